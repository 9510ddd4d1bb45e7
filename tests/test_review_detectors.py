"""Each detector judged by speakers (gateway/review/detectors.py): confirmed
shares with clustered bootstrap intervals, the analyzer's false-rejection
rate, the errors no detector suggested and the prefill bias, on small
hand-worked cases."""
from __future__ import annotations

import json

import pytest
import sqlalchemy

from apps.client import Client
from champollion.core.run_card import run_card_from_proto, run_card_to_proto
from champollion.eval.v1 import gateway_pb2
from gateway.review import campaigns
from gateway.review.campaigns import CampaignRequest, ReviewCache, create_campaign, results_of
from gateway.review.detectors import MIN_JUDGED, MIN_JUDGED_OUTPUTS, citations, detector_report
from gateway.review.prefill import suggestions_for
from gateway.review.ratings import checked_ratings
from gateway.store.location import open_engine, parse_store_url
from gateway.store.tables import review_campaigns, review_ratings, review_tasks
from tests.conftest import run_cli
from tests.test_review_campaigns import copied_store


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


def _judged_fst() -> list[dict]:
    """25 outputs with two analyzer suggestions each (50 judged), 3 of 4 confirmed in turn; 10 code-switch ones."""
    outputs = []
    for i in range(25):
        verdicts = ("accepted", "rejected") if i % 2 else ("edited", "accepted")
        outputs.append({"item": f"e{i}", "prefilled": True, "score": 50.0, "spans": [],
                        "suggestions": [], "decisions": [decision("fst_rejected", 0, 3, v) for v in verdicts]
                        + ([decision("code_switched", 5, 9, "accepted")] if i < 10 else [])})
    return outputs


def test_a_rate_is_cited_only_past_the_bar():
    report = detector_report(_judged_fst(), "crk", resamples=200)
    assert report["detectors"]["fst_rejected"]["judged"] == MIN_JUDGED and 25 >= MIN_JUDGED_OUTPUTS
    assert citations(report, campaign_meets_bar=False, campaign_id="c1") == []
    [cited] = citations(report, campaign_meets_bar=True, campaign_id="c1")
    # 12 outputs of 1 of 2, 13 of 2 of 2: 38 of 50.
    assert cited["detector"] == "fst_rejected" and cited["confirmed_share"] == pytest.approx(38 / 50)
    assert cited["false_rejection_rate"] == pytest.approx(12 / 50)
    assert cited["statement"].startswith("fst_acceptance_rate (crk): speakers confirmed 0.76 (95% CI ")
    assert "false-rejection rate (scoring spec §1.6) 0.24" in cited["statement"]


# --- over a real store: runs scored by the session's stack, a campaign rated with decisions ----------------------

PREFILL_CORPUS = {"id": "review-detectors-eng-spa", "source_lang": "eng", "target_lang": "spa", "entries": [
    {"id": f"rd-{i}", "source": f"You have {{count}} messages from {i + 3} friends",
     "reference": f"Tienes {{count}} mensajes de {i + 3} amigos"} for i in range(8)]}
# System A changes each number; system B renames the placeholder.
SYSTEMS_OUTPUT = (lambda i: f"Tienes {{count}} mensajes de {i + 30} amigos",
                  lambda i: f"Tienes {{cuenta}} mensajes de {i + 3} amigos")
HELD_OUT = {"rd-0", "rd-1"}  # items shown without suggestions


@pytest.fixture(scope="module")
def prefill_runs(stack) -> dict:
    with Client(stack.gateway_address) as client:
        client.register_corpus(PREFILL_CORPUS, "dev")
        runs = [client.evaluate(gateway_pb2.CorpusRef(id=PREFILL_CORPUS["id"]),
                                [{"id": e["id"], "prediction": make(i)} for i, e in enumerate(PREFILL_CORPUS["entries"])],
                                {"model_slug": f"prefill-{k}"})["run_id"] for k, make in enumerate(SYSTEMS_OUTPUT)]
    return {"corpus": PREFILL_CORPUS, "runs": runs}


