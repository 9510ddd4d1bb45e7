"""A review campaign's results (gateway/review/results.py), on a scripted
campaign whose truth is known, and on small hand-made cases.

The scripted campaign is built with gateway/review/design.py as a real one
would be and rated by simulated raters:
  score = quality[system] + item offset + bias + (scale - 1) * (latent - 65) + noise,
rounded to the slider's integers and clipped to 0..100, where the latent is
quality + item offset; a degraded output scores CONTROL_DROP lower; a rater
calls an output usable when its score is at least 70.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pytest

from apps.meta_eval.human_judgments import read_judgments
from gateway.review.design import CorpusItem, assign_items, reviewer_tasks, sample_entries
from gateway.review.protocol import CONTROL, MIN_ALPHA, RATE, RELIABILITY_P, REPEAT
from gateway.review.results import Rating, campaign_results, degraded_lower_p, judgments_tsv, system_validated

QUALITY = {"run-a": 82.0, "run-b": 74.0, "run-c": 61.0, "run-d": 45.0}
SYSTEMS = list(QUALITY)
TRUE_ORDER = sorted(SYSTEMS, key=QUALITY.get, reverse=True)
ITEM_SD = 8.0
NOISE_SD = 6.0
CONTROL_DROP = 25.0
USABLE_FROM = 70
CENTRE = 65.0  # about the mean latent score: a rater's scale stretches around it, its bias shifts it
SEED = 2
DOMAINS = ("news", "health", "legal", "chat")


@dataclass(frozen=True)
class Rater:
    name: str
    bias: float
    scale: float


RATERS = (Rater("ana", -5.0, 0.9), Rater("ben", 0.0, 1.0), Rater("chloe", 6.0, 1.1))


def corpus(size: int) -> list[CorpusItem]:
    return [CorpusItem(f"seg-{i:04d}", 1 + i % 5, DOMAINS[(i // 5) % 4]) for i in range(size)]


def simulated_score(rater: Rater, latent: float, degraded: bool, rng: np.random.Generator) -> int:
    score = latent + rater.bias + (rater.scale - 1) * (latent - CENTRE) + rng.normal(0, NOISE_SD)
    score -= CONTROL_DROP if degraded else 0.0
    return int(round(min(max(score, 0.0), 100.0)))


def queue_ratings(name: str, tasks, score_of) -> list[Rating]:
    """A reviewer's ratings of its queue, `score_of(task, system, degraded)` -> (score, usable)."""
    ratings = []
    for task in tasks:
        for system in task.systems:
            degraded = system == task.degraded
            score, usable = score_of(task, system, degraded)
            ratings.append(Rating(name, task.entry_id, system, task.kind, score, usable, degraded))
    return ratings


@cache
def scripted_campaign(items: int, raters: tuple[Rater, ...] = RATERS, seed: int = SEED,
                      random_rater: str | None = None) -> tuple[Rating, ...]:
    """Sampled, assigned (3 reviewers per item) and queued by design.py, rated by the simulated raters; the
    random rater, when named, gets every entry and scores uniformly at random. Each rater draws from its own
    generator: adding a rater changes nobody else's ratings."""
    entries = sample_entries(corpus(max(300, items)), items, seed)
    offsets = dict(zip(entries, np.random.default_rng(seed).normal(0, ITEM_SD, len(entries))))
    assignment = assign_items(entries, [rater.name for rater in raters], overlap=3, seed=seed)
    ratings: list[Rating] = []
    for k, rater in enumerate(raters):
        rng = np.random.default_rng([seed, k])

        def score_of(task, system, degraded, rater=rater, rng=rng):
            score = simulated_score(rater, QUALITY[system] + offsets[task.entry_id], degraded, rng)
            return score, score >= USABLE_FROM

        mine = [entry_id for entry_id in entries if rater.name in assignment[entry_id]]
        ratings += queue_ratings(rater.name, reviewer_tasks(mine, SYSTEMS, seed=seed * 100 + k), score_of)
    if random_rater:
        rng = np.random.default_rng([seed, 99])

        def random_score(task, system, degraded):
            return int(rng.integers(0, 101)), bool(rng.random() < 0.5)

        ratings += queue_ratings(random_rater, reviewer_tasks(entries, SYSTEMS, seed=seed * 100 + 99), random_score)
    return tuple(ratings)


