"""Campaigns that grow (gateway/review/growth.py), end to end over the store
(SQLite and PostgreSQL) and the CLI: the four runs and simulated raters of
tests/test_review_campaigns.py; and `review results` printing WMT's checks."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from gateway.review import protocol
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.growth import add_reviewers
from gateway.store import RunStore
from gateway.store.reviews import CampaignChanged
from tests.test_review_campaigns import QUALITY, RATERS, copied_store, rate_everything, scored  # noqa: F401

NEW_RATER = {"rater-d": (2.0, 1.0)}


def rated_entries(store, campaign_id: str) -> dict[str, list[str]]:
    return {reviewer: [entry for entry, kind in tasks if kind == protocol.RATE]
            for reviewer, tasks in store.campaign_queues(campaign_id).items()}


def test_a_campaign_grows_without_losing_a_rating(scored, store_url, cli):
    store = copied_store(store_url, scored)
    try:
        campaign = create_campaign(store, CampaignRequest("growing", scored["runs"], list(RATERS), items=30,
                                                          overlap=2, seed=5))
        campaign_id = campaign["campaign_id"]
        rate_everything(store, campaign, dict(zip(scored["runs"], QUALITY)))
        ratings_before = store.campaign_ratings(campaign_id)
        queues_before = store.campaign_queues(campaign_id)
    finally:
        store.close()

    # A fourth reviewer: the existing ones rate 30 * 2 / 3 = 20 items each, and so does she.
    added = cli("review", "add-reviewers", campaign_id, "rater-d", "--store", store_url, "--json")
    assert added.exit_code == 0, added.stderr
    assert json.loads(added.stdout)["added"] == {"rater-d": 20}
    assert "rater-d gets 20 items" in added.stderr
    # Fifteen more items from the corpus, dealt to the four with the campaign's overlap.
    extended = cli("review", "extend", campaign_id, "--items", "15", "--store", store_url, "--json")
    assert extended.exit_code == 0, extended.stderr
    new_entries = json.loads(extended.stdout)["added"]
    assert json.loads(extended.stdout)["items"] == 45 and len(new_entries) == 15

    store = RunStore.open(store_url)
    try:
        # Nothing rated before is lost or changed, and the old queues are where they were.
        assert store.campaign_ratings(campaign_id) == ratings_before
        queues = store.campaign_queues(campaign_id)
        for reviewer, tasks in queues_before.items():
            assert queues[reviewer][:len(tasks)] == tasks
        rated = rated_entries(store, campaign_id)
        old_items = {entry for reviewer in RATERS for entry in rated[reviewer][:20]}
        assert len(old_items) == 30 and not old_items & set(new_entries)
        assert len(set(rated["rater-d"]) & old_items) == 20
        # Her queue is built as at creation: 10% repeats and 10% degraded controls; then her new items.
        assert Counter(kind for _, kind in queues["rater-d"][:24]) == {"rate": 20, "repeat": 2, "control": 2}
        coverage = Counter(entry for entries in rated.values() for entry in set(entries))
        assert sorted(Counter(coverage[entry] for entry in old_items).items()) == [(2, 10), (3, 20)]
        assert all(coverage[entry] == 2 for entry in new_entries)  # the campaign's overlap
        # The same strata: the corpus's entry i has domain i % 5 and difficulty 1 + 3i % 5, five strata of 42;
        # 30 items took 6 of each, and 15 more take 3 of each of the 36 left.
        stratum = {entry["id"]: (entry["domain"], entry["difficulty"]) for entry in scored["corpus"]["entries"]}
        assert Counter(stratum[entry] for entry in old_items) == Counter({key: 6 for key in set(stratum.values())})
        assert Counter(stratum[entry] for entry in new_entries) == Counter({key: 3 for key in set(stratum.values())})
        # The finished reviewers resume at their first new task.
        progress = store.reviewer_progress(campaign_id)
        for reviewer, tasks in queues_before.items():
            if len(queues[reviewer]) > len(tasks):
                assert progress[reviewer]["next"] == len(tasks)
        # The new reviewer rates her queue: the results read four raters, the others' ratings as they were.
        rate_everything(store, store.campaign(campaign_id), dict(zip(scored["runs"], QUALITY)), seed=3,
                        raters=NEW_RATER)
        results = results_of(store, campaign_id)["results"]
        assert [rater["reviewer"] for rater in results["raters"]] == [*RATERS, "rater-d"]
        # Her share of the new items is rated; the others' shares are not yet.
        assert results["items"] == 30 + len(set(rated["rater-d"]) & set(new_entries))
        kept = [rating for rating in store.campaign_ratings(campaign_id) if rating["reviewer"] in RATERS]
        assert kept == ratings_before
    finally:
        store.close()

    audit = cli("review", "audit", campaign_id, "--store", store_url, "--json")
    assert audit.exit_code == 0
    changes = json.loads(audit.stdout)
    assert [change["action"] for change in changes] == ["reviewers_added", "items_extended"]
    assert changes[0]["details"] == {"reviewers": ["rater-d"], "items_each": {"rater-d": 20}}
    assert changes[1]["details"]["entry_ids"] == new_entries and changes[1]["details"]["extension"] == 1
    assert all(change["at"] and "by" in change for change in changes)
    table = cli("review", "audit", campaign_id, "--store", store_url)
    assert "items_extended" in table.stdout and "entry_ids: 15 ids" in table.stdout

    # `review results` prints WMT's checks beside ours: 2 or 3 controls each (10% of 20 items, and of the new
    # items rated) are too few for a verdict.
    printed = cli("review", "results", campaign_id, "--store", store_url)
    assert printed.exit_code == 0 and "WMT p (BAD<REF)" in printed.stdout and "repeat |diff|" in printed.stdout
    rows = [line for line in printed.stdout.splitlines() if line.startswith(("rater-a", "rater-d"))]
    assert len(rows) == 2 and all("too few controls" in row for row in rows)
    as_json = json.loads(cli("review", "results", campaign_id, "--store", store_url, "--json").stdout)
    for rater in as_json["results"]["raters"]:
        assert rater["wmt"]["bad_ref"]["pairs"] == rater["control_pairs"] < protocol.MIN_CONTROL_PAIRS
        assert rater["wmt"]["bad_ref"]["passes"] is None
        assert rater["wmt"]["repeats"]["pairs"] == rater["repeat_pairs"]


def test_growth_refuses_what_it_cannot_do(scored, tmp_path, cli):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = copied_store(url, scored)
    try:
        campaign_id = create_campaign(store, CampaignRequest("small", scored["runs"], ["a", "b"], items=12,
                                                             overlap=1, seed=3))["campaign_id"]
    finally:
        store.close()
    for args, message in (
        (("add-reviewers", campaign_id, "a"), "reviewers: already in campaign"),
        (("add-reviewers", campaign_id, "c", "c"), "reviewers: give one or more different"),
        (("extend", campaign_id, "--items", "0"), "items: must be 1 to"),
        (("extend", campaign_id, "--items", "199"), "items: 198 entries of corpus"),
        (("extend", "000000000000", "--items", "1"), "no review campaign"),
        (("audit", "000000000000"), "no review campaign"),
        (("export", campaign_id, "--format", "wmt-esa"), "has no ratings yet"),
    ):
        refused = cli("review", *args, "--store", url)
        assert refused.exit_code == 2, (args, refused)
        assert message in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    store = RunStore.open(url)
    try:
        # A change prepared from settings someone else changed meanwhile is refused, and writes nothing.
        with pytest.raises(CampaignChanged, match="try again"):
            store.grow_campaign(campaign_id, {"items": 11}, {"items": 13}, [], "x", "items_extended", {})
        assert store.campaign(campaign_id)["items"] == 12 and store.campaign_audit(campaign_id) == []
        store.set_campaign_state(campaign_id, "closed")
        with pytest.raises(Exception, match="closed: reopen it"):
            add_reviewers(store, campaign_id, ["c"], None)
        assert store.campaign_audit(campaign_id) == []  # nothing was changed, nothing audited
    finally:
        store.close()
    closed = cli("review", "extend", campaign_id, "--items", "1", "--store", url)
    assert closed.exit_code == 2 and "closed: reopen it" in closed.stderr
