"""Words of an output text for FST lookup and orthographic checks (SPEC §2.2).

Punctuation is stripped; numbers, URLs, e-mail addresses and {placeholders}
are skipped; only tokens with a letter count. Hyphenated forms (SRO
`ê-nipâyân`) stay whole when the card says so, otherwise they split.
"""
from __future__ import annotations

import re
import unicodedata
from functools import cache

# Things that are not words of the language, removed before splitting.
_SKIPPED = re.compile(
    r"https?://\S+|www\.\S+|\S+@\S+\.\w+"  # URLs, e-mail addresses
    r"|\{\{[^{}]*\}\}|\{[^{}]*\}"  # {{var}}, {name}, {count, plural, ...} (innermost)
    # printf and %(name)s; no space flag, so "20% en" stays prose.
    r"|%(?:\(\w+\))?[-+#0]*\d*(?:\.\d+)?[sdifxXeEgGcr]"
)
# Word characters (letters, digits, combining marks) joined by apostrophes
# (Cree t'ês-, English don't) and, for cards that keep hyphenated forms
# (SRO ê-nipâyân), by hyphens, or by NARROW NO-BREAK SPACE, which Cree
# syllabics write for SRO's hyphen (ᐁ ᓂᐹᔮᐣ). Joiners never start or end a word.
_JOINERS = "'\u2019"
_HYPHENS = "\\-\u2010\u2011\u202f"
_UNICODE_HYPHENS = re.compile(r"[\u2010\u2011]")
_LETTER = re.compile(r"[^\W\d_]")


# Where Unicode puts combining marks (categories Mn, Mc, Me): scanned once.
_MARK_PLANES = ((0x0300, 0x20000), (0xE0100, 0xE01F0))


@cache
def _word_chars() -> str:
    """A character class's inside: `\\w` and every combining mark. `\\w` has
    no vowel sign or virama (Devanagari नमस्ते is one word, not नमस + त)."""
    ranges: list[list[int]] = []
    for low, high in _MARK_PLANES:
        for code in range(low, high):
            if unicodedata.category(chr(code)).startswith("M"):
                if ranges and ranges[-1][1] == code - 1:
                    ranges[-1][1] = code
                else:
                    ranges.append([code, code])
    marks = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)
    return rf"\w{marks}"


@cache
def _pattern(keep_hyphenated: bool, extra_chars: str) -> re.Pattern:
    chars = f"[{_word_chars()}{re.escape(extra_chars)}]+"
    joiners = _JOINERS + (_HYPHENS if keep_hyphenated else "")
    return re.compile(rf"{chars}(?:[{joiners}]+{chars})*")


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def unify_hyphens(text: str) -> str:
    """U+2010 HYPHEN and U+2011 NON-BREAKING HYPHEN as "-", as kept hyphenated words are listed."""
    return _UNICODE_HYPHENS.sub("-", text)


def normal_form(text: str) -> str:
    """The form of the words words_of lists: NFC, Unicode hyphens as "-"."""
    return unify_hyphens(_nfc(text))


def normal_form_with_offsets(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` in normal_form and, per character of it, the stretch [start,
    end) of `text` it comes from, so that a word found in the normal form can
    be shown in the raw text (a decomposed ê, e + U+0302, is one character
    from two)."""
    # NFC joins a character only to what precedes it: to the same piece goes
    # a mark, or a letter that composes with the piece (Hangul jamo).
    pieces: list[tuple[int, int]] = []
    for index, char in enumerate(text):
        if pieces and (unicodedata.combining(char) or _composes(text[pieces[-1][0]:index], char)):
            pieces[-1] = (pieces[-1][0], index + 1)
        else:
            pieces.append((index, index + 1))
    normal, offsets = [], []
    for start, end in pieces:
        piece = normal_form(text[start:end])
        normal.append(piece)
        offsets += [(start, end)] * len(piece)
    return "".join(normal), offsets


def _composes(piece: str, char: str) -> bool:
    return _nfc(piece + char) != _nfc(piece) + _nfc(char)


def words_of(text: str, keep_hyphenated: bool = False, extra_chars: str = "") -> list[str]:
    """NFC words with at least one letter, in order. `extra_chars` are kept
    inside words although they are no word characters: the look-alikes an
    orthographic rule must see (◁ typed for syllabic ᐊ)."""
    text = _SKIPPED.sub(" ", _nfc(text))
    pattern = _pattern(keep_hyphenated, extra_chars)
    # Most tokens start with a letter; the regex only runs for the others.
    words = [token for token in pattern.findall(text) if token[0].isalpha() or _LETTER.search(token)]
    if keep_hyphenated:
        words = [unify_hyphens(word) for word in words]
    return words
