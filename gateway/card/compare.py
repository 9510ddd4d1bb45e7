"""Paired significance between two run cards (SPEC §7), from the per-entry
statistics the run cards carry: the paired bootstrap (method "bs", as
sacreBLEU's `--paired-bs`) or paired approximate randomization (method "ar",
as sacreBLEU's `--paired-ar`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from champollion.core.sampling import BOOTSTRAP, DEFAULT_RESAMPLES, DEFAULT_TRIALS, METHODS, RANDOMIZATION
from champollion.eval.v1 import run_card_pb2
from gateway.card.adequacy import gated_statistics, inadequate_entries
from gateway.card.bootstrap import (
    ALPHA,
    missing_interval_warnings,
    percentile_interval,
    resampled_sums,
    undefined_reason,
)
from gateway.card.composite import weighted_composite
from gateway.card.corpus import corpus_value, values_from_sums
from gateway.card.metrics import COMPARED_METRICS, METRICS
from gateway.card.randomization import randomization_p_value, shuffled_sums

# Resamples (bs) or trials (ar) when none are asked for: sacreBLEU's defaults.
DEFAULT_SAMPLES = {BOOTSTRAP: DEFAULT_RESAMPLES, RANDOMIZATION: DEFAULT_TRIALS}
# What the comparison says about `difference_ci` under each method.
DIFFERENCE_CI = {
    BOOTSTRAP: f"{1 - ALPHA:.0%} paired bootstrap percentile interval",
    RANDOMIZATION: "none: approximate randomization tests whether the two outputs of each entry are "
                   "exchangeable and estimates no distribution of the difference (method bs gives one)",
}


class CompareRefused(ValueError):
    """The two run cards cannot be compared (e.g. different corpus versions)."""


@dataclass
class ComparableRun:
    """What a comparison reads from a run card."""
    version: str
    ids: list[str]
    # Metric id -> (entries x statistics), rows in `ids` order.
    stats: dict[str, np.ndarray]
    composite: float | None
    weights: dict[str, float]
    # True where the entry failed an adequacy gate (gateway/card/adequacy.py):
    # the composite reads it at its inputs' worst, as the card's composite does.
    inadequate: np.ndarray | None = None

    def __post_init__(self):
        if self.inadequate is None:  # no entry marked: every one adequate
            self.inadequate = np.zeros(len(self.ids), dtype=bool)

    @classmethod
    def from_rows(cls, version, composite, weights, rows: list[tuple[str, dict]],
                  inadequate=None) -> "ComparableRun":
        """`rows`: (entry id, {metric id: statistics}) per entry;
        `inadequate`: per entry, whether it is marked inadequate (None: none is)."""
        shared = set.intersection(*(set(stats) for _, stats in rows)) if rows else set()
        return cls(
            version=version,
            ids=[entry_id for entry_id, _ in rows],
            stats={m: np.asarray([list(stats[m]) for _, stats in rows], dtype=float) for m in sorted(shared)},
            composite=composite,
            # Sorted: a proto map's order is arbitrary, and the composite's sum must
            # not depend on where the card came from (a file, the store).
            weights=dict(sorted(weights.items())),
            inadequate=None if inadequate is None else np.asarray(inadequate, dtype=bool),
        )

    @classmethod
    def from_card(cls, card: dict) -> "ComparableRun":
        return cls.from_rows(
            card["dataset"]["version"], card["scores"]["composite"], card["composite_coverage"]["weights"],
            [(entry["id"], entry.get("stats") or {}) for entry in card["entries"]],
            inadequate_entries(card["entries"]),
        )

    @classmethod
    def from_stored(cls, card: dict, rows: list[tuple[str, dict, bool]]) -> "ComparableRun":
        """A stored run: its card without entries and RunStore.comparable_stats'
        (entry id, statistics, inadequate) rows."""
        return cls.from_rows(card["dataset"]["version"], card["scores"].get("composite"),
                             (card.get("composite_coverage") or {}).get("weights") or {},
                             [(entry_id, stats) for entry_id, stats, _ in rows],
                             [inadequate for _, _, inadequate in rows])

    @classmethod
    def from_proto(cls, card: run_card_pb2.RunCard) -> "ComparableRun":
        """Reads only what is needed, without converting the whole card."""
        composite = card.scores.composite if card.scores.HasField("composite") else None
        rows = [(entry.id, {m: vector.values for m, vector in entry.stats.items()}) for entry in card.entries]
        inadequate = [_marked_inadequate(entry) for entry in card.entries]
        return cls.from_rows(card.dataset.version, composite, card.composite_coverage.weights, rows, inadequate)

    def order_of(self, ids: list[str]) -> list[int]:
        """The rows of `ids` in this run; CompareRefused unless the runs
        cover the same entries."""
        position = {entry_id: index for index, entry_id in enumerate(self.ids)}
        missing = [entry_id for entry_id in ids if entry_id not in position]
        if missing or len(ids) != len(self.ids):
            raise CompareRefused(f"the runs do not cover the same entries (e.g. {missing[:3]})")
        return [position[entry_id] for entry_id in ids]

    def aligned_to(self, ids: list[str]) -> dict[str, np.ndarray]:
        order = self.order_of(ids)
        return {m: matrix[order] for m, matrix in self.stats.items()}


def _marked_inadequate(entry: run_card_pb2.EntryResult) -> bool:
    value = entry.scores.fields.get("adequate")
    return value is not None and value.WhichOneof("kind") == "bool_value" and not value.bool_value


def _p_value(sample_differences: np.ndarray, observed: float) -> float:
    """Moses/sacreBLEU: share of centred absolute resample differences above
    the observed absolute difference, with +1 smoothing."""
    absolute = np.abs(sample_differences)
    centred = absolute - absolute.mean()
    return float((np.sum(centred > abs(observed)) + 1) / (len(centred) + 1))


def compare_runs(baseline: ComparableRun, system: ComparableRun, samples: int, seed: int,
                 method: str = BOOTSTRAP) -> dict:
    """Per metric: both values, the difference (system - baseline), the
    p-value of `method` ("bs": `samples` bootstrap resamples, with the
    difference's percentile CI; "ar": `samples` randomization trials, no CI)
    and whether it is significant at 95%."""
    if method not in METHODS:
        raise ValueError(f"unknown comparison method {method!r} (expected one of {', '.join(METHODS)})")
    if baseline.version != system.version:
        raise CompareRefused(
            f"different corpus versions ({baseline.version[:12]}… vs {system.version[:12]}…): "
            "scores compare only within a version"
        )
    ids = baseline.ids
    compared, weighted = compared_metrics([baseline, system])
    if not compared and not weighted:
        raise CompareRefused("the run cards carry no common per-entry statistics to resample")
    warnings = []
    if set(baseline.weights) != set(system.weights):
        warnings.append(
            "the runs' composites cover different metrics "
            f"({', '.join(sorted(set(baseline.weights) ^ set(system.weights)))} in one only): "
            "their difference is not like for like"
        )
    columns_a = comparison_columns(baseline, ids, compared, weighted)
    columns_b = comparison_columns(system, ids, compared, weighted)
    sums_a, sums_b = sampled_sums(columns_a, columns_b, samples, seed, method)
    sampled_a, sampled_b = series_values(baseline, sums_a), series_values(system, sums_b)
    points_a, points_b = point_values(baseline, columns_a), point_values(system, columns_b)
    series = {name: (points_a[name], points_b[name], sampled_a[name], sampled_b[name]) for name in sampled_a}
    test = paired_bootstrap_test if method == BOOTSTRAP else randomization_test
    metrics, untested = {}, {}
    for metric_id, (value_a, value_b, sampled_a, sampled_b) in series.items():
        if value_a is None or value_b is None:
            continue
        sample_differences = sampled_b - sampled_a
        undefined = int(np.isnan(sample_differences).sum())
        if undefined:
            untested[metric_id] = (undefined_reason if method == BOOTSTRAP else _undefined_in_trials)(
                metric_id, undefined, sample_differences.size)
            continue
        metrics[metric_id] = {"baseline": value_a, "system": value_b, "difference": value_b - value_a,
                              **test(sample_differences, value_b - value_a)}
    if method == BOOTSTRAP:
        warnings += missing_interval_warnings(untested, "(difference; no paired test)")
    else:
        warnings += missing_interval_warnings(untested, what="paired test")
    result = {"dataset_version": baseline.version, "metrics": metrics, "warnings": warnings,
              "test": {"method": method, "samples": samples, "seed": seed, "alpha": ALPHA,
                       "difference_ci": DIFFERENCE_CI[method]}}
    if method == BOOTSTRAP:
        result["bootstrap"] = {"method": "paired percentile", "resamples": samples, "alpha": ALPHA, "seed": seed}
    return result


# The composite's statistics sit beside the metrics' under keys of their own:
# the metrics are compared as defined, the composite from the gated statistics.
METRIC, COMPOSITE_INPUT = "metric", "composite"


def compared_metrics(runs: list[ComparableRun]) -> tuple[list[str], list[str]]:
    """(metrics `compare` tests that every run has statistics for, the
    composite's weighted metrics when every run has a composite whose
    inputs all runs have statistics for; else no weighted metric)."""
    shared = set.intersection(*(set(run.stats) for run in runs)) & set(METRICS)
    compared = [m for m in COMPARED_METRICS if m in shared]
    weighted = set().union(*(run.weights for run in runs))
    if not all(run.weights for run in runs) or not weighted <= shared:
        return compared, []
    return compared, sorted(weighted)


def comparison_columns(run: ComparableRun, ids: list[str], compared: list[str],
                       weighted: list[str]) -> dict[tuple[str, str], np.ndarray]:
    """The statistics a comparison resamples, rows in `ids` order: each
    compared metric's, and the composite inputs' with the run's inadequate
    entries at their worst."""
    order = run.order_of(ids)
    columns = {(METRIC, m): run.stats[m][order] for m in compared}
    if weighted:
        gated = gated_statistics(run.stats, run.inadequate, weighted)
        columns.update({(COMPOSITE_INPUT, m): gated[m][order] for m in weighted})
    return columns


def series_values(run: ComparableRun, sums: dict[tuple[str, str], np.ndarray]) -> dict[str, np.ndarray]:
    """Each compared metric's value, and the run's composite (its own
    weights), for every row of summed statistics."""
    values = {m: values_from_sums(m, matrix) for (kind, m), matrix in sums.items() if kind == METRIC}
    inputs = {m: values_from_sums(m, matrix) for (kind, m), matrix in sums.items() if kind == COMPOSITE_INPUT}
    if inputs:
        values["composite"] = weighted_composite(inputs, run.weights)
    return values


def point_values(run: ComparableRun, columns: dict[tuple[str, str], np.ndarray]) -> dict[str, float | None]:
    """The run's values over every entry: the metrics' corpus values, the
    card's own composite."""
    values = {m: corpus_value(m, matrix) for (kind, m), matrix in columns.items() if kind == METRIC}
    if any(kind == COMPOSITE_INPUT for kind, _ in columns):
        values["composite"] = run.composite
    return values


def sampled_sums(stats_a, stats_b, samples: int, seed: int, method: str):
    """Summed statistics of both sides in each bootstrap resample (the same
    entries drawn for both), or of both pseudo-systems in each AR trial."""
    if method == RANDOMIZATION:
        return shuffled_sums(stats_a, stats_b, samples, seed)
    return resampled_sums(stats_a, samples, seed), resampled_sums(stats_b, samples, seed)


def paired_bootstrap_test(sample_differences: np.ndarray, difference: float) -> dict:
    """The verdict on one metric from its resampled differences (also the
    corpus check's power simulation, gateway/corpus_check/power.py)."""
    interval = percentile_interval(sample_differences)
    p_value = _p_value(sample_differences, difference)
    return {"difference_ci": interval, "p_value": p_value,
            "significant": p_value < ALPHA and not interval["ci_lower"] <= 0 <= interval["ci_upper"]}


def randomization_test(trial_differences: np.ndarray, difference: float) -> dict:
    p_value = randomization_p_value(trial_differences, difference)
    # sacreBLEU counts only trials strictly above the observed difference, so
    # two runs with the same statistics get p = 1/(trials+1): a difference of
    # 0 is never called significant, whatever the p-value.
    return {"difference_ci": None, "p_value": p_value, "significant": p_value < ALPHA and difference != 0}


def _undefined_in_trials(name: str, undefined: int, trials: int) -> str:
    what = "no composite metric is defined" if name == "composite" else "undefined"
    return f"{what} in {undefined} of {trials} randomization trials (a pseudo-system took no entry it counts)"


def compare_run_cards(baseline: dict, system: dict, samples: int, seed: int, method: str = BOOTSTRAP) -> dict:
    """`compare_runs` on two run cards in their dict form."""
    return compare_runs(ComparableRun.from_card(baseline), ComparableRun.from_card(system), samples, seed, method)
