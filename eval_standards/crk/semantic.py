"""CrkSemanticMetric: a deterministic meaning check for Plains Cree (LYSS-sem).

The output's words are lemmatised by the FST, their lemmas glossed in English
with the Cree-English lexicon, and the glosses' content lemmas compared with
the English source's (spaCy lookup lemmatizer, stop words dropped):

  coverage  = source content lemmas the output expresses / source content lemmas
  extra     = output glosses the source does not contain

Verdicts, first match wins, and the entry score each gives:
  NO_OUTPUT       0.0   nothing produced
  EXACT_MATCH     1.0   the reference or an acceptable variant, as is
  VALID           0.9   coverage >= 0.75, every word a valid Cree form
  GRAMMAR_ISSUES  0.6   the meaning is there (coverage, counting words the FST
                        rejects as possibly right, >= 0.75) but forms are invalid
  INCOMPLETE      0.3   what is said is in the source (nothing extra), too little
  PARTIAL         0.5   coverage >= 0.4, with content the source does not have
  WRONG           0.0   otherwise: the output says something else
"""
from __future__ import annotations

from champollion.core.entries import EntryInput
from champollion.core.plugins import PluginTools, PluginVerdict
from champollion.core.text import normalise_for_match
from champollion.core.words import words_of
from eval_standards.crk.linter import normalise_orthography
from eval_standards.english import content_lemmas
from eval_standards.lexicon import find_lexicon, parse_lexicon

VERDICT_WEIGHTS = {
    "EXACT_MATCH": 1.0, "VALID": 0.9, "GRAMMAR_ISSUES": 0.6, "PARTIAL": 0.5,
    "INCOMPLETE": 0.3, "WRONG": 0.0, "NO_OUTPUT": 0.0,
}
MEANING_KEPT = 0.75
MEANING_PARTIAL = 0.4


class CrkSemanticMetric:
    id = "crk_semantic"
    metric = "semantic_score"
    verdict_key = "semantic_verdict"

    def __init__(self, tools: PluginTools):
        if tools.analyzer is None:
            raise LookupError("needs the crk analyzer to lemmatise outputs")
        self.analyzer = tools.analyzer
        self.lexicon = parse_lexicon(find_lexicon("crk", "crk-eng.lexicon.tsv"))
        self._gloss_cache: dict[str, frozenset[str]] = {}

    def glossed(self, word: str) -> frozenset[str]:
        """English content lemmas of every gloss of every lemma of the word,
        read through orthographic variants (a macron form still means what
        its circumflex form means; its invalidity is counted separately)."""
        if word not in self._gloss_cache:
            lemmas = set()
            for lemma in self.analyzer.lemmas(normalise_orthography(word)):
                for gloss in self.lexicon.glosses(lemma):
                    lemmas |= content_lemmas(gloss)
            self._gloss_cache[word] = frozenset(lemmas)
        return self._gloss_cache[word]

    def score_entry(self, entry: EntryInput) -> PluginVerdict:
        if entry.failed or not entry.prediction.strip():
            return self._verdict("NO_OUTPUT")
        prediction = normalise_for_match(entry.prediction)
        if any(prediction == normalise_for_match(t) for t in (entry.reference, *entry.acceptable_variants)):
            return self._verdict("EXACT_MATCH")
        words = words_of(entry.prediction, keep_hyphenated=True)
        rejected = self.analyzer.rejected(words)
        expressed = frozenset().union(*(self.glossed(w) for w in words)) if words else frozenset()
        source = content_lemmas(entry.source)
        if not source:
            return self._verdict("VALID" if not rejected else "GRAMMAR_ISSUES", "source has no content words")
        covered = source & expressed
        coverage = len(covered) / len(source)
        extra = expressed - source
        reasons = (f"coverage {coverage:.2f} ({', '.join(sorted(covered)) or 'none'} of "
                   f"{', '.join(sorted(source))})",)
        if extra:
            reasons += (f"not in the source: {', '.join(sorted(extra))}",)
        if rejected:
            reasons += (f"invalid forms: {', '.join(rejected)}",)
        if coverage >= MEANING_KEPT and not rejected:
            return self._verdict("VALID", *reasons)
        if rejected and min(1.0, coverage + len(rejected) / len(source)) >= MEANING_KEPT:
            return self._verdict("GRAMMAR_ISSUES", *reasons)
        if covered and not extra:
            return self._verdict("INCOMPLETE", *reasons)
        if coverage >= MEANING_PARTIAL:
            return self._verdict("PARTIAL", *reasons)
        return self._verdict("WRONG", *reasons)

    @staticmethod
    def _verdict(name: str, *reasons: str) -> PluginVerdict:
        return PluginVerdict(VERDICT_WEIGHTS[name], name, tuple(reasons))
