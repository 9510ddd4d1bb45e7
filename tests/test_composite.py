"""Composite (SPEC §4) and tiers (§5) against hand computations."""
import numpy as np
import pytest

from gateway.card.composite import WEIGHTS, compute_composite, entry_composites, quality_tier, weighted_composite

# SPEC §4's table, typed from the spec.
SPEC_WEIGHTS = {
    "A": {
        "fst_acceptance_rate": 0.25, "morphological_accuracy": 0.15, "chrf_plus_plus": 0.15,
        "semantic_score": 0.15, "equivalent_match_rate": 0.10, "exact_match_rate": 0.05,
        "code_switching_rate": 0.05, "terminology_adherence": 0.05, "hallucination_rate": 0.05,
    },
    "B": {
        "chrf_plus_plus": 0.25, "semantic_score": 0.25, "equivalent_match_rate": 0.15, "exact_match_rate": 0.10,
        "code_switching_rate": 0.10, "terminology_adherence": 0.05, "hallucination_rate": 0.05,
        "orthographic_accuracy": 0.05,
    },
}




def spec_composite(values: dict, profile: str) -> float:
    """SPEC §4 written out, for other tests: Σ w·v / Σ w over the given
    (defined) values, chrF++ / 100, code-switching and hallucination as 1 - v."""
    weights = SPEC_WEIGHTS[profile]
    inputs = {m: v / 100 if m == "chrf_plus_plus" else 1 - v if m in ("code_switching_rate", "hallucination_rate")
              else v for m, v in values.items()}
    return sum(weights[m] * v for m, v in inputs.items()) / sum(weights[m] for m in inputs)


def test_profiles_are_the_specs():
    assert {profile: dict(weights) for profile, weights in WEIGHTS.items()} == SPEC_WEIGHTS
    for weights in WEIGHTS.values():
        assert sum(weights.values()) == pytest.approx(1.0)


def test_profile_b_with_every_metric():
    values = {
        "chrf_plus_plus": 80.0, "semantic_score": 0.7, "equivalent_match_rate": 0.6,
        "exact_match_rate": 0.5, "code_switching_rate": 0.1, "terminology_adherence": 0.9,
        "hallucination_rate": 0.2, "orthographic_accuracy": 1.0,
    }
    by_hand = 0.25 * 0.8 + 0.25 * 0.7 + 0.15 * 0.6 + 0.10 * 0.5 + 0.10 * 0.9 + 0.05 * 0.9 + 0.05 * 0.8 + 0.05 * 1.0
    result = compute_composite(values, "B")
    assert result.value == pytest.approx(by_hand)
    assert result.missing == ()
    assert result.weights == pytest.approx(SPEC_WEIGHTS["B"])


def test_profile_a_renormalises_over_present_metrics():
    # FST and morphology missing (structural service down): 0.40 of weight gone.
    values = {
        "fst_acceptance_rate": None, "morphological_accuracy": None, "chrf_plus_plus": 60.0,
        "semantic_score": 0.5, "equivalent_match_rate": 0.4, "exact_match_rate": 0.2,
        "code_switching_rate": 0.0, "terminology_adherence": None, "hallucination_rate": 0.1,
    }
    present = 0.15 + 0.15 + 0.10 + 0.05 + 0.05 + 0.05
    by_hand = (0.15 * 0.6 + 0.15 * 0.5 + 0.10 * 0.4 + 0.05 * 0.2 + 0.05 * 1.0 + 0.05 * 0.9) / present
    result = compute_composite(values, "A")
    assert result.value == pytest.approx(by_hand)
    assert set(result.missing) == {"fst_acceptance_rate", "morphological_accuracy", "terminology_adherence"}
    assert result.weights["chrf_plus_plus"] == pytest.approx(0.15 / present)
    assert sum(result.weights.values()) == pytest.approx(1.0)


def test_each_resample_renormalises_over_its_defined_metrics():
    """The bootstrap's composite per resample is the corpus composite's
    function: a metric undefined in a resample (NaN) is re-normalised away
    there only."""
    values = {
        "chrf_plus_plus": np.array([60.0, 80.0, np.nan]),
        "morphological_accuracy": np.array([0.5, np.nan, np.nan]),
        "hallucination_rate": np.array([0.1, 0.3, np.nan]),
    }
    weights = {"chrf_plus_plus": 0.15, "morphological_accuracy": 0.15, "hallucination_rate": 0.05}
    first = (0.15 * 0.6 + 0.15 * 0.5 + 0.05 * 0.9) / 0.35
    second = (0.15 * 0.8 + 0.05 * 0.7) / 0.20
    resampled = weighted_composite(values, weights)
    assert resampled[:2] == pytest.approx([first, second])
    assert np.isnan(resampled[2])
    corpus = compute_composite({"chrf_plus_plus": 80.0, "morphological_accuracy": None, "hallucination_rate": 0.3}, "A")
    assert corpus.value == pytest.approx(second)


def test_no_metric_means_no_composite():
    result = compute_composite({}, "B")
    assert result.value is None and result.weights == {}
    assert quality_tier(result.value) == "unscored"


@pytest.mark.parametrize(
    "composite, tier",
    [(1.0, "fluent"), (0.85, "fluent"), (0.8499, "deployable"), (0.70, "deployable"), (0.6999, "functional"),
     (0.50, "functional"), (0.30, "emerging"), (0.2999, "baseline"), (0.0, "baseline")],
)
def test_tier_thresholds_first_match_wins(composite, tier):
    assert quality_tier(composite) == tier


def test_entry_composites_are_compute_composite_entry_by_entry():
    """The gateway's one-pass entry composites (gateway/server/evaluation.py)
    against compute_composite called per entry, float for float, over
    entries missing random metrics, one missing all, and a run metric the
    profile leaves out."""
    rng = np.random.default_rng(5)
    profile = "B"
    metrics = list(WEIGHTS[profile])
    run = compute_composite({m: 0.5 for m in metrics[:-1]}, profile)  # the last metric: null for the run
    entries = []
    for _ in range(200):
        entry = {m: float(rng.uniform(0, 100 if m == "chrf_plus_plus" else 1)) for m in metrics}
        for m in metrics:
            if rng.random() < 0.3:
                entry[m] = None
        entries.append(entry)
    entries.append({m: None for m in metrics})
    expected = [compute_composite({m: entry.get(m) for m in run.weights}, profile).value for entry in entries]
    assert entry_composites(entries, run) == expected
    assert expected[-1] is None and sum(value is None for value in expected) >= 1
    empty = compute_composite({}, profile)
    assert entry_composites(entries[:3], empty) == [None, None, None]
