"""Composite score (SPEC §4) and quality tier (§5)."""
from __future__ import annotations

from dataclasses import dataclass

WEIGHTS: dict[str, dict[str, float]] = {
    "A": {
        "fst_acceptance_rate": 0.25,
        "morphological_accuracy": 0.15,
        "chrf_plus_plus": 0.15,
        "semantic_score": 0.15,
        "equivalent_match_rate": 0.10,
        "exact_match_rate": 0.05,
        "code_switching_rate": 0.05,
        "terminology_adherence": 0.05,
        "hallucination_rate": 0.05,
    },
    "B": {
        "chrf_plus_plus": 0.25,
        "semantic_score": 0.25,
        "equivalent_match_rate": 0.15,
        "exact_match_rate": 0.10,
        "code_switching_rate": 0.10,
        "terminology_adherence": 0.05,
        "hallucination_rate": 0.05,
        "orthographic_accuracy": 0.05,
    },
}

# Lower is better for these: they enter as 1 - value.
INVERTED = frozenset({"code_switching_rate", "hallucination_rate"})

# First match wins.
TIERS = ((0.85, "fluent"), (0.70, "deployable"), (0.50, "functional"), (0.30, "emerging"), (0.0, "baseline"))


def composite_input(metric_id: str, value: float) -> float:
    """A metric value on the composite's 0-1, higher-is-better scale."""
    if metric_id == "chrf_plus_plus":
        return value / 100.0
    if metric_id in INVERTED:
        return 1.0 - value
    return value


@dataclass(frozen=True)
class Composite:
    value: float | None
    profile: str
    # Effective weights of the metrics that entered, re-normalised to sum to 1.
    weights: dict[str, float]
    # Metrics of the profile whose value was null.
    missing: tuple[str, ...]


def compute_composite(values: dict[str, float | None], profile: str) -> Composite:
    """Σ w·v / Σ w over the profile's metrics whose value is not null."""
    profile_weights = WEIGHTS[profile]
    present = {m: w for m, w in profile_weights.items() if values.get(m) is not None}
    missing = tuple(m for m in profile_weights if m not in present)
    total_weight = sum(present.values())
    if total_weight == 0:
        return Composite(None, profile, {}, missing)
    value = sum(w * composite_input(m, values[m]) for m, w in present.items()) / total_weight
    weights = {m: w / total_weight for m, w in present.items()}
    return Composite(value, profile, weights, missing)


def quality_tier(composite: float | None) -> str:
    if composite is None:
        return "unscored"
    for threshold, label in TIERS:
        if composite >= threshold:
            return label
    # A composite below 0 cannot happen with 0-1 inputs; say so rather than guess.
    raise ValueError(f"composite out of range: {composite}")
