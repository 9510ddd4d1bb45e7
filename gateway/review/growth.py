"""Campaigns that grow (issue 36): reviewers added and items extended after
creation, without touching a rating; each change written to the campaign's
audit (who, when, what). Blocking store calls, as campaigns.py's.

The rules:

- Adding reviewers. A new reviewer rates as many of the campaign's items as
  the existing reviewers rate on average (rounded half up; at least one, all
  of them at most). The items go to whoever has the fewest reviewers first (ties in a
  random order from the campaign's seed), so that the new reviewers top up
  the items that need it most; several new reviewers are served in the order
  given, each item counted again once a new reviewer takes it. A new
  reviewer's queue is built as at creation (design.reviewer_tasks: shuffled,
  with its repeated and degraded controls), from the seed creation would have
  given that name.
- Extending items. `items` new entries sampled as at creation
  (design.sample_entries: proportionally from the (difficulty, domain)
  strata) among the corpus entries every system has an output for and the
  campaign does not have yet, dealt to the campaign's reviewers with its
  overlap (design.assign_items) and appended to their queues, controls
  included. The k-th extension draws from a seed of its own (the campaign's
  seed, "extend" and k), so that two extensions differ and each is
  reproducible.
- A closed campaign does not grow (CampaignClosed). Two changes prepared at
  once: the second is refused (CampaignChanged: try again), never applied
  over the first.
- Closing a campaign, or opening it again (change_state), is audited too.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from gateway.review import protocol
from gateway.review.campaigns import MAX_ITEMS, CampaignRefused, derived_seed, queue_rows, suggested_spans
from gateway.review.design import CorpusItem, assign_items, sample_entries
from gateway.review.errors import CampaignClosed
from gateway.store import RunStore
from gateway.store.reviews import CLOSED, OPEN

REVIEWERS_ADDED, ITEMS_EXTENDED, STATE_CHANGED = "reviewers_added", "items_extended", "state_changed"
# The settings a growth reads and changes: another change to them meanwhile refuses it (CampaignChanged).
_GROWN = ("reviewers", "items", "extensions")


def _open_campaign(store: RunStore, campaign_id: str) -> dict:
    campaign = store.campaign(campaign_id)  # UnknownCampaign
    if campaign["state"] != OPEN:
        raise CampaignClosed(f"campaign {campaign_id} is {campaign['state']}: reopen it before it grows")
    return campaign


def _as_read(campaign: dict) -> dict:
    return {key: campaign.get(key) for key in _GROWN}


def _rated_entries(queues: dict[str, list[tuple[str, str]]]) -> dict[str, list[str]]:
    return {reviewer: [entry_id for entry_id, kind in tasks if kind == protocol.RATE]
            for reviewer, tasks in queues.items()}


def _as_shown(tasks: list[dict]) -> tuple[list[dict], dict[str, dict | None]]:
    """What a reviewer added later gets as the others did: the gate's tasks
    (the first reviewer's, without its name) and each rated entry's
    suggestions (entry id -> {run id: spans}; None: shown without)."""
    first = tasks[0]["reviewer"] if tasks else None
    gate = [{key: value for key, value in task.items() if key != "reviewer"}
            for task in tasks if task["reviewer"] == first and task["kind"] in protocol.GATE_KINDS]
    suggested = {task["entry_id"]: task["suggestions"] for task in tasks if task["kind"] == protocol.RATE}
    return gate, suggested


def _outputs(store: RunStore, systems: list[str]) -> dict[str, dict[str, str | None]]:
    return {system: store.run_predictions(system) for system in systems}


def add_reviewers(store: RunStore, campaign_id: str, names: list[str], by: str | None) -> dict:
    """Adds reviewers to an open campaign (the module docstring's rules); the campaign as stored, with the
    items each new reviewer got in `added`."""
    campaign = _open_campaign(store, campaign_id)
    names = [name.strip() for name in names]
    if not names or any(not name for name in names) or len(set(names)) != len(names):
        raise CampaignRefused("reviewers: give one or more different token names")
    already = [name for name in names if name in campaign["reviewers"]]
    if already:
        raise CampaignRefused(f"reviewers: already in campaign {campaign_id}: {', '.join(already)}")
    rated = _rated_entries(store.campaign_queues(campaign_id))
    items = sorted({entry_id for entries in rated.values() for entry_id in entries})
    if not items:
        raise CampaignRefused(f"campaign {campaign_id}: no item to give a new reviewer")
    load = min(len(items), max(1, math.floor(np.mean([len(entries) for entries in rated.values()]) + 0.5)))
    coverage = Counter(entry_id for entries in rated.values() for entry_id in set(entries))
    tie_break = dict(zip(items, np.random.default_rng(derived_seed(campaign["seed"], REVIEWERS_ADDED,
                                                                   *names)).permutation(len(items))))
    systems = campaign["systems"]
    outputs = _outputs(store, systems)
    gate, suggested = _as_shown(store.campaign_task_rows(campaign_id))
    tasks, added = [], {}
    for name in names:
        chosen = set(sorted(items, key=lambda entry_id: (coverage[entry_id], tie_break[entry_id]))[:load])
        for entry_id in chosen:
            coverage[entry_id] += 1
        mine = [entry_id for entry_id in items if entry_id in chosen]
        tasks += [{**task, "reviewer": name} for task in gate]
        tasks += queue_rows(name, mine, systems, outputs, campaign["seed"], campaign["shares"], len(gate), (name,),
                            items, suggested)
        added[name] = len(mine)
    stored = store.grow_campaign(campaign_id, _as_read(campaign), {"reviewers": [*campaign["reviewers"], *names]},
                                 tasks, by, REVIEWERS_ADDED,
                                 {"reviewers": names, "items_each": added})
    return {**stored, "added": added}


def extend_items(store: RunStore, campaign_id: str, items: int, by: str | None) -> dict:
    """Adds `items` new entries to an open campaign (the module docstring's rules); the campaign as stored,
    with the new entry ids in `added`."""
    campaign = _open_campaign(store, campaign_id)
    if not 1 <= items <= MAX_ITEMS - campaign["items"]:
        raise CampaignRefused(f"items: must be 1 to {MAX_ITEMS - campaign['items']} (a campaign holds at most "
                              f"{MAX_ITEMS}), got {items}")
    queues = store.campaign_queues(campaign_id)
    rated = _rated_entries(queues)
    taken = {entry_id for entries in rated.values() for entry_id in entries}
    systems = campaign["systems"]
    outputs = _outputs(store, systems)
    entries = [entry for batch in store.corpus_entries(campaign["corpus_id"], campaign["corpus_version"])
               for entry in batch]
    left = [CorpusItem(entry["id"], entry.get("difficulty"), entry.get("domain")) for entry in entries
            if entry["id"] not in taken and all(outputs[system].get(entry["id"]) for system in systems)]
    if len(left) < items:
        raise CampaignRefused(f"items: {len(left)} entries of corpus {campaign['corpus_id']} with an output from "
                              f"every run are not in the campaign yet, asked for {items}")
    extension = campaign.get("extensions", 0) + 1
    seed = derived_seed(campaign["seed"], "extend", str(extension))
    sampled = sample_entries(left, items, seed)
    reviewers = campaign["reviewers"]
    seats = assign_items(sampled, reviewers, campaign["overlap"], seed)
    # The new items are shown with suggestions as the first ones were: the same share without.
    suggested = suggested_spans(store, campaign.get("prefill", protocol.PREFILL_NONE), campaign.get("prefill_share", 0.0),
                                derived_seed(seed, "prefill"), systems, outputs,
                                {entry["id"]: entry for entry in entries}, sampled)
    tasks = []
    for reviewer in reviewers:
        mine = [entry_id for entry_id in sampled if reviewer in seats[entry_id]]
        if mine:
            tasks += queue_rows(reviewer, mine, systems, outputs, campaign["seed"], campaign["shares"],
                                len(queues.get(reviewer, [])), (reviewer, "extend", str(extension)), sampled,
                                suggested)
    stored = store.grow_campaign(campaign_id, _as_read(campaign),
                                 {"items": campaign["items"] + len(sampled), "extensions": extension},
                                 tasks, by, ITEMS_EXTENDED,
                                 {"items": len(sampled), "entry_ids": sampled, "extension": extension})
    return {**stored, "added": sampled}


def change_state(store: RunStore, campaign_id: str, state: str, by: str | None) -> dict:
    """Closes a campaign (no more ratings are taken; its results stay) or opens it again, audited."""
    if state not in (OPEN, CLOSED):
        raise CampaignRefused(f"state: {OPEN} or {CLOSED}, got {state[:20]!r}")
    return store.set_campaign_state_audited(campaign_id, state, by, STATE_CHANGED)


def audit_of(store: RunStore, campaign_id: str) -> list[dict]:
    """Every change to the campaign since its creation, oldest first (who, when, what)."""
    return store.campaign_audit(campaign_id)
