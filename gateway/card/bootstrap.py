"""Bootstrap resampling over per-entry sufficient statistics (SPEC §7).

Resample indices follow sacreBLEU's scheme exactly — one stream from
``numpy.random.default_rng(seed).choice(N, size=(n, N))`` — so that, seeded
alike, our percentile bounds are the points behind sacreBLEU's own interval
and our paired p-values are those of its paired bootstrap test. Nothing is
re-scored: each resample's statistics are a weighted sum (resample counts x
per-entry statistics, one matrix product), and corpus values are rebuilt from
them by the same reducers as the corpus value itself (`corpus.values_from_sums`),
and each resample's composite by the same function as the corpus composite.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import numpy as np

from gateway.card.composite import weighted_composite
from gateway.card.corpus import NO_LABELS, corpus_value, values_from_sums
from gateway.card.metrics import CI_METRICS
from gateway.card.reducers import micro_average

NO_RATES: Mapping[str, np.ndarray] = {}

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


def resampled_sums(stats: Mapping, resamples: int, seed: int) -> dict:
    """Key (a metric id) -> (resamples x statistics) summed statistics of every resample."""
    metric_ids = list(stats)
    widths = [stats[m].shape[1] for m in metric_ids]
    combined = np.hstack([stats[m] for m in metric_ids])
    entry_count = combined.shape[0]
    sums = np.vstack([counts @ combined for counts in resample_counts(entry_count, resamples, seed)])
    offsets = np.cumsum([0, *widths])
    return {m: sums[:, offsets[i]:offsets[i + 1]] for i, m in enumerate(metric_ids)}


def percentile_interval(values: np.ndarray, alpha: float = ALPHA) -> dict[str, float] | None:
    """Percentile bounds, indexed as sacreBLEU does (n//40 from each end at
    alpha 0.05); None when any resample is undefined."""
    if values.size == 0 or np.isnan(values).any():
        return None
    ordered = np.sort(values)
    lower_index = int(values.size * alpha / 2)
    return {"ci_lower": float(ordered[lower_index]), "ci_upper": float(ordered[values.size - lower_index - 1])}


# Fewer entries than this: every resample would be the corpus itself.
MIN_ENTRIES = 2


@dataclass
class Intervals:
    # Metric id (or "composite") -> {"ci_lower", "ci_upper"}.
    found: dict[str, dict[str, float]] = field(default_factory=dict)
    # Metric id (or "composite") -> why it has no interval.
    missing: dict[str, str] = field(default_factory=dict)


def undefined_reason(name: str, undefined: int, resamples: int) -> str:
    if name == "composite":
        return f"no composite metric is defined in {undefined} of {resamples} resamples"
    return f"undefined in {undefined} of {resamples} resamples (they draw no entry it counts)"


def intervals_of(series: Mapping[str, np.ndarray]) -> Intervals:
    """Percentile interval of each series of resampled values; a series
    undefined in some resamples has none, and says why. One undefined in
    every resample is a null value: nothing to bound, nothing to say."""
    result = Intervals()
    for name, values in series.items():
        undefined = int(np.isnan(values).sum())
        if undefined == values.size:
            continue
        if undefined:
            result.missing[name] = undefined_reason(name, undefined, values.size)
        else:
            result.found[name] = percentile_interval(values)
    return result


def confidence_intervals(
    stats: Mapping[str, np.ndarray],
    composite_weights: Mapping[str, float],
    resamples: int,
    seed: int,
    metric_ids: tuple[str, ...] = CI_METRICS,
    labels: Mapping[str, str] = NO_LABELS,
    composite_stats: Mapping[str, np.ndarray] | None = None,
    rates: Mapping[str, np.ndarray] = NO_RATES,
) -> Intervals:
    """Percentile CIs of `metric_ids`, of the composite (weighted by
    `composite_weights`, re-normalised in each resample over the metrics
    defined there, as the corpus composite is; from `composite_stats`, the
    adequacy-gated statistics, when given) and of the `rates` ([numerator,
    denominator] per entry, e.g. adequacy_rate), all on the same resamples."""
    composite_stats = stats if composite_stats is None else composite_stats
    wanted = [m for m in metric_ids if m in stats]
    weighted = [m for m in composite_weights if m in composite_stats]
    if not wanted and not weighted and not rates:
        return Intervals()
    # Composite inputs and rates under keys of their own, beside the metrics.
    columns = {("metric", m): stats[m] for m in wanted}
    columns.update({("composite", m): composite_stats[m] for m in weighted})
    columns.update({("rate", name): matrix for name, matrix in rates.items()})
    entry_count = next(iter(columns.values())).shape[0]
    if entry_count < MIN_ENTRIES:
        reason = f"{entry_count} {'entry is' if entry_count == 1 else 'entries are'} too few to resample"
        names = [m for m in wanted if corpus_value(m, stats[m], labels) is not None]
        if any(corpus_value(m, composite_stats[m], labels) is not None for m in weighted):
            names.append("composite")
        names += [name for name, matrix in rates.items() if matrix[:, 1].sum() > 0]
        return Intervals(missing={name: reason for name in names})
    sums = resampled_sums(columns, resamples, seed)
    series = {m: values_from_sums(m, sums[("metric", m)], labels) for m in wanted}
    if weighted:
        series["composite"] = weighted_composite(
            {m: values_from_sums(m, sums[("composite", m)], labels) for m in weighted}, composite_weights)
    for name in rates:
        series[name] = micro_average(sums[("rate", name)], labels)
    return intervals_of(series)


def missing_interval_warnings(missing: Mapping[str, str], scope: str = "",
                              what: str = "confidence interval") -> list[str]:
    """One warning per reason, naming the metrics it leaves without `what`
    (and the `scope`, e.g. "in difficulty tier 5")."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in missing.items():
        by_reason.setdefault(reason, []).append(name)
    where = f" {scope}" if scope else ""
    return [f"no {what} for {', '.join(names)}{where}: {reason}" for reason, names in by_reason.items()]
