"""Each detector judged by speakers (gateway/review/detectors.py): confirmed
shares with clustered bootstrap intervals, the analyzer's false-rejection
rate, the errors no detector suggested and the prefill bias, on small
hand-worked cases."""
from __future__ import annotations

import pytest

from gateway.review.detectors import MIN_JUDGED, MIN_JUDGED_OUTPUTS, citations, detector_report


def suggestion(detector: str, start: int, end: int, missing: bool = False) -> dict:
    return {"detector": detector, "start": start, "end": end, "severity": "minor", "note": "", "missing": missing}


def decision(detector: str, start: int, end: int, verdict: str) -> dict:
    final = None if verdict == "rejected" else {"start": start, "end": end, "severity": "minor"}
    return {"detector": detector, "start": start, "end": end, "decision": verdict, "final": final}


def span(start: int, end: int, missing: bool = False) -> dict:
    return {"start": start, "end": end, "severity": "minor", "missing": missing}


def small_campaign() -> list[dict]:
    """Three outputs shown with suggestions, two without (one of which the detectors flagged)."""
    return [
        {"item": "e1/A", "prefilled": True, "score": 60.0,
         "suggestions": [suggestion("fst_rejected", 0, 5), suggestion("fst_rejected", 6, 10)],
         "decisions": [decision("fst_rejected", 0, 5, "accepted"), decision("fst_rejected", 6, 10, "rejected")],
         "spans": [span(0, 5)]},
        {"item": "e2/A", "prefilled": True, "score": 40.0,
         "suggestions": [suggestion("fst_rejected", 0, 4)],
         "decisions": [decision("fst_rejected", 0, 4, "edited")],
         "spans": [span(0, 4), span(10, 15)]},
        {"item": "e3/A", "prefilled": True, "score": 70.0,
         "suggestions": [suggestion("code_switched", 3, 8), suggestion("number_mismatch", 20, 20, True)],
         "decisions": [decision("code_switched", 3, 8, "rejected"), decision("number_mismatch", 20, 20, "accepted")],
         "spans": [span(20, 20, True)]},
        # Not shown: what the detectors would have suggested.
        {"item": "e4/A", "prefilled": False, "score": 80.0, "suggestions": [suggestion("fst_rejected", 0, 5)],
         "decisions": [], "spans": [span(0, 3), span(20, 25)]},
        {"item": "e5/A", "prefilled": False, "score": 90.0, "suggestions": [], "decisions": [], "spans": []},
    ]


def test_confirmed_shares_the_false_rejection_rate_and_their_clustered_intervals():
    report = detector_report(small_campaign(), "crk")
    assert report["language"] == "crk" and report["bootstrap"]["clusters"] == 5
    assert list(report["detectors"]) == ["fst_rejected", "code_switched", "number_mismatch"]  # the table's order
    fst = report["detectors"]["fst_rejected"]
    # 3 judged (accepted, rejected; edited), 2 confirmed; the false-rejection rate is the rest.
    assert (fst["judged"], fst["confirmed"], fst["accepted"], fst["edited"], fst["rejected"]) == (3, 2, 1, 1, 1)
    assert fst["confirmed_share"] == pytest.approx(2 / 3) and fst["false_rejection_rate"] == pytest.approx(1 / 3)
    assert fst["metric"] == "fst_acceptance_rate" and fst["suggested"] == 3 and fst["judged_outputs"] == 2
    # Two clusters (1 of 2, 1 of 1): a resample is both copies of one (1/2 or 1/1, a quarter of
    # the time each) or one of each (2/3): the 2.5th and 97.5th percentiles are 0.5 and 1.
    assert fst["confirmed_ci"] == [0.5, 1.0] and fst["false_rejection_ci"] == [0.0, 0.5]
    # Not shown on e4: the reviewer marked 0-3 there unprompted, inside the would-be suggestion 0-5.
    assert fst["unprompted"] == {"suggestions": 1, "marked": 1, "share": 1.0}
    switched, numbers = report["detectors"]["code_switched"], report["detectors"]["number_mismatch"]
    assert (switched["confirmed_share"], numbers["confirmed_share"]) == (0.0, 1.0)
    assert switched["confirmed_ci"] is None and "false_rejection_rate" not in switched  # one output: no interval


