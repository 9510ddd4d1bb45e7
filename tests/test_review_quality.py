"""WMT's annotator checks beside the campaign's own (gateway/review/quality.py,
results.py wmt_quality) and an mqm campaign's scores (results.py mqm_results,
gateway/review/mqm.py), on small hand-worked cases."""
from __future__ import annotations

from itertools import combinations

import pytest

from gateway.review.protocol import CONTROL, RATE, REPEAT
from gateway.review.quality import (REPEAT_TOLERANCE, WMT_P, bad_below_ref_p, bad_ref_check,
                                    repeat_consistency)
from gateway.review.results import Rating, campaign_results


def exact_less_p(bad: list[float], ref: list[float]) -> float:
    """P(U <= U observed) under the null, by enumerating every split of the pooled scores (no ties)."""
    def u_of(first, second):
        return sum(1 for x in first for y in second if x > y)

    pooled = bad + ref
    observed = u_of(bad, ref)
    splits = list(combinations(range(len(pooled)), len(bad)))
    low = sum(1 for chosen in splits
              if u_of([pooled[i] for i in chosen], [pooled[i] for i in range(len(pooled)) if i not in chosen])
              <= observed)
    return low / len(splits)


def test_mann_whitney_separated_samples_by_hand():
    # Every BAD below every REF: U = 0, one split in C(6, 3) = 20 is as extreme.
    assert bad_below_ref_p([10, 20, 30], [40, 50, 60]) == pytest.approx(1 / 20)
    # Four and four: 1 / C(8, 4) = 1/70, below WMT's 0.05, but fewer pairs than a verdict needs.
    check = bad_ref_check([(40, 10), (50, 20), (60, 30), (70, 35)])
    assert check["p_value"] == pytest.approx(1 / 70)
    assert check["passes"] is None and check["pairs"] == 4
    assert check["bad_mean"] == pytest.approx(23.75) and check["ref_mean"] == pytest.approx(55.0)
    # Five and five: 1 / C(10, 5) = 1/252, judged.
    check = bad_ref_check([(40, 10), (50, 20), (60, 30), (70, 35), (80, 38)])
    assert check["p_value"] == pytest.approx(1 / 252) and check["passes"] is True


def test_mann_whitney_matches_the_enumerated_distribution():
    bad, ref = [5.0, 25.0, 45.0, 65.0, 85.0], [10.0, 30.0, 50.0, 70.0, 90.0]
    assert bad_below_ref_p(bad, ref) == pytest.approx(exact_less_p(bad, ref))


def test_no_pair_or_no_difference_is_p_one():
    assert bad_below_ref_p([], []) == 1.0
    assert bad_below_ref_p([50, 60], [50, 60]) == 1.0
    assert bad_ref_check([])["passes"] is None
    with pytest.raises(ValueError, match="bad and ref"):
        bad_below_ref_p([1.0], [])


def test_repeat_consistency_by_hand():
    consistency = repeat_consistency([(80, 85), (60, 75), (50, 50)])
    assert consistency["pairs"] == 3
    assert consistency["mean_abs_diff"] == pytest.approx(20 / 3)
    assert consistency["within_tolerance_share"] == pytest.approx(2 / 3)  # 5 and 0 within 10; 15 is not
    assert consistency["tolerance"] == REPEAT_TOLERANCE
    assert repeat_consistency([])["mean_abs_diff"] is None


def rate(reviewer, entry, system, score, kind=RATE, degraded=False, spans=()):
    return Rating(reviewer, entry, system, kind, score, None, degraded, tuple(spans))


def test_the_paired_test_passes_a_rater_the_unpaired_one_does_not():
    # REF spread wide, every BAD 5 points below its own REF: the pairs all say "lower" (Wilcoxon, exact:
    # 1/2^5), the two samples overlap almost wholly (Mann-Whitney).
    refs = [10, 30, 50, 70, 90]
    ratings = []
    for k, ref in enumerate(refs):
        ratings.append(rate("ana", f"e{k}", "A", ref))
        ratings.append(rate("ana", f"e{k}", "A", ref - 5, kind=CONTROL, degraded=True))
    ratings += [rate("ana", "e0", "A", 12, kind=REPEAT), rate("ana", "e1", "A", 45, kind=REPEAT)]
    rater = campaign_results(ratings, ["A"], resamples=0)["raters"][0]
    assert rater["p_value"] == pytest.approx(1 / 32)
    assert rater["reliable"] is True and rater["excluded"] is False
    wmt = rater["wmt"]
    assert wmt["bad_ref"]["pairs"] == 5
    assert wmt["bad_ref"]["p_value"] == pytest.approx(exact_less_p([r - 5 for r in refs], refs))
    assert wmt["bad_ref"]["p_value"] >= WMT_P and wmt["bad_ref"]["passes"] is False
    assert wmt["repeats"]["pairs"] == 2
    assert wmt["repeats"]["mean_abs_diff"] == pytest.approx((2 + 15) / 2)
    assert wmt["repeats"]["within_tolerance_share"] == pytest.approx(0.5)


