"""Orthographic rules named by language cards (`orthography.rules` for every
word, `orthography.scripts.<script>.rules` for words written in that script).

Each rule looks at one word and returns its violations; a word is correct
when no rule of the card finds any. orthographic_accuracy is the share of
correct words (SPEC §2.2), null for a card without rules. Where a card has
per-script rules, a word mixing scripts is an error, and a word of a script
the card has no rule for is left out of the rate (the scorer warns).
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Callable

from champollion.core.cards import LanguageCard
from champollion.core.scripts import CardScripts, base_script, letter_scripts

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


# Characters a rule must see inside words although they are no word
# characters (words_of would cut ◁ off ◁ᑎᒼ).
RULE_CHARS: dict[str, str] = {"cans-lookalikes": "".join(_SYLLABIC_LOOKALIKES)}


def rules_for(names: list[str]) -> list[Callable[[str], list[str]]]:
    unknown = [name for name in names if name not in RULES]
    if unknown:
        raise KeyError(f"unknown orthographic rule(s): {', '.join(unknown)}; known: {', '.join(RULES)}")
    return [RULES[name] for name in names]


def violations(word: str, rules: list[Callable[[str], list[str]]]) -> list[str]:
    return [problem for rule in rules for problem in rule(word)]


@dataclass(frozen=True)
class Checked:
    # None: not checked, no rule applies to the word's script.
    problems: list[str] | None
    # The scripts (ISO 15924) that left it unchecked.
    unruled: tuple[str, ...] = ()


class Orthography:
    """A card's orthographic rules, applied word by word."""

    def __init__(self, card: LanguageCard):
        settings = card.orthography.scripts
        self.scripts = CardScripts(settings)
        self._common_names = list(card.orthography.rules)
        self._common = rules_for(self._common_names)
        self._by_script = {base_script(s.script): rules_for(list(s.rules)) for s in settings if s.rules}
        names = [*self._common_names, *(name for s in settings for name in s.rules)]
        self.extra_chars = "".join(dict.fromkeys(RULE_CHARS.get(name, "") for name in names))
        # A look-alike counts as a letter of the script whose rule looks for it
        # (ΔΔ is syllabics mistyped, not a Greek word nor a mixed one).
        self._claimed = {char: base_script(s.script) for s in settings for name in s.rules
                         for char in RULE_CHARS.get(name, "")}
        self._signature = self._describe(settings)

    def __bool__(self) -> bool:
        return bool(self._common or self._by_script)

    def check(self, word: str) -> Checked:
        if not self.scripts:
            return Checked(violations(word, self._common))
        letters = self._letter_scripts(word)
        found = [f"mixed scripts ({' + '.join(letters)}) in one word"] if len(letters) > 1 else []
        rules = [*self._common, *(rule for code in letters for rule in self._by_script.get(code, ()))]
        if not found and not rules:
            return Checked(None, letters or ("Zyyy",))
        return Checked(found + violations(word, rules))

    def _letter_scripts(self, word: str) -> tuple[str, ...]:
        claimed = [self._claimed[char] for char in word if char in self._claimed]
        if not claimed:
            return letter_scripts(word)
        rest = "".join(char for char in word if char not in self._claimed)
        return tuple(dict.fromkeys([*letter_scripts(rest), *claimed]))

    def _describe(self, settings) -> str:
        if not self.scripts:
            return f"rules:{','.join(self._common_names)}"
        parts = [f"*={','.join(self._common_names)}"] if self._common_names else []
        parts += [f"{s.script}={','.join(s.rules)}" for s in settings if s.rules]
        return f"rules:{';'.join(parts)}|mixed-script:error"

    def signature(self) -> str:
        """`rules:Latn-SRO=a,b;Cans=c,d|mixed-script:error` (per script), or
        `rules:a,b` (every word)."""
        return self._signature
