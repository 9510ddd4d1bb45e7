"""The token-row cache (champollion/core/encoder/row_cache.py): RowCache's
bookkeeping, the window keys that decide when a row can be reused, and how
few rows `encode` computes when texts share windows. That a vector stays
the same whatever the cache holds: tests/test_embeddings.py."""
from __future__ import annotations

import random

import numpy as np
import pytest

from champollion.core.encoder.embeddings import SentenceEmbedder
from champollion.core.encoder.forward import REACH, ROW_WIDTH, token_rows
from champollion.core.encoder.row_cache import PIECE_BUDGET, RowCache, encode, window_keys
from tests.test_embeddings import SENTENCES, random_words

KEYS = [f"window {index}".encode() for index in range(12)]


def numbered_rows(count: int) -> np.ndarray:
    """Rows that differ in every column, and not only by whole numbers."""
    return np.arange(count * ROW_WIDTH, dtype=np.float32).reshape(count, ROW_WIDTH) / 7


def rows_held(cache: RowCache, keys: list[bytes]) -> tuple[list[bytes], np.ndarray]:
    """The keys among `keys` that the cache holds, and their rows (the hit counter moves)."""
    with cache.pinned(keys) as (held, slots, _):
        return [keys[index] for index in held], cache.table[slots]


def missing(cache: RowCache, keys: list[bytes]) -> list[int]:
    """The positions of the keys it does not hold."""
    with cache.pinned(keys) as (_, _, found):
        return found


def test_a_row_cache_copies_the_rows_it_holds_and_names_the_others():
    cache = RowCache(4)
    rows = numbered_rows(6)
    cache.store(KEYS[:3], rows, [3, 4, 5])
    rows[:] = 0  # the cache kept copies
    with cache.pinned([KEYS[9], KEYS[1], KEYS[0], KEYS[8], KEYS[2]]) as (held, slots, absent):
        assert held.tolist() == [1, 2, 4] and absent == [0, 3]  # the rows it does not hold are left to compute
        assert np.array_equal(cache.table[slots], numbered_rows(6)[[4, 3, 5]])
    assert np.array_equal(rows_held(cache, KEYS[:3])[1], numbered_rows(6)[3:])
    assert (len(cache), cache.hits, cache.computed) == (3, 6, 3)


def test_a_full_row_cache_keeps_the_rows_read_since_its_hand_last_passed():
    """The clock algorithm (RowCache's docstring): the hand takes the first
    slot whose row was not read since it last passed, clearing the marks of
    the rows it passes. (Looking a row up reads it: the test looks up only
    the rows that should have gone, but where it says.)"""
    cache = RowCache(3)
    rows = numbered_rows(len(KEYS))
    cache.store(KEYS[:3], rows, [0, 1, 2])
    cache.store([KEYS[0]], rows, [9])  # a key it holds keeps its first row
    assert np.array_equal(rows_held(cache, [KEYS[0]])[1], rows[[0]])  # now 0 is read
    cache.store([KEYS[3]], rows, [3])
    assert rows_held(cache, [KEYS[1]])[0] == []  # 0 was read: passed, and cleared; 1 went
    cache.store([KEYS[4]], rows, [4])
    assert rows_held(cache, [KEYS[2]])[0] == []  # never read
    cache.store([KEYS[5]], rows, [5])
    assert rows_held(cache, [KEYS[0]])[0] == []  # not read again since the hand passed
    assert rows_held(cache, KEYS[3:6])[0] == KEYS[3:6]  # all three held, now read
    cache.store([KEYS[6]], rows, [6])  # every row read: the hand clears them all and takes the next, 3's
    assert rows_held(cache, KEYS[3:7])[0] == KEYS[4:7]
    # more new rows than it holds, in one call: the last ones stay
    cache.store(KEYS[7:12], rows, [7, 8, 9, 10, 11])
    held, held_rows = rows_held(cache, KEYS)
    assert held == KEYS[9:12] and np.array_equal(held_rows, rows[9:12])
    assert len(cache) == 3 and cache.computed == 13  # every row handed, held or not


def test_when_too_few_rows_are_unread_those_go_first_then_the_next_in_order():
    cache = RowCache(8)
    rows = numbered_rows(len(KEYS))
    cache.store(KEYS[:8], rows, list(range(8)))
    assert rows_held(cache, KEYS[:7])[0] == KEYS[:7]  # all read but 7's
    cache.store(KEYS[8:10], rows, [8, 9])  # two places: 7's (unread), then, a round later, 0's
    held, held_rows = rows_held(cache, KEYS[:10])
    assert held == KEYS[1:7] + KEYS[8:10] and np.array_equal(held_rows[-2:], rows[8:10])


def test_a_row_cache_of_no_rows_holds_nothing_but_counts_what_was_computed():
    cache = RowCache(0)
    cache.store(KEYS[:4], numbered_rows(4), [0, 1, 2, 3])
    assert missing(cache, KEYS[:4]) == [0, 1, 2, 3]
    assert (len(cache), cache.hits, cache.computed) == (0, 0, 4)
    with pytest.raises(ValueError, match="-1"):
        RowCache(-1)


def test_a_key_given_twice_is_kept_once_and_evicts_cleanly():
    cache = RowCache(2)
    rows = numbered_rows(2)
    cache.store([KEYS[0], KEYS[0]], rows, [0, 1])
    assert len(cache) == 1
    held, held_rows = rows_held(cache, [KEYS[0]])
    assert held == [KEYS[0]] and np.array_equal(held_rows[0], rows[0])  # the first given
    cache.store(KEYS[1:3], rows, [0, 1])  # evicts it
    assert len(cache) == 2 and missing(cache, KEYS[:3]) == [0]


