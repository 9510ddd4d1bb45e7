"""ESA and MQM campaigns over the store, through the review rules the front
doors call (gateway/review/reviewing.py): real Cree and Spanish runs scored
by the session's stack; the gate before the items (a wrong answer told why
and not stored, a right one passing); suggested spans from the analyzers'
rejected words on all but a seeded share of the items; decisions, [MISSING]
spans and start times stored; document context; and the refusals (not a
reviewer, a closed campaign, a bad protocol) with their gRPC statuses."""
from __future__ import annotations

from datetime import datetime, timezone

import grpc
import pytest

from apps.client import Client, InvalidArgument
from gateway.review import growth, protocol, reviewing
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.errors import CampaignRefused, NotAReviewer, NotNow
from gateway.review.gate import changed_span, expected_answer, gate_failures
from gateway.review.ratings import checked_ratings
from gateway.store import RunStore, default_store_url
from tests.conftest import run_cli
from tests.review_fixtures import REJECTED, store_two_runs


@pytest.fixture(scope="module")
def runs(stack) -> dict[str, list[str]]:
    return {"crk": store_two_runs(stack.gateway_address, "esa-store-crk", "crk"),
            "spa": store_two_runs(stack.gateway_address, "esa-store-spa", "spa")}


@pytest.fixture()
def store():
    opened = RunStore.open(default_store_url())
    yield opened
    opened.close()


def esa_campaign(store: RunStore, run_ids: list[str], reviewers=("r1",), **options) -> dict:
    return create_campaign(store, CampaignRequest("esa", run_ids, list(reviewers), items=5, overlap=1, seed=7,
                                                  protocol=options.pop("protocol", protocol.ESA),
                                                  prefill=protocol.PREFILL_LYSS, **options))


def answer(task: dict, score: float, spans=(), decide=None, only: int | None = None) -> dict:
    """A page's answer to a task: the same score for every output, `spans`
    on each (on output `only` alone when given), each suggestion decided by
    `decide(suggestion) -> (decision, final)`."""
    ratings = []
    for index, system in enumerate(task["systems"]):
        marked = spans if only in (None, index) else ()
        decisions, extra = [], []
        for suggestion in (task["suggestions"] or {}).get(system) or []:
            decision, final = decide(suggestion) if decide else ("rejected", None)
            decisions.append({"detector": suggestion["detector"], "start": suggestion["start"],
                              "end": suggestion["end"], "decision": decision, "final": final})
            if final:
                extra.append({**final, "missing": False})
        ratings.append({"score": score, "usable": score >= 70, "spans": [*marked, *extra], "decisions": decisions})
    return {"ratings": ratings, "opened_at": datetime.now(timezone.utc).isoformat()}


def test_the_gate_comes_first_tells_why_and_then_lets_the_reviewer_in(store, runs):
    campaign = esa_campaign(store, runs["crk"])
    campaign_id = campaign["campaign_id"]
    assert (campaign["protocol"], campaign["prefill"], campaign["prefill_share"]) == ("esa", "lyss", 0.2)
    tutorial, attention = (store.review_task(campaign_id, "r1", position) for position in (0, 1))
    assert (tutorial["kind"], attention["kind"]) == (protocol.TUTORIAL, protocol.ATTENTION)
    assert tutorial["outputs"] == [tutorial["reference"]] and tutorial["expected"]["spans"] == []
    (wanted,) = attention["expected"]["spans"]
    assert attention["expected"]["score"] == [0, 50] and wanted["end"] > wanted["start"]
    # The expected answer never reaches the page.
    assert "expected" not in reviewing.item_page(store, campaign_id, "r1", 1)["task"]
    # A campaign item before the gate: refused, by page and by rating.
    with pytest.raises(NotNow, match="pass the tutorial item"):
        reviewing.item_page(store, campaign_id, "r1", 2)
    item = store.review_task(campaign_id, "r1", 2)
    with pytest.raises(NotNow):
        reviewing.rate(store, campaign_id, "r1", 2, answer(item, 80))

    assert reviewing.rate(store, campaign_id, "r1", 0, answer(tutorial, 95))["passed"] is True
    # The attention item scored high with nothing marked: told why (both), nothing stored.
    failed = reviewing.rate(store, campaign_id, "r1", 1, answer(attention, 90))
    assert failed["passed"] is False and len(failed["reasons"]) == 2
    assert "from 0 to 70" in failed["reasons"][0]
    assert f"characters {wanted['start']}-{wanted['end']}" in failed["reasons"][1]
    assert store.reviewer_progress(campaign_id)["r1"]["next"] == 1
    # Marked three characters off at each end (the tolerance) and scored 70: passes.
    near = {"start": max(0, wanted["start"] - 3), "end": min(len(attention["outputs"][0]), wanted["end"] + 3),
            "severity": "major", "missing": False}
    passed = reviewing.rate(store, campaign_id, "r1", 1, answer(attention, 70, [near]))
    assert passed["passed"] is True and passed["next"] == 2
    assert reviewing.item_page(store, campaign_id, "r1", 2)["task"]["position"] == 2
    # The gate's ratings are not results.
    assert results_of(store, campaign_id)["results"] is None


