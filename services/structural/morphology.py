"""Morphological accuracy against gold annotations (SPEC §2.2 decision).

Features are compared without their markup: "+Pl", "<pl>" and "Pl" are one
feature, case-insensitively.
"""
from __future__ import annotations

from champollion.core.analyzers import ParsedAnalysis


def feature_key(feature: str) -> str:
    return feature.strip("+<>").lower()


def _shows(analysis: ParsedAnalysis, lemmas: set[str], features: set[str]) -> bool:
    tags = {feature_key(tag) for tag in analysis.tags}
    return (not lemmas or analysis.lemma in lemmas) and features <= tags


def matched_gold(
    gold: list[tuple[str, tuple[str, ...]]],
    predicted: list[list[ParsedAnalysis]],
    gold_lemmas: list[set[str]],
) -> int:
    """Gold items that some predicted word expresses: an analysis with one of
    the gold word's lemmas and every expected feature. Each predicted word
    serves one gold item at most (first come, first served)."""
    used: set[int] = set()
    matched = 0
    for (_, features), lemmas in zip(gold, gold_lemmas):
        wanted = {feature_key(f) for f in features}
        for index, analyses in enumerate(predicted):
            if index not in used and any(_shows(a, lemmas, wanted) for a in analyses):
                used.add(index)
                matched += 1
                break
    return matched
