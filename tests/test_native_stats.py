"""The compiled statistics (champollion/core/native) equal sacreBLEU's own, statistic
for statistic and type for type, on random and on hand-picked segments."""
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF, TER, lib_ter

from champollion.core import sacrebleu_adapter
from champollion.core.native import _stats
from champollion.core.sacrebleu_adapter import PURE_SACREBLEU_ENV, reference_streams


@pytest.fixture(autouse=True)
def compiled_statistics_are_built():
    """`make test` builds the extension (g++ is part of the machine's set-up):
    without it these tests fail rather than skip, so a broken build is seen."""
    assert _stats is not None, "champollion.core.native._stats is not built: is g++ installed? (pip install -e . builds it)"

TER_METRICS = [TER(), TER(normalized=True, asian_support=True), TER(case_sensitive=True, no_punct=True)]
CHRF_METRICS = [
    CHRF(word_order=2),
    CHRF(),
    CHRF(word_order=2, whitespace=True),
    CHRF(word_order=2, eps_smoothing=True),
    CHRF(char_order=8, word_order=3, beta=3, lowercase=True),  # orders past 6: the unpacked path
]
BLEU_METRICS = [BLEU(), BLEU(tokenize="char"), BLEU(tokenize="intl", lowercase=True), BLEU(max_ngram_order=7)]
ALL_METRICS = TER_METRICS + CHRF_METRICS + BLEU_METRICS

WORDS = [
    "the", "The", "cat", "sat", "on", "mat", "a", "b", "c", "Größe", "STRASSE", "straße", "猫", "が", "眠る",
    "ᐃᓄᒃᑎᑐᑦ", "😀", "e\u0301", "é", ",", ".", '"', "(x)", "don't", "A.", "-", "&amp;", "1,000", "naïve!", "?¿",
]
SEPARATORS = [" ", " ", " ", "  ", "\t", "\n", "\u3000", "\xa0", "\u2009", "\x1c"]


def python_statistics(metric, hypotheses, references_per_entry):
    return metric._extract_corpus_statistics(hypotheses, reference_streams(references_per_entry))


def native_statistics(metric, hypotheses, references_per_entry):
    return sacrebleu_adapter.native_segment_statistics(metric, hypotheses, references_per_entry)


def assert_same_statistics(metric, hypotheses, references_per_entry):
    native = native_statistics(metric, hypotheses, references_per_entry)
    python = python_statistics(metric, hypotheses, references_per_entry)
    assert native == python
    assert [[type(value) for value in row] for row in native] == [[type(value) for value in row] for row in python]


# --- random segments ---------------------------------------------------------

# Few distinct words: many equal shift candidates, so the tie-breaks matter.
SMALL_VOCABULARIES = [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]


@st.composite
def word_lists(draw, min_size=0, max_size=25):
    vocabulary = draw(st.sampled_from([WORDS, *SMALL_VOCABULARIES]))
    return draw(st.lists(st.sampled_from(vocabulary), min_size=min_size, max_size=max_size))


@st.composite
def perturbed(draw, words):
    """`words` moved in blocks (TER's shifts), dropped, repeated, replaced."""
    words = list(words)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["move", "drop", "repeat", "replace", "insert"]))
        start = draw(st.integers(0, max(len(words) - 1, 0)))
        size = draw(st.integers(1, 6))
        block = words[start:start + size]
        if kind == "move" and block:
            del words[start:start + size]
            target = draw(st.integers(0, len(words)))
            words[target:target] = block
        elif kind == "drop":
            del words[start:start + size]
        elif kind == "repeat":
            words[start:start] = block
        elif kind == "replace" and words:
            words[start] = draw(st.sampled_from(WORDS))
        elif kind == "insert":
            words.insert(start, draw(st.sampled_from(WORDS)))
    return words


@st.composite
def joined(draw, words):
    if not words:
        return draw(st.sampled_from(["", " ", "\n"]))
    text = words[0]
    for word in words[1:]:
        text += draw(st.sampled_from(SEPARATORS)) + word
    return draw(st.sampled_from(["", " "])) + text + draw(st.sampled_from(["", " ", "\n"]))


@st.composite
def entries(draw):
    """(hypothesis, references): references are variants of one sentence;
    sometimes free Unicode text instead."""
    if draw(st.integers(0, 9)) == 0:
        free = st.text(max_size=40)
        return draw(free), [draw(free) for _ in range(draw(st.integers(1, 3)))]
    base = draw(word_lists())
    references = [draw(joined(base))]
    for _ in range(draw(st.integers(0, 2))):
        references.append(draw(joined(draw(perturbed(base)))))
    hypothesis = draw(joined(draw(perturbed(base))))
    return hypothesis, references


random_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@random_settings
@given(metric=st.sampled_from(ALL_METRICS), batch=st.lists(entries(), min_size=1, max_size=4))
def test_random_segments_equal_sacrebleu(metric, batch):
    hypotheses = [hypothesis for hypothesis, _ in batch]
    references = [refs for _, refs in batch]
    assert_same_statistics(metric, hypotheses, references)


@settings(max_examples=10, deadline=None)
@given(words=word_lists(min_size=40, max_size=80), data=st.data())
def test_long_shifted_segments_equal_sacrebleu(words, data):
    hypothesis = data.draw(perturbed(words))
    for metric in (TER_METRICS[0], CHRF_METRICS[0], BLEU_METRICS[0]):
        assert_same_statistics(metric, [" ".join(hypothesis)], [[" ".join(words)]])


# --- TER cases -----------------------------------------------------------------