def test_errors_no_detector_suggested_overall_and_by_group():
    unsuggested = detector_report(small_campaign(), "crk")["unsuggested"]
    # e2's 10-15 and e4's 20-25 overlap no suggestion; e3's [MISSING] meets a [MISSING] suggestion.
    # Spans: e1 1, e2 2, e3 1 shown with suggestions; e4 2 without.
    assert unsuggested == {"overall": {"spans": 6, "unsuggested": 2, "share": pytest.approx(1 / 3)},
                           "prefilled": {"spans": 4, "unsuggested": 1, "share": 0.25},
                           "not_prefilled": {"spans": 2, "unsuggested": 1, "share": 0.5}}


def test_prefill_bias_means_differences_and_mann_whitney():
    bias = detector_report(small_campaign(), "crk")["prefill_bias"]
    assert bias["outputs"] == {"with": 3, "without": 2}
    score = bias["score"]
    assert score["with"] == pytest.approx(170 / 3) and score["without"] == pytest.approx(85.0)
    assert score["difference"] == pytest.approx(170 / 3 - 85)
    low, high = score["difference_ci"]
    # Each resampled mean stays within its group's scores: with 40..70, without 80..90.
    assert -50 <= low <= score["difference"] <= high <= -10
    spans = bias["spans"]
    assert (spans["with"], spans["without"], spans["difference"]) == pytest.approx((4 / 3, 1.0, 1 / 3))
    # Every score with suggestions below every one without: U = 0, exact two-sided p = 2 / C(5, 2).
    assert bias["score_mann_whitney_p"] == pytest.approx(0.2)


def test_reviewers_of_one_output_are_one_cluster():
    one_output_twice = [{"item": "e1/A", "prefilled": True, "score": 50.0, "spans": [],
                         "suggestions": [suggestion("orthography", 0, 3)],
                         "decisions": [decision("orthography", 0, 3, verdict)]} for verdict in ("accepted", "rejected")]
    clustered = detector_report(one_output_twice, "spa")
    assert clustered["bootstrap"]["clusters"] == 1
    assert clustered["detectors"]["orthography"]["confirmed_share"] == 0.5
    assert clustered["detectors"]["orthography"]["confirmed_ci"] is None  # one cluster: nothing to resample
    apart = detector_report([{**output, "item": None} for output in one_output_twice], "spa")
    assert apart["bootstrap"]["clusters"] == 2 and apart["detectors"]["orthography"]["confirmed_ci"] == [0.0, 1.0]


def test_the_same_seed_gives_the_same_intervals_and_bad_input_is_named():
    first, again = detector_report(small_campaign(), "crk", seed=7), detector_report(small_campaign(), "crk", seed=7)
    assert first == again
    outputs = small_campaign()
    outputs[1]["decisions"][0]["decision"] = "maybe"
    with pytest.raises(ValueError, match=r"outputs\[1\].decisions\[0\].decision: one of accepted, edited, rejected"):
        detector_report(outputs, "crk")
    outputs = small_campaign()
    outputs[2]["score"] = float("nan")
    with pytest.raises(ValueError, match=r"outputs\[2\].score"):
        detector_report(outputs, "crk")
    assert detector_report([], "crk")["detectors"] == {}


def test_a_rate_is_cited_only_past_the_bar():
    # 25 outputs with two analyzer suggestions each (50 judged), 3 of 4 confirmed in turn; 10 code-switch ones.
    outputs = []
    for i in range(25):
        verdicts = ("accepted", "rejected") if i % 2 else ("edited", "accepted")
        outputs.append({"item": f"e{i}", "prefilled": True, "score": 50.0, "spans": [],
                        "suggestions": [], "decisions": [decision("fst_rejected", 0, 3, v) for v in verdicts]
                        + ([decision("code_switched", 5, 9, "accepted")] if i < 10 else [])})
    report = detector_report(outputs, "crk", resamples=200)
    assert report["detectors"]["fst_rejected"]["judged"] == MIN_JUDGED and 25 >= MIN_JUDGED_OUTPUTS
    assert citations(report, campaign_meets_bar=False, campaign_id="c1") == []
    [cited] = citations(report, campaign_meets_bar=True, campaign_id="c1")
    # 12 outputs of 1 of 2, 13 of 2 of 2: 38 of 50.
    assert cited["detector"] == "fst_rejected" and cited["confirmed_share"] == pytest.approx(38 / 50)
    assert cited["false_rejection_rate"] == pytest.approx(12 / 50)
    assert cited["statement"].startswith("fst_acceptance_rate (crk): speakers confirmed 0.76 (95% CI ")
    assert "false-rejection rate (scoring spec §1.6) 0.24" in cited["statement"]