@cache
def results_of(items: int, random_rater: str | None = None, exclude_unreliable: bool = True) -> dict:
    return campaign_results(list(scripted_campaign(items, random_rater=random_rater)), SYSTEMS,
                            exclude_unreliable=exclude_unreliable)


def ranking(results: dict) -> list[str]:
    return [row["system"] for row in results["systems"]]


def row_of(results: dict, system: str) -> dict:
    return next(row for row in results["systems"] if row["system"] == system)


# --- the scripted campaign -----------------------------------------------------------------------------------------


def test_scripted_campaign_ranks_the_systems_in_their_true_order_and_its_raters_agree():
    """Alpha's expected value from the design: between (item, system) units the latent score varies by the
    systems' spread (variance 196) and the items' (64), 260, times the raters' mean squared scale (0.97): ~254.
    Within a unit the raters differ by noise (36), bias (-5, 0, +6: 20) and scale (0.007 * 260: 2): ~58.
    alpha ~ 1 - 58 / (254 + 58) ~ 0.81; clipping at 100 (chloe on run-a) and integer scores take a little off,
    and 240 units leave a sampling spread of a few hundredths (0.76 to 0.81 over seeds 0-11). Asserted: 0.70
    to 0.88, above the bar of 0.667."""
    results = results_of(60)
    alpha = results["alpha"]
    print(f"\nscripted campaign, 3 raters x 60 items x 4 systems: alpha(interval) = {alpha['da']:.4f}, "
          f"alpha(usable, nominal) = {alpha['usable']:.4f}")
    for row in results["systems"]:
        print(f"  {row['rank']} {row['system']}: mean {row['mean']:.2f} {row['mean_ci']}, z {row['z']:+.3f} "
              f"{row['z_ci']}, usable {row['usable_share']:.3f} {row['usable_ci']}")
    for rater in results["raters"]:
        print(f"  {rater['reviewer']}: p {rater['p_value']:.4f}, repeat |diff| {rater['repeat_mean_abs_diff']:.2f}")
    assert ranking(results) == TRUE_ORDER
    assert [row["rank"] for row in results["systems"]] == [1, 2, 3, 4]
    assert 0.70 <= alpha["da"] <= 0.88
    assert 0.3 <= alpha["usable"] <= 0.8  # a yes/no on the noisy score: agrees less than the scores
    for row in results["systems"]:
        assert row["items"] == 60 and row["ratings"] == 180
        assert abs(row["mean"] - (QUALITY[row["system"]] + 0.33)) < 5  # the raters' mean bias is +0.33
    assert results["items"] == 60
    assert results["reviewers_per_item"] == {"min": 3, "mean": 3.0}
    assert results["excluded_reviewers"] == []
    json.dumps(results, allow_nan=False)  # plain JSON, no NaN


def test_scripted_raters_are_reliable_and_consistent():
    raters = results_of(60)["raters"]
    assert [rater["reviewer"] for rater in raters] == ["ana", "ben", "chloe"]
    for rater in raters:
        assert rater["ratings"] == 240
        assert rater["control_pairs"] == 6 and rater["repeat_pairs"] == 6 * 4  # 10% of 60; a repeat has 4 columns
        assert rater["degraded_lower_share"] == 1.0
        assert rater["p_value"] == pytest.approx(1 / 64)  # 6 pairs, all lower: the exact test's smallest p
        assert rater["reliable"] is True and rater["excluded"] is False
        # Two ratings of the same output differ by the noise twice: E|N(0, 6 * sqrt 2)| ~ 6.8.
        assert 3 < rater["repeat_mean_abs_diff"] < 11


def test_a_random_rater_is_flagged_excluded_and_changes_nothing():
    clean = results_of(60)
    with_random = results_of(60, random_rater="dan")
    dan = next(rater for rater in with_random["raters"] if rater["reviewer"] == "dan")
    print(f"\nrandom rater: p {dan['p_value']:.4f}, degraded lower in {dan['degraded_lower_share']:.2f} of "
          f"{dan['control_pairs']} pairs")
    assert dan["control_pairs"] == 6 and dan["reliable"] is False and dan["excluded"] is True
    assert with_random["excluded_reviewers"] == ["dan"]
    assert ranking(with_random) == TRUE_ORDER
    for key in ("systems", "alpha", "items", "reviewers_per_item", "judgments"):
        assert with_random[key] == clean[key]


