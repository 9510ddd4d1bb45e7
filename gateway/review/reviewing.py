"""The review rules the front doors apply, in one place (issue 35): who may
rate a campaign, what a reviewer's page shows, when ratings are taken, the
gate before an ESA or MQM campaign, and reference flags. The web front and
the gateway call these and map the domain errors (gateway/review/errors.py)
to their statuses; they decide nothing themselves. Blocking store calls."""
from __future__ import annotations

from datetime import datetime, timezone

from gateway.review import protocol
from gateway.review.campaigns import results_of
from gateway.review.errors import CampaignRefused, NotAReviewer, NotNow
from gateway.review.gate import gate_failures
from gateway.review.ratings import check_flag, checked_ratings
from gateway.store import RunStore
from gateway.store.reviews import OPEN


def reviewer_of(campaign: dict, name: str | None) -> str:
    """`name` when it is one of the campaign's reviewers."""
    if name is None or name not in campaign["reviewers"]:
        raise NotAReviewer(f"campaign {campaign['campaign_id']}: token {name!r} is not one of its reviewers")
    return name


def campaigns_of(store: RunStore, name: str | None, maintainer: bool) -> tuple[list[dict], list[dict]]:
    """(the campaigns `name` reviews, every campaign for a maintainer)."""
    mine = store.list_campaigns(reviewer=name) if name else []
    return mine, store.list_campaigns() if maintainer else []


def campaign_with_flags(store: RunStore, campaign_id: str) -> tuple[dict, list[dict]]:
    """A maintainer's view: the campaign with its results, and the flags on its corpus's references."""
    campaign = results_of(store, campaign_id)
    return campaign, store.reference_flags(campaign["corpus_id"], campaign["corpus_version"])


def next_item(store: RunStore, campaign_id: str, name: str | None) -> tuple[dict, dict | None]:
    """(the campaign, the reviewer's progress: `next` is where to resume, None when done)."""
    campaign = store.campaign(campaign_id)
    return campaign, store.reviewer_progress(campaign_id).get(reviewer_of(campaign, name))


def _gate_open(store: RunStore, campaign_id: str, reviewer: str, task: dict) -> None:
    """Refuses a campaign item while a gate item of the reviewer's is not passed."""
    if task["kind"] in protocol.GATE_KINDS:
        return
    progress = store.reviewer_progress(campaign_id)[reviewer]
    if progress["next"] is not None and progress["next"] < task["position"]:
        first = store.review_task(campaign_id, reviewer, progress["next"])
        if first["kind"] in protocol.GATE_KINDS:
            raise NotNow(f"campaign {campaign_id}: pass the {first['kind']} item (item {first['position'] + 1}) "
                         f"before the campaign's items")


def item_page(store: RunStore, campaign_id: str, name: str | None, position: int) -> dict:
    """What a reviewer's page shows of one item: the campaign, the task
    (without a gate item's expected answer), the reviewer's progress, the
    reference (only once the item is rated: source-based assessment), and
    the time the page was opened (sent back with the ratings: the item's
    start)."""
    campaign = store.campaign(campaign_id)
    reviewer = reviewer_of(campaign, name)
    task = store.review_task(campaign_id, reviewer, position)
    _gate_open(store, campaign_id, reviewer, task)
    shown = {key: value for key, value in task.items() if key != "expected"}
    suggestions = task["suggestions"] or {}
    shown["suggested"] = [suggestions.get(system) or [] for system in task["systems"]]
    reference = task["reference"] if campaign["reference_review"] and task["done"] else None
    return {"campaign": campaign, "task": shown, "progress": store.reviewer_progress(campaign_id)[reviewer],
            "reference": reference, "opened_at": datetime.now(timezone.utc).isoformat(),
            "protocol": campaign.get("protocol", protocol.DA)}


def _started_at(text, campaign: dict) -> datetime | None:
    """The item's start as the page sent it back: not before the campaign, not in the future."""
    if text in (None, ""):
        return None
    try:
        started = datetime.fromisoformat(str(text))
    except ValueError:
        raise CampaignRefused("opened_at: an ISO 8601 time (the page's own)") from None
    if started.tzinfo is None:
        raise CampaignRefused("opened_at: a time with its UTC offset")
    if not datetime.fromisoformat(campaign["created_at"]) <= started <= datetime.now(timezone.utc):
        raise CampaignRefused("opened_at: between the campaign's creation and now")
    return started


def rate(store: RunStore, campaign_id: str, name: str | None, position: int, body: dict) -> dict:
    """Checks and stores a reviewer's ratings of one item ({ratings: [one
    per output shown], opened_at}). On an open campaign only; a campaign
    item only after the gate is passed. A gate item that is answered too far
    from its expected answer is not stored: the answer says why
    ({passed: false, reasons}), and the reviewer tries again."""
    campaign = store.campaign(campaign_id)
    reviewer = reviewer_of(campaign, name)
    if campaign["state"] != OPEN:
        raise NotNow(f"campaign {campaign_id} is {campaign['state']}")
    task = store.review_task(campaign_id, reviewer, position)
    _gate_open(store, campaign_id, reviewer, task)
    systems, sent = task["systems"], body.get("ratings")
    if not isinstance(sent, list) or len(sent) != len(systems):
        raise CampaignRefused(f"ratings: one per output shown ({len(systems)})")
    ratings = checked_ratings(systems, {system: rating if isinstance(rating, dict) else {}
                                        for system, rating in zip(systems, sent)},
                              task["outputs"], campaign.get("protocol", protocol.DA), task["suggestions"])
    started_at = _started_at(body.get("opened_at"), campaign)
    if task["expected"] is not None:
        only = ratings[systems[0]]
        reasons = gate_failures(task["expected"], only["score"], only["spans"])
        if reasons:
            return {"passed": False, "reasons": reasons, "kind": task["kind"]}
    store.save_ratings(campaign_id, reviewer, position, ratings, started_at)
    progress = store.reviewer_progress(campaign_id)[reviewer]
    answer = {"saved": position, "next": progress["next"], "done": progress["done"], "tasks": progress["tasks"]}
    if task["expected"] is not None:
        answer["passed"] = True
    if campaign["reference_review"]:
        answer["reference"] = task["reference"]
    return answer


def flag_reference(store: RunStore, campaign_id: str, name: str | None, position: int, flag: str,
                   note: str) -> str | None:
    """A reviewer's flag on the reference of an item already rated (an empty
    flag takes it back), in a campaign that reviews references."""
    campaign = store.campaign(campaign_id)
    reviewer = reviewer_of(campaign, name)
    if not campaign["reference_review"]:
        raise NotNow(f"campaign {campaign_id} does not review references")
    task = store.review_task(campaign_id, reviewer, position)
    if not task["done"]:
        raise NotNow("rate the item before flagging its reference")
    if not flag:
        store.unflag_reference(campaign["corpus_id"], campaign["corpus_version"], task["entry_id"], reviewer)
        return None
    check_flag(flag, note)
    store.flag_reference(campaign["corpus_id"], campaign["corpus_version"], task["entry_id"], reviewer, flag, note,
                         campaign_id)
    return flag