# --- mqm campaigns ----------------------------------------------------------------------------------------------------

MAJOR_MISTRANSLATION = {"start": 0, "end": 3, "severity": "major", "category": "Accuracy/Mistranslation"}
MINOR_PUNCTUATION = {"start": 3, "end": 4, "severity": "minor", "category": "Fluency/Punctuation"}
MINOR_GRAMMAR = {"start": 0, "end": 2, "severity": "minor", "category": "Fluency/Grammar"}
NON_TRANSLATION = {"start": 0, "end": 9, "severity": "major", "category": "Non-translation"}
MINOR_AWKWARD = {"start": 1, "end": 2, "severity": "minor", "category": "Style/Awkward"}


def test_mqm_campaign_scores_by_hand():
    ratings = [
        # A, e1: r1 5 + 0.1, r2 nothing -> -(5.1 + 0) / 2 = -2.55; e2: r1 1, r2 25 -> -13. A: -7.775.
        rate("r1", "e1", "A", 40, spans=[MAJOR_MISTRANSLATION, MINOR_PUNCTUATION]), rate("r2", "e1", "A", 90),
        rate("r1", "e2", "A", 70, spans=[MINOR_GRAMMAR]), rate("r2", "e2", "A", 5, spans=[NON_TRANSLATION]),
        # B, e1: nothing from either -> 0; e2: r1 0.1, r2 1 -> -0.55. B: -0.275.
        rate("r1", "e1", "B", 95), rate("r2", "e1", "B", 96),
        rate("r1", "e2", "B", 88, spans=[MINOR_PUNCTUATION]), rate("r2", "e2", "B", 80, spans=[MINOR_AWKWARD]),
        # A repeat is no rating of the results: its spans count for nothing.
        rate("r1", "e1", "B", 20, kind=REPEAT, spans=[NON_TRANSLATION]),
    ]
    results = campaign_results(ratings, ["A", "B", "C"], resamples=0, protocol="mqm")
    rows = results["mqm"]["systems"]
    assert [row["system"] for row in rows] == ["B", "A", "C"]
    assert rows[0]["score"] == pytest.approx(-0.275) and rows[0]["items"] == 2 and rows[0]["rank"] == 1
    assert rows[1]["score"] == pytest.approx(-7.775)
    assert rows[2]["score"] is None and rows[2]["items"] == 0
    assert "Major 5" in results["mqm"]["weights"]
    assert "mqm" not in campaign_results(ratings, ["A", "B", "C"], resamples=0)


def test_an_excluded_raters_spans_do_not_count():
    ratings = [rate("r1", "e1", "A", 80), rate("r2", "e1", "A", 10, spans=[NON_TRANSLATION])]
    # r2 cannot tell degraded outputs: five controls scored as high as their originals.
    for k in range(5):
        ratings += [rate("r2", f"c{k}", "A", 50), rate("r2", f"c{k}", "A", 50, kind=CONTROL, degraded=True)]
    results = campaign_results(ratings, ["A"], resamples=0, protocol="mqm")
    assert results["excluded_reviewers"] == ["r2"]
    assert results["mqm"]["systems"][0]["score"] == 0.0  # r1's one rating, no error


def test_on_the_scripted_campaign_the_unpaired_test_needs_more_controls_than_the_paired_one():
    from tests.test_review_results import results_of as scripted_results

    # 60 items: 6 controls each. Every degraded output is scored under its original (ours: p = 1/64 for all
    # three), but one rater's REF scores spread so widely that WMT's unpaired test does not see it.
    raters = {rater["reviewer"]: rater for rater in scripted_results(60, random_rater="dan")["raters"]}
    for name in ("ana", "ben", "chloe"):
        assert raters[name]["p_value"] == pytest.approx(1 / 64) and raters[name]["reliable"] is True
        wmt = raters[name]["wmt"]
        assert wmt["bad_ref"]["pairs"] == 6 and wmt["bad_ref"]["bad_mean"] < wmt["bad_ref"]["ref_mean"] - 20
        assert 3 < wmt["repeats"]["mean_abs_diff"] < 11  # twice the noise: E|N(0, 6 sqrt 2)| ~ 6.8
        assert wmt["repeats"]["mean_abs_diff"] == pytest.approx(raters[name]["repeat_mean_abs_diff"])
    assert [name for name in ("ana", "ben", "chloe") if raters[name]["wmt"]["bad_ref"]["passes"]] == ["ana", "ben"]
    assert raters["chloe"]["wmt"]["bad_ref"]["p_value"] == pytest.approx(0.066, abs=0.001)
    dan = raters["dan"]["wmt"]
    assert dan["bad_ref"]["passes"] is False and raters["dan"]["reliable"] is False  # both fail the random rater
    assert dan["repeats"]["mean_abs_diff"] > 20  # uniform scores: E|U - U'| over 0..100 ~ 33
    # 200 items: 20 controls each, and WMT's test passes all three too.
    raters = scripted_results(200)["raters"]
    assert all(rater["wmt"]["bad_ref"]["passes"] and rater["wmt"]["bad_ref"]["pairs"] == 20 for rater in raters)