def test_keeping_the_random_rater_lowers_the_agreement():
    kept = results_of(60, random_rater="dan", exclude_unreliable=False)
    clean = results_of(60)
    print(f"\nalpha(interval) with the random rater kept: {kept['alpha']['da']:.4f} "
          f"(without: {clean['alpha']['da']:.4f})")
    assert kept["excluded_reviewers"] == []
    assert next(r for r in kept["raters"] if r["reviewer"] == "dan")["reliable"] is False  # flagged, not excluded
    assert kept["alpha"]["da"] < clean["alpha"]["da"] - 0.2
    assert kept["alpha"]["usable"] < clean["alpha"]["usable"]
    assert kept["reviewers_per_item"] == {"min": 4, "mean": 4.0}
    assert not kept["meets_bar"]["agreement"]


def test_z_removes_a_raters_bias():
    """A harsh ana (bias -20) and the same ana 10 points kinder: the same z, raw means 10/3 higher (ana rates
    every item, one rater of three)."""
    harsh = (replace(RATERS[0], bias=-20.0),) + RATERS[1:]
    ratings = list(scripted_campaign(60, raters=harsh))
    ana = [rating for rating in ratings if rating.reviewer == "ana"]
    assert max(rating.score for rating in ana) + 10 <= 100  # no clipping
    kinder = [replace(rating, score=rating.score + 10) if rating.reviewer == "ana" else rating for rating in ratings]
    before, after = campaign_results(ratings, SYSTEMS), campaign_results(kinder, SYSTEMS)
    for system in SYSTEMS:
        old, new = row_of(before, system), row_of(after, system)
        assert new["z"] == pytest.approx(old["z"], abs=1e-9)
        assert new["z_ci"] == pytest.approx(old["z_ci"], abs=1e-9)
        assert new["mean"] - old["mean"] == pytest.approx(10 / 3, abs=1e-9)
    assert ranking(after) == ranking(before) == TRUE_ORDER


def test_intervals_contain_the_mean_and_narrow_with_more_items():
    small, large = results_of(60), results_of(200)
    for system in SYSTEMS:
        for results in (small, large):
            row = row_of(results, system)
            for value, interval in ((row["mean"], row["mean_ci"]), (row["z"], row["z_ci"]),
                                    (row["usable_share"], row["usable_ci"])):
                assert interval[0] <= value <= interval[1]
        narrow, wide = row_of(large, system), row_of(small, system)
        for key in ("mean_ci", "z_ci"):
            # An interval's width goes as 1/sqrt(items): sqrt(60/200) = 0.55.
            assert narrow[key][1] - narrow[key][0] < 0.8 * (wide[key][1] - wide[key][0])
    assert row_of(small, "run-a")["mean_ci"][0] > row_of(small, "run-b")["mean_ci"][1]  # 8 points apart: separated
    assert small["bootstrap"] == {"resamples": 1000, "seed": 12345, "alpha": 0.05}


def test_results_are_deterministic_and_the_intervals_follow_the_seed():
    ratings = list(scripted_campaign(60))
    first = campaign_results(ratings, SYSTEMS, seed=7, resamples=300)
    assert campaign_results(ratings, SYSTEMS, seed=7, resamples=300) == first
    other = campaign_results(ratings, SYSTEMS, seed=8, resamples=300)
    assert other["systems"][0]["mean"] == first["systems"][0]["mean"]
    assert other["systems"][0]["mean_ci"] != first["systems"][0]["mean_ci"]


def test_sixty_items_fall_short_of_the_bar():
    results = results_of(60)
    assert results["meets_bar"] == {"reviewers_per_item": True, "items": False, "agreement": True}
    validated, reasons = system_validated(results, "run-a")
    assert not validated
    assert reasons == ["items: 60 rated, the bar is 200"]