def test_suggestions_are_the_rejected_words_except_on_a_seeded_share(store, runs):
    campaign = esa_campaign(store, runs["crk"])
    campaign_id = campaign["campaign_id"]
    rough = runs["crk"][1]
    tasks = [store.review_task(campaign_id, "r1", position)
             for position in range(store.reviewer_progress(campaign_id)["r1"]["tasks"])]
    items = [task for task in tasks if task["kind"] not in protocol.GATE_KINDS]
    plain = {task["entry_id"] for task in items if task["suggestions"] is None}
    assert len(plain) == round(0.2 * 5) == 1  # one entry of five shown without suggestions, in every task of it
    assert all(task["suggestions"] is None for task in tasks if task["kind"] in protocol.GATE_KINDS)
    for task in items:
        if task["suggestions"] is None:
            continue
        assert set(task["suggestions"]) == set(task["systems"])
        shown = task["outputs"][task["systems"].index(rough)]
        words = [shown[s["start"]:s["end"]] for s in task["suggestions"][rough]]
        if task["kind"] != protocol.CONTROL:  # a degraded output gets none (five items: no control here)
            assert words and set(words) <= REJECTED, (shown, words)
        assert all(s["detector"] == "fst_rejected" for s in task["suggestions"][rough])
    good = runs["crk"][0]
    assert all(task["suggestions"][good] == [] for task in items if task["suggestions"] is not None)
    # The same seed, the same share; another seed may leave out another entry.
    again = esa_campaign(store, runs["crk"])
    assert {store.review_task(again["campaign_id"], "r1", task["position"])["entry_id"] for task in items
            if store.review_task(again["campaign_id"], "r1", task["position"])["suggestions"] is None} == plain


def pass_gate(store: RunStore, campaign_id: str, reviewer: str = "r1") -> None:
    for position in (0, 1):
        task = store.review_task(campaign_id, reviewer, position)
        spans = [{**span, "severity": "major", "missing": False} for span in task["expected"]["spans"]]
        if protocol.MQM == store.campaign(campaign_id)["protocol"]:
            spans = [{**span, "category": "Accuracy/Mistranslation"} for span in spans]
        score = 90 if task["kind"] == protocol.TUTORIAL else 20
        assert reviewing.rate(store, campaign_id, reviewer, position, answer(task, score, spans))["passed"]


def first_with_suggestions(store: RunStore, campaign_id: str, reviewer: str = "r1") -> dict:
    position = 2
    while True:
        task = store.review_task(campaign_id, reviewer, position)
        if task["suggestions"] and sum(map(len, task["suggestions"].values())) >= 2:
            return task
        position += 1


