"""Reducers: from summed per-entry statistics to a metric's value.

A reducer takes a matrix whose rows are summed statistics (one row for the
corpus value, one per resample for the bootstrap) and the run's labels, and
returns one value per row, NaN where the value is undefined (nothing to
count). The corpus value and every bootstrap resample go through the same
reducer, as sacreBLEU computes both with one ``_compute_score_from_stats``.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from champollion.core.sacrebleu_adapter import build_metric, score_from_statistics

Reducer = Callable[[np.ndarray, Mapping[str, str]], np.ndarray]


def micro_average(sums: np.ndarray, _labels: Mapping[str, str]) -> np.ndarray:
    """Summed numerators / summed denominators ([numerator, denominator]
    statistics); a mean of entry values when every denominator is 1."""
    numerators, denominators = sums[:, 0], sums[:, 1]
    safe = np.where(denominators > 0, denominators, 1.0)
    return np.where(denominators > 0, numerators / safe, np.nan)


def sacrebleu_score(metric_id: str) -> Reducer:
    """sacreBLEU's own score from summed statistics. The statistics layout
    does not depend on the tokenizer, so the default configuration rebuilds
    any run's score."""
    def reduce(sums: np.ndarray, _labels: Mapping[str, str]) -> np.ndarray:
        metric = build_metric(metric_id)
        return np.array([score_from_statistics(metric, row.tolist()) for row in sums], dtype=float)
    return reduce


# The behavioral family's label giving how many renderings each glossary
# term has, in the order of consistency_score's statistics.
CONSISTENCY_GROUPS = "consistency_groups"


def majority_share(sums: np.ndarray, labels: Mapping[str, str]) -> np.ndarray:
    """Consistency (SPEC §2.4 decision): each row counts, term by term, how
    many entries used each rendering. Over terms used in at least two
    entries: the mean share of the majority rendering."""
    sizes = [int(size) for size in labels[CONSISTENCY_GROUPS].split(",")] if labels.get(CONSISTENCY_GROUPS) else []
    starts = np.cumsum([0, *sizes[:-1]])
    values = np.full(sums.shape[0], np.nan)
    for row, counts in enumerate(sums):
        shares = [counts[start:start + size].max() / counts[start:start + size].sum()
                  for start, size in zip(starts, sizes) if counts[start:start + size].sum() >= 2]
        if shares:
            values[row] = float(np.mean(shares))
    return values