def test_two_hundred_items_meet_the_bar_and_validate_the_usable_system_only():
    results = results_of(200)
    print(f"\n200 items: alpha(interval) = {results['alpha']['da']:.4f}, usable shares "
          + ", ".join(f"{row['system']} {row['usable_share']:.3f}" for row in results["systems"]))
    assert results["meets_bar"] == {"reviewers_per_item": True, "items": True, "agreement": True}
    assert results["alpha"]["da"] >= MIN_ALPHA
    assert ranking(results) == TRUE_ORDER
    assert system_validated(results, "run-a") == (True, [])
    validated, reasons = system_validated(results, "run-b")
    share = row_of(results, "run-b")["usable_share"]
    assert not validated and reasons == [f"usable: {share:.1%} of items judged usable, the bar is 80%"]
    assert system_validated(results, "run-z") == (False, ["usable: run-z was not part of this campaign"])


def test_judgments_round_trip_through_meta_eval(tmp_path):
    results = results_of(60)
    path = tmp_path / "human.tsv"
    path.write_text(judgments_tsv(results), encoding="utf-8")
    for file_format in ("system-segment-score", "auto"):
        read = read_judgments(path, file_format)
        assert read.format == "system-segment-score" and not read.by_position
        assert read.scores == results["judgments"]  # float for float
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 * 60
    assert [line.split("\t")[0] for line in lines[::60]] == ranking(results)
    segments = [line.split("\t")[1] for line in lines[:60]]
    assert segments == sorted(segments)
    assert any(len(line.split("\t")[2]) > 8 for line in lines)  # thirds: more digits than '%.6g' keeps


def test_judgments_are_the_mean_raw_score_over_the_raters():
    ratings = [Rating("ana", "e1", "run-a", RATE, 70, True), Rating("ben", "e1", "run-a", RATE, 81, True),
               Rating("ana", "e1", "run-b", RATE, 10, False)]
    results = campaign_results(ratings, ["run-a", "run-b"], resamples=0)
    assert results["judgments"] == {"run-a": {"e1": 75.5}, "run-b": {"e1": 10.0}}
    assert judgments_tsv(results) == "run-a\te1\t75.5\nrun-b\te1\t10.0\n"


# --- small hand-made cases -----------------------------------------------------------------------------------------


def rate(reviewer: str, entry_id: str, system: str, score: float, usable: bool | None = None) -> Rating:
    return Rating(reviewer, entry_id, system, RATE, score, usable)


def control(reviewer: str, entry_id: str, system: str, score: float) -> Rating:
    return Rating(reviewer, entry_id, system, CONTROL, score, None, degraded=True)


def rater_row(results: dict, reviewer: str) -> dict:
    return next(rater for rater in results["raters"] if rater["reviewer"] == reviewer)


def test_reliability_needs_enough_control_pairs():
    originals = [rate("ana", f"e{i}", "run-a", 60 + i) for i in range(6)]
    five_lower = [control("ana", f"e{i}", "run-a", 30 + i) for i in range(5)]
    results = campaign_results(originals + five_lower, ["run-a"], resamples=0)
    ana = rater_row(results, "ana")
    assert ana["control_pairs"] == 5 and ana["p_value"] == pytest.approx(1 / 32) and ana["reliable"] is True
    four = campaign_results(originals + five_lower[:4], ["run-a"], resamples=0)
    assert rater_row(four, "ana")["p_value"] == pytest.approx(1 / 16)
    assert rater_row(four, "ana")["reliable"] is None and not rater_row(four, "ana")["excluded"]
    # A degraded rating without its original pairs with nothing.
    orphan = campaign_results(originals[:3] + five_lower, ["run-a"], resamples=0)
    assert rater_row(orphan, "ana")["control_pairs"] == 3


def test_a_rater_who_cannot_tell_is_unreliable_and_excluded():
    ratings = [rate("ana", f"e{i}", "run-a", 50, True) for i in range(6)]
    ratings += [control("ana", f"e{i}", "run-a", 50) for i in range(6)]  # the degraded scored the same
    ratings += [rate("ben", f"e{i}", "run-a", 60 + i, True) for i in range(6)]
    results = campaign_results(ratings, ["run-a"], resamples=0)
    ana = rater_row(results, "ana")
    assert ana["p_value"] == 1.0 and ana["degraded_lower_share"] == 0.0
    assert ana["reliable"] is False and ana["excluded"] is True
    assert rater_row(results, "ben")["reliable"] is None  # no controls: not judged, kept
    assert results["excluded_reviewers"] == ["ana"]
    assert results["judgments"]["run-a"] == {f"e{i}": 60.0 + i for i in range(6)}
    assert results["alpha"] == {"da": None, "usable": None}  # one rater left
    assert results["reviewers_per_item"] == {"min": 1, "mean": 1.0}


