"""CrkLinterMetric: deterministic variant classes for Plains Cree (LYSS-eq).

An output is EXACT when it equals the reference (or an acceptable variant)
after match normalisation, EQUIVALENT when the two become equal under the
rules below — each a small, named step that coarsens both sides the same
way — and MISS otherwise; an empty output is NO_OUTPUT. The verdict names
the rules that were needed.

  orthographic_variants   case; macron -> circumflex; ê- written joined,
                          spaced or hyphenated
  optional_particles      discourse particles and demonstratives that may
                          be dropped (êkwa; awa, ana, ôma, anima, ...)
  lemma_synonyms          lemmas of one synonym group in the lexicon
  progressive_aspect      English "is X-ing" may be independent (nipâw) or
                          ê- conjunct (ê-nipât): same verb, same person
  inclusive_exclusive_we  English "we" may be exclusive (1Pl) or inclusive
                          (12Pl)
  word_order              Cree word order is free: the same words in any order
  script                  the sides are written in different scripts of the
                          card (SRO, syllabics)

Words reach the analyzer through the card's transliteration (syllabics are
looked up as SRO), so a text scores the same in either script.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from champollion.core.entries import EntryInput
from champollion.core.plugins import PluginTools, PluginVerdict
from champollion.core.scripts import letter_scripts
from champollion.core.text import normalise_for_match
from champollion.core.words import words_of
from eval_standards.lexicon import find_lexicon, parse_lexicon

_MACRON_TO_CIRCUMFLEX = str.maketrans("āēīōĀĒĪŌ", "âêîôÂÊÎÔ")
# ê- preverb written "ê nipât" or with another dash: one form ("ênipât",
# joined, is resolved word by word with the analyzer: êkwa starts with ê too).
_PREVERB = re.compile(r"(?<!\w)ê[\s\u2010\u2011-]+(?=\w)", re.IGNORECASE)
OPTIONAL_PARTICLES = frozenset({"êkwa"})
# A token: its surface, and (lemma, tags) when the analyzer knows it.
Token = tuple[str, tuple[str, tuple[str, ...]] | None]


def normalise_orthography(text: str) -> str:
    text = unicodedata.normalize("NFC", text).translate(_MACRON_TO_CIRCUMFLEX).lower()
    return _PREVERB.sub("ê-", text)


@dataclass(frozen=True)
class Rule:
    name: str
    # Coarsens one side's tokens; the same function is applied to both sides.
    apply: Callable[[list[Token]], list[Token]]


def _drop_optional(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if not (t[1] and (t[1][0] in OPTIONAL_PARTICLES or "Dem" in t[1][1]))
            and t[0] not in OPTIONAL_PARTICLES]


def _map_tags(tokens: list[Token], change: Callable[[tuple[str, ...]], tuple[str, ...]]) -> list[Token]:
    return [(surface, (analysis[0], change(analysis[1])) if analysis else None) for surface, analysis in tokens]


def _neutral_order(tags: tuple[str, ...]) -> tuple[str, ...]:
    """Independent and ê- conjunct of the same person read alike."""
    if "V" not in tags or not ({"3Sg", "3Pl"} & set(tags)):
        return tags
    return tuple("Order" if t in ("Ind", "Cnj") else t for t in tags if t != "PV/e")


def _neutral_we(tags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("1PlAny" if t in ("1Pl", "12Pl") else t for t in tags)


class CrkLinterMetric:
    id = "crk_linter"
    metric = "equivalent_match_rate"
    verdict_key = "lint_verdict"

    def __init__(self, tools: PluginTools):
        self.analyzer = tools.analyzer
        self.lexicon = parse_lexicon(find_lexicon("crk", "crk-eng.lexicon.tsv"))
        self.rules = [
            Rule("optional_particles", _drop_optional),
            Rule("lemma_synonyms", lambda ts: [(s, (self.lexicon.synonym_key(a[0]), a[1]) if a else None)
                                               for s, a in ts]),
            Rule("progressive_aspect", lambda ts: _map_tags(ts, _neutral_order)),
            Rule("inclusive_exclusive_we", lambda ts: _map_tags(ts, _neutral_we)),
        ]

    def _joined_preverb(self, word: str) -> str:
        """"ênipât" (or syllabics ᐁᓂᐹᐟ) -> "ê-nipât" when only the hyphenated form is a word."""
        if not self.analyzer:
            return word
        read = self.analyzer.reading(word)
        if read.startswith("ê") and not read.startswith("ê-") and len(read) > 1:
            if not self.analyzer.accepts(word) and self.analyzer.accepts("ê-" + read[1:]):
                return "ê-" + read[1:]
        return word

    def _tokens(self, text: str) -> list[Token]:
        tokens = []
        for word in map(self._joined_preverb, words_of(text, keep_hyphenated=True)):
            parsed = sorted(self.analyzer.parsed(word), key=lambda p: p.raw) if self.analyzer else []
            tokens.append((word, (parsed[0].lemma, parsed[0].tags) if parsed else None))
        return tokens

    @staticmethod
    def _keys(tokens: list[Token]) -> list:
        return [analysis if analysis else surface for surface, analysis in tokens]

    def equivalence(self, prediction: str, target: str) -> list[str] | None:
        """The rules under which `prediction` equals `target`, or None."""
        ours, theirs = normalise_orthography(prediction), normalise_orthography(target)
        ours_tokens, theirs_tokens = self._tokens(ours), self._tokens(theirs)
        surfaces = ([t[0] for t in ours_tokens], [t[0] for t in theirs_tokens])
        plain = (words_of(prediction, True), words_of(target, True))
        fired = ["orthographic_variants"] if surfaces != plain else []
        if set(letter_scripts(prediction)) != set(letter_scripts(target)):
            fired.append("script")
        for rule in self.rules:
            if self._keys(ours_tokens) == self._keys(theirs_tokens):
                return fired
            before = self._difference(ours_tokens, theirs_tokens)
            ours_tokens, theirs_tokens = rule.apply(ours_tokens), rule.apply(theirs_tokens)
            if self._difference(ours_tokens, theirs_tokens) < before:
                fired.append(rule.name)  # only rules that brought the sides closer count
        if self._keys(ours_tokens) == self._keys(theirs_tokens):
            return fired
        if self._difference(ours_tokens, theirs_tokens) == 0:
            return [*fired, "word_order"]
        return None

    @classmethod
    def _difference(cls, ours: list[Token], theirs: list[Token]) -> int:
        """Tokens one side has and the other lacks, in any order."""
        a, b = Counter(map(repr, cls._keys(ours))), Counter(map(repr, cls._keys(theirs)))
        return sum(((a - b) + (b - a)).values())

    def score_entry(self, entry: EntryInput) -> PluginVerdict:
        if entry.failed or not entry.prediction.strip():
            return PluginVerdict(0.0, "NO_OUTPUT")
        targets = (entry.reference, *entry.acceptable_variants)
        prediction = normalise_for_match(entry.prediction)
        if any(prediction == normalise_for_match(target) for target in targets):
            return PluginVerdict(1.0, "EXACT")
        for index, target in enumerate(targets):
            rules = self.equivalence(entry.prediction, target)
            if rules is not None:
                against = "reference" if index == 0 else f"acceptable_variants[{index - 1}]"
                return PluginVerdict(1.0, "EQUIVALENT", tuple(f"{rule} (vs {against})" for rule in rules))
        return PluginVerdict(0.0, "MISS")
