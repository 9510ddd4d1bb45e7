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
A resampled p-value is never below 1/(samples + 1), and Holm multiplies the
smallest by the number of pairs: asked for no sample count, all pairs
draws at least pairs / alpha of them (190 pairs, 20 systems: 3,800
resamples), so that Holm can call a pair significant at all. A board of
many runs (board_ranks.py) would need tens of thousands: it computes the
same test's p-value from the normal distribution of the resampled
differences' mean and spread instead (`p_values="normal"`), which the same
1,000 resamples estimate well and which has no floor.
Win/tie/loss compare the two runs entry by entry, on each entry's own value
of the metric (its statistics reduced alone; the composite from the gated
statistics): a difference of at most `tie_threshold` is a tie."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import combinations
from statistics import NormalDist
from typing import Callable, Sequence

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
# Where a pair's p-value comes from (module docstring).
RESAMPLED, NORMAL = "resampled", "normal"
# What a summary of the pairs shows unless told (the CLI, the report, the
# web front's run page): the composite, then chrF++.
HEADLINE_METRICS = (COMPOSITE, "chrf_plus_plus")


class DifferentVersions(CompareRefused):
    """Runs of more than one corpus version. `versions`: each version with
    the names of its runs, in the runs' order."""

    def __init__(self, versions: dict[str, list[str]]):
        self.versions = versions
        super().__init__(self.worded())

    def worded(self, shown: Callable[[str], str] = lambda version: version) -> str:
        """The refusal, each version as `shown` gives it (a secret version's
        public id for a non-maintainer), cut to 12 characters."""
        def cut(version: str) -> str:
            return version if len(version) <= 12 else f"{version[:12]}…"

        found = "; ".join(f"{', '.join(names)} on {cut(shown(version))}" for version, names in self.versions.items())
        return f"different corpus versions ({found}): scores compare only within a version"


def check_tie_threshold(tie_threshold: float) -> None:
    """ValueError unless the tie threshold is a finite number ≥ 0."""
    if not np.isfinite(tie_threshold) or tie_threshold < 0:
        raise ValueError(f"must be a finite number ≥ 0, got {tie_threshold}")


def headline_metrics(result: dict, wanted: Sequence[str] | None = None) -> list[str]:
    """The metrics of compare_all's `result` a summary shows: `wanted` (in
    that order) or else HEADLINE_METRICS, those the result has; every
    metric it has when it has none of those."""
    tested = result["metrics"]
    shown = [metric_id for metric_id in (wanted or HEADLINE_METRICS) if metric_id in tested]
    return shown or ([] if wanted else list(tested))


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


def _shares(a: np.ndarray, b: np.ndarray, threshold: float) -> tuple[float | None, float | None, float | None]:
    both = ~(np.isnan(a) | np.isnan(b))
    if not both.any():
        return None, None, None
    difference = a[both] - b[both]
    first, second = float(np.mean(difference > threshold)), float(np.mean(difference < -threshold))
    return first, 1.0 - first - second, second


def _resampled(runs: Sequence[ComparableRun], columns: list[dict], samples: int, seed: int) -> list[dict]:
    """Each run's values in every bootstrap resample (one stream per seed:
    the same resamples for every run, as a paired test draws them)."""
    return [series_values(run, resampled_sums(own, samples, seed)) for run, own in zip(runs, columns)]


def normal_p_value(differences: np.ndarray, observed: float) -> float:
    """compare's bootstrap p-value (the share of resamples whose |difference|,
    less the mean |difference|, exceeds the |observed| one: Moses' and
    sacreBLEU's test) where the resampled differences follow the normal
    distribution of their mean and spread: the same test without the floor
    of 1/(resamples + 1)."""
    centre = float(np.mean(differences))
    spread = float(np.std(differences))
    if spread == 0:
        return 1.0 if observed == 0 else 0.0
    fitted = NormalDist(centre, spread)
    # The mean of |X| for X normal (a folded normal's mean).
    mean_absolute = spread * math.sqrt(2 / math.pi) * math.exp(-centre ** 2 / (2 * spread ** 2)) \
        + centre * (1 - 2 * fitted.cdf(0))
    beyond = abs(observed) + mean_absolute
    return (1 - fitted.cdf(beyond)) + fitted.cdf(-beyond)


