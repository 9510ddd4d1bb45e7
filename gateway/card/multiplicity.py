"""Many paired tests at once (issue 34): p-values corrected for the number
of comparisons, and what the significant differences say about ranks.

- Holm (step-down) controls the family-wise error rate: the chance of any
  false "significant" among all the pairs. Benjamini-Hochberg controls the
  false discovery rate: the expected share of false ones among those called
  significant (scipy.stats.false_discovery_control). With 20 systems, 190
  uncorrected tests at 0.05 call about 10 differences significant by chance.
- A rank range: a system's best rank is 1 + the number of systems
  significantly better than it, its worst the number of systems minus those
  it is significantly better than (WMT's findings show ranks this way).
- Significance clusters (mt-metrics-eval's AssignRanks, by its definition):
  systems in order, best first; a new cluster starts at the first system
  that some system of the current cluster is significantly better than.

Pure: numpy and scipy, no store, no gateway. The corrections' names are
champollion/core/sampling.py's (a command line lists them without numpy)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from champollion.core.sampling import BENJAMINI_HOCHBERG, CORRECTIONS, HOLM, NO_CORRECTION

__all__ = ["BENJAMINI_HOCHBERG", "CORRECTIONS", "HOLM", "NO_CORRECTION", "adjust", "benjamini_hochberg", "holm",
           "rank_ranges", "significance_clusters"]


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest of m is
    multiplied by m - i + 1 (i from 1), kept at least as large as the
    adjusted one before it, capped at 1."""
    p_values = np.asarray(p_values, dtype=float)
    m = p_values.size
    if m == 0:
        return p_values.copy()
    order = np.argsort(p_values, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p_values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's implementation)."""
    p_values = np.asarray(p_values, dtype=float)
    if p_values.size == 0:
        return p_values.copy()
    from scipy.stats import false_discovery_control  # a quarter of a second: only when asked

    return np.asarray(false_discovery_control(p_values, method="bh"), dtype=float)


def adjust(p_values: np.ndarray, correction: str) -> np.ndarray:
    """`p_values` corrected by `correction` (one of CORRECTIONS)."""
    if correction == HOLM:
        return holm(p_values)
    if correction == BENJAMINI_HOCHBERG:
        return benjamini_hochberg(p_values)
    if correction == NO_CORRECTION:
        return np.asarray(p_values, dtype=float).copy()
    raise ValueError(f"unknown correction {correction!r} (expected one of {', '.join(CORRECTIONS)})")


def rank_ranges(better: np.ndarray) -> list[tuple[int, int]]:
    """(best rank, worst rank) per system, 1-based; `better[i, j]`: system i
    is significantly better than system j."""
    better = np.asarray(better, dtype=bool)
    n = better.shape[0]
    return [(1 + int(better[:, i].sum()), n - int(better[i, :].sum())) for i in range(n)]


def significance_clusters(order: Sequence[int], better: np.ndarray) -> list[int]:
    """Cluster number (1 = best) per system. `order`: the systems' indices,
    best first; `better[i, j]`: system i is significantly better than j. A
    system opens a new cluster when any system from the current cluster's
    first up to it is significantly better than it."""
    better = np.asarray(better, dtype=bool)
    clusters = [0] * better.shape[0]
    current, start = 1, 0
    for position, system in enumerate(order):
        if any(better[order[earlier], system] for earlier in range(start, position)):
            current, start = current + 1, position
        clusters[system] = current
    return clusters
