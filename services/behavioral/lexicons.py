"""Word lists of a language from maintained spaCy data: the forms and lemmas
of `spacy-lookups-data`'s lemma lookup table plus spaCy's stop words. A card
names its spaCy language code (`lexicon.spacy: en`).

The tables are kept, as built, in marshal files under the cache directory
(services/behavioral/table_cache.py): building English and German's from
spaCy's gzipped JSON costs a worker process 4.0 s, reading them back 1.2 s;
code-switching reads a language pair's table of the words it may look up
(switch_tables), 0.03 s. Changing how a table is built: raise
table_cache.TABLES_FORMAT."""
from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from champollion.core.cards import LanguageCard
from services.behavioral.table_cache import cached

_LOCK = threading.Lock()


class LexiconMissing(LookupError):
    """The card names no lexicon, or its data is not installed."""


def spacy_code(card: LanguageCard) -> str | None:
    return card.lexicon.spacy


def _lookups_table(code: str, name: str) -> dict:
    """spacy-lookups-data's table `<code>_<name>`, empty where it has none."""
    try:
        import spacy_lookups_data
    except ImportError as error:
        raise LexiconMissing(f"spaCy word lists are not installed ({error.name})") from None
    table = Path(spacy_lookups_data.__file__).parent / "data" / f"{code}_{name}.json.gz"
    if not table.is_file():
        return {}
    with gzip.open(table, "rt", encoding="utf-8") as handle:
        return json.load(handle)


@lru_cache(maxsize=None)
def _lemma_table(code: str) -> dict[str, str]:
    # Most tables map a form to its lemma; French's and Catalan's to a list
    # of lemmas, of which the first is taken.
    return cached(f"{code}_lemmas", lambda: {
        form.lower(): (lemma[0] if isinstance(lemma, list) else lemma).lower()
        for form, lemma in _lookups_table(code, "lemma_lookup").items() if lemma or isinstance(lemma, str)})


def _defaults(spacy, code: str):
    """spaCy's language defaults (stop words, lexical attributes), read from
    the language's class: a blank pipeline would also build its tokenizer,
    which for some languages (th, vi) needs a package of its own."""
    try:
        return spacy.util.get_lang_class(code).Defaults
    except (ImportError, KeyError) as error:
        raise LexiconMissing(f"spaCy has no language {code!r} ({error})") from None


@lru_cache(maxsize=None)
def _words_for(code: str) -> frozenset[str]:
    def build() -> frozenset[str]:
        try:
            import spacy
        except ImportError as error:
            raise LexiconMissing(f"spaCy is not installed ({error.name})") from None
        lookup = _lemma_table(code)
        words = {word.lower() for word in _defaults(spacy, code).stop_words}
        return frozenset(words | set(lookup) | set(lookup.values()))
    return cached(f"{code}_words", build)


def _code(card: LanguageCard) -> str:
    code = spacy_code(card)
    if code is None:
        raise LexiconMissing(f"the {card.code} card names no lexicon")
    return code


def lexicon(card: LanguageCard) -> frozenset[str]:
    """Lower-cased words of the card's language; raises LexiconMissing."""
    with _LOCK:  # loading takes a moment; concurrent batches wait for one load
        return _words_for(_code(card))


def lemma_table(card: LanguageCard) -> dict[str, str]:
    """Lower-cased form -> lemma (spaCy's lookup lemmatizer data); raises LexiconMissing."""
    with _LOCK:
        return _lemma_table(_code(card))


@lru_cache(maxsize=None)
def _like_num(code: str):
    try:
        import spacy
        from spacy.attrs import LIKE_NUM
    except ImportError:
        return None
    try:
        return _defaults(spacy, code).lex_attr_getters.get(LIKE_NUM)
    except LexiconMissing:
        return None


def number_word_test(card: LanguageCard) -> Callable[[str], bool] | None:
    """spaCy's test for the language's numerals ("four", "Thirty"), or None
    where the card names no spaCy language. spaCy (half a second to import)
    is loaded by the first word tested, which a batch without an unmatched
    number never tests; where spaCy has no such language, no word is one."""
    code = spacy_code(card)
    if code is None:
        return None

    def is_number_word(word: str) -> bool:
        with _LOCK:
            test = _like_num(code)
        return test is not None and bool(test(word))
    return is_number_word


@lru_cache(maxsize=None)
def _probabilities(code: str) -> dict[str, float]:
    return cached(f"{code}_probabilities", lambda: _lookups_table(code, "lexeme_prob"))


def _optional_probabilities(code: str | None) -> dict[str, float]:
    try:
        return _probabilities(code) if code is not None else {}
    except LexiconMissing:
        return {}


@lru_cache(maxsize=None)
def _switch_tables(source: str, target: str | None) -> tuple:
    """_words_for(target) and both languages' _probabilities, kept to the
    words written as a source word (lower-cased)."""
    def build() -> tuple:
        words = _words_for(source)

        def kept(table: dict[str, float]) -> dict[str, float]:
            found = {word: value for word, value in table.items() if word.lower() in words}
            # An empty table says "no probabilities" (CodeSwitchDetector): one that had some keeps them.
            return found if found or not table else table
        target_words = None
        if target is not None:
            try:
                target_words = frozenset(word for word in _words_for(target) if word in words)
            except LexiconMissing:
                pass
        target_probabilities = kept(_optional_probabilities(target)) if target is not None else {}
        return target_words, target_probabilities, kept(_optional_probabilities(source))
    return cached(f"switches_{source}_{target or 'same'}", build)


def switch_tables(source: LanguageCard, target: LanguageCard) -> tuple[
        frozenset[str] | None, dict[str, float], dict[str, float]]:
    """(the target's words, its word probabilities, the source's) as a check
    of source words in target text (code_switching.CodeSwitchDetector) looks
    them up: for a word written as one of the source's words, and no other.
    So they keep those words alone, in a table of the language pair
    (English into German: German's 343,367 words become 2,795, and the two
    million probabilities 38,820 and 125,678, read in 0.03 s instead of
    0.7 s). The target's
    are None (no word list) and {} (no probabilities) where the card or spaCy
    has none, and for a target in the source's language; raises
    LexiconMissing where the source has no word list."""
    code = _code(source)
    with _LOCK:
        return _switch_tables(code, spacy_code(target) if target.code != source.code else None)


def word_probabilities(card: LanguageCard) -> dict[str, float]:
    """Word as written -> natural-log probability in a large corpus of the
    language (spacy-lookups-data's `lexeme_prob`: de, el, en, es); empty where
    spaCy has none; raises LexiconMissing."""
    with _LOCK:
        return _probabilities(_code(card))
