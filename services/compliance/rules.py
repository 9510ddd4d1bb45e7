"""Quote and casing rules of the target language card (SPEC §2.5).

Both work on placeholder-masked text: placeholder syntax is not translated
text, so it can neither leak Latin words nor use the wrong quotes.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# Quote marks that are not initial/final punctuation (Pi/Pf) in Unicode:
# ASCII quotes and the open/close (Ps/Pe) low-9 and CJK corner brackets.
# « and » are Pi/Pf already; they are listed so the set reads complete.
EXTRA_QUOTES = frozenset('"\'«»„‚「」『』')
# Quote characters that double as the apostrophe inside a word (don't, l'eau,
# l’eau): there they are letters' business, not quotation.
APOSTROPHES = frozenset("'\u2019")


@dataclass
class RuleResult:
    score: float
    # The offending items, one per occurrence.
    violations: list[str]


def is_quote_character(char: str) -> bool:
    return char in EXTRA_QUOTES or unicodedata.category(char) in ("Pi", "Pf")


def _is_word_internal_apostrophe(text: str, index: int) -> bool:
    return (
        text[index] in APOSTROPHES
        and 0 < index < len(text) - 1
        and text[index - 1].isalpha()
        and text[index + 1].isalpha()
    )


def quote_characters(text: str) -> list[str]:
    """Every quote character used as a quote, in order of appearance."""
    # The text's distinct characters are looked up once (most texts have no
    # quote at all): a tenth of the lookups of every character in turn.
    quotes = {char for char in set(text) if is_quote_character(char)}
    if not quotes:
        return []
    return [
        char
        for index, char in enumerate(text)
        if char in quotes and not _is_word_internal_apostrophe(text, index)
    ]


def quote_compliance(text: str, allowed: list[str] | None) -> RuleResult:
    """Share of the quote characters used that the card allows; 1.0 when none
    is used, or when the card does not restrict quotes at all."""
    used = quote_characters(text)
    if not used or allowed is None:
        return RuleResult(score=1.0, violations=[])
    allowed_set = set(allowed)
    disallowed = [char for char in used if char not in allowed_set]
    return RuleResult(score=1 - len(disallowed) / len(used), violations=disallowed)


def _is_latin_letter(char: str) -> bool:
    # Covers fullwidth Latin (Ｆｉｌｅ) too: it is leakage all the same.
    return unicodedata.name(char, "").startswith(("LATIN", "FULLWIDTH LATIN"))


def words(text: str) -> list[str]:
    """Runs of letters, split where Latin meets another script, so that a
    Latin word glued to Hangul or kana ("Chrome에서") is a word of its own.
    Digits, spaces and punctuation separate words."""
    found: list[str] = []
    current: list[str] = []
    current_is_latin = False
    for char in text:
        category = unicodedata.category(char)
        if category.startswith("M") and current:  # combining mark: part of the letter before
            current.append(char)
            continue
        if not category.startswith("L"):
            if current:
                found.append("".join(current))
            current = []
            continue
        latin = _is_latin_letter(char)
        if current and latin != current_is_latin:
            found.append("".join(current))
            current = []
        current.append(char)
        current_is_latin = latin
    if current:
        found.append("".join(current))
    return found


def casing_compliance(text: str, casing: str) -> RuleResult:
    """Caseless targets (Korean, Japanese, Chinese, Inuktitut): 1 − share of
    words written in Latin letters. Cased targets always comply."""
    if casing != "caseless":
        return RuleResult(score=1.0, violations=[])
    all_words = words(text)
    if not all_words:
        return RuleResult(score=1.0, violations=[])
    leaked = [word for word in all_words if _is_latin_letter(word[0])]
    return RuleResult(score=1 - len(leaked) / len(all_words), violations=leaked)
