"""Reading stored runs as a caller may: the gateway's ListRuns, GetRun and
Leaderboard and the web front's pages call these, so both front doors
apply the rules of access.py the same way (one implementation). Blocking
store calls: the gateway runs them in a worker thread."""
from __future__ import annotations

from gateway.card.floor import FLOOR_SLUG_PREFIX
from gateway.review.campaigns import ReviewCache, with_review
from gateway.server.access import (
    CardView,
    check_listing,
    check_read,
    hidden_tiers,
    is_maintainer,
    listed_row,
    stored_view,
)
from gateway.server.auth import Caller
from gateway.store import RunStore


def _check_listing(store: RunStore, caller: Caller, dataset_id: str | None, what: str) -> None:
    """Refused (access.Refused) when `caller` may not list a registered
    corpus's runs (gold: maintainers only)."""
    if dataset_id is None or is_maintainer(caller):
        return
    check_listing(caller, store.registered_tier(dataset_id), dataset_id, what)


def runs_for(store: RunStore, caller: Caller, dataset_id: str | None = None, model_slug: str | None = None,
             limit: int | None = None) -> list[dict]:
    """ListRuns: stored runs newest first, as `caller` may see them; floor
    runs only when `model_slug` names one (floor:<kind>)."""
    _check_listing(store, caller, dataset_id, "ListRuns")
    runs = store.list_runs(dataset_id, model_slug, limit=limit, hidden_tiers=hidden_tiers(caller),
                           include_floor=bool(model_slug and model_slug.startswith(FLOOR_SLUG_PREFIX)))
    return [listed_row(caller, run) for run in runs]


def leaderboard_for(store: RunStore, caller: Caller, dataset_id: str, **options) -> dict:
    """Leaderboard: RunStore.leaderboard's board (`options` are its
    keywords) with the rows `caller` may see."""
    _check_listing(store, caller, dataset_id, "Leaderboard")
    board = store.leaderboard(dataset_id, hidden_tiers=hidden_tiers(caller), **options)
    reviews = ReviewCache(store, [row["run_id"] for row in board["rows"]])
    rows = [{**row, "community_review": reviews.label(row["run_id"], row.get("quality_tier"))}
            for row in board["rows"]]
    return {**board, "rows": [listed_row(caller, row) for row in rows]}


def run_for(store: RunStore, caller: Caller, run_id: str) -> CardView:
    """GetRun: the stored card as `caller` may read it (gold: maintainers
    only; a secret tier's entries: maintainers only)."""
    tier, _ = store.run_access(run_id)
    check_read(caller, tier, "GetRun")
    card = store.get_run(run_id)
    review = ReviewCache(store, [card["run_id"]]).block(card["run_id"], card["scores"].get("quality_tier"))
    if review is not None:
        card = with_review(card, review)
    return stored_view(card, caller.role)