def _pair_tests(runs, columns: list[dict], points, method: str, samples: int, seed: int,
                p_values: str = RESAMPLED) -> dict:
    """(first, second) -> metric -> compare's verdict on that pair (None
    where a value is missing or the test undefined in some resample), its
    p-value read off the normal distribution with `p_values="normal"`.
    `columns`: each run's comparison_columns."""
    tests: dict[tuple[int, int], dict[str, dict | None]] = {}
    resampled = _resampled(runs, columns, samples, seed) if method == BOOTSTRAP else None
    for first, second in combinations(range(len(runs)), 2):
        if resampled is not None:
            sampled_a, sampled_b = resampled[first], resampled[second]
        else:
            sums_a, sums_b = sampled_sums(columns[first], columns[second], samples, seed, method)
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
            if p_values == NORMAL:
                verdicts[metric_id]["p_value"] = normal_p_value(differences, value_b - value_a)
        tests[(first, second)] = verdicts
    return tests, resampled


def compare_all(runs: Sequence[ComparableRun], samples: int | None = None, seed: int = DEFAULT_SEED,
                method: str = BOOTSTRAP, correction: str = HOLM, tie_threshold: float = 0.0,
                metric_ids: Sequence[str] | None = None, names: Sequence[str] | None = None,
                descending: bool | None = None, p_values: str = RESAMPLED) -> dict:
    """Every pair of `runs` (at least two, one corpus version) on each
    metric `compare` tests and the composite (or `metric_ids` of those);
    `names` name the runs in the result, its warnings and refusals (else
    their 1-based positions). Per metric: the runs' values, each pair's
    verdict, each run's rank range and significance cluster, and with bs
    each run's own percentile interval on the same resamples. Ranks and
    clusters count the better value as each metric's own direction says,
    or, with `descending`, as a board sorted that way does (True: the
    higher value ranks first). `p_values`: RESAMPLED (compare's) or NORMAL
    (bs only: module docstring). `samples` None: the method's default, or
    more when Holm needs them. CompareRefused (DifferentVersions for runs of
    several corpus versions) when the runs cannot be compared; ValueError
    for a bad method, p-value kind or tie threshold."""
    if method not in METHODS:
        raise ValueError(f"unknown comparison method {method!r} (expected one of {', '.join(METHODS)})")
    if p_values not in (RESAMPLED, NORMAL) or (p_values == NORMAL and method != BOOTSTRAP):
        raise ValueError(f"p-values {p_values!r}: {RESAMPLED}, or {NORMAL} with the paired bootstrap")
    if len(runs) < MIN_RUNS:
        raise CompareRefused(f"all pairs needs at least {MIN_RUNS} runs, got {len(runs)}")
    try:
        check_tie_threshold(tie_threshold)
    except ValueError as error:
        raise ValueError(f"the tie threshold {error}") from None
    names = list(names) if names is not None else [str(i + 1) for i in range(len(runs))]
    versions: dict[str, list[str]] = {}
    for name, run in zip(names, runs):
        versions.setdefault(run.version, []).append(name)
    if len(versions) > 1:
        raise DifferentVersions(versions)
    pair_count = len(runs) * (len(runs) - 1) // 2
    if samples is None or samples == 0:
        samples = DEFAULT_SAMPLES[method]
        if correction == HOLM and p_values == RESAMPLED:
            samples = max(samples, samples_for_holm(pair_count))
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
    # Each run's statistics as compared (the composite's gated), once: every
    # pair, its points and its entries' own values read them.
    columns = [comparison_columns(run, ids, compared, weighted) for run in runs]
    points = [point_values(run, own) for run, own in zip(runs, columns)]
    tests, resampled = _pair_tests(runs, columns, points, method, samples, seed, p_values)
    # Each entry's own value: its statistics reduced alone.
    per_entry = [series_values(run, own) for run, own in zip(runs, columns)]
    metrics = {}
    warnings = _resolution_warnings(len(tests), samples, method, correction) if p_values == RESAMPLED else []
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
        metrics[metric_id] = _metric_block(metric_id, higher, values, verdicts, per_entry, correction, tie_threshold,
                                           None if resampled is None else [r[metric_id] for r in resampled])
    return {
        "dataset_version": runs[0].version,
        "names": names,
        "metrics": metrics,
        "warnings": warnings,
        "test": {"method": method, "samples": samples, "seed": seed, "alpha": ALPHA, "correction": correction,
                 "tie_threshold": tie_threshold, "p_values": p_values},
    }