def test_wilcoxon_ties_count_for_nothing():
    assert degraded_lower_p([0.0] * 6) == 1.0
    assert degraded_lower_p([20.0] * 6) == pytest.approx(1 / 64)
    assert degraded_lower_p([20.0, 20.0, 0.0, 0.0, 0.0, 0.0]) >= RELIABILITY_P  # 2 of 6 seen: not enough
    assert degraded_lower_p([20.0, 15.0, 25.0, 30.0, 10.0, 0.0]) < RELIABILITY_P  # 5 of 6, one tie: reliable
    assert degraded_lower_p([20.0, -20.0] * 3) > 0.4
    # Above 13 pairs, the normal approximation, ties kept in the count.
    assert degraded_lower_p([20.0] * 3 + [0.0] * 15) >= RELIABILITY_P
    assert degraded_lower_p([20.0] * 12 + [0.0] * 6) < 0.001


def test_repeats_are_measured_not_used():
    ratings = [rate("ana", "e1", "run-a", 60), rate("ana", "e2", "run-a", 40),
               Rating("ana", "e1", "run-a", REPEAT, 70, None), Rating("ana", "e2", "run-a", REPEAT, 36, None)]
    results = campaign_results(ratings, ["run-a"], resamples=0)
    ana = rater_row(results, "ana")
    assert ana["repeat_pairs"] == 2 and ana["repeat_mean_abs_diff"] == 7.0 and ana["ratings"] == 2
    assert row_of(results, "run-a")["mean"] == 50.0 and row_of(results, "run-a")["ratings"] == 2


def test_usable_is_the_majority_of_an_items_raters():
    ratings = [
        rate("ana", "e1", "run-a", 80, True), rate("ben", "e1", "run-a", 75, True),
        rate("chloe", "e1", "run-a", 60, False),
        rate("ana", "e2", "run-a", 70, True), rate("ben", "e2", "run-a", 65, False),  # a tie: not usable
        rate("ana", "e3", "run-a", 90, None), rate("ben", "e3", "run-a", 85, None),  # no verdicts: left out
        rate("ana", "e4", "run-a", 20, False), rate("ben", "e4", "run-a", 30, False),
    ]
    row = row_of(campaign_results(ratings, ["run-a"], resamples=200), "run-a")
    assert row["usable_share"] == pytest.approx(1 / 3)  # e1 of e1, e2, e4
    assert row["usable_ratings_share"] == pytest.approx(3 / 7)
    assert row["items"] == 4 and row["ratings"] == 9
    low, high = row["usable_ci"]
    assert 0.0 <= low <= row["usable_share"] <= high <= 1.0


def test_z_of_a_constant_rater_is_zero_and_ranks_break_ties_by_mean_then_order():
    ratings = [rate("ana", "e1", "run-a", 50), rate("ana", "e1", "run-b", 50), rate("ana", "e1", "run-c", 50),
               rate("ben", "e2", "run-a", 40), rate("ben", "e2", "run-b", 40), rate("ben", "e2", "run-c", 40)]
    results = campaign_results(ratings, ["run-b", "run-c", "run-a"], resamples=10)
    assert [row["z"] for row in results["systems"]] == [0.0, 0.0, 0.0]
    assert ranking(results) == ["run-b", "run-c", "run-a"]
    ratings.append(rate("chloe", "e2", "run-a", 41))  # the same z (0: chloe's only rating), a higher mean
    assert ranking(campaign_results(ratings, ["run-b", "run-c", "run-a"], resamples=10))[0] == "run-a"


# Krippendorff's own example (Computing Krippendorff's alpha-reliability, 2011): 4 coders, 12 units, missing
# values; alpha 0.743 nominal, 0.849 interval.
KRIPPENDORFF_EXAMPLE = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def test_alpha_matches_krippendorffs_example():
    ratings = [rate(coder, f"unit-{unit:02d}", "run-a", value) for coder, values in KRIPPENDORFF_EXAMPLE.items()
               for unit, value in enumerate(values) if value is not None]
    assert round(campaign_results(ratings, ["run-a"], resamples=0)["alpha"]["da"], 3) == 0.849
    # The same units spread over two systems: units are (entry, system) pairs.
    def spread(rating: Rating) -> Rating:
        unit = int(rating.entry_id[-2:])
        return replace(rating, entry_id=f"e{unit % 6}", system="run-a" if unit < 6 else "run-b")

    split = [spread(rating) for rating in ratings]
    assert round(campaign_results(split, ["run-a", "run-b"], resamples=0)["alpha"]["da"], 3) == 0.849