def _prefill_tasks(store_url: str, store, campaign: dict) -> None:
    """What `--prefill lyss` stores (issue 36's shapes): the setting, and each task's suggestions but the held-out ones'."""
    scores = {run_id: {e["id"]: e["scores"] for e in store.get_run(run_id)["entries"]}
              for run_id in campaign["systems"]}
    outputs = {run_id: store.run_predictions(run_id) for run_id in campaign["systems"]}
    engine = open_engine(parse_store_url(store_url))
    with engine.begin() as connection:
        settings = connection.scalar(sqlalchemy.select(review_campaigns.c.settings)
                                     .where(review_campaigns.c.campaign_id == campaign["campaign_id"]))
        connection.execute(sqlalchemy.update(review_campaigns)
                           .where(review_campaigns.c.campaign_id == campaign["campaign_id"])
                           .values(settings={**settings, "prefill": "lyss", "prefill_share": 0.25}))
        for row in connection.execute(sqlalchemy.select(review_tasks.c.reviewer, review_tasks.c.position,
                                                        review_tasks.c.entry_id)
                                      .where(review_tasks.c.campaign_id == campaign["campaign_id"])).all():
            if row.entry_id in HELD_OUT:
                continue
            shown = {run_id: [s.as_dict() for s in suggestions_for(outputs[run_id][row.entry_id], "",
                                                                   scores[run_id][row.entry_id])]
                     for run_id in campaign["systems"]}
            connection.execute(sqlalchemy.update(review_tasks).where(
                review_tasks.c.campaign_id == campaign["campaign_id"], review_tasks.c.reviewer == row.reviewer,
                review_tasks.c.position == row.position).values(suggestions=shown))
    engine.dispose()


def _rate_with_decisions(store_url: str, store, campaign: dict) -> None:
    """Each reviewer accepts the number and [MISSING] suggestions, rejects the invented placeholder; marks
    every item's first word as a minor error (which no detector suggests); scores 60 with suggestions, 80 without."""
    import sqlalchemy

    engine = open_engine(parse_store_url(store_url))
    for reviewer, progress in store.reviewer_progress(campaign["campaign_id"]).items():
        for position in range(progress["tasks"]):
            task = store.review_task(campaign["campaign_id"], reviewer, position)
            with engine.connect() as connection:
                shown = connection.scalar(sqlalchemy.select(review_tasks.c.suggestions).where(
                    review_tasks.c.campaign_id == campaign["campaign_id"], review_tasks.c.reviewer == reviewer,
                    review_tasks.c.position == position))
            form, decisions = {}, {}
            for system in task["systems"]:
                decided = []
                spans = [{"start": 0, "end": 6, "severity": "minor"}]
                for s in (shown or {}).get(system, []):
                    verdict = "rejected" if s["detector"] == "placeholder_invented" else "accepted"
                    final = None if verdict == "rejected" else {"start": s["start"], "end": s["end"],
                                                                "severity": s["severity"]}
                    decided.append({"detector": s["detector"], "start": s["start"], "end": s["end"],
                                    "decision": verdict, "final": final})
                    if final and not s["missing"]:
                        spans.append(final)
                form[system] = {"score": 60.0 if shown else 80.0, "usable": True, "spans": spans}
                decisions[system] = decided
            store.save_ratings(campaign["campaign_id"], reviewer, position, checked_ratings(task["systems"], form))
            with engine.begin() as connection:
                for system, decided in decisions.items():
                    connection.execute(sqlalchemy.update(review_ratings).where(
                        review_ratings.c.campaign_id == campaign["campaign_id"],
                        review_ratings.c.reviewer == reviewer, review_ratings.c.position == position,
                        review_ratings.c.system == system).values(decisions=decided))
    engine.dispose()


