"""The structural family's per-type caches give what uncached work gives:
word-type acceptance and analyses against direct hfst lookups, the chunk-
cached tokeniser against words_of, and every cache stays within its bound."""
import unicodedata

import hfst
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from champollion.core.analyzers import _FLAG_DIACRITIC, DEFAULT_FST_DIR, Analyzer, AnalyzerRegistry
from champollion.core.cards import default_registry
from champollion.core.type_cache import TypeCache
from champollion.core.words import words_of
from services.structural.text_words import TextWords

# Letters, digits, joiners, the characters words_of skips around (URLs,
# e-mail, {placeholders}, printf), combining marks and odd whitespace, the
# syllabics hyphen (NARROW NO-BREAK SPACE) and look-alikes kept inside words.
PIECES = st.sampled_from(
    list("abcEé_1 .,-'’‐‑{}%@:/()sdwhtp") + ["http://", "www.", "{n, plural}", "%(n)d", "e\u0301", "\u0301",
                                                "\u00a0", "\u2009", "\n", "\x1c", "ß", "İ", "ᐃ", "２",
                                                "\u202f", "◁", "Δ"])
LOOKALIKES = "Δ∆◁▷∇"
TEXTS = st.lists(PIECES, max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=4), keep_hyphenated=st.booleans(),
       extra=st.sampled_from(["", LOOKALIKES]))
@example(texts=["Ver https://x.org/a, 20% en {n, plural, one {uno}} y %(count)d. ê-nipâyân"], keep_hyphenated=True,
         extra="")
@example(texts=["l'eau -- don't", "l'eau -- don't"], keep_hyphenated=False, extra="")
@example(texts=["a\u2010b x\u2011y", "%\u20105d %-5d"], keep_hyphenated=True, extra="")
@example(texts=["e\u0301te\u0301 \u0301a"], keep_hyphenated=False, extra="")
@example(texts=["ᐁ\u202fᓂᐹᔮᐣ ◁ᑎᒼ", "ᐁ\u202fᓂᐹᔮᐣ"], keep_hyphenated=True, extra=LOOKALIKES)
def test_chunk_cached_words_are_words_of(texts, keep_hyphenated, extra):
    """Texts scored one after another share the cache: a chunk split for one
    text must give the same words in the next."""
    split = TextWords(keep_hyphenated, limit=4, extra_chars=extra)
    for text in texts + texts:
        assert split(text) == words_of(text, keep_hyphenated, extra)


def test_no_whitespace_composes_under_nfc():
    """Why a text's chunks can be split apart after NFC: no whitespace
    character combines with a following mark, so NFC(text).split() are NFC."""
    def nfc(text):
        return unicodedata.normalize("NFC", text)

    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    marks = [chr(c) for c in range(0x110000) if unicodedata.combining(chr(c))]
    assert [(s, m) for s in spaces for m in marks if nfc(s + m) != nfc(s) + nfc(m)] == []
    assert all(nfc(s).isspace() for s in spaces)


def test_type_cache_computes_each_missing_type_once_and_stays_bounded():
    asked = []

    def compute(keys):
        asked.append(list(keys))
        return [key.upper() for key in keys]

    cache = TypeCache(compute, limit=10)
    assert cache.get_many(["a", "b", "a", "c", "b"]) == ["A", "B", "A", "C", "B"]
    assert asked == [["a", "b", "c"]]
    assert cache.get_many(["c", "a"]) == ["C", "A"] and len(asked) == 1  # all cached: no call
    assert cache.get_many(["d", "a"]) == ["D", "A"] and asked[-1] == ["d"]
    words = [f"w{i}" for i in range(95)]
    for start in range(0, 95, 7):
        assert cache.get_many(words[start:start + 7]) == [w.upper() for w in words[start:start + 7]]
        assert len(cache) <= 10
    # More new types in one call than the bound: all answered, the newest kept.
    many = [f"m{i}" for i in range(25)]
    assert cache.get_many(many) == [m.upper() for m in many]
    assert len(cache) <= 10 and cache.get("m24") == "M24" and asked[-1] == many
    with pytest.raises(ValueError, match="at least 2"):
        TypeCache(compute, limit=1)


@pytest.fixture(scope="module")
def eng_spa_nob():
    missing = [c for c in ("eng", "spa", "nob") if not (DEFAULT_FST_DIR / f"{c}.hfstol").is_file()]
    assert not missing, f"analyzers {missing} are not built: run `make fst` (make test does)"
    cards = default_registry()
    return {code: AnalyzerRegistry().for_card(cards.get(code)) for code in ("eng", "spa", "nob")}


WORDS = {
    "eng": ["The", "houses", "were", "running", "THE", "Went", "went", "hourses", "xqzt", "Houses", "don't",
            "well-known", "Paris", "paris"],
    "spa": ["Las", "casas", "corrió", "EL", "sesión", "sesion", "xqzt", "Madrid", "madrid", "casass"],
    "nob": ["Huset", "fotballbøkene", "kaffekoppen", "xqztbok", "huusset", "Jeg", "løper", "bøkene", "xqzt"],
}


def direct_analyses(path, word):
    """Analyses of the first case form with any, straight from hfst: no cache."""
    transducer = hfst.HfstInputStream(str(path)).read()
    for form in dict.fromkeys((word, word.lower(), word[:1].upper() + word[1:].lower())):
        found = [_FLAG_DIACRITIC.sub("", analysis) for analysis, _ in transducer.lookup(form)]
        if found:
            return found
    return []


@pytest.mark.parametrize("code", ["eng", "spa"])
def test_cached_acceptance_and_analyses_are_direct_lookups(eng_spa_nob, code):
    cached = eng_spa_nob[code]
    words = WORDS[code] * 3
    expected = {word: direct_analyses(cached.path, word) for word in words}
    # The same words again and again, through a cache big enough and one
    # that evicts all the time.
    for analyzer in (cached, Analyzer.load(cached.path, None, cached.tag_format, cache_limit=2)):
        for _ in range(2):
            assert analyzer.rejected(words) == [w for w in words if not expected[w]]
            assert [analyzer.analyses(w) for w in words] == [expected[w] for w in words]
            assert all(analyzer.accepts(w) == bool(expected[w]) for w in words)
    assert expected["houses" if code == "eng" else "casas"]  # a real word does have analyses


def test_compounds_through_a_tiny_cache_match_a_big_one(eng_spa_nob):
    """nob accepts run-time compounds: the compound search's own cache
    (left/right parts) evicting constantly must not change a verdict."""
    big = eng_spa_nob["nob"]
    tiny = Analyzer.load(big.path, big.compounds, big.tag_format, cache_limit=2)
    words = WORDS["nob"] * 2
    assert tiny.rejected(words) == big.rejected(words) == [w for w in words if w in ("xqztbok", "huusset", "xqzt")]
    assert len(tiny._accepted) <= 2 and len(tiny._part_tags) <= 2