def test_a_pinned_row_stays_whatever_is_stored_meanwhile():
    """What lets an encoder sum the rows it holds where they lie while
    another thread stores rows: a store never takes a pinned slot, and
    stores fewer rows when too few slots are free."""
    cache = RowCache(3)
    rows = numbered_rows(len(KEYS))
    cache.store(KEYS[:3], rows, [0, 1, 2])
    with cache.pinned([KEYS[1], KEYS[5]]) as (held, slots, absent):
        assert held.tolist() == [0] and absent == [1]
        cache.store(KEYS[6:9], rows, [6, 7, 8])  # three new rows, two free slots: the last two stored
        assert np.array_equal(cache.table[slots], rows[[1]])  # KEYS[1]'s row, untouched
        assert rows_held(cache, KEYS[:9])[0] == [KEYS[1], KEYS[7], KEYS[8]]
        with cache.pinned(KEYS[7:9]):  # every slot pinned now: nothing stored, nothing evicted
            cache.store([KEYS[9]], rows, [9])
            assert rows_held(cache, KEYS[:10])[0] == [KEYS[1], KEYS[7], KEYS[8]]
    cache.store([KEYS[9]], rows, [9])  # unpinned: room again
    assert KEYS[9] in rows_held(cache, KEYS[:10])[0] and len(cache) == 3


@pytest.fixture(scope="module")
def embedder():
    embedder = SentenceEmbedder()
    embedder._loaded()
    return embedder


def token_ids(embedder: SentenceEmbedder, text: str) -> np.ndarray:
    return np.array(embedder._tokens(text), dtype=np.int32)


def test_a_window_key_determines_its_tokens_row(embedder):
    """Rows of tokens with equal keys are equal, bit for bit, over texts that
    share most of their windows: what makes a cached row right."""
    a, b = SENTENCES[0], SENTENCES[11]
    sequences = [token_ids(embedder, text) for text in (a, b, f"{a} {b}", f"{b} {a}", f"{a} {a} {a}")]
    rows = token_rows(embedder._loaded(), sequences)
    keys = window_keys(sequences)
    # a token's key does not depend on the texts beside it
    assert keys == [key for ids in sequences for key in window_keys([ids])]
    first_with: dict[bytes, int] = {}
    for row, key in enumerate(keys):
        if key in first_with:
            assert np.array_equal(rows[row], rows[first_with[key]]), row
        else:
            first_with[key] = row
    assert len(keys) - len(first_with) > len(keys) // 3  # the texts did share windows


def test_encoding_a_text_computes_only_the_rows_of_windows_not_seen(embedder):
    weights = embedder._loaded()
    first, second = SENTENCES[0], SENTENCES[11]
    a, b, a_b = (token_ids(embedder, text) for text in (first, second, f"{first} {second}"))
    assert a_b.tolist() == a[:-1].tolist() + b[1:].tolist()  # "A B" holds A's and B's tokens but an end and a start
    cache = RowCache(1000)
    encode(weights, [a], cache)
    assert cache.computed == len(a)
    vectors = encode(weights, [a_b], cache)
    # A's rows whose windows stop short of its end of sentence are reused
    assert cache.computed - len(a) == len(a_b) - (len(a) - REACH - 1)
    assert cache.hits == len(a) - REACH - 1
    assert np.array_equal(vectors, encode(weights, [a_b], RowCache(0)))
    computed = cache.computed
    vectors = encode(weights, [b], cache)
    # only B's rows whose windows reach its start of sentence are new
    assert cache.computed - computed == REACH + 1
    assert np.array_equal(vectors, encode(weights, [b], RowCache(0)))


def test_each_distinct_window_of_a_call_is_computed_once(embedder):
    ids = token_ids(embedder, " ".join([SENTENCES[2]] * 6))
    cache = RowCache(0)
    encode(embedder._loaded(), [ids, ids[:40]], cache)
    assert cache.computed == len(set(window_keys([ids, ids[:40]]))) < len(ids)


def test_cached_windows_inside_a_long_text_leave_its_vector_unchanged(embedder):
    """Rows reused in the middle of a text, the rows between them computed in
    pieces with their context, one of them longer than PIECE_BUDGET."""
    weights = embedder._loaded()
    rng = random.Random(17)
    inserted = [SENTENCES[2], SENTENCES[10], SENTENCES[11]]
    longest_gap = random_words(rng, 500)
    assert len(token_ids(embedder, longest_gap)) > PIECE_BUDGET
    text = " ".join([random_words(rng, 40), inserted[0], longest_gap, inserted[1],
                     random_words(rng, 5), inserted[2], random_words(rng, 30)])
    ids = token_ids(embedder, text)
    cache = RowCache(10_000)
    encode(weights, [token_ids(embedder, sentence) for sentence in inserted], cache)
    vector = encode(weights, [ids], cache)
    # each inserted sentence's rows but those whose windows reach either end
    assert cache.hits == sum(len(token_ids(embedder, sentence)) - 2 * (REACH + 1) for sentence in inserted)
    assert np.array_equal(vector, encode(weights, [ids], RowCache(0)))


def test_an_empty_token_sequence_is_refused_and_a_cache_too_large_names_its_setting(embedder):
    with pytest.raises(ValueError, match="begin and end tokens"):
        encode(embedder._loaded(), [token_ids(embedder, "Hola."), np.array([], dtype=np.int32)], RowCache(4))
    with pytest.raises(MemoryError, match=r"\$CHAMPOLLION_TOKEN_ROW_CACHE_MB"):
        SentenceEmbedder(row_cache_rows=2**50)
