"""Word lists of a language from maintained spaCy data: the forms and lemmas
of `spacy-lookups-data`'s lemma lookup table plus spaCy's stop words. A card
names its spaCy language code (`lexicon.spacy: en`).

The tables are kept, as built, in marshal files under the cache directory
(services/behavioral/table_cache.py): building English and German's from
spaCy's gzipped JSON costs a worker process 4.0 s, reading them back 1.2 s. Changing how a table is
built: raise table_cache.TABLES_FORMAT."""
from __future__ import annotations

import gzip
import json
import threading
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


def number_word_test(card: LanguageCard):
    """spaCy's test for the language's numerals ("four", "Thirty"), or None
    where the card names no spaCy language or spaCy has none for it."""
    code = spacy_code(card)
    if code is None:
        return None
    with _LOCK:
        return _like_num(code)


@lru_cache(maxsize=None)
def _probabilities(code: str) -> dict[str, float]:
    return cached(f"{code}_probabilities", lambda: _lookups_table(code, "lexeme_prob"))


def word_probabilities(card: LanguageCard) -> dict[str, float]:
    """Word as written -> natural-log probability in a large corpus of the
    language (spacy-lookups-data's `lexeme_prob`: de, el, en, es); empty where
    spaCy has none; raises LexiconMissing."""
    with _LOCK:
        return _probabilities(_code(card))