def samples_for_holm(pairs: int) -> int:
    """The fewest resamples (or trials) whose smallest p-value, 1/(n + 1),
    Holm's correction over `pairs` pairs can still bring below alpha."""
    return math.floor(pairs / ALPHA + 1e-9)


def _resolution_warnings(pairs: int, samples: int, method: str, correction: str) -> list[str]:
    """Holm multiplies the smallest p-value by the number of pairs, and a
    paired test's p-value is at least 1/(samples + 1): with too few
    samples for the pairs no pair can be significant, whatever the data
    (190 pairs of 20 systems need 3,800 resamples)."""
    if correction != HOLM or pairs / (samples + 1) < ALPHA:
        return []
    what = "resamples" if method == BOOTSTRAP else "trials"
    needed = samples_for_holm(pairs)
    return [f"holm over {pairs} pairs: the smallest p-value {samples} {what} give, 1/{samples + 1}, is corrected "
            f"to {pairs / (samples + 1):.3g}, not below {ALPHA}: no pair can be significant (give at least "
            f"{needed} {what})"]


def _metric_block(metric_id: str, higher: bool, values: list[float], verdicts: dict, per_entry: list[dict],
                  correction: str, tie_threshold: float, resampled: list[np.ndarray] | None) -> dict:
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
    return {
        "values": values,
        "higher_is_better": sign > 0,
        "ci": None if resampled is None else [percentile_interval(sampled) for sampled in resampled],
        "pairs": [asdict(row) for row in rows],
        "rank_ranges": [{"best": best, "worst": worst} for best, worst in rank_ranges(better)],
        "clusters": significance_clusters(best_first(values, sign > 0), better),
    }


# --- reading a result ----------------------------------------------------------------

@dataclass(frozen=True)
class SeenPair:
    """A pair's verdict as seen from one of its two runs against the other."""
    p_value: float
    p_corrected: float
    significant: bool
    difference: float  # this run's value - the other's
    # Shares of the entries where this run's value is higher by more than
    # the tie threshold, within it, lower (None: no entry both have a value on).
    wins: float | None
    ties: float | None
    losses: float | None

    @property
    def marked(self) -> str:
        """The corrected p-value as a heatmap's cell shows it: 3 significant
        digits, `*` when significant."""
        return f"{self.p_corrected:.3g}{'*' if self.significant else ''}"


@dataclass(frozen=True)
class RankedRuns:
    """One metric's block of compare_all's result (or of ComparePairs's
    answer, of the same shape) for a reader: the runs' positions best
    first, and every pair seen from each side, `seen[run, other]`."""
    order: list[int]
    seen: dict[tuple[int, int], SeenPair]

    def pairs(self) -> list[tuple[int, int]]:
        """Each pair once, the better-placed run first, best runs' pairs first."""
        return [(run, other) for position, run in enumerate(self.order) for other in self.order[position + 1:]]


def best_first(values: Sequence[float], higher_is_better: bool) -> list[int]:
    """The positions of `values`, the best value's first."""
    return sorted(range(len(values)), key=lambda i: -values[i] if higher_is_better else values[i])


def ranked(block: dict) -> RankedRuns:
    order = best_first(block["values"], block["higher_is_better"])
    seen = {}
    for pair in block["pairs"]:
        first, second = pair["first"], pair["second"]
        common = (pair["p_value"], pair["p_corrected"], pair["significant"])
        seen[first, second] = SeenPair(*common, -pair["difference"], pair["first_better"], pair["ties"],
                                       pair["second_better"])
        seen[second, first] = SeenPair(*common, pair["difference"], pair["second_better"], pair["ties"],
                                       pair["first_better"])
    return RankedRuns(order, seen)
