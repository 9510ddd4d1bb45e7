"""Analyzer coverage: the share of the human references' words the target
language's analyzer rejects (the scoring spec's experiment "FST
false-rejection rate on a representative corpus"). A rejected word of a
reference is a correct word the analyzer does not know, so this is the rate
at which fst_acceptance_rate penalises correct output.

Words and verdicts are the structural family's own: `words_of` with the
card's hyphen rule (services/structural/text_words.py gives the same words,
cached) and `Analyzer.rejected` (as written, lower-cased, capitalised; the
card's run-time compounds), so the counts are what fst_acceptance_rate
would count on predictions equal to the references."""
from __future__ import annotations

from collections import Counter

from champollion.core.analyzers import AnalyzerMissing, AnalyzerRegistry
from champollion.core.cards import LanguageCard
from champollion.core.corpus_rules import REJECTED_SHOWN
from champollion.core.words import words_of


def references_of(entry: dict) -> list[str]:
    """The entry's human references: the primary one and any further ones."""
    return [text for text in (entry.get("reference"), *(entry.get("extra_references") or ())) if text]


def analyzer_coverage(entries: list[dict], card: LanguageCard, registry: AnalyzerRegistry | None) -> dict:
    found = {"language": card.code, "analyzer": None}
    if registry is None:
        return {**found, "note": "not computed (no analyzers here)"}
    if not card.fst.analyzers:
        return {**found, "note": f"the {card.code} card names no analyzer"}
    try:
        analyzer = registry.for_card(card)
    except AnalyzerMissing as error:
        return {**found, "note": str(error)}
    rejected: Counter = Counter()
    total = 0
    for entry in entries:
        for text in references_of(entry):
            words = words_of(text, card.words.keep_hyphenated)
            total += len(words)
            rejected.update(analyzer.rejected(words))
    count = sum(rejected.values())
    return {
        **found, "analyzer": analyzer.name, "sha256": analyzer.sha256, "caveats": list(analyzer.caveats),
        "words": total, "rejected": count, "rejected_share": count / total if total else None,
        "rejected_types": len(rejected),
        "top_rejected": [{"word": word, "count": n} for word, n in rejected.most_common(REJECTED_SHOWN)],
    }
