"""Composite score (SPEC §4) and quality tier (§5). Weights, scales and
directions come from the metric table."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from gateway.card.metrics import METRICS, WEIGHTS

# First match wins.
TIERS = ((0.85, "fluent"), (0.70, "deployable"), (0.50, "functional"), (0.30, "emerging"), (0.0, "baseline"))


def composite_input(metric_id: str, value):
    """A metric value (or array of values) on the composite's 0-1,
    higher-is-better scale."""
    row = METRICS[metric_id]
    scaled = value / row.scale
    return 1.0 - scaled if row.lower_is_better else scaled


def weighted_composite(values: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Σ w·v / Σ w per row (the corpus, or each bootstrap resample) over the
    weighted metrics defined in that row (NaN: undefined, re-normalised
    away); NaN where none is."""
    rows = len(next(iter(values.values()))) if values else 1
    total, weight = np.zeros(rows), np.zeros(rows)
    for metric_id, w in weights.items():
        column = values.get(metric_id)
        if column is None:
            continue
        defined = ~np.isnan(column)
        total += np.where(defined, w * composite_input(metric_id, np.where(defined, column, 0.0)), 0.0)
        weight += np.where(defined, w, 0.0)
    return np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)


@dataclass(frozen=True)
class Composite:
    value: float | None
    profile: str
    # Effective weights of the metrics that entered, re-normalised to sum to 1.
    weights: dict[str, float]
    # Metrics of the profile whose value was null.
    missing: tuple[str, ...]


def compute_composite(values: Mapping[str, float | None], profile: str) -> Composite:
    """The profile's composite over its metrics whose value is not null."""
    profile_weights = WEIGHTS[profile]
    present = {m: w for m, w in profile_weights.items() if values.get(m) is not None}
    missing = tuple(m for m in profile_weights if m not in present)
    if not present:
        return Composite(None, profile, {}, missing)
    value = float(weighted_composite({m: np.array([values[m]], dtype=float) for m in present}, present)[0])
    total_weight = sum(present.values())
    weights = {m: w / total_weight for m, w in present.items()}
    return Composite(value, profile, weights, missing)


def entry_composites(entries: list[Mapping[str, float | None]], composite: Composite) -> list[float | None]:
    """Each entry's composite, over the run's composite metrics with the
    profile's weights, re-normalised over those the entry has: what
    compute_composite gives entry by entry, the same floats, in one pass."""
    profile_weights = WEIGHTS[composite.profile]
    weights = {m: w for m, w in profile_weights.items() if m in composite.weights}
    if not weights:
        return [None] * len(entries)
    columns = {m: np.array([np.nan if entry.get(m) is None else entry[m] for entry in entries], dtype=float)
               for m in weights}
    return [None if np.isnan(value) else float(value) for value in weighted_composite(columns, weights)]


def quality_tier(composite: float | None) -> str:
    if composite is None:
        return "unscored"
    for threshold, label in TIERS:
        if composite >= threshold:
            return label
    # A composite below 0 cannot happen with 0-1 inputs; say so rather than guess.
    raise ValueError(f"composite out of range: {composite}")
