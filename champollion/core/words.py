"""Words of an output text for FST lookup and orthographic checks (SPEC §2.2).

Punctuation is stripped; numbers, URLs, e-mail addresses and {placeholders}
are skipped; only tokens with a letter count. Hyphenated forms (SRO
`ê-nipâyân`) stay whole when the card says so, otherwise they split.
"""
from __future__ import annotations

import re
import unicodedata

# Things that are not words of the language, removed before splitting.
_SKIPPED = re.compile(
    r"https?://\S+|www\.\S+|\S+@\S+\.\w+"  # URLs, e-mail addresses
    r"|\{\{[^{}]*\}\}|\{[^{}]*\}"  # {{var}}, {name}, {count, plural, ...} (innermost)
    # printf and %(name)s; no space flag, so "20% en" stays prose.
    r"|%(?:\(\w+\))?[-+#0]*\d*(?:\.\d+)?[sdifxXeEgGcr]"
)
# Word characters (letters, digits, combining marks) joined by apostrophes
# (Cree t'ês-, English don't) and, for cards that keep hyphenated forms
# (SRO ê-nipâyân), by hyphens. Joiners never start or end a word.
_CHARS = r"[\w\u0300-\u036f]+"
_WORD = re.compile(rf"{_CHARS}(?:['\u2019]+{_CHARS})*")
_HYPHENATED_WORD = re.compile(rf"{_CHARS}(?:['\u2019\-\u2010\u2011]+{_CHARS})*")
_UNICODE_HYPHENS = re.compile(r"[\u2010\u2011]")
_LETTER = re.compile(r"[^\W\d_]")


def words_of(text: str, keep_hyphenated: bool = False) -> list[str]:
    """NFC words with at least one letter, in order."""
    text = _SKIPPED.sub(" ", unicodedata.normalize("NFC", text))
    pattern = _HYPHENATED_WORD if keep_hyphenated else _WORD
    # Most tokens start with a letter; the regex only runs for the others.
    words = [token for token in pattern.findall(text) if token[0].isalpha() or _LETTER.search(token)]
    if keep_hyphenated:
        words = [_UNICODE_HYPHENS.sub("-", word) for word in words]
    return words