def test_campaign_results_report_the_detectors_from_the_stored_decisions(prefill_runs, store_url, capsys,
                                                                         run_card_validator):
    store = copied_store(store_url, prefill_runs)
    try:
        campaign = create_campaign(store, CampaignRequest("detectors", prefill_runs["runs"], ["ana", "ben"], items=8,
                                                          overlap=2, seed=3, shares={"repeat": 0, "control": 0}))
        _prefill_tasks(store_url, store, campaign)
        _rate_with_decisions(store_url, store, campaign)
        report = results_of(store, campaign["campaign_id"])["results"]["detectors"]
        # A leaderboard's label reads the campaign without its detectors; the run card's block with them.
        run_id = prefill_runs["runs"][0]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(campaigns, "campaign_detectors", lambda *_: pytest.fail("detectors for a label"))
            reviews = ReviewCache(store, [run_id])
            assert reviews.label(run_id, "deployable") is not None
        assert "cited" in reviews._campaign_results(campaign["campaign_id"], detectors=True)["detectors"]
    finally:
        store.close()
    assert report["language"] == "spa"
    # 8 items x 2 systems x 2 reviewers; 6 items shown with suggestions.
    assert report["outputs"] == 32 and report["bootstrap"]["clusters"] == 16
    detectors = report["detectors"]
    # System A: 30 for 3 on each item (a number the source lacks, and its [MISSING] 3): 2 per output,
    # 6 items x 2 reviewers. System B: {count} missing, {cuenta} invented: 1 each per output.
    assert detectors["number_mismatch"]["judged"] == 24 and detectors["number_mismatch"]["confirmed_share"] == 1.0
    assert detectors["placeholder_missing"]["judged"] == 12 and detectors["placeholder_missing"]["accepted"] == 12
    invented = detectors["placeholder_invented"]
    assert (invented["judged"], invented["rejected"], invented["confirmed_share"]) == (12, 12, 0.0)
    assert invented["confirmed_ci"] == [0.0, 0.0] and detectors["number_mismatch"]["confirmed_ci"] == [1.0, 1.0]
    # Held out: the would-be suggestions of rd-0 and rd-1 (2 + 2 per reviewer and system pair) count as
    # unprompted; the reviewers marked only the first word there, which none overlaps but system B's {cuenta}.
    assert detectors["number_mismatch"]["unprompted"]["suggestions"] == 2 * 2 * 2
    assert detectors["placeholder_invented"]["unprompted"] == {"suggestions": 4, "marked": 0, "share": 0.0}
    # The first word "Tienes" (0-6): marked on every output, suggested on none.
    assert report["unsuggested"]["overall"]["unsuggested"] == 32
    assert report["unsuggested"]["not_prefilled"] == {"spans": 8, "unsuggested": 8, "share": 1.0}
    bias = report["prefill_bias"]
    assert bias["outputs"] == {"with": 24, "without": 8}
    assert bias["score"]["difference"] == pytest.approx(-20.0) and bias["score"]["difference_ci"] == [-20.0, -20.0]
    assert bias["score_mann_whitney_p"] < 0.001
    assert report["cited"] == []  # 8 items: the campaign is far from its bar

    capsys.readouterr()
    assert run_cli("review", "results", campaign["campaign_id"], "--store", store_url) == 0
    printed = capsys.readouterr().out
    assert "detectors judged by speakers (spa):" in printed
    assert "placeholder_invented" in printed and "errors no detector suggested: overall 32 of" in printed
    assert "difference -20 (95% CI -20 – -20)" in printed
    assert run_cli("show", prefill_runs["runs"][0], "--store", store_url, "--json", "--entries") == 0
    card = json.loads(capsys.readouterr().out)
    run_card_validator.validate(card)
    assert card["community_review"]["campaigns"][0]["detectors"] == []
    entry = card["entries"][0]["scores"]
    # "Tienes {count} mensajes de 30 amigos": 30 at 27-29 (offsets come back as a Struct's floats).
    assert entry["number_mismatches"] == {"unmatched": [[27, 29]], "missing": ["3"]}

    # A campaign past its bar cites its rates: they travel in the card (protobuf and back) as the schema says.
    [cited] = citations(detector_report(_judged_fst(), "crk", resamples=200), campaign_meets_bar=True,
                        campaign_id=campaign["campaign_id"])
    card["community_review"]["campaigns"][0]["detectors"] = [cited]
    back = run_card_from_proto(run_card_to_proto(card))
    run_card_validator.validate(back)
    [read] = back["community_review"]["campaigns"][0]["detectors"]
    assert {key: read[key] for key in ("detector", "metric", "language", "campaign_id", "judged", "statement")} == \
        {key: cited[key] for key in ("detector", "metric", "language", "campaign_id", "judged", "statement")}
    for key in ("confirmed_share", "confirmed_ci", "false_rejection_rate", "false_rejection_ci"):
        assert read[key] == pytest.approx(cited[key])
