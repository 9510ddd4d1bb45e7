"""Every pair of several runs of one corpus version compared (issue 34):
per metric, the paired test of each pair, its p-value corrected for the
number of pairs, the share of entries each side wins, and what the
significant differences say about the systems' ranks.

Each pair's test is `compare`'s (compare.py): the paired bootstrap (bs)
draws one stream of resamples from the seed whatever the run, so each run's
resampled values are computed once and every pair's differences are read
off them; the uncorrected p-values are those `compare` gives for the pair.
Approximate randomization (ar) swaps entries between the two runs of a pair,
so its trials are drawn per pair, as `compare` draws them.

The correction (multiplicity.py: Holm by default, Benjamini-Hochberg, or
none) runs over the pairs of one metric. A pair is significant when its
corrected p-value is below alpha (and, for ar, its difference is not 0).
Win/tie/loss compare the two runs entry by entry, on each entry's own value
of the metric (its statistics reduced alone; the composite from the gated
statistics): a difference of at most `tie_threshold` is a tie."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Sequence

import numpy as np

from champollion.core.sampling import BOOTSTRAP, DEFAULT_SEED, METHODS
from gateway.card.bootstrap import ALPHA, percentile_interval, resampled_sums
from gateway.card.compare import (
    DEFAULT_SAMPLES,
    ComparableRun,
    CompareRefused,
    randomization_test,
    sampled_sums,
    comparison_columns,
    compared_metrics,
    paired_bootstrap_test,
    point_values,
    series_values,
)
from gateway.card.metrics import METRICS
from gateway.card.multiplicity import HOLM, adjust, rank_ranges, significance_clusters

COMPOSITE = "composite"
MIN_RUNS = 2


@dataclass(frozen=True)
class PairVerdict:
    """One pair (first, second) on one metric: second - first."""
    first: int
    second: int
    difference: float
    p_value: float
    p_corrected: float
    significant: bool
    difference_ci: dict | None
    # Shares of entries where first's value is higher by more than the
    # threshold, within it, second's higher; over entries both have a value.
    first_better: float | None
    ties: float | None
    second_better: float | None


def higher_is_better(metric_id: str) -> bool:
    return metric_id == COMPOSITE or not METRICS[metric_id].lower_is_better


def entry_values(run: ComparableRun, ids: list[str], compared: list[str], weighted: list[str]) -> dict[str, np.ndarray]:
    """Each metric's value on each entry alone (NaN where undefined), and
    the composite's from the gated statistics with the run's weights."""
    return series_values(run, comparison_columns(run, ids, compared, weighted))


def _shares(a: np.ndarray, b: np.ndarray, threshold: float) -> tuple[float | None, float | None, float | None]:
    both = ~(np.isnan(a) | np.isnan(b))
    if not both.any():
        return None, None, None
    difference = a[both] - b[both]
    first, second = float(np.mean(difference > threshold)), float(np.mean(difference < -threshold))
    return first, 1.0 - first - second, second


def _resampled(runs: Sequence[ComparableRun], ids, compared, weighted, samples: int, seed: int) -> list[dict]:
    """Each run's values in every bootstrap resample (one stream per seed:
    the same resamples for every run, as a paired test draws them)."""
    return [series_values(run, resampled_sums(comparison_columns(run, ids, compared, weighted), samples, seed))
            for run in runs]


def _pair_tests(runs, ids, compared, weighted, points, method: str, samples: int, seed: int) -> dict:
    """(first, second) -> metric -> compare's verdict on that pair (None
    where a value is missing or the test undefined in some resample)."""
    tests: dict[tuple[int, int], dict[str, dict | None]] = {}
    resampled = _resampled(runs, ids, compared, weighted, samples, seed) if method == BOOTSTRAP else None
    for first, second in combinations(range(len(runs)), 2):
        if resampled is not None:
            sampled_a, sampled_b = resampled[first], resampled[second]
        else:
            columns = [comparison_columns(runs[i], ids, compared, weighted) for i in (first, second)]
            sums_a, sums_b = sampled_sums(*columns, samples, seed, method)
            sampled_a, sampled_b = series_values(runs[first], sums_a), series_values(runs[second], sums_b)
        verdicts = {}
        for metric_id in sampled_a:
            value_a, value_b = points[first][metric_id], points[second][metric_id]
            differences = sampled_b[metric_id] - sampled_a[metric_id]
            if value_a is None or value_b is None or np.isnan(differences).any():
                verdicts[metric_id] = None
                continue
            test = paired_bootstrap_test if method == BOOTSTRAP else randomization_test
            verdicts[metric_id] = test(differences, value_b - value_a)
        tests[(first, second)] = verdicts
    return tests, resampled


def compare_all(runs: Sequence[ComparableRun], samples: int | None = None, seed: int = DEFAULT_SEED,
                method: str = BOOTSTRAP, correction: str = HOLM, tie_threshold: float = 0.0,
                metric_ids: Sequence[str] | None = None, names: Sequence[str] | None = None,
                descending: bool | None = None) -> dict:
    """Every pair of `runs` (at least two, one corpus version) on each
    metric `compare` tests and the composite (or `metric_ids` of those);
    `names` name the runs in warnings (else their 1-based positions).
    Per metric: the runs' values, each pair's verdict, each run's rank
    range and significance cluster, and with bs each run's own percentile
    interval on the same resamples. Ranks and clusters count the better
    value as each metric's own direction says, or, with `descending`, as a
    board sorted that way does (True: the higher value ranks first)."""
    if method not in METHODS:
        raise ValueError(f"unknown comparison method {method!r} (expected one of {', '.join(METHODS)})")
    if len(runs) < MIN_RUNS:
        raise CompareRefused(f"all pairs needs at least {MIN_RUNS} runs, got {len(runs)}")
    if tie_threshold < 0 or not np.isfinite(tie_threshold):
        raise ValueError(f"the tie threshold must be a finite number ≥ 0, got {tie_threshold}")
    versions = sorted({run.version for run in runs})
    if len(versions) > 1:
        raise CompareRefused(f"different corpus versions ({', '.join(v[:12] + '…' for v in versions)}): "
                             "scores compare only within a version")
    samples = samples or DEFAULT_SAMPLES[method]
    names = list(names) if names is not None else [str(i + 1) for i in range(len(runs))]
    ids = runs[0].ids
    compared, weighted = compared_metrics(list(runs))
    if metric_ids is not None:
        unknown = [m for m in metric_ids if m != COMPOSITE and m not in compared]
        if unknown:
            raise CompareRefused(f"metric {unknown[0]!r} is not one every run can be compared on "
                                 f"(they share: {', '.join([*compared, *([COMPOSITE] if weighted else [])])})")
        compared = [m for m in compared if m in metric_ids]
        weighted = weighted if COMPOSITE in metric_ids else []
    if not compared and not weighted:
        raise CompareRefused("the runs carry no common per-entry statistics to resample")
    points = [point_values(run, comparison_columns(run, ids, compared, weighted)) for run in runs]
    tests, resampled = _pair_tests(runs, ids, compared, weighted, points, method, samples, seed)
    per_entry = [entry_values(run, ids, compared, weighted) for run in runs]
    metrics, warnings = {}, []
    for metric_id in points[0]:
        values = [point[metric_id] for point in points]
        if any(value is None for value in values):
            warnings.append(f"{metric_id}: not compared: undefined for "
                            f"{', '.join(name for name, value in zip(names, values) if value is None)}")
            continue
        verdicts = {pair: tests[pair][metric_id] for pair in tests}
        untested = [pair for pair, verdict in verdicts.items() if verdict is None]
        if untested:
            what = "resample" if method == BOOTSTRAP else "trial"
            warnings.append(f"{metric_id}: not compared: undefined in some {what} of "
                            f"{', '.join(f'{names[a]} vs {names[b]}' for a, b in untested[:3])}"
                            f"{', ...' if len(untested) > 3 else ''}")
            continue
        higher = higher_is_better(metric_id) if descending is None else descending
        metrics[metric_id] = _metric_block(higher, values, verdicts, per_entry, method, correction, tie_threshold,
                                           None if resampled is None else [r[metric_id] for r in resampled],
                                           metric_id)
    floor = _resolution_floor(len(tests), samples, method, correction)
    return {
        "dataset_version": versions[0],
        "runs": len(runs),
        "metrics": metrics,
        "warnings": warnings + ([floor] if floor and metrics else []),
        "test": {"method": method, "samples": samples, "seed": seed, "alpha": ALPHA, "correction": correction,
                 "tie_threshold": tie_threshold},
    }


def _resolution_floor(pairs: int, samples: int, method: str, correction: str) -> str | None:
    """Why Holm's correction can call no pair significant, where it cannot:
    no p-value of `samples` resamples or trials is below 1/(samples + 1),
    and Holm multiplies the smallest by the number of pairs."""
    if correction != HOLM or pairs / (samples + 1) < ALPHA:
        return None
    what = "resamples" if method == BOOTSTRAP else "trials"
    needed = int(pairs / ALPHA + 1e-9)  # the fewest with pairs / (samples + 1) < ALPHA
    return (f"no pair can be significant: no p-value of {samples:,} {what} is below 1/{samples + 1:,}, and Holm's "
            f"correction multiplies the smallest by the {pairs:,} pairs (at least {needed:,} {what} would be needed)")


def _metric_block(higher: bool, values: list[float], verdicts: dict, per_entry: list[dict], method: str,
                  correction: str, tie_threshold: float, resampled: list[np.ndarray] | None, metric_id: str) -> dict:
    """One metric's verdicts, ranks and clusters; `higher`: whether the
    higher value ranks first."""
    pairs = list(verdicts)
    corrected = adjust(np.array([verdicts[pair]["p_value"] for pair in pairs]), correction)
    rows, better = [], np.zeros((len(values), len(values)), dtype=bool)
    sign = 1.0 if higher else -1.0
    for (first, second), p_corrected in zip(pairs, corrected):
        verdict, difference = verdicts[(first, second)], values[second] - values[first]
        significant = bool(p_corrected < ALPHA and difference != 0)
        if significant:
            winner, loser = (second, first) if sign * difference > 0 else (first, second)
            better[winner, loser] = True
        rows.append(PairVerdict(first, second, difference, verdict["p_value"], float(p_corrected), significant,
                                verdict["difference_ci"],
                                *_shares(per_entry[first][metric_id], per_entry[second][metric_id], tie_threshold)))
    order = sorted(range(len(values)), key=lambda i: -sign * values[i])
    return {
        "values": values,
        "higher_is_better": sign > 0,
        "ci": None if resampled is None else [percentile_interval(sampled) for sampled in resampled],
        "pairs": [asdict(row) for row in rows],
        "rank_ranges": [list(found) for found in rank_ranges(better)],
        "clusters": significance_clusters(order, better),
    }