def test_decisions_missing_spans_and_times_are_stored_and_checked(store, runs):
    campaign = esa_campaign(store, runs["spa"], prefill_share=0.0)
    campaign_id = campaign["campaign_id"]
    pass_gate(store, campaign_id)
    task = first_with_suggestions(store, campaign_id)
    rough = next(system for system in task["systems"] if task["suggestions"][system])
    index = task["systems"].index(rough)
    length = len(task["outputs"][index])
    missing = {"start": length, "end": length, "severity": "minor", "missing": True}
    first = task["suggestions"][rough][0]

    def accept_first(suggestion):
        if suggestion == first:
            return "accepted", {"start": first["start"], "end": first["end"], "severity": first["severity"]}
        return "rejected", None

    body = answer(task, 40, [missing], accept_first, only=index)
    # Refusals first, each naming its field; nothing is stored.
    broken = [dict(rating) for rating in body["ratings"]]
    broken[index] = {**broken[index], "decisions": broken[index]["decisions"][:-1]}
    with pytest.raises(CampaignRefused, match=rf"ratings\[{index}\].decisions: one decision per suggested span"):
        reviewing.rate(store, campaign_id, "r1", task["position"], {**body, "ratings": broken})
    moved = [dict(rating) for rating in body["ratings"]]
    decisions = [dict(d) for d in moved[index]["decisions"]]
    decisions[0] = {**decisions[0], "final": {**decisions[0]["final"], "end": decisions[0]["final"]["end"] - 1}}
    moved[index] = {**moved[index], "decisions": decisions}
    with pytest.raises(CampaignRefused, match="accepted suggestion keeps its extent"):
        reviewing.rate(store, campaign_id, "r1", task["position"], {**body, "ratings": moved})
    # Accepted with another severity: that is an edit (the page's `t` sends "edited").
    major = {"start": first["start"], "end": first["end"], "severity": "major"}
    other = answer(task, 40, [missing], lambda s: ("accepted", major) if s == first else ("rejected", None), only=index)
    with pytest.raises(CampaignRefused, match=rf"decisions\[0\]\.final\.severity: an accepted suggestion keeps its "
                                              rf"severity \({first['severity']}\)"):
        reviewing.rate(store, campaign_id, "r1", task["position"], other)
    early = [dict(rating) for rating in body["ratings"]]
    early[index] = {**early[index], "spans": [{**missing, "start": length - 1}]}
    with pytest.raises(CampaignRefused, match=r"MISSING\] span has start == end"):
        reviewing.rate(store, campaign_id, "r1", task["position"], {**body, "ratings": early})
    with pytest.raises(CampaignRefused, match="opened_at"):
        reviewing.rate(store, campaign_id, "r1", task["position"], {**body, "opened_at": "2001-01-01T00:00:00+00:00"})
    assert not store.review_task(campaign_id, "r1", task["position"])["done"]

    saved = reviewing.rate(store, campaign_id, "r1", task["position"], body)
    assert saved["saved"] == task["position"]
    stored = store.review_task(campaign_id, "r1", task["position"])["ratings"][rough]
    assert missing in stored["spans"]
    accepted = {"start": first["start"], "end": first["end"], "severity": first["severity"], "missing": False}
    assert accepted in stored["spans"] and stored["decisions"][0]["final"] == accepted
    assert [d["decision"] for d in stored["decisions"]] == ["accepted"] + ["rejected"] * (len(body["ratings"][index]
                                                                                               ["decisions"]) - 1)
    assert all(d["detector"] == "fst_rejected" for d in stored["decisions"])
    started, rated = (datetime.fromisoformat(stored[key]) for key in ("started_at", "rated_at"))
    assert started <= rated


def test_document_context_shows_the_neighbours_of_the_same_document(store, runs):
    campaign = esa_campaign(store, runs["crk"], reviewers=("r1",))
    task = store.review_task(campaign["campaign_id"], "r1", 0)
    context = {entry_id: store.review_task(campaign["campaign_id"], "r1", position)["document"]
               for position in range(2, 7)
               for entry_id in [store.review_task(campaign["campaign_id"], "r1", position)["entry_id"]]}
    assert task["document"]["doc_id"] in ("story-1", "story-2")
    # crk-2 is story-1's middle sentence; crk-4 opens story-2 (crk-3 before it is story-1's).
    assert context["crk-2"] == {"doc_id": "story-1", "before": ["The Cree language."], "after": ["A horse."]}
    assert context["crk-4"] == {"doc_id": "story-2", "before": [], "after": ["The dogs are sleeping."]}


