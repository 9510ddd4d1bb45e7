"""Corpus values from summed per-entry sufficient statistics.

Each metric id has a reducer that turns the column-wise sum of its statistics
into the corpus value. sacreBLEU metrics are rebuilt by sacreBLEU itself (via
the adapter); everything else is a micro-averaged rate [numerator,
denominator]. The same reducers will serve bootstrap resamples.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from champollion.sacrebleu_adapter import (
    SACREBLEU_METRICS,
    build_metric,
    score_from_statistics,
)


def rate_from_sums(sums: np.ndarray) -> float | None:
    """Micro average: summed numerators / summed denominators; None when nothing counted."""
    numerator, denominator = float(sums[0]), float(sums[1])
    return None if denominator == 0 else numerator / denominator


def _sacrebleu_reducer(metric_id: str) -> Callable[[np.ndarray], float]:
    metric = build_metric(metric_id)
    return lambda sums: score_from_statistics(metric, sums.tolist())


REDUCERS: dict[str, Callable[[np.ndarray], float | None]] = {
    metric_id: _sacrebleu_reducer(metric_id) for metric_id in SACREBLEU_METRICS
}


def majority_share(sums: np.ndarray, groups: list[int]) -> float | None:
    """Consistency (SPEC §2.4 decision): `sums` counts, term by term (`groups`
    renderings each), which rendering entries used. Over terms used in at
    least two entries: the mean share of the majority rendering."""
    shares = []
    for start, size in zip(np.cumsum([0, *groups[:-1]]), groups):
        counts = sums[start:start + size]
        if counts.sum() >= 2:
            shares.append(counts.max() / counts.sum())
    return float(np.mean(shares)) if shares else None


def _groups(labels: dict[str, str], key: str) -> list[int]:
    return [int(size) for size in labels[key].split(",")] if labels.get(key) else []


# Reducers that need a run-level layout (a family's label) besides the sums.
LAYOUT_REDUCERS: dict[str, Callable[[np.ndarray, dict[str, str]], float | None]] = {
    "consistency_score": lambda sums, labels: majority_share(sums, _groups(labels, "consistency_groups")),
}


def corpus_value(metric_id: str, stats: np.ndarray, labels: dict[str, str] | None = None) -> float | None:
    """`stats` has one row per entry; the corpus value of their sum."""
    if stats.shape[0] == 0:
        return None
    sums = stats.sum(axis=0)
    if metric_id in LAYOUT_REDUCERS:
        return LAYOUT_REDUCERS[metric_id](sums, labels or {})
    return REDUCERS.get(metric_id, rate_from_sums)(sums)


def corpus_values(
    stats: dict[str, np.ndarray], rows: np.ndarray | None = None, labels: dict[str, str] | None = None
) -> dict[str, float | None]:
    """Corpus value of every metric, over all entries or the given rows."""
    return {metric_id: corpus_value(metric_id, matrix if rows is None else matrix[rows], labels)
            for metric_id, matrix in stats.items()}