def shift_candidates_checked(hypothesis: list[str], reference: list[str]) -> tuple[int, float]:
    """sacreBLEU's own shift loop: candidates checked, and the gain of the
    shift it stopped at (what the 1,000-candidate cap throws away)."""
    distance, words, checked = lib_ter.BeamEditDistance(reference), hypothesis, 0
    while True:
        delta, shifted, checked = lib_ter._shift(words, reference, distance, checked)
        if checked >= 1000 or delta <= 0:
            return checked, delta
        words = shifted


def ter_of(hypothesis: str, reference: str) -> list:
    return native_statistics(TER(), [hypothesis], [[reference]])[0]


# Facts from sacreBLEU's test_ter.py: edits against the reference.
@pytest.mark.parametrize("hypothesis, reference, edits", [
    ("aaaa bbbb cccc dddd", "aaaa bbbb cccc dddd", 0),
    ("dddd eeee ffff", "aaaa bbbb cccc", 3),
    ("", "a", 1),
    ("d e f g h a b c", "a b c d e f g h", 1),  # one shift
])
def test_sacrebleu_ter_cases(hypothesis, reference, edits):
    assert ter_of(hypothesis, reference)[0] == edits
    assert_same_statistics(TER(), [hypothesis], [[reference]])


# Found by comparing with sacreBLEU under a reversed target tie-break.
@pytest.mark.parametrize("hypothesis, reference", [
    ("a a b a c a b", "a a a a b b c"),
    ("b a b b a a b a a a b a", "b a a b b a a a b a b a"),
    ("a a d b b d", "a b d b d a"),
    ("c a b a d d c a c a d", "c c a d d d c a a b a"),
])
def test_shift_tie_breaks(hypothesis, reference):
    assert_same_statistics(TER(), [hypothesis], [[reference]])


def test_candidate_cap_discards_the_last_shift():
    hypothesis = "a a b b b a a c b c a c a c c c a a c a c b c b b a a a c b b a c c"
    reference = "a a b a c c a c c a a c a c b c b b a a a c a c b c b b a c c b b a"
    checked, delta = shift_candidates_checked(hypothesis.split(), reference.split())
    assert checked >= 1000 and delta > 0  # the case the cap exists for
    assert_same_statistics(TER(), [hypothesis], [[reference]])


def test_candidate_cap_in_the_first_shift():
    rng = random.Random(3)
    reference = [rng.choice("abc") for _ in range(30)]
    hypothesis = reference[15:] + reference[:15]
    assert shift_candidates_checked(hypothesis, reference)[0] >= 1000
    assert_same_statistics(TER(), [" ".join(hypothesis)], [[" ".join(reference)]])


@pytest.mark.parametrize("hypothesis, reference", [
    ("w5 w6", " ".join(f"w{i}" for i in range(120))),  # length ratio 60: the widened beam
    (" ".join(f"w{i}" for i in range(120)), "w5 w6"),
    (" ".join(f"w{i}" for i in range(60, 120)) + " " + " ".join(f"w{i}" for i in range(60)),
     " ".join(f"w{i}" for i in range(120))),  # blocks further apart than the shift distance
    (" ".join(["x y z"] * 12), " ".join(["z y x"] * 12)),  # repetitions
    ("a b c", ""),  # empty reference
    ("", ""),
])
def test_extreme_ter_segments(hypothesis, reference):
    assert_same_statistics(TER(), [hypothesis], [[reference]])


def test_several_references_take_the_fewest_edits_and_the_mean_length():
    hypotheses = ["the cat sat on the mat"]
    references = [["a cat sat on a mat", "the cat sat on the mat today", "the cat"]]
    assert native_statistics(TER(), hypotheses, references) == [[1, (6 + 7 + 2) / 3]]
    assert_same_statistics(TER(), hypotheses, references)


# --- plumbing --------------------------------------------------------------------

def test_whitespace_is_what_str_split_splits_on():
    spaces = [c for c in range(0x110000) if chr(c).isspace()]
    assert all(_stats.is_whitespace(c) for c in spaces)
    # Every other code point of the first planes, and the edges of the range.
    others = [c for c in list(range(0x3100)) + [0xFEFF, 0x10FFFF] if c not in set(spaces)]
    assert not any(_stats.is_whitespace(c) for c in others)


def test_surrogates_and_non_strings():
    assert_same_statistics(TER(), ["a \udcff b"], [["\udcff a b"]])
    with pytest.raises(TypeError, match="hypothesis must be str"):
        _stats.ter_statistics([None], [["a"]])
    with pytest.raises(ValueError, match="differ in length"):
        _stats.bleu_statistics(["a"], [], 4)


def test_environment_variable_forces_sacrebleu(monkeypatch):
    metric = CHRF(word_order=2)
    hypotheses, references = ["Der Hund bellt."], [["Der Hund bellte.", "Ein Hund bellt."]]
    assert sacrebleu_adapter.native_statistics_enabled()
    native = sacrebleu_adapter.segment_statistics(metric, hypotheses, references)
    monkeypatch.setenv(PURE_SACREBLEU_ENV, "1")
    assert not sacrebleu_adapter.native_statistics_enabled()
    calls = []
    original = CHRF._extract_corpus_statistics
    monkeypatch.setattr(CHRF, "_extract_corpus_statistics",
                        lambda self, *args: calls.append(args) or original(self, *args))
    assert sacrebleu_adapter.segment_statistics(metric, hypotheses, references) == native
    assert calls, "sacreBLEU's own code was not used"