def test_mqm_spans_carry_a_category(store, runs):
    campaign = esa_campaign(store, runs["spa"], protocol=protocol.MQM, prefill_share=1.0)
    campaign_id = campaign["campaign_id"]
    pass_gate(store, campaign_id)
    task = store.review_task(campaign_id, "r1", 2)
    assert task["suggestions"] is None  # every item without suggestions: share 1
    span = {"start": 0, "end": 2, "severity": "minor", "missing": False}
    with pytest.raises(CampaignRefused, match=r"spans\[0\].category: one of the MQM categories"):
        reviewing.rate(store, campaign_id, "r1", 2, answer(task, 60, [span]))
    reviewing.rate(store, campaign_id, "r1", 2, answer(task, 60, [{**span, "category": "Fluency/Spelling"}]))
    ratings = store.review_task(campaign_id, "r1", 2)["ratings"]
    assert all(rating["spans"][0]["category"] == "Fluency/Spelling" for rating in ratings.values())


def test_mqm_suggestions_keep_a_category_and_the_item_sent_again_replaces_its_ratings(store, runs):
    """An accepted suggestion in MQM is a span like the others: it needs a
    category, which its stored decision keeps; the same answer sent again
    (as the page sends a rated item back) is accepted and replaces it."""
    campaign = esa_campaign(store, runs["spa"], protocol=protocol.MQM, prefill_share=0.0)
    campaign_id = campaign["campaign_id"]
    pass_gate(store, campaign_id)
    task = first_with_suggestions(store, campaign_id)

    def keep(suggestion):
        return "accepted", {**{key: suggestion[key] for key in ("start", "end", "severity")},
                            "category": "Fluency/Spelling"}

    body = answer(task, 50, decide=keep)
    # The spans have their category; a decision's final span without it is refused as any span would be.
    index = next(i for i, rating in enumerate(body["ratings"]) if rating["decisions"])
    bare = [dict(rating) for rating in body["ratings"]]
    bare[index] = {**bare[index], "decisions": [{**d, "final": {k: v for k, v in d["final"].items() if k != "category"}}
                                                for d in bare[index]["decisions"]]}
    with pytest.raises(CampaignRefused, match=rf"ratings\[{index}\]\.decisions\[0\]\.final\.category: one of the MQM"):
        reviewing.rate(store, campaign_id, "r1", task["position"], {**body, "ratings": bare})
    reviewing.rate(store, campaign_id, "r1", task["position"], body)
    stored = store.review_task(campaign_id, "r1", task["position"])["ratings"]
    finals = [d["final"] for rating in stored.values() for d in rating["decisions"]]
    assert finals and all(final["category"] == "Fluency/Spelling" and final["missing"] is False for final in finals)
    again = answer(task, 30, decide=keep)
    reviewing.rate(store, campaign_id, "r1", task["position"], again)
    assert {rating["score"] for rating in store.review_task(campaign_id, "r1", task["position"])["ratings"].values()} \
        == {30}


def test_a_rated_item_with_an_accepted_missing_suggestion_can_be_sent_again():
    """Hand-made suggestions on "abc" (length 3): a [MISSING] one (3-3) and a
    word (0-1), accepted and edited (major). The page sends a rated item
    back with the stored decisions' final spans among its spans: they keep
    [MISSING] and the category, so the second check gives the first's answer."""
    suggested = [{"detector": "number_mismatch", "start": 3, "end": 3, "severity": "major", "missing": True},
                 {"detector": "fst_rejected", "start": 0, "end": 1, "severity": "minor", "missing": False}]
    for kind, extra in ((protocol.ESA, {}), (protocol.MQM, {"category": "Accuracy/Omission"})):
        finals = [{"start": 3, "end": 3, "severity": "major", **extra}, {"start": 0, "end": 1, "severity": "major", **extra}]
        sent = {"A": {"score": 40, "usable": False,
                      "spans": [{**finals[0], "missing": True}, {**finals[1], "missing": False}],
                      "decisions": [{"detector": s["detector"], "start": s["start"], "end": s["end"], "decision": d,
                                     "final": final} for s, d, final in zip(suggested, ("accepted", "edited"), finals)]}}
        first = checked_ratings(["A"], sent, ["abc"], kind, {"A": suggested})["A"]
        assert [d["final"] for d in first["decisions"]] == [{**finals[0], "missing": True},
                                                           {**finals[1], "missing": False}]
        again = {"A": {**first, "spans": [d["final"] for d in first["decisions"]]}}
        assert checked_ratings(["A"], again, ["abc"], kind, {"A": suggested}) == {"A": first}


