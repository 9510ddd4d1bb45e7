"""The floor of a corpus version: what degenerate systems that ignore their
input (champollion/core/degenerate.py FLOOR_KINDS) score on it, which the
gateway computes itself and stores as floor runs (gateway/server/floor.py).
Pure arithmetic, no gRPC, no store.

Two rules read it:
  baseline_tier   a run whose composite interval reaches the best floor run's
                  is indistinguishable from ignoring the input: tier baseline
  headroom        per composite metric, how far the version's stored systems
                  are from the floor; under HEADROOM_SHARE of the metric's
                  scale the metric does not tell systems from the floor on
                  this corpus (the corpus check reports it)
"""
from __future__ import annotations

from typing import Iterable, Mapping

from gateway.card.metrics import METRICS

FLOOR_SLUG_PREFIX = "floor:"
BASELINE_TIER = "baseline"
# A metric whose best stored system is less than this share of its scale
# (0.05: 5 chrF++ points, 0.05 of a rate, 0.05 of the composite) above the
# best floor run is uninformative on the corpus.
HEADROOM_SHARE = 0.05
COMPOSITE = "composite"


def floor_slug(kind: str) -> str:
    """The model slug a floor run is stored under: floor:<kind>."""
    return f"{FLOOR_SLUG_PREFIX}{kind}"


def _bound(interval, name: str) -> float | None:
    """A run card's interval bound (`ci_lower`, `ci_upper`); None without one."""
    value = (interval or {}).get(name)
    return None if value is None else float(value)


def _upper(floor_run: Mapping) -> float | None:
    """A floor run's composite interval upper bound; its composite when it has no interval."""
    upper = _bound(floor_run.get("interval"), "ci_upper")
    if upper is not None:
        return upper
    composite = floor_run.get("composite")
    return None if composite is None else float(composite)


def highest_floor(floor_runs: Iterable[Mapping]) -> tuple[str, float] | None:
    """(kind, upper bound) of the floor run whose composite reaches highest
    (`floor_runs`: {floor_kind, composite, interval: {ci_lower, ci_upper}
    or None}); None without any."""
    best = None
    for floor_run in floor_runs:
        upper = _upper(floor_run)
        if upper is not None and (best is None or upper > best[1]):
            best = (floor_run["floor_kind"], upper)
    return best


def floor_warning(kind: str, lower: float, upper: float) -> str:
    return (f"quality_tier is {BASELINE_TIER}: the composite's interval (lower bound {lower:.4f}) reaches that of "
            f"the floor run {floor_slug(kind)} (upper bound {upper:.4f}), a system that ignores its input: this run "
            f"is indistinguishable from ignoring the input on this corpus version")


def baseline_tier(scores: Mapping, floor_runs: Iterable[Mapping]) -> tuple[str, str] | None:
    """The tier rule: when the run's composite interval lower bound (its
    composite without an interval) is at or below the highest floor run's
    composite interval upper bound (its composite without one), the run's
    tier becomes baseline: returns (tier, warning naming the floor kind);
    None when the rule does not apply (no floor, no composite, clearly
    above the floor)."""
    best = highest_floor(floor_runs)
    composite = scores.get("composite")
    if best is None or composite is None:
        return None
    lower = _bound((scores.get("confidence_intervals") or {}).get(COMPOSITE), "ci_lower")
    lower = float(composite) if lower is None else lower
    kind, upper = best
    if lower > upper:
        return None
    return BASELINE_TIER, floor_warning(kind, lower, upper)


def _oriented(metric_id: str, value: float) -> float:
    """A value on a higher-is-better scale of the metric's own units."""
    if metric_id == COMPOSITE:
        return value
    return -value if METRICS[metric_id].lower_is_better else value


def _scale(metric_id: str) -> float:
    return 1.0 if metric_id == COMPOSITE else METRICS[metric_id].scale


def headroom(runs: Iterable[Mapping], metric_ids: Iterable[str] | None = None) -> dict:
    """Per composite metric and the composite: the floor (the best floor
    run's value, and its kind), the stored systems' lowest and highest
    value (the pilot systems: every run that is not a floor run), the
    headroom from the floor to each (in the metric's direction: positive
    is better than the floor) and whether the metric is uninformative (the
    best system's headroom under HEADROOM_SHARE of its scale). `runs`:
    {floor_kind, scores, weights} as RunStore.version_scores gives them;
    `metric_ids`: the metrics to report (default: every metric in any run's
    composite weights)."""
    runs = list(runs)
    floors = [run for run in runs if run.get("floor_kind")]
    systems = [run for run in runs if not run.get("floor_kind")]
    if metric_ids is None:
        metric_ids = sorted({metric for run in runs for metric in (run.get("weights") or {})})
    metrics = {}
    for metric_id in [*metric_ids, COMPOSITE]:
        floor_values = [(run["scores"].get(metric_id), run["floor_kind"]) for run in floors
                        if run["scores"].get(metric_id) is not None]
        system_values = [run["scores"][metric_id] for run in systems if run["scores"].get(metric_id) is not None]
        if not floor_values:
            metrics[metric_id] = {"floor": None, "floor_kind": None, "systems": len(system_values),
                                  "lowest": None, "highest": None, "headroom_lowest": None,
                                  "headroom_highest": None, "uninformative": None}
            continue
        floor, kind = max(floor_values, key=lambda pair: (_oriented(metric_id, pair[0]), pair[1]))
        found = {"floor": floor, "floor_kind": kind, "systems": len(system_values), "lowest": None,
                 "highest": None, "headroom_lowest": None, "headroom_highest": None, "uninformative": None}
        if system_values:
            worst = min(system_values, key=lambda value: _oriented(metric_id, value))
            best = max(system_values, key=lambda value: _oriented(metric_id, value))
            found.update(
                lowest=min(system_values), highest=max(system_values),
                headroom_lowest=_oriented(metric_id, worst) - _oriented(metric_id, floor),
                headroom_highest=_oriented(metric_id, best) - _oriented(metric_id, floor))
            found["uninformative"] = found["headroom_highest"] < HEADROOM_SHARE * _scale(metric_id)
        metrics[metric_id] = found
    uninformative = [metric_id for metric_id, found in metrics.items() if found["uninformative"]]
    return {"threshold_share": HEADROOM_SHARE, "floor_runs": len(floors), "systems": len(systems),
            "metrics": metrics, "uninformative": uninformative}
