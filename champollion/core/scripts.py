"""Scripts of words, and how a word in one of a card's scripts reaches its
analyzer and orthographic rules.

A card lists its scripts (ISO 15924 codes, with an optional variant:
`Latn-SRO`) and may say, per script (`orthography.scripts`), which rules
check words written in it and which registered transliterator turns them into
the script its analyzer and LYSS plugins read (Plains Cree: syllabics -> SRO).
A word's script is the Unicode script of its letters (fontTools' copy of the
Unicode Script property); marks, digits and punctuation belong to no script.
A word whose letters are of two scripts is a *mixed-script* word.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata

# Common, inherited and unknown: not a script a word can be written in.
_NO_SCRIPT = frozenset({"Zyyy", "Zinh", "Zzzz"})


def base_script(code: str) -> str:
    """`Latn-SRO` -> `Latn`: the Unicode script of a card's script code."""
    return code.split("-", 1)[0]


# fontTools is imported where used: champollion.core.cards imports this module,
# and the analyzer build (deploy/docker) loads cards with PyYAML and jsonschema only.
def script_name(code: str) -> str:
    from fontTools import unicodedata as unicode_scripts

    return unicode_scripts.script_name(base_script(code), default=code)


@cache
def letter_script(char: str) -> str | None:
    """The ISO 15924 code of a letter's script; None for anything else."""
    if not unicodedata.category(char).startswith("L"):
        return None
    from fontTools import unicodedata as unicode_scripts

    code = unicode_scripts.script(char)
    return None if code in _NO_SCRIPT else code


def letter_scripts(word: str) -> tuple[str, ...]:
    """The ISO 15924 codes of the word's letters, in order of first appearance."""
    found = dict.fromkeys(code for char in word if (code := letter_script(char)) is not None)
    return tuple(found)


@dataclass(frozen=True)
class Transliterator:
    """Turns words of script `source` into the script `target` (ISO 15924)."""
    name: str
    source: str
    target: str
    # The distribution that implements it, named with its version in signatures.
    package: str
    convert: Callable[[str], str]

    def signature(self) -> str:
        return f"{self.name}({self.package}-{_version_of(self.package)})"


@cache  # reads the package's metadata file: once per process, not per batch
def _version_of(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not-installed"


def _syllabics_to_sro(word: str) -> str:
    # ALTLab's converter: syllabics finals, w-dots, the syllabics full stop and
    # NARROW NO-BREAK SPACE for the SRO hyphen (ᐁ ᓂᐹᔮᐣ -> ê-nipâyân).
    from cree_sro_syllabics import syllabics2sro

    return syllabics2sro(word)


# Registered transliterators, named by cards (`orthography.scripts.X.transliterate`).
TRANSLITERATORS: dict[str, Transliterator] = {
    "cans-to-sro": Transliterator("cans-to-sro", "Cans", "Latn", "cree-sro-syllabics", _syllabics_to_sro),
}


@dataclass(frozen=True)
class ScriptSettings:
    """One `orthography.scripts` entry of a card: the rules for words written
    in `script` (a code of the card's `scripts`) and the transliterator that
    brings them to the analyzer's script (None: read as written)."""
    script: str
    rules: tuple[str, ...] = ()
    transliterate: str | None = None


class CardScripts:
    """A card's per-script settings, applied word by word."""

    def __init__(self, settings: tuple[ScriptSettings, ...]):
        self.settings = settings
        self._by_script = {base_script(s.script): s for s in settings}

    def __bool__(self) -> bool:
        return bool(self.settings)

    @property
    def transliterations(self) -> tuple[tuple[str, Transliterator], ...]:
        """(card script, transliterator) for each script read through one."""
        return tuple((s.script, TRANSLITERATORS[s.transliterate]) for s in self.settings if s.transliterate)

    def reading(self, word: str) -> str:
        """The word as the analyzer should see it: transliterated when all its
        letters are of one script the card transliterates, as written
        otherwise (a mixed-script word is not a word of either script, so the
        analyzer is left to reject it)."""
        letters = letter_scripts(word)
        if len(letters) == 1 and (settings := self._by_script.get(letters[0])) and settings.transliterate:
            return unicodedata.normalize("NFC", TRANSLITERATORS[settings.transliterate].convert(word))
        return word

    def reading_signature(self) -> str | None:
        """`Cans>cans-to-sro(cree-sro-syllabics-2021.7.26)`, for the signatures
        of metrics computed on readings; None when nothing is transliterated."""
        parts = [f"{script}>{t.signature()}" for script, t in self.transliterations]
        return ",".join(parts) or None
