"""WMT's meta-evaluation statistics (issue 34; apps/meta_eval/wmt.py):
soft pairwise accuracy, tie-calibrated pairwise accuracy, PERM-BOTH between
metrics and the WMT24 combination, on small cases worked by hand, then
through `champollion meta-eval`."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from apps.meta_eval import wmt
from tests.test_meta_eval import ENTRIES, card_paths, segment_errors, write_system_score
from tests.test_meta_eval import cards, entries  # noqa: F401  (fixtures)

NAN = float("nan")


def every_flip(segments: int) -> np.ndarray:
    """All 2^segments sign patterns: an exact permutation distribution."""
    return np.array(list(itertools.product([1.0, -1.0], repeat=segments)))


def test_sign_flips_are_mt_metrics_evals_draws():
    flips = wmt.sign_flips(50, 200)
    assert set(np.unique(flips)) == {-1.0, 1.0} and flips.shape == (200, 50)
    # float32 uniforms from default_rng(4), rounded: the stream mt-metrics-eval draws.
    expected = np.rint(np.random.default_rng(4).random(size=(200, 50), dtype=np.float32)) * 2 - 1
    assert np.array_equal(flips, expected)


def test_pairwise_p_values_by_hand():
    # A - B = [1, 2, -1], observed 2. Of the 8 patterns, +2, +4, +2 reach it: 3/8.
    # B - A: observed -2; 7 of the 8 reach it (only -4 does not): the ties count both ways.
    scores = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    assert wmt.pairwise_p_values(scores, every_flip(3)) == pytest.approx([3 / 8])
    assert wmt.pairwise_p_values(scores[::-1], every_flip(3)) == pytest.approx([7 / 8])


def test_soft_pairwise_accuracy_by_hand():
    human = np.array([[1.0, 1, 1], [0, 0, 0], [1, 0, 0]])
    # Systems 1 and 2 swapped by the metric.
    metric = np.array([[1.0, 1, 1], [1, 0, 0], [0, 0, 0]])
    flips = every_flip(3)
    # Human p: (0,1) d=[1,1,1] 1/8; (0,2) d=[0,1,1] 2/8; (1,2) d=[-1,0,0] 8/8.
    human_p = wmt.pairwise_p_values(human, flips)
    assert human_p == pytest.approx([1 / 8, 2 / 8, 1.0])
    # Metric p: (0,1) 2/8; (0,2) 1/8; (1,2) d=[1,0,0] 4/8.
    metric_p = wmt.pairwise_p_values(metric, flips)
    assert metric_p == pytest.approx([2 / 8, 1 / 8, 4 / 8])
    # |differences| 1/8, 1/8, 1/2: mean 1/4.
    assert wmt.soft_pairwise_accuracy(human_p, metric_p) == pytest.approx(0.75)
    assert wmt.soft_pairwise_accuracy(human_p, human_p) == 1.0


def worked_items():
    """Segment 1: humans tie systems 0 and 1, the metric ties none. Segment
    2: humans tie all three, the metric none. Segment 3: one system judged,
    no pair."""
    human = np.array([[2.0, 1, NAN], [2, 1, 3], [0, 1, NAN]])
    metric = np.array([[1.0, 0.75, 9], [0.5, 0.5, 9], [0.0, 0.625, 9]])
    return wmt.ItemPairs.of(human, metric)


def test_acc23_and_tau23_at_epsilon_zero_by_hand():
    pairs = worked_items()
    assert pairs.segments == 2 and pairs.weight.size == 6
    # Segment 1: (0,1) tied by humans only: wrong; (0,2) and (1,2) concordant: 2/3.
    # Segment 2: every pair tied by humans only: 0/3. Mean 1/3.
    assert pairs.accuracy(0.0) == pytest.approx(1 / 3)
    # tau23: segment 1 (2 - 1)/3, segment 2 -3/3: mean -1/3.
    assert pairs.tau23(0.0) == pytest.approx(-1 / 3)


def test_tie_calibration_by_hand():
    pairs = worked_items()
    # Gaps: segment 1 0.5, 1.0, 0.5; segment 2 0.25, 0.125, 0.125.
    #   eps 0.125: (2/3 + 2/3)/2; 0.25: (2/3 + 1)/2 = 5/6; 0.5: 5/6 (segment 1's (0,1) right, (1,2)
    #   wrong); 1.0: (1/3 + 1)/2. The smallest best epsilon is 0.25.
    assert pairs.accuracy(0.125) == pytest.approx(2 / 3)
    assert pairs.accuracy(0.5) == pytest.approx(5 / 6)
    assert pairs.accuracy(1.0) == pytest.approx(2 / 3)
    assert pairs.best_epsilon() == pytest.approx((0.25, 5 / 6))
    # A metric tying everything scores the share of pairs the humans tie: (1/3 + 3/3)/2.
    assert pairs.all_tied() == pytest.approx(2 / 3)
    assert pairs.accuracy(10.0) == pytest.approx(pairs.all_tied())


def test_ties_in_both_count_right_and_an_exact_metric_tie_is_a_tie():
    human = np.array([[1.0], [1.0], [0.0]])
    metric = np.array([[0.5], [0.5], [0.5]])
    pairs = wmt.ItemPairs.of(human, metric)
    # (0,1) tied in both: right; (0,2), (1,2) tied by the metric only: wrong.
    assert pairs.accuracy(0.0) == pytest.approx(1 / 3)
    assert pairs.best_epsilon() == (0.0, pytest.approx(1 / 3))


@pytest.fixture(scope="module")
def judged_systems():
    """6 systems x 40 segments of human scores; a metric equal to them, one
    slightly noisy, and one of pure noise."""
    rng = np.random.default_rng(11)
    quality = np.linspace(0, 1, 6)[:, None]
    human = np.round(quality * 5 + rng.normal(0, 1.0, size=(6, 40)))
    return human, {"exact": human.copy(), "close": human + rng.normal(0, 0.3, size=human.shape),
                   "noise": rng.normal(0, 1, size=human.shape)}


def test_perm_both_ranks_the_metrics(judged_systems):
    human, metrics = judged_systems
    spa = wmt.spa_task(human, metrics, draws=300, seed=5)
    assert spa.values["exact"] == 1.0
    assert spa.values["exact"] >= spa.values["close"] > spa.values["noise"]
    assert spa.ranks["exact"] == 1 and spa.ranks["noise"] > spa.ranks["close"]
    assert spa.p_values[("close", "noise")] <= wmt.SIGNIFICANCE
    pairs = {name: wmt.ItemPairs.of(human, values) for name, values in metrics.items()}
    epsilons = {name: item_pairs.best_epsilon()[0] for name, item_pairs in pairs.items()}
    acc_eq = wmt.acc_eq_task(pairs, epsilons, draws=300, seed=5)
    assert acc_eq.values["exact"] == pytest.approx(1.0) and acc_eq.ranks["exact"] == 1
    assert acc_eq.ranks["noise"] > acc_eq.ranks["exact"]
    # Draws stop early once the p-value leaves [0.02, 0.5]: a clear difference takes one block.
    assert len(acc_eq.draws[("exact", "noise")]["exact"]) == wmt.BLOCK


def test_identical_metrics_share_a_cluster(judged_systems):
    human, metrics = judged_systems
    twins = {"a": metrics["close"], "b": metrics["close"].copy()}
    result = wmt.spa_task(human, twins, draws=200, seed=1)
    # Every draw swaps identical scores: a difference of 0, at least the observed 0.
    assert result.p_values[("a", "b")] == 1.0 and result.ranks == {"a": 1, "b": 1}


def test_the_acc_eq_permutation_swaps_pair_outcomes():
    """Two pairs of equal weight; the metrics disagree on the first only:
    the observed difference (0.5) is reached exactly when the first pair's
    outcomes are kept: p is about 1/2."""
    human = np.array([[1.0, 1.0], [0.0, 0.0]])
    high = wmt.ItemPairs.of(human, np.array([[1.0, 1.0], [0.0, 0.0]]))
    low = wmt.ItemPairs.of(human, np.array([[0.0, 1.0], [1.0, 0.0]]))
    result = wmt.acc_eq_task({"high": high, "low": low}, {"high": 0.0, "low": 0.0}, draws=1000, seed=3)
    assert result.values == {"high": 1.0, "low": 0.5}
    assert 0.4 < result.p_values[("high", "low")] < 0.6


def test_the_wmt24_combination_by_hand():
    draws_a = {("m1", "m2"): {"m1": np.array([0.6, 0.5]), "m2": np.array([0.5, 0.6])}}
    draws_b = {("m1", "m2"): {"m1": np.array([0.7]), "m2": np.array([0.6])}}
    # Null differences, weighted 1/2 each: (0.1, -0.1) and (0.1, repeated): 0.1 and 0.0.
    # Task A: m1 0.8, m2 0.7; task B: m1 0.9, m2 0.85: means 0.85 and 0.775, 0.075 apart: reached once in 2.
    close = wmt.combined_task({"soft_pairwise_accuracy": wmt.TaskResult({"m1": 0.8, "m2": 0.7}, draws=draws_a),
                               "acc_eq": wmt.TaskResult({"m1": 0.9, "m2": 0.85}, draws=draws_b)})
    assert close.values == pytest.approx({"m1": 0.85, "m2": 0.775})
    assert close.p_values[("m1", "m2")] == 0.5 and close.ranks == {"m1": 1, "m2": 1}
    # Task A: m2 0.6 instead: means 0.85 and 0.725, 0.125 apart: never reached.
    apart = wmt.combined_task({"soft_pairwise_accuracy": wmt.TaskResult({"m1": 0.8, "m2": 0.6}, draws=draws_a),
                               "acc_eq": wmt.TaskResult({"m1": 0.9, "m2": 0.85}, draws=draws_b)})
    assert apart.p_values[("m1", "m2")] == 0.0 and apart.ranks == {"m1": 1, "m2": 2}


def test_meta_eval_reports_wmt_measures(cli, cards, tmp_path):  # noqa: F811
    # Humans count the damaged entries' errors, negated: higher is better.
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    result = cli("meta-eval", *card_paths(cards), "--human", human, "--resamples", "20", "--metric-draws", "100",
                 "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["wmt"]["segments"] == ENTRIES
    chrf = report["metrics"]["chrf_plus_plus"]
    for key in ("soft_pairwise_accuracy", "acc_eq", "acc23", "tau23", "wmt24"):
        assert 0 <= chrf[key]["value"] <= 1 or key == "tau23"
    assert chrf["acc_eq"]["epsilon"] >= 0 and chrf["acc_eq"]["rank"] >= 1
    # The systems are ordered by construction and chrF++ orders them alike: full agreement.
    assert chrf["soft_pairwise_accuracy"]["value"] > 0.9
    # Human ties (undamaged entries) are common here: the all-tie baseline is reported, and acc_eq beats acc23.
    assert report["wmt"]["acc_eq"]["all_tied"] > 0.3
    assert chrf["acc_eq"]["value"] >= chrf["acc23"]["value"]
    # BLEU has no segment scores: none of WMT's measures.
    assert report["metrics"]["bleu"]["soft_pairwise_accuracy"] is None
    table = cli("meta-eval", *card_paths(cards), "--human", human, "--resamples", "20", "--metric-draws", "0")
    assert table.exit_code == 0, table.stderr
    assert "SPA" in table.stdout and "acc_eq" in table.stdout and "WMT24" in table.stdout


def test_negative_metric_draws_are_refused(cli, cards, tmp_path):  # noqa: F811
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    result = cli("meta-eval", *card_paths(cards), "--human", human, "--metric-draws", "-1")
    assert result.exit_code == 2 and "--metric-draws" in result.stderr
