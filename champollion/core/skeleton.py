"""Skeletons: texts reduced to what a disguise cannot change, so that two
texts a reader would take for the same compare equal (issue 33).

`skeleton(text)` is what the contamination check (gateway/card/contamination.py)
compares: HTML entities decoded (`&eacute;`, `&#1072;`, repeatedly, for
double encoding); NFKD (full-width, mathematical and other compatibility
forms, ligatures) with every combining mark taken out (accents stripped or
added, U+034F COMBINING GRAPHEME JOINER, variation selectors);
default-ignorable code points dropped (zero-width characters, soft hyphens,
tag characters, ...); characters that show as a space but are letters or
fillers (U+3164 HANGUL FILLER, U+115F, U+1160, U+FFA0, U+2800, U+180E) and
every whitespace made a space; punctuation a space (never mapped: ICU takes
the em dash for a katakana letter); every other character replaced by its
UTS #39 confusable prototype (ICU's SpoofChecker, through PyICU), a letter
and its other case sharing one (the capital's prototype when it has one,
else the small letter's: Cyrillic `Т` and `т` are Latin `t`, `0` is `o`,
`m` is `rn`), case folded, until nothing changes, and `l` merged with `i`
(`1`, `I` and `l` look alike, `I` and `i` are one letter); symbols, once
mapped (`|` is `l`), spaces; control, private-use and unassigned
characters dropped; whitespace runs collapsed. Every step but the entity
decoding acts on one character at a time, so the skeleton of a text
contains the skeleton of any part of it: a substring search on skeletons
finds a disguised quote. It merges more than a reader would (Devanagari
vowel signs are combining marks; `m` and `rn` are one): it serves
matching, where both sides go through it alike, never scoring.

`identifier_skeleton(text)` is the same for an id (a dataset id): no entity
decoding, punctuation kept (`wmt21-ende` and `wmt21.ende` are two ids),
the rest as above, so `wmt2l-ende`, `WMT21-ENDE` and `wmt21-еnde` (Cyrillic
e) all have the skeleton of `wmt21-ende`.

Without PyICU (the `icu` extra) a small built-in table stands in for ICU's
confusables: the Cyrillic and Greek letters that look like Latin ones, and
the digits and letters ICU maps among ASCII.
"""
from __future__ import annotations

import html
import re
import unicodedata

try:  # the `icu` extra
    import icu
except ImportError:  # pragma: no cover - depends on the install
    icu = None

# Letters and fillers that render as blank space: a space, not a letter.
WHITESPACE_LIKE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")

# Built-in stand-in for ICU's confusables (their prototypes are then case folded).
_FALLBACK_CONFUSABLES = {
    **dict(zip("авсԁеһіјӏкмпорԛѕтѵԝхуᴢ", "abcdehijlkmnopqstvwxyz", strict=True)),  # Cyrillic
    **dict(zip("αβγδεηικνορτυχω", "abydenikvoptuxw", strict=True)),  # Greek
    "0": "o", "1": "l", "|": "l", "m": "rn", "ı": "i", "ȷ": "j", "ɡ": "g", "ſ": "f",
}

_WHITESPACE_RUN = re.compile(r"\s+")
_SPOOF = icu.SpoofChecker() if icu is not None else None


def _default_ignorable(char: str) -> bool:
    if icu is not None:
        return icu.Char.hasBinaryProperty(char, icu.UProperty.DEFAULT_IGNORABLE_CODE_POINT)
    code = ord(char)
    return (unicodedata.category(char) == "Cf" or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF
            or code in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F))


def _prototype(char: str) -> str:
    """The character's UTS #39 confusable prototype (one or more characters)."""
    if _SPOOF is not None:
        return _SPOOF.getSkeleton(0, char)
    return _FALLBACK_CONFUSABLES.get(char, char)


class _Table(dict):
    """str.translate's table, filled as characters are met: each character
    (after NFKD) to what it contributes to a skeleton."""

    def __init__(self, keep_punctuation: bool):
        super().__init__()
        self._keep_punctuation = keep_punctuation
        self._pending: set[str] = set()

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if char in self._pending:  # a cycle among prototypes: the character stands for itself
            return self._terminal(char)
        self._pending.add(char)
        try:
            value = self._value(char)
        finally:
            self._pending.discard(char)
        self[code] = value
        return value

    def _of(self, text: str) -> str:
        return "".join(self[ord(char)] for char in text)

    def _terminal(self, char: str) -> str:
        if unicodedata.category(char)[0] in "PS" and not self._keep_punctuation:
            return " "
        return "i" if char == "l" else char

    def _value(self, char: str) -> str:
        if char in WHITESPACE_LIKE or char.isspace():
            return " "
        kind = unicodedata.category(char)
        if kind[0] in "MC" or _default_ignorable(char):
            return ""  # marks; control, format, private use, unassigned; default-ignorables
        if kind[0] == "P":
            # Punctuation is a space whatever it looks like (ICU takes the em
            # dash for the katakana letter ー); a symbol may be a letter's
            # look-alike (| for l).
            return " " if not self._keep_punctuation else char
        lower = unicodedata.normalize("NFKD", char.casefold())
        if lower != char and (len(lower) != 1 or lower.upper() != char.upper()):
            return self._of(lower)  # ß: ss
        # A character and its other case share one skeleton: the prototype
        # of the capital when it has one (Cyrillic Т and т: Latin t), else
        # of the small letter (Cyrillic һ: h), case folded, until nothing
        # changes.
        for form in (lower.upper(), lower):
            prototype = unicodedata.normalize("NFKD", _prototype(form)).casefold()
            if prototype != lower:
                return self._of(prototype)
        return self._terminal(lower)


_TEXT_TABLE = _Table(keep_punctuation=False)
_ID_TABLE = _Table(keep_punctuation=True)


def _unescaped(text: str) -> str:
    """HTML entities decoded, up to three times (`&amp;eacute;`)."""
    for _ in range(3):
        if "&" not in text:
            break
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return text


def skeleton(text: str) -> str:
    """What the contamination check compares (module docstring): words
    separated by single spaces, no leading or trailing space."""
    folded = unicodedata.normalize("NFKD", _unescaped(text)).translate(_TEXT_TABLE)
    return _WHITESPACE_RUN.sub(" ", folded).strip()


def identifier_skeleton(text: str) -> str:
    """An id's skeleton: look-alike, case-different and invisibly padded ids
    share one; punctuation is kept."""
    folded = unicodedata.normalize("NFKD", text).translate(_ID_TABLE)
    return _WHITESPACE_RUN.sub(" ", folded).strip()


def icu_available() -> bool:
    """Whether ICU's confusables are used (else the built-in table)."""
    return _SPOOF is not None
