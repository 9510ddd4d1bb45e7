"""Orthographic rules named by language cards (`orthography.rules`).

Each rule looks at one word and returns its violations; a word is correct
when no rule of the card finds any. orthographic_accuracy is the share of
correct words (SPEC §2.2), null for a card without rules.
"""
from __future__ import annotations

import unicodedata
from typing import Callable

# Plains Cree SRO: long vowels take a circumflex; there is no short e.
_MACRONS = {"ā": "â", "ē": "ê", "ī": "î", "ō": "ô", "Ā": "Â", "Ē": "Ê", "Ī": "Î", "Ō": "Ô"}
_DOUBLED = ("aa", "ee", "ii", "oo")
_SRO_LETTERS = set("ptckshmnwyaioâêîô")


def sro_circumflex_long_vowels(word: str) -> list[str]:
    """Macrons and doubled vowels for long vowels are errors in SRO."""
    found = [f"macron {char} (SRO writes {_MACRONS[char]})" for char in word if char in _MACRONS]
    lowered = word.lower()
    found += [f"doubled vowel {pair} (SRO writes a circumflex)" for pair in _DOUBLED if pair in lowered]
    return found


def sro_inventory(word: str) -> list[str]:
    """Latin letters outside SRO's inventory (e.g. plain e, b, d, r) are
    errors. Words in syllabics are another orthography, not SRO's concern."""
    return [
        f"letter {char!r} is not in SRO"
        for char in dict.fromkeys(word.lower())
        if unicodedata.name(char, "").startswith("LATIN") and char not in _SRO_LETTERS and char not in _MACRONS
    ]


# Characters typed in place of syllabics because they look alike.
_SYLLABIC_LOOKALIKES = {"Δ": "ᐃ", "∆": "ᐃ", "◁": "ᐊ", "▷": "ᐅ", "∇": "ᐁ"}


def _is_syllabic(char: str) -> bool:
    return "\u1400" <= char <= "\u167f" or "\u18b0" <= char <= "\u18ff"


def cans_lookalikes(word: str) -> list[str]:
    return [
        f"look-alike {char!r} (U+{ord(char):04X}) instead of {replacement}"
        for char in word
        if (replacement := _SYLLABIC_LOOKALIKES.get(char))
    ]


def cans_inventory(word: str) -> list[str]:
    """A word written in syllabics uses syllabics only (no Latin letters mixed in)."""
    return [
        f"non-syllabic letter {char!r} in a syllabics word"
        for char in dict.fromkeys(word)
        if unicodedata.category(char).startswith("L") and not _is_syllabic(char)
    ]


RULES: dict[str, Callable[[str], list[str]]] = {
    "sro-circumflex-long-vowels": sro_circumflex_long_vowels,
    "sro-inventory": sro_inventory,
    "cans-lookalikes": cans_lookalikes,
    "cans-inventory": cans_inventory,
}


def rules_for(names: list[str]) -> list[Callable[[str], list[str]]]:
    unknown = [name for name in names if name not in RULES]
    if unknown:
        raise KeyError(f"unknown orthographic rule(s): {', '.join(unknown)}; known: {', '.join(RULES)}")
    return [RULES[name] for name in names]


def violations(word: str, rules: list[Callable[[str], list[str]]]) -> list[str]:
    return [problem for rule in rules for problem in rule(word)]
