"""Bootstrap resampling over per-entry sufficient statistics (SPEC §7).

Resample indices follow sacreBLEU's scheme exactly — one stream from
``numpy.random.default_rng(seed).choice(N, size=(n, N))`` — so that, seeded
alike, our percentile bounds are the points behind sacreBLEU's own interval
and our paired p-values are those of its paired bootstrap test. Nothing is
re-scored: each resample's statistics are a weighted sum (resample counts x
per-entry statistics, one matrix product), and corpus values are rebuilt from
them by the same reducers as the corpus value itself.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from champollion.sacrebleu_adapter import (
    SACREBLEU_METRICS,
    build_metric,
    score_from_statistics,
)

DEFAULT_SEED = 12345
DEFAULT_RESAMPLES = 1000
ALPHA = 0.05
# Memory for one chunk of resamples (drawn indices, then counts): bounded
# whatever the corpus size, at most 50 resamples at a time.
CHUNK_BYTES = 32 * 2**20
MAX_CHUNK = 50


def chunk_rows(entry_count: int) -> int:
    return max(1, min(MAX_CHUNK, CHUNK_BYTES // (16 * max(entry_count, 1))))


def resample_counts(entry_count: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yields (chunk x entry_count) matrices: how often each entry is drawn in
    each resample. Drawn in chunks from one generator, which gives the same
    index stream as sacreBLEU's single `choice(N, size=(n, N))` call,
    whatever the chunk size."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < resamples:
        rows = min(chunk_rows(entry_count), resamples - done)
        indices = rng.choice(entry_count, size=(rows, entry_count), replace=True)
        counts = np.empty((rows, entry_count))
        for row, drawn in enumerate(indices):
            counts[row] = np.bincount(drawn, minlength=entry_count)
        yield counts
        done += rows


def resampled_sums(stats: dict[str, np.ndarray], resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Metric id -> (resamples x statistics) summed statistics of every resample."""
    metric_ids = list(stats)
    widths = [stats[m].shape[1] for m in metric_ids]
    combined = np.hstack([stats[m] for m in metric_ids])
    entry_count = combined.shape[0]
    sums = np.vstack([counts @ combined for counts in resample_counts(entry_count, resamples, seed)])
    offsets = np.cumsum([0, *widths])
    return {m: sums[:, offsets[i]:offsets[i + 1]] for i, m in enumerate(metric_ids)}


def values_from_sums(metric_id: str, sums: np.ndarray) -> np.ndarray:
    """Corpus value of each resample (NaN where undefined, e.g. no words)."""
    if metric_id in SACREBLEU_METRICS:
        metric = build_metric(metric_id)
        return np.array([score_from_statistics(metric, row.tolist()) for row in sums])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan)


def percentile_interval(values: np.ndarray, alpha: float = ALPHA) -> dict[str, float] | None:
    """Percentile bounds, indexed as sacreBLEU does (n//40 from each end at
    alpha 0.05); None when any resample is undefined."""
    if values.size == 0 or np.isnan(values).any():
        return None
    ordered = np.sort(values)
    lower_index = int(values.size * alpha / 2)
    return {"ci_lower": float(ordered[lower_index]), "ci_upper": float(ordered[values.size - lower_index - 1])}


def composite_from_values(values: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    """Composite of every resample with fixed (already re-normalised) weights."""
    from gateway.card.composite import composite_input

    total = np.zeros(len(next(iter(values.values()))))
    for metric_id, weight in weights.items():
        total = total + weight * composite_input(metric_id, values[metric_id])
    return total


# Metrics with a confidence interval when their statistics are present (SPEC §7).
CI_METRICS = ("chrf_plus_plus", "bleu", "exact_match_rate", "fst_acceptance_rate", "comet_score")
TIER_CI_METRICS = ("chrf_plus_plus", "exact_match_rate")


def confidence_intervals(
    stats: dict[str, np.ndarray],
    composite_weights: dict[str, float],
    resamples: int,
    seed: int,
    metric_ids: tuple[str, ...] = CI_METRICS,
) -> dict[str, dict[str, float]]:
    """Percentile CIs of `metric_ids` and of the composite, all on the same resamples."""
    needed = [m for m in stats if m in metric_ids or m in composite_weights]
    if not needed or next(iter(stats.values())).shape[0] == 0:
        return {}
    sums = resampled_sums({m: stats[m] for m in needed}, resamples, seed)
    values = {m: values_from_sums(m, sums[m]) for m in needed}
    intervals = {m: percentile_interval(values[m]) for m in metric_ids if m in values}
    if composite_weights and all(m in values for m in composite_weights):
        intervals["composite"] = percentile_interval(composite_from_values(values, composite_weights))
    return {m: interval for m, interval in intervals.items() if interval is not None}