def test_the_rules_refuse_outsiders_closed_campaigns_and_unknown_protocols(store, runs, stack):
    campaign = esa_campaign(store, runs["crk"])
    campaign_id = campaign["campaign_id"]
    with pytest.raises(NotAReviewer, match="not one of its reviewers"):
        reviewing.item_page(store, campaign_id, "someone-else", 0)
    growth.change_state(store, campaign_id, "closed", "maintainer")
    tutorial = store.review_task(campaign_id, "r1", 0)
    with pytest.raises(NotNow, match="is closed"):
        reviewing.rate(store, campaign_id, "r1", 0, answer(tutorial, 90))
    with pytest.raises(CampaignRefused, match="state: open or closed"):
        growth.change_state(store, campaign_id, "archived", "maintainer")
    with pytest.raises(CampaignRefused, match="prefill: suggested spans go with the esa or mqm protocol"):
        esa_campaign(store, runs["crk"], protocol=protocol.DA)
    with Client(stack.gateway_address) as client:
        with pytest.raises(InvalidArgument) as refused:
            client.create_campaign("bad", runs["crk"], ["r1"], items=2, overlap=1, protocol="appraise")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and "protocol: one of da, esa, mqm" in str(
        refused.value)


def test_the_cli_creates_an_esa_campaign_with_suggestions(runs, stack, capsys):
    assert run_cli("review", "create", "--name", "cli esa", "--run", runs["spa"][0], "--run", runs["spa"][1],
                   "--reviewers", "r1", "--items", "3", "--overlap", "1", "--protocol", "esa", "--prefill", "lyss",
                   "--prefill-share", "0.5", "--gateway", stack.gateway_address) == 0
    out, err = capsys.readouterr()
    assert "protocol esa, suggestions lyss" in err
    store = RunStore.open(default_store_url())
    try:
        campaign = store.campaign(out.strip())
    finally:
        store.close()
    assert (campaign["protocol"], campaign["prefill"], campaign["prefill_share"]) == ("esa", "lyss", 0.5)
    assert run_cli("review", "create", "--name", "x", "--run", runs["spa"][0], "--run", runs["spa"][1],
                   "--reviewers", "r1", "--prefill", "lyss", "--gateway", stack.gateway_address) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0  # one line: prefill needs esa or mqm


def test_a_gate_answer_is_judged_with_its_tolerances():
    """Hand-worked: the changed span of a degraded text, and answers just
    inside and just outside the tolerances (3 characters, 20 points)."""
    assert changed_span("the dog runs", "the cat runs") == (4, 7)
    assert changed_span("abc def", "abc") == (2, 3)  # a cut at the end: the character before it
    assert changed_span("a b c", "a c") == (2, 3)  # a cut inside: the character after it
    expected = expected_answer(protocol.ATTENTION, [(10, 20)])
    assert expected == {"score": [0, 50], "spans": [{"start": 10, "end": 20}], "span_tolerance": 3,
                        "score_tolerance": 20}
    inside = [{"start": 7, "end": 23, "severity": "major"}]
    assert gate_failures(expected, 70, inside) == []
    (score_reason,) = gate_failures(expected, 71, inside)
    assert "a score from 0 to 70 is expected" in score_reason
    (span_reason,) = gate_failures(expected, 40, [{"start": 6, "end": 20, "severity": "minor"}])
    assert "characters 10-20 is not marked" in span_reason
    # A [MISSING] span does not stand for a replaced one.
    assert len(gate_failures(expected, 40, [{"start": 10, "end": 20, "severity": "minor", "missing": True}])) == 1
    tutorial = expected_answer(protocol.TUTORIAL, [])
    assert gate_failures(tutorial, 60, []) == [] and len(gate_failures(tutorial, 59, [])) == 1
