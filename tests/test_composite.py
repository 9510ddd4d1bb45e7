"""Composite (SPEC §4) and tiers (§5) against hand computations."""
import pytest

from gateway.card.composite import WEIGHTS, compute_composite, quality_tier


def test_each_profile_sums_to_one():
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
    assert result.weights == pytest.approx(WEIGHTS["B"])


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
