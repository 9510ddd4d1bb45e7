"""Corpus values from summed per-entry sufficient statistics.

Each metric id has a reducer that turns the column-wise sum of its statistics
into the corpus value. sacreBLEU metrics are rebuilt by sacreBLEU itself (via
the adapter); everything else is a micro-averaged rate [numerator,
denominator]. The same reducers will serve bootstrap resamples.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from champollion.sacrebleu_adapter import SACREBLEU_METRICS, build_metric, score_from_statistics


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


def corpus_value(metric_id: str, stats: np.ndarray) -> float | None:
    """`stats` has one row per entry; the corpus value of their sum."""
    if stats.shape[0] == 0:
        return None
    return REDUCERS.get(metric_id, rate_from_sums)(stats.sum(axis=0))


def corpus_values(stats: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict[str, float | None]:
    """Corpus value of every metric, over all entries or the given rows."""
    return {metric_id: corpus_value(metric_id, matrix if rows is None else matrix[rows])
            for metric_id, matrix in stats.items()}