def test_alpha_is_none_when_undefined():
    single = [rate("ana", f"e{i}", "run-a", 10 * i, True) for i in range(1, 5)]
    assert campaign_results(single, ["run-a"], resamples=0)["alpha"] == {"da": None, "usable": None}
    disjoint = [rate("ana", "e1", "run-a", 10, True), rate("ben", "e2", "run-a", 20, False)]
    assert campaign_results(disjoint, ["run-a"], resamples=0)["alpha"] == {"da": None, "usable": None}
    all_usable = [rate(name, f"e{i}", "run-a", 10 * i + k, True) for k, name in enumerate(("ana", "ben"))
                  for i in range(1, 5)]
    alpha = campaign_results(all_usable, ["run-a"], resamples=0)["alpha"]
    assert alpha["usable"] is None and alpha["da"] > 0.9  # one verdict only: undefined; scores 1 apart: close to 1


def test_a_system_nobody_rated_is_listed_last_without_numbers():
    ratings = [rate("ana", "e1", "run-a", 70, True), rate("ana", "e2", "run-a", 40, False)]
    results = campaign_results(ratings, ["run-x", "run-a"], resamples=50)
    assert ranking(results) == ["run-a", "run-x"]
    unrated = results["systems"][1]
    assert unrated == {"system": "run-x", "rank": 2, "items": 0, "ratings": 0, "mean": None, "mean_ci": None,
                       "z": None, "z_ci": None, "usable_share": None, "usable_ci": None,
                       "usable_ratings_share": None}
    assert results["judgments"] == {"run-x": {}, "run-a": {"e1": 70.0, "e2": 40.0}}
    json.dumps(results, allow_nan=False)
    assert system_validated(results, "run-x")[1][-1] == "usable: no verdicts on run-x's outputs"


def test_no_ratings_at_all():
    results = campaign_results([], ["run-a"])
    assert results["items"] == 0 and results["reviewers_per_item"] == {"min": 0, "mean": 0.0}
    assert results["meets_bar"] == {"reviewers_per_item": False, "items": False, "agreement": False}
    assert system_validated(results, "run-a")[1] == [
        "reviewers per item: as few as 0 (mean 0.0), the bar is 3",
        "items: 0 rated, the bar is 200",
        "agreement: Krippendorff's alpha could not be computed, the bar is 0.667",
        "usable: no verdicts on run-a's outputs",
    ]
    assert judgments_tsv(results) == ""
    json.dumps(results, allow_nan=False)


@pytest.mark.parametrize("rating, message", [
    (rate("ana", "e1", "run-z", 50), "unknown system"),
    (rate("ana", "e1", "run-a", 100.5), "score must be between 0 and 100, got 100.5"),
    (rate("ana", "e1", "run-a", -1), "score must be between 0 and 100, got -1"),
    (rate("ana", "e1", "run-a", math.nan), "score must be between 0 and 100, got nan"),
    (Rating("ana", "e1", "run-a", "judge", 50, None), "kind must be one of rate, repeat, control"),
    (Rating("ana", "e1", "run-a", RATE, 50, None, degraded=True), "only a control rating can be of a degraded"),
    (rate("ana", "e0", "run-a", 50), "rated twice as rate"),
])
def test_bad_ratings_are_refused_with_a_clear_message(rating, message):
    with pytest.raises(ValueError, match=message) as raised:
        campaign_results([rate("ana", "e0", "run-a", 50), rating], ["run-a", "run-b"])
    assert "'ana'" in str(raised.value)


def test_bad_arguments():
    with pytest.raises(ValueError, match="^resamples: "):
        campaign_results([], ["run-a"], resamples=-1)
    with pytest.raises(ValueError, match="^systems: "):
        campaign_results([], ["run-a", "run-a"])
    results = campaign_results([rate("ana", "e\t1", "run-a", 50)], ["run-a"], resamples=0)
    with pytest.raises(ValueError, match="entry id 'e\\\\t1'"):
        judgments_tsv(results)
