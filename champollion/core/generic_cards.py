"""The generic card: what a language without a written card in
``language_cards/`` is scored with, derived from data and from the
language's ISO 639 code and script alone, so that the gateway and every
family, wherever they run, build the same card for the same tag.

- name: CLDR (langcodes' language-data);
- script: the tag's, else CLDR's likely script (champollion.core.cards decides);
- casing: `cased` for the bicameral scripts (CASED_SCRIPTS), else `caseless`;
- quotes: CLDR's quotation delimiters for the locale through ICU (PyICU)
  where installed, with the ASCII quotes; else GENERIC_QUOTES;
- BLEU tokenizer and TER: as sacreBLEU's CLI picks them for `-l SRC-TGT`
  (champollion.core.sacrebleu_adapter), but `char` for a script written
  without spaces between words (SPACELESS_SCRIPTS);
- embedding support: the sentence encoder declares the language
  (EMBEDDING_LANGUAGES), in its likely script;
- lexicon: spaCy ships the language (spacy/lang/<code>), in its likely script;
- COMET: the default model, not validated for the language;
- analyzer, orthography rules, plugins: none.

The card is a mapping checked against ``card.schema.json`` like a written
one; ``champollion.core.cards`` turns it into a LanguageCard.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from champollion.core.encoder.embeddings import EMBEDDING_LANGUAGES
from champollion.core.language_tags import LanguageTag, cldr_data_version, language_name, likely_script
from champollion.core.sacrebleu_adapter import CLI_TER_ASIAN_SUPPORT, cli_bleu_tokenizer

# ISO 15924 scripts with upper and lower case in ordinary use (Unicode's
# bicameral scripts). Georgian's Mtavruli capitals are left out: modern
# Georgian is written in one case.
CASED_SCRIPTS = frozenset({
    "Latn", "Latf", "Latg", "Grek", "Copt", "Cyrl", "Cyrs", "Glag", "Armn", "Hung", "Dsrt", "Osge", "Wara",
    "Adlm", "Medf", "Cher", "Vith", "Gara",
})
# Scripts written without spaces between words: a word-level BLEU over them
# scores near zero, so they get sacreBLEU's `char` tokenizer. Unicode's line
# breaking class SA (Thai, Lao, Khmer, Myanmar, the Tai scripts), Tibetan
# (syllables, no word spaces), Han and kana, Yi, and the scriptio continua of
# Javanese, Balinese and Buginese.
SPACELESS_SCRIPTS = frozenset({
    "Thai", "Laoo", "Khmr", "Mymr", "Lana", "Talu", "Tale", "Tavt", "Ahom", "Tibt",
    "Hani", "Hans", "Hant", "Hanb", "Jpan", "Hira", "Kana", "Bopo", "Yiii", "Java", "Bali", "Bugi",
})
# Quote characters of a generic card when ICU is not installed: the ASCII
# quotes, CLDR root's delimiters and the guillemets and low-9 quotes of
# Europe's languages.
GENERIC_QUOTES = ('"', "'", "“", "”", "‘", "’", "«", "»", "„", "‚", "‹", "›")
ASCII_QUOTES = ('"', "'")


@dataclass(frozen=True)
class GenericCard:
    # The card as a written card's YAML would read (card.schema.json).
    mapping: dict
    # How it was built: `generic (CLDR ...)`, for the run card's signatures.
    origin: str
    # What the user should know of this card (run card warnings).
    notes: tuple[str, ...]


def generic_card(tag: LanguageTag, script: str, canonical: str) -> GenericCard:
    """The generic card of `tag`'s language written in `script`;
    `canonical` is the tag as run cards show it."""
    quotes, quotes_origin = cldr_quotes(tag.language, script)
    usual_script = script == likely_script(tag.language)
    tokenizer = cli_bleu_tokenizer(tag.language)
    notes = []
    if script in SPACELESS_SCRIPTS and tokenizer == cli_bleu_tokenizer(""):
        notes.append(f"{canonical} is written without spaces between words: BLEU uses sacreBLEU's `char` "
                     f"tokenizer, not the `{tokenizer}` sacreBLEU's CLI would pick, under which a word-level "
                     "metric scores such text near zero")
        tokenizer = "char"
    mapping = {
        "code": tag.alpha3,
        "name": language_name(tag.language),
        "scripts": [script],
        "casing": "cased" if script in CASED_SCRIPTS else "caseless",
        "quotes": list(quotes),
        "surface": {"bleu_tokenizer": tokenizer, "ter_asian_support": CLI_TER_ASIAN_SUPPORT},
        "metricModelSupport": {
            "comet": {"validated": False},
            "embedding": usual_script and tag.language in EMBEDDING_LANGUAGES,
        },
    }
    spacy = spacy_language(tag) if usual_script else None
    if spacy is not None:
        mapping["lexicon"] = {"spacy": spacy}
    origin = f"generic (CLDR: {cldr_data_version()}; quotes: {quotes_origin})"
    return GenericCard(mapping=mapping, origin=origin, notes=tuple(notes))


def describe_generic_cards() -> str:
    """How a generic card is built, in a sentence (``describe --languages``)."""
    _, quotes_origin = cldr_quotes("en", "Latn")
    return ("a language without a written card is scored with a generic card: name and likely script from CLDR "
            f"({cldr_data_version()}); casing from the script; quotation marks from {quotes_origin}; BLEU "
            "tokenizer and TER settings as sacreBLEU's CLI picks them for `-l SRC-TGT`, but `char` for a script "
            "written without spaces between words; embedding support where the sentence encoder declares the "
            "language; spaCy's word lists where spaCy has the language; the default COMET model, not "
            "validated; no analyzer. Add language_cards/<ISO 639-3 code>.yaml for more (language_cards/README.md)")


@lru_cache(maxsize=1)
def _icu():
    try:
        import icu
    except ImportError:
        return None
    return icu


@lru_cache(maxsize=None)
def cldr_quotes(language: str, script: str) -> tuple[tuple[str, ...], str]:
    """The quote characters of `language` in `script` from CLDR's delimiters
    (ICU's locale data) and the ASCII quotes, and where they came from; the
    generic set where ICU is not installed or has no locale for the language."""
    icu = _icu()
    if icu is None:
        return GENERIC_QUOTES, "the generic set (PyICU is not installed)"
    available = set(icu.Locale.getAvailableLocales().keys())
    locale = f"{language}_{script}"
    if locale not in available:
        if language not in available or script != likely_script(language):
            return GENERIC_QUOTES, f"the generic set (ICU {icu.ICU_VERSION} has no locale {locale})"
        locale = language
    data = icu.LocaleData(locale)
    kinds = icu.ULocaleDataDelimiterType
    found = [data.getDelimiter(getattr(kinds, name)) for name in (
        "QUOTATION_START", "QUOTATION_END", "ALT_QUOTATION_START", "ALT_QUOTATION_END")]
    return tuple(dict.fromkeys([*found, *ASCII_QUOTES])), f"CLDR delimiters (ICU {icu.ICU_VERSION})"


def spacy_language(tag: LanguageTag) -> str | None:
    """The spaCy language code of the tag's language where spaCy ships the
    language (its 639-1 code, else its 639-3 code), without importing spaCy."""
    root = _spacy_lang_dir()
    if root is None:
        return None
    for code in dict.fromkeys((tag.language, tag.alpha3)):
        if code != "xx" and (root / code / "__init__.py").is_file():
            return code
    return None


@lru_cache(maxsize=1)
def _spacy_lang_dir() -> Path | None:
    spec = importlib.util.find_spec("spacy")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "lang"
