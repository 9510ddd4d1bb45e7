"""Paired bootstrap significance between two run cards (SPEC §7), as
sacreBLEU's paired bootstrap test (`--paired-bs`) computes it, from the
per-entry statistics the run cards carry."""
from __future__ import annotations

import numpy as np

from gateway.bootstrap import (
    ALPHA,
    composite_from_values,
    percentile_interval,
    resampled_sums,
    values_from_sums,
)

COMPARED_METRICS = (
    "chrf_plus_plus", "bleu", "ter", "exact_match_rate", "equivalent_match_rate",
    "fst_acceptance_rate", "comet_score",
)


class CompareRefused(ValueError):
    """The two run cards cannot be compared (e.g. different corpus versions)."""


def _aligned_stats(card: dict, ids: list[str]) -> dict[str, np.ndarray]:
    by_id = {entry["id"]: entry.get("stats") or {} for entry in card["entries"]}
    missing = [entry_id for entry_id in ids if entry_id not in by_id]
    if missing:
        raise CompareRefused(f"run card lacks entries {missing[:5]} of the other run")
    metrics = set.intersection(*(set(by_id[entry_id]) for entry_id in ids)) if ids else set()
    return {m: np.asarray([by_id[entry_id][m] for entry_id in ids], dtype=float) for m in sorted(metrics)}


def _p_value(sample_differences: np.ndarray, observed: float) -> float:
    """Moses/sacreBLEU: share of centred absolute resample differences above
    the observed absolute difference, with +1 smoothing."""
    absolute = np.abs(sample_differences)
    centred = absolute - absolute.mean()
    return float((np.sum(centred > abs(observed)) + 1) / (len(centred) + 1))


def compare_run_cards(baseline: dict, system: dict, resamples: int, seed: int) -> dict:
    """Per metric: both values, the difference (system - baseline), its
    percentile CI, the p-value and whether it is significant at 95%."""
    version_a, version_b = baseline["dataset"]["version"], system["dataset"]["version"]
    if version_a != version_b:
        raise CompareRefused(
            f"different corpus versions ({version_a[:12]}… vs {version_b[:12]}…): scores compare only within a version"
        )
    ids = [entry["id"] for entry in baseline["entries"]]
    stats_a, stats_b = _aligned_stats(baseline, ids), _aligned_stats(system, ids)
    shared = [m for m in stats_a if m in stats_b]
    if not shared:
        raise CompareRefused("the run cards carry no common per-entry statistics to resample")
    warnings = []
    weights_a = baseline["composite_coverage"]["weights"]
    weights_b = system["composite_coverage"]["weights"]
    if set(weights_a) != set(weights_b):
        warnings.append(
            "the runs' composites cover different metrics "
            f"({', '.join(sorted(set(weights_a) ^ set(weights_b)))} in one only): their difference is not like for like"
        )
    sums_a = resampled_sums({m: stats_a[m] for m in shared}, resamples, seed)
    sums_b = resampled_sums({m: stats_b[m] for m in shared}, resamples, seed)
    values_a = {m: values_from_sums(m, sums_a[m]) for m in shared}
    values_b = {m: values_from_sums(m, sums_b[m]) for m in shared}
    actual_a = {m: float(values_from_sums(m, stats_a[m].sum(axis=0, keepdims=True))[0]) for m in shared}
    actual_b = {m: float(values_from_sums(m, stats_b[m].sum(axis=0, keepdims=True))[0]) for m in shared}

    series = {m: (actual_a[m], actual_b[m], values_a[m], values_b[m]) for m in shared if m in COMPARED_METRICS}
    if weights_a and weights_b and all(m in values_a for m in {*weights_a, *weights_b}):
        series["composite"] = (
            baseline["scores"]["composite"], system["scores"]["composite"],
            composite_from_values(values_a, weights_a), composite_from_values(values_b, weights_b),
        )
    metrics = {}
    for metric_id, (value_a, value_b, resampled_a, resampled_b) in series.items():
        sample_differences = resampled_b - resampled_a
        interval = percentile_interval(sample_differences)
        if interval is None:
            continue
        difference = value_b - value_a
        p_value = _p_value(sample_differences, difference)
        metrics[metric_id] = {
            "baseline": value_a,
            "system": value_b,
            "difference": difference,
            "difference_ci": interval,
            "p_value": p_value,
            "significant": p_value < ALPHA and not interval["ci_lower"] <= 0 <= interval["ci_upper"],
        }
    return {
        "dataset_version": version_a,
        "metrics": metrics,
        "warnings": warnings,
        "bootstrap": {"method": "paired percentile", "resamples": resamples, "alpha": ALPHA, "seed": seed},
    }
