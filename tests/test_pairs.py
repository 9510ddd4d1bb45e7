"""All pairs of runs (issue 34): multiple-comparison corrections worked by
hand, rank ranges and significance clusters, and compare_all's uncorrected
p-values equal to pairwise compare's."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.card.compare import ComparableRun, CompareRefused, compare_runs
from gateway.card.multiplicity import (
    adjust,
    benjamini_hochberg,
    holm,
    rank_ranges,
    significance_clusters,
)
from gateway.card.pairs import (
    DifferentVersions,
    check_tie_threshold,
    compare_all,
    headline_metrics,
    normal_p_value,
    ranked,
)


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04: times 3, 2, 1 = 0.03, 0.06, 0.04; kept non-decreasing: 0.03, 0.06, 0.06.
    assert holm(np.array([0.01, 0.04, 0.03])) == pytest.approx([0.03, 0.06, 0.06])
    # Capped at 1.
    assert holm(np.array([0.5, 0.6])) == pytest.approx([1.0, 1.0])


def test_benjamini_hochberg_by_hand():
    # Sorted 0.01, 0.03, 0.04: times 3/1, 3/2, 3/3 = 0.03, 0.045, 0.04; running minimum from the largest.
    assert benjamini_hochberg(np.array([0.01, 0.04, 0.03])) == pytest.approx([0.03, 0.04, 0.04])


def test_no_correction_and_unknown_correction():
    assert adjust(np.array([0.2, 0.01]), "none") == pytest.approx([0.2, 0.01])
    with pytest.raises(ValueError, match="bonferroni"):
        adjust(np.array([0.2]), "bonferroni")


def test_rank_ranges_and_clusters_by_hand():
    # Three systems, best first by value: A (0), C (2), B (1); only A is significantly better than B.
    better = np.zeros((3, 3), dtype=bool)
    better[0, 1] = True
    assert rank_ranges(better) == [(1, 2), (2, 3), (1, 3)]
    assert significance_clusters([0, 2, 1], better) == [1, 2, 1]
    # Nothing significant: one cluster, every rank possible.
    assert significance_clusters([0, 1, 2], np.zeros((3, 3), dtype=bool)) == [1, 1, 1]
    assert rank_ranges(np.zeros((3, 3), dtype=bool)) == [(1, 3)] * 3


def _run(right: np.ndarray, weights=None) -> ComparableRun:
    ids = [f"e{i}" for i in range(right.size)]
    stats = {"exact_match_rate": np.column_stack([right.astype(float), np.ones(right.size)])}
    return ComparableRun("v", ids, stats, float(right.mean()), weights or {"exact_match_rate": 1.0})


@pytest.fixture(scope="module")
def four_runs():
    rng = np.random.default_rng(3)
    skill = [0.30, 0.45, 0.47, 0.70]
    return [_run(rng.random(120) < p) for p in skill]


@pytest.mark.parametrize("method", ["bs", "ar"])
def test_uncorrected_p_values_are_pairwise_compares(four_runs, method):
    samples = 300 if method == "bs" else 400
    result = compare_all(four_runs, samples=samples, seed=7, method=method, correction="none")
    for metric_id in ("exact_match_rate", "composite"):
        block = result["metrics"][metric_id]
        assert len(block["pairs"]) == 6
        for pair in block["pairs"]:
            alone = compare_runs(four_runs[pair["first"]], four_runs[pair["second"]], samples, 7, method)
            assert pair["p_value"] == alone["metrics"][metric_id]["p_value"]
            assert pair["p_corrected"] == pair["p_value"]
            assert pair["difference"] == pytest.approx(alone["metrics"][metric_id]["difference"])


def test_holm_corrects_over_the_pairs_of_a_metric(four_runs):
    raw = compare_all(four_runs, samples=500, seed=7, correction="none")["metrics"]["exact_match_rate"]["pairs"]
    held = compare_all(four_runs, samples=500, seed=7)["metrics"]["exact_match_rate"]
    assert [pair["p_corrected"] for pair in held["pairs"]] == pytest.approx(
        list(holm(np.array([pair["p_value"] for pair in raw]))))
    # The strongest system is significantly better than the weakest; the two middle ones are not apart.
    verdict = {(pair["first"], pair["second"]): pair for pair in held["pairs"]}
    assert verdict[(0, 3)]["significant"] and not verdict[(1, 2)]["significant"]
    assert held["rank_ranges"][3]["best"] == 1 and held["rank_ranges"][0]["worst"] == 4
    assert held["clusters"][1] == held["clusters"][2]
    assert held["clusters"][3] < held["clusters"][0]
    # Each run's own interval, on the same resamples.
    assert all(ci["ci_lower"] <= value <= ci["ci_upper"] for ci, value in zip(held["ci"], held["values"]))


def test_win_tie_loss_counts_entries():
    a = _run(np.array([1, 1, 0, 0, 1], dtype=bool))
    b = _run(np.array([1, 0, 1, 0, 0], dtype=bool))
    pair = compare_all([a, b], samples=50, seed=1)["metrics"]["exact_match_rate"]["pairs"][0]
    # Entry by entry: a higher on 2 (e1, e4), b on 1 (e2), equal on 2.
    assert (pair["first_better"], pair["ties"], pair["second_better"]) == pytest.approx((0.4, 0.4, 0.2))
    # A threshold of 1 makes every difference a tie.
    wide = compare_all([a, b], samples=50, seed=1, tie_threshold=1.0)["metrics"]["exact_match_rate"]["pairs"][0]
    assert wide["ties"] == 1.0


def test_the_composite_reads_inadequate_entries_at_their_worst():
    right = np.ones(40, dtype=bool)
    clean = _run(right)
    inadequate = np.zeros(40, dtype=bool)
    inadequate[:20] = True
    gated = ComparableRun("v", clean.ids, clean.stats, 0.5, clean.weights, inadequate)
    result = compare_runs(clean, gated, 200, 3)
    # exact_match_rate itself is ungated (both 1.0); the composite's resamples are gated.
    assert result["metrics"]["exact_match_rate"]["difference"] == 0
    assert result["metrics"]["composite"]["difference_ci"]["ci_upper"] < 0


def test_refusals():
    one = _run(np.ones(10, dtype=bool))
    with pytest.raises(CompareRefused, match="at least 2"):
        compare_all([one])
    other = ComparableRun("w" * 40, one.ids, one.stats, 1.0, one.weights)
    with pytest.raises(DifferentVersions) as refused:
        compare_all([one, other, one], names=["A", "B", "C"])
    # Each version with the runs on it, in the runs' order; versions cut to 12 characters.
    assert str(refused.value) == (f"different corpus versions (A, C on v; B on {'w' * 12}…): scores compare only "
                                  f"within a version")
    assert refused.value.worded(lambda version: version.upper()[:2]) == \
        "different corpus versions (A, C on V; B on WW): scores compare only within a version"
    with pytest.raises(CompareRefused, match="bleu"):
        compare_all([one, one], metric_ids=["bleu"])
    with pytest.raises(ValueError, match="tie threshold"):
        compare_all([one, one], tie_threshold=-1)


def test_a_direction_given_ranks_the_other_way(four_runs):
    """A board sorted lowest first ranks by the lower value: each range is
    the metric's own reversed (best' = n + 1 - worst), and the clusters
    count from the other end; the verdicts are the same."""
    own = compare_all(four_runs, samples=500, seed=7)["metrics"]["exact_match_rate"]
    lowest = compare_all(four_runs, samples=500, seed=7, descending=False)["metrics"]["exact_match_rate"]
    assert own["higher_is_better"] and not lowest["higher_is_better"]
    assert lowest["pairs"] == own["pairs"] and lowest["ci"] == own["ci"]
    assert lowest["rank_ranges"] == [{"best": 5 - found["worst"], "worst": 5 - found["best"]}
                                     for found in own["rank_ranges"]]
    # Weakest (run 0) first now; the two middle ones still share a cluster.
    assert lowest["clusters"][0] == 1 and lowest["clusters"][1] == lowest["clusters"][2]
    assert lowest["clusters"][3] == max(lowest["clusters"])
    assert compare_all(four_runs, samples=500, seed=7, descending=True)["metrics"]["exact_match_rate"] == own


def test_the_result_names_the_runs_and_the_headline_metrics_come_first(four_runs):
    result = compare_all(four_runs, samples=100, seed=7, names=["w", "x", "y", "z"])
    assert result["names"] == ["w", "x", "y", "z"]
    assert headline_metrics(result) == ["composite"]  # no chrF++ among these runs' statistics
    assert headline_metrics(result, ["exact_match_rate", "bleu"]) == ["exact_match_rate"]
    only = compare_all(four_runs, samples=100, seed=7, metric_ids=["exact_match_rate"])
    assert headline_metrics(only) == ["exact_match_rate"]  # neither headline metric: every one compared


def test_a_pair_read_from_either_side():
    a = _run(np.array([1, 1, 0, 0, 1], dtype=bool))
    b = _run(np.array([1, 0, 1, 0, 0], dtype=bool))
    block = compare_all([a, b], samples=50, seed=1, correction="none")["metrics"]["exact_match_rate"]
    runs = ranked(block)
    assert runs.order == [0, 1] and runs.pairs() == [(0, 1)]  # a: 0.6, b: 0.4
    from_a, from_b = runs.seen[0, 1], runs.seen[1, 0]
    assert from_a.difference == pytest.approx(0.2) and from_b.difference == pytest.approx(-0.2)
    assert (from_a.wins, from_a.ties, from_a.losses) == pytest.approx((0.4, 0.4, 0.2))
    assert (from_b.wins, from_b.losses) == pytest.approx((0.2, 0.4))
    assert from_a.p_corrected == from_b.p_corrected == block["pairs"][0]["p_value"]
    assert from_a.marked == f"{from_a.p_corrected:.3g}"  # not significant: no star


@pytest.mark.parametrize("threshold", [-0.1, float("nan"), float("inf")])
def test_a_tie_threshold_is_finite_and_not_negative(threshold):
    with pytest.raises(ValueError, match="finite number ≥ 0"):
        check_tie_threshold(threshold)


def test_too_few_samples_for_holm_over_the_pairs_are_said(four_runs):
    # 6 pairs: Holm turns the smallest possible p, 1/(100+1), into 6/101 = 0.0594, not below 0.05.
    few = compare_all(four_runs, samples=100, seed=7)
    assert few["warnings"] == ["holm over 6 pairs: the smallest p-value 100 resamples give, 1/101, is corrected to "
                               "0.0594, not below 0.05: no pair can be significant (give at least 120 resamples)"]
    assert not any(pair["significant"] for block in few["metrics"].values() for pair in block["pairs"])
    # 120 resamples: 6/121 = 0.0496; Benjamini-Hochberg (or no correction) is not bounded so.
    assert compare_all(four_runs, samples=120, seed=7)["warnings"] == []
    assert compare_all(four_runs, samples=100, seed=7, correction="bh")["warnings"] == []


def test_holm_draws_enough_resamples_when_none_are_asked_for():
    """Twelve runs, 66 pairs: 1,000 resamples could call none significant
    under Holm (66/1,001 > 0.05), so all pairs draws 1,320 unless told."""
    rng = np.random.default_rng(5)
    runs = [_run(rng.random(40) < p) for p in np.linspace(0.1, 0.9, 12)]
    result = compare_all(runs, seed=3, metric_ids=["exact_match_rate"])
    assert result["test"]["samples"] == 1320 and result["warnings"] == []
    assert any(pair["significant"] for pair in result["metrics"]["exact_match_rate"]["pairs"])
    assert compare_all(runs, seed=3, metric_ids=["exact_match_rate"], correction="bh")["test"]["samples"] == 1000


def test_normal_p_values_have_no_floor(four_runs):
    """A board's p-values (p_values="normal"): compare's test on the normal
    distribution of the resampled differences, far below 1/(resamples + 1)
    for a clear difference, near the resampled p-value for a close one."""
    resampled = compare_all(four_runs, samples=1000, seed=7, correction="none")["metrics"]["exact_match_rate"]
    normal = compare_all(four_runs, samples=1000, seed=7, correction="none",
                         p_values="normal")["metrics"]["exact_match_rate"]
    pairs = {(p["first"], p["second"]): p["p_value"] for p in resampled["pairs"]}
    read = {(p["first"], p["second"]): p["p_value"] for p in normal["pairs"]}
    assert pairs[(0, 3)] == 1 / 1001 and read[(0, 3)] < 1e-6
    assert pairs[(1, 2)] > 0.2 and abs(read[(1, 2)] - pairs[(1, 2)]) < 0.05
    with pytest.raises(ValueError, match="paired bootstrap"):
        compare_all(four_runs, method="ar", p_values="normal")


def test_normal_p_value_by_hand():
    # Differences centred on 0 with spread 1: E|X| = sqrt(2/pi) = 0.798; an observed 0 is exceeded when
    # |X| > 0.798: p = 2 (1 - Phi(0.798)) = 0.425 (compare's test gives about that for equal systems).
    assert normal_p_value(np.array([-1.0, 1.0]), 0.0) == pytest.approx(0.4249, abs=1e-4)
    # Centred on 3 (= the observed difference), spread 1: E|X| = 3.0000 (to 4 digits); |X| > 6: p = 1 - Phi(3).
    assert normal_p_value(np.array([2.0, 4.0]), 3.0) == pytest.approx(0.00135, abs=1e-5)
    assert normal_p_value(np.zeros(5), 0.0) == 1.0 and normal_p_value(np.zeros(5), 0.1) == 0.0
    # Against many resamples of a normal difference, the resampled p-value agrees.
    rng = np.random.default_rng(1)
    differences = rng.normal(0.5, 1.0, 200_000)
    resampled = (np.sum(np.abs(differences) - np.abs(differences).mean() > 0.5) + 1) / (differences.size + 1)
    assert normal_p_value(differences, 0.5) == pytest.approx(resampled, abs=0.005)
