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
_WORD_CHARS = r"\w\u0300-\u036f"
_JOINERS = "'\u2019"
_HYPHENS = "\\-\u2010\u2011\u202f"
_UNICODE_HYPHENS = re.compile(r"[\u2010\u2011]")
_LETTER = re.compile(r"[^\W\d_]")


@cache
def _pattern(keep_hyphenated: bool, extra_chars: str) -> re.Pattern:
    chars = f"[{_WORD_CHARS}{re.escape(extra_chars)}]+"
    joiners = _JOINERS + (_HYPHENS if keep_hyphenated else "")
    return re.compile(rf"{chars}(?:[{joiners}]+{chars})*")


def words_of(text: str, keep_hyphenated: bool = False, extra_chars: str = "") -> list[str]:
    """NFC words with at least one letter, in order. `extra_chars` are kept
    inside words although they are no word characters: the look-alikes an
    orthographic rule must see (◁ typed for syllabic ᐊ)."""
    text = _SKIPPED.sub(" ", unicodedata.normalize("NFC", text))
    pattern = _pattern(keep_hyphenated, extra_chars)
    # Most tokens start with a letter; the regex only runs for the others.
    words = [token for token in pattern.findall(text) if token[0].isalpha() or _LETTER.search(token)]
    if keep_hyphenated:
        words = [_UNICODE_HYPHENS.sub("-", word) for word in words]
    return words
