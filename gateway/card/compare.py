"""Paired significance between two run cards (SPEC §7), from the per-entry
statistics the run cards carry: the paired bootstrap (method "bs", as
sacreBLEU's `--paired-bs`) or paired approximate randomization (method "ar",
as sacreBLEU's `--paired-ar`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from champollion.core.sampling import BOOTSTRAP, DEFAULT_RESAMPLES, DEFAULT_TRIALS, METHODS, RANDOMIZATION
from champollion.eval.v1 import run_card_pb2
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

    @classmethod
    def from_rows(cls, version, composite, weights, rows: list[tuple[str, dict]]) -> "ComparableRun":
        """`rows`: (entry id, {metric id: statistics}) per entry."""
        shared = set.intersection(*(set(stats) for _, stats in rows)) if rows else set()
        return cls(
            version=version,
            ids=[entry_id for entry_id, _ in rows],
            stats={m: np.asarray([list(stats[m]) for _, stats in rows], dtype=float) for m in sorted(shared)},
            composite=composite,
            # Sorted: a proto map's order is arbitrary, and the composite's sum must
            # not depend on where the card came from (a file, the store).
            weights=dict(sorted(weights.items())),
        )

    @classmethod
    def from_card(cls, card: dict) -> "ComparableRun":
        return cls.from_rows(
            card["dataset"]["version"], card["scores"]["composite"], card["composite_coverage"]["weights"],
            [(entry["id"], entry.get("stats") or {}) for entry in card["entries"]],
        )

    @classmethod
    def from_proto(cls, card: run_card_pb2.RunCard) -> "ComparableRun":
        """Reads only what is needed, without converting the whole card."""
        composite = card.scores.composite if card.scores.HasField("composite") else None
        rows = [(entry.id, {m: vector.values for m, vector in entry.stats.items()}) for entry in card.entries]
        return cls.from_rows(card.dataset.version, composite, card.composite_coverage.weights, rows)

    def aligned_to(self, ids: list[str]) -> dict[str, np.ndarray]:
        position = {entry_id: index for index, entry_id in enumerate(self.ids)}
        missing = [entry_id for entry_id in ids if entry_id not in position]
        if missing or len(ids) != len(self.ids):
            raise CompareRefused(f"the runs do not cover the same entries (e.g. {missing[:3]})")
        order = [position[entry_id] for entry_id in ids]
        return {m: matrix[order] for m, matrix in self.stats.items()}


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
    stats_a, stats_b = baseline.stats, system.aligned_to(baseline.ids)
    # Weighted metrics too, for the composite; ids this gateway does not know are left out.
    wanted = {*COMPARED_METRICS, *baseline.weights, *system.weights} & set(METRICS)
    shared = [m for m in stats_a if m in stats_b and m in wanted]
    if not shared:
        raise CompareRefused("the run cards carry no common per-entry statistics to resample")
    warnings = []
    if set(baseline.weights) != set(system.weights):
        warnings.append(
            "the runs' composites cover different metrics "
            f"({', '.join(sorted(set(baseline.weights) ^ set(system.weights)))} in one only): "
            "their difference is not like for like"
        )
    sums_a, sums_b = _sampled_sums({m: stats_a[m] for m in shared}, {m: stats_b[m] for m in shared},
                                   samples, seed, method)
    values_a = {m: values_from_sums(m, sums_a[m]) for m in shared}
    values_b = {m: values_from_sums(m, sums_b[m]) for m in shared}

    series = {
        m: (corpus_value(m, stats_a[m]), corpus_value(m, stats_b[m]), values_a[m], values_b[m])
        for m in shared if m in COMPARED_METRICS
    }
    weighted = {*baseline.weights, *system.weights}
    if baseline.weights and system.weights and weighted <= set(values_a):
        series["composite"] = (
            baseline.composite, system.composite,
            weighted_composite(values_a, baseline.weights), weighted_composite(values_b, system.weights),
        )
    test = paired_bootstrap_test if method == BOOTSTRAP else _randomization_test
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


def _sampled_sums(stats_a, stats_b, samples: int, seed: int, method: str):
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


def _randomization_test(trial_differences: np.ndarray, difference: float) -> dict:
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
