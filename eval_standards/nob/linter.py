"""NobLinterMetric: Bokmål's optional feminine (LYSS-eq).

Bokmål lets a feminine noun take the masculine endings: "boka" and "boken",
"jenta" and "jenten" are both correct. An output that differs from the
reference (or a variant) only so is EQUIVALENT; rule `feminine_or_masculine`.
"""
from __future__ import annotations

from champollion.core.entries import EntryInput
from champollion.core.plugins import PluginTools, PluginVerdict
from champollion.core.text import normalise_for_match
from champollion.core.words import words_of

_GENDERS = {"f", "m"}


class NobLinterMetric:
    id = "nob_linter"
    metric = "equivalent_match_rate"
    verdict_key = "lint_verdict"

    def __init__(self, tools: PluginTools):
        if tools.analyzer is None:
            raise LookupError("needs the nob analyzer")
        self.analyzer = tools.analyzer

    def _gender_neutral_readings(self, word: str) -> set[tuple[str, tuple[str, ...]]]:
        """Noun readings with gender f/m merged; other words read as themselves."""
        readings = set()
        for parsed in self.analyzer.parsed(word.lower()):
            if parsed.tags and parsed.tags[0] == "n" and _GENDERS & set(parsed.tags):
                tags = tuple("f|m" if t in _GENDERS else t for t in parsed.tags if t != "compound-R")
                readings.add((parsed.lemma, tags))
        return readings or {(word.lower(), ())}

    def equivalent(self, prediction: str, target: str) -> bool:
        ours, theirs = words_of(prediction, True), words_of(target, True)
        if len(ours) != len(theirs):
            return False
        return all(a.lower() == b.lower() or self._gender_neutral_readings(a) & self._gender_neutral_readings(b)
                   for a, b in zip(ours, theirs))

    def score_entry(self, entry: EntryInput) -> PluginVerdict:
        if entry.failed or not entry.prediction.strip():
            return PluginVerdict(0.0, "NO_OUTPUT")
        targets = (entry.reference, *entry.acceptable_variants)
        if any(normalise_for_match(entry.prediction) == normalise_for_match(t) for t in targets):
            return PluginVerdict(1.0, "EXACT")
        if any(self.equivalent(entry.prediction, t) for t in targets):
            return PluginVerdict(1.0, "EQUIVALENT", ("feminine_or_masculine",))
        return PluginVerdict(0.0, "MISS")
