"""Corpus values from per-entry sufficient statistics, through each metric's
reducer in the metric table, and the `scores` keys the families provide."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from gateway.card.metrics import METRICS, TABLE, Kind

NO_LABELS: Mapping[str, str] = {}


def values_from_sums(metric_id: str, sums: np.ndarray, labels: Mapping[str, str] = NO_LABELS) -> np.ndarray:
    """The value of each row of summed statistics (NaN where undefined): the
    one path for corpus values and bootstrap resamples alike."""
    return METRICS[metric_id].reducer(sums, labels)


def corpus_value(metric_id: str, stats: np.ndarray, labels: Mapping[str, str] = NO_LABELS) -> float | None:
    """`stats` has one row per entry; the value of their sum, None when undefined."""
    if stats.shape[0] == 0:
        return None
    value = float(values_from_sums(metric_id, stats.sum(axis=0, keepdims=True), labels)[0])
    return None if np.isnan(value) else value


def corpus_values(
    stats: Mapping[str, np.ndarray], rows: np.ndarray | None = None, labels: Mapping[str, str] = NO_LABELS
) -> dict[str, float | None]:
    """Corpus value of every metric, over all entries or the given rows."""
    return {metric_id: corpus_value(metric_id, matrix if rows is None else matrix[rows], labels)
            for metric_id, matrix in stats.items()}


def family_scores(values: Mapping[str, float | None], stats: Mapping[str, np.ndarray],
                  labels: Mapping[str, str]) -> dict:
    """Every key of the metric table, in its order: the metrics' corpus
    `values`, counts (their rate's summed numerator) and labels; None where
    absent."""
    scores = {}
    for row in TABLE:
        if row.kind is Kind.STATISTIC:
            scores[row.key] = values.get(row.key)
        elif row.kind is Kind.COUNT:
            counted = stats.get(row.count_of)
            scores[row.key] = None if counted is None else int(round(counted[:, 0].sum()))
        else:
            scores[row.key] = labels.get(row.key)
    return scores
