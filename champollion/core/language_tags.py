"""Language tags as people write them, read into one form.

Accepted wherever a language is named: ISO 639-1 (`fr`), 639-2/T and /B
(`fra`, `fre`), 639-3 (`fra`), BCP-47 tags with script, region and variants
(`fr-FR`, `zh-Hant`, `sr-Latn-RS`, `de-1996`) and FLORES-200 codes
(`fra_Latn`, `zho_Hans`; `_` reads as `-` in any tag). `langcodes` parses
and normalises them with CLDR's aliases (`fre` -> `fr`, `iw` -> `he`), and
its CLDR likely-subtags data says which script a language (and region) is
most likely written in.

Which card a tag reaches, and the canonical tag a run card records, is
``champollion.core.cards``' business; this module knows no card.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

import langcodes
from langcodes.data_dicts import ALL_SCRIPTS, LIKELY_SUBTAGS
from langcodes.tag_parser import LanguageTagError

from champollion.core.limits import shown

# Where an error about a language sends the user.
LANGUAGES_HINT = "`champollion describe --languages` lists the languages with a card and how others are scored"
# BCP 47's codes of special scope: no language in particular.
SPECIAL_LANGUAGES = frozenset({"mis", "mul", "und", "zxx"})
NEAREST_SHOWN = 3


class InvalidLanguageTag(ValueError):
    """Not a tag naming one language; the message says why and, where it
    can, the nearest valid tags."""

    def __init__(self, typed: str, reason: str, nearest: tuple[str, ...] = ()):
        self.typed, self.reason, self.nearest = typed, reason, nearest
        hint = f"; nearest valid tags: {', '.join(nearest)}" if nearest else ""
        super().__init__(f"{shown(typed)}: {reason}{hint}")


@dataclass(frozen=True)
class LanguageTag:
    """A tag as read: `language` is langcodes' normalised language subtag
    (the shortest form: `fr`, `yue`, `iu`), `alpha3` its ISO 639-3 code
    (639-2/T where both exist: `fra`, `yue`, `iku`); `script` and `region`
    as given (title- and upper-case), else None."""
    typed: str
    language: str
    alpha3: str
    script: str | None
    region: str | None


def cldr_data_version() -> str:
    """The packages CLDR's data comes from, for signatures."""
    return f"langcodes {metadata.version('langcodes')}, language-data {metadata.version('language-data')}"


def parse_tag(text: str, known: tuple[str, ...] = ()) -> LanguageTag:
    """Reads a language tag; raises InvalidLanguageTag. `known`: further
    codes to suggest when the language subtag is not one (the written cards'
    codes and aliases)."""
    typed = text
    text = text.strip().replace("_", "-")
    if not text:
        raise InvalidLanguageTag(typed, "an empty language tag")
    try:
        parsed = langcodes.Language.get(text)
    except (LanguageTagError, LookupError, ValueError):
        raise InvalidLanguageTag(typed, "not a language tag", _nearest_for_text(text, known)) from None
    language = parsed.language
    if language is None or language in SPECIAL_LANGUAGES:
        raise InvalidLanguageTag(typed, "names no particular language")
    if not language.isalpha():  # private use (`x-...`) or digits
        raise InvalidLanguageTag(typed, "not a language tag")
    if not _language_is_valid(language):
        raise InvalidLanguageTag(typed, f"{shown(language)} is not a language code", _nearest_for_text(text, known))
    if parsed.extlangs:
        raise InvalidLanguageTag(typed, f"{shown(parsed.extlangs[0])} is neither a script nor a region",
                                 _with_language(language, parsed.script, parsed.territory))
    if parsed.script is not None and parsed.script not in ALL_SCRIPTS:
        raise InvalidLanguageTag(typed, f"{shown(parsed.script)} is not an ISO 15924 script code",
                                 _nearest_scripts(language, parsed.script))
    if not parsed.is_valid():
        raise InvalidLanguageTag(typed, "a subtag is not registered (IANA language subtag registry)",
                                 _with_language(language, parsed.script, None))
    return LanguageTag(typed=typed, language=language, alpha3=parsed.to_alpha3(), script=parsed.script,
                       region=parsed.territory)


def _language_is_valid(language: str) -> bool:
    try:
        return langcodes.Language.get(language).is_valid()
    except (LanguageTagError, LookupError, ValueError):
        return False


def has_likely_script(language: str) -> bool:
    """Whether CLDR's likely subtags know the language itself (else a likely
    script would be the default, English's, not the language's)."""
    return language in LIKELY_SUBTAGS


def likely_script(language: str, region: str | None = None) -> str | None:
    """CLDR's likely script for `language` (in `region`, where given); None
    when CLDR has no likely subtags for the language."""
    if not has_likely_script(language):
        return None
    return langcodes.Language.make(language=language, territory=region).maximize().script


def script_implied_by_region(tag: LanguageTag) -> str | None:
    """The script the tag's region implies when it is not the language's
    own likely script (`zh-TW` -> Hant, `sr-ME` -> Latn); else None."""
    if tag.region is None:
        return None
    in_region = likely_script(tag.language, tag.region)
    return in_region if in_region != likely_script(tag.language) else None


def language_name(language: str) -> str:
    """CLDR's English name of a language (`fr` -> French)."""
    return langcodes.Language.get(language).display_name("en")


def _with_language(language: str, script: str | None, region: str | None) -> tuple[str, ...]:
    """The tag without its faulty subtags."""
    kept = str(langcodes.Language.make(language=language, script=script, territory=region))
    return (kept,) if kept == language else (kept, language)


def _nearest_scripts(language: str, script: str) -> tuple[str, ...]:
    close = sorted(code for code in ALL_SCRIPTS if _distance(code.lower(), script.lower()) <= 1)
    return tuple(f"{language}-{code}" for code in close[:NEAREST_SHOWN - 1]) + (language,)


def _nearest_for_text(text: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """A language name (`French`) suggests its tag; else the codes nearest
    the first subtag."""
    if text.replace(" ", "").isalpha() and len(text) > 3:
        try:
            found = langcodes.find(text)
        except LookupError:
            pass
        else:
            return (f"{found.language} ({found.display_name('en')})",)
    return _nearest_languages(text.split("-")[0].lower(), known)


def _nearest_languages(subtag: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """The codes CLDR has data for (and `known`) nearest `subtag` by edit
    distance, the known ones first on a tie, each with its name."""
    preferred = {code.lower() for code in known}
    candidates = preferred | _cldr_languages()
    ranked = sorted(candidates, key=lambda code: (_distance(code, subtag), code not in preferred,
                                                  abs(len(code) - len(subtag)), code))
    nearest = [code for code in ranked[:NEAREST_SHOWN] if _distance(code, subtag) <= 2]
    return tuple(f"{code} ({language_name(code)})" for code in nearest)


@lru_cache(maxsize=1)
def _cldr_languages() -> frozenset[str]:
    return frozenset(key for key in LIKELY_SUBTAGS if "-" not in key and key not in SPECIAL_LANGUAGES)


def _distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]
