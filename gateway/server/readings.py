"""Reading stored runs as a caller may: the gateway's ListRuns, GetRun and
Leaderboard and the web front's pages call these, so both front doors
apply the rules of access.py the same way (one implementation). Blocking
store calls: the gateway runs them in a worker thread."""
from __future__ import annotations

from collections import Counter, OrderedDict
from datetime import datetime
from threading import Lock

from gateway.card.breakdowns import min_shown_entries
from gateway.card.compare import ComparableRun
from gateway.card.floor import FLOOR_SLUG_PREFIX
from gateway.card.ladder import LADDER_METRIC, Rung, climb, next_rung
from gateway.review.campaigns import ReviewCache, with_review
from gateway.review.reviewing import campaigns_of
# check_maintainer and is_maintainer are also the web front's (apps/web asks
# the rules through this module, as the servicer does).
from gateway.server.access import (
    CardView,
    check_listing,
    check_maintainer,
    check_read,
    corpus_info_view,
    hidden_tiers,
    is_maintainer,
    listed_row,
    public_card,
    stored_view,
)
from gateway.server.callers import Caller, may_use_tier
from gateway.server.refusals import InvalidRequest, NotFound
from gateway.server.board_ranks import (
    LADDER_NOTE,
    MAX_RANKED_RUNS,
    group_ranks,
    ranked_group,
    ranked_metric,
    unranked_note,
    with_ranks,
)
from champollion.core.tiers import SECRET_TIERS
from gateway.store import RunStore, UnknownCorpus
from gateway.store.errors import NothingStored
from gateway.store.corpora import KEYED_TIERS, shown_version
from gateway.store.leaderboard import LADDER_DECIMALS, ladder_row
from gateway.store.submissions import reviewed_at


def _check_listing(store: RunStore, caller: Caller, dataset_id: str | None, what: str) -> None:
    """refusals.Forbidden when `caller` may not list a registered
    corpus's runs (gold: maintainers only)."""
    if dataset_id is None or is_maintainer(caller):
        return
    check_listing(caller, store.registered_tier(dataset_id), dataset_id, what)


def _few_entries(store: RunStore, caller: Caller, rows: list[dict], version: str | None,
                 tier: str | None) -> list[bool]:
    """For each of `rows`, whether its corpus is secret (its `corpus_tier`,
    else `tier`) and has fewer than k entries in its version (its
    `corpus_version`, else `version`): its scores are then functions of
    fewer than k entries. All False for maintainers."""
    if is_maintainer(caller):
        return [False] * len(rows)
    sizes: dict[tuple, int | None] = {}
    found = []
    for row in rows:
        key = (row.get("dataset_id"), row.get("corpus_version") or version)
        if (row.get("corpus_tier") or tier) not in SECRET_TIERS or not key[1]:
            found.append(False)
            continue
        if key not in sizes:
            try:
                sizes[key] = store.corpus_info(*key)["entries"]
            except UnknownCorpus:
                sizes[key] = None
        found.append(sizes[key] is not None and sizes[key] < min_shown_entries())
    return found


def _listed(store: RunStore, caller: Caller, rows: list[dict], version: str | None = None,
            tier: str | None = None, ladder_only: bool = False) -> list[dict]:
    """The rows as `caller` sees them; `ladder_only`: a secret tier's runs
    (the gateway's floor runs aside) without their scores, which reach a
    non-maintainer only through the board's Ladder (issue 33)."""
    few = _few_entries(store, caller, rows, version, tier)
    if ladder_only:
        few = [small or (row.get("corpus_tier") in SECRET_TIERS and row.get("floor_kind") is None)
               for small, row in zip(few, rows)]
    versions: dict = {}  # (dataset, version) -> secret_version, asked once per listing
    return [_with_public_ids(store, caller, listed_row(caller, row, small), versions) for row, small in zip(rows, few)]


def secret_version(store: RunStore, caller: Caller, dataset_id: str | None, version: str | None) -> dict | None:
    """The registered holdout or gold version (corpus_info) whose public id
    `caller`, not a maintainer, is shown in place of its content hash
    (issue 33: the hash confirms guessed references offline); None when the
    content hash may be shown."""
    if is_maintainer(caller) or not dataset_id or not version:
        return None
    try:
        info = store.corpus_info(dataset_id, version)
    except (UnknownCorpus, ValueError):  # not a registered version: a client-sent corpus's hash
        return None
    return info if info["tier"] in KEYED_TIERS else None


def shown_compared_version(store: RunStore, caller: Caller, version: str) -> str:
    """Compare's dataset_version as `caller` may see it: a registered holdout
    or gold version's public id for a non-maintainer, else as it is."""
    if is_maintainer(caller):
        return version
    for info in store.list_corpora():
        if info["version"] == version and info["tier"] in KEYED_TIERS:
            return shown_version(info)
    return version


def _with_public_ids(store: RunStore, caller: Caller, row: dict, versions: dict) -> dict:
    """A listing's row with a secret version's public id and fingerprint;
    `versions` remembers the versions looked up."""
    key = (row.get("dataset_id"), row.get("corpus_version"))
    if key not in versions:
        versions[key] = secret_version(store, caller, *key)
    info = versions[key]
    if info is None:
        return row
    shown = {**row, "corpus_version": shown_version(info)}
    if "fingerprint_hash" in row:
        shown["fingerprint_hash"] = None  # hashes the content hash with what the submitter knows
    return shown


def _someone_elses_secret_run(caller: Caller, run: dict) -> bool:
    """A run of a secret tier (holdout, gold) that `caller` did not submit
    (the gateway's floor runs excepted): listed to maintainers only, so that
    a listing tells nobody which runs exist beside the board's (issue 33)."""
    return (run.get("corpus_tier") in SECRET_TIERS and run.get("floor_kind") is None
            and (caller.name is None or run.get("submitted_by") != caller.name))


def runs_for(store: RunStore, caller: Caller, dataset_id: str | None = None, model_slug: str | None = None,
             limit: int | None = None) -> list[dict]:
    """ListRuns: stored runs newest first, as `caller` may see them; floor
    runs only when `model_slug` names one (floor:<kind>). On a secret tier a
    non-maintainer sees its own runs only (issue 33)."""
    _check_listing(store, caller, dataset_id, "ListRuns")
    own_only = not is_maintainer(caller)
    runs = store.list_runs(dataset_id, model_slug, limit=None if own_only else limit,
                           hidden_tiers=hidden_tiers(caller),
                           include_floor=bool(model_slug and model_slug.startswith(FLOOR_SLUG_PREFIX)))
    if own_only:
        runs = [run for run in runs if not _someone_elses_secret_run(caller, run)][:limit]
    return _listed(store, caller, runs, ladder_only=True)


def leaderboard_for(store: RunStore, caller: Caller, dataset_id: str, **options) -> dict:
    """Leaderboard: RunStore.leaderboard's board (`options` are its
    keywords) with the rows `caller` may see, each ranked row with its
    interval, rank range and cluster (board_ranks.py). A non-maintainer's
    board of a secret-tier version is the Ladder's (`ladder_board`, issue
    33), without those. refusals.InvalidRequest without a corpus id or with
    a negative limit."""
    if not dataset_id:
        raise InvalidRequest("dataset_id: required (the corpus id to rank runs of)")
    limit = options.get("limit")
    if limit is not None and limit < 0:
        raise InvalidRequest("limit: must be 0 (every row) or positive")
    _check_listing(store, caller, dataset_id, "Leaderboard")
    # The ranges count every ranked run, the page's and those below it: read
    # enough rows to hold a group ranges are computed for.
    fetched = None if limit is None else max(limit, MAX_RANKED_RUNS + 1)
    board = store.leaderboard(dataset_id, hidden_tiers=hidden_tiers(caller), **{**options, "limit": fetched})
    if not is_maintainer(caller) and _version_tier(store, dataset_id, board["corpus_version"]) in SECRET_TIERS:
        board = with_ranks(ladder_board(store, caller, dataset_id, board["corpus_version"], limit,
                                        options.get("official", False)), {}, LADDER_NOTE)
    else:
        board = _page(_ranked(store, dataset_id, board), limit)
    reviews = ReviewCache(store, [row["run_id"] for row in board["rows"]])
    rows = [{**row, "community_review": reviews.label(row["run_id"], row.get("quality_tier"))}
            for row in board["rows"]]
    info = secret_version(store, caller, dataset_id, board.get("corpus_version"))
    shown = board if info is None else {**board, "corpus_version": shown_version(info)}
    return {**shown, "rows": _listed(store, caller, rows, board.get("corpus_version"),
                                     store.registered_tier(dataset_id))}


def run_for(store: RunStore, caller: Caller, run_id: str) -> CardView:
    """GetRun: the stored card as `caller` may read it (gold: maintainers
    only; a secret tier's entries: maintainers only)."""
    tier, _ = store.run_access(run_id)
    check_read(caller, tier, "GetRun")
    card = store.get_run(run_id)
    review = ReviewCache(store, [card["run_id"]]).block(card["run_id"], card["scores"].get("quality_tier"))
    if review is not None:
        card = with_review(card, review)
    dataset = card.get("dataset") or {}
    info = secret_version(store, caller, dataset.get("id"), dataset.get("version"))
    if info is not None:
        card = public_card(card, info, caller.role)
    return stored_view(card, caller.role)


def held_runs_for(store: RunStore, caller: Caller, dataset_id: str | None = None) -> list[dict]:
    """ListHeldRuns: the runs held for review (of `dataset_id`, else all), for maintainers only."""
    check_maintainer(caller, "ListHeldRuns")
    return store.held_runs(dataset_id)


def campaigns_for(store: RunStore, caller: Caller) -> list[dict]:
    """The review campaigns `caller` may list: every one for a maintainer,
    else those it reviews in (none for a nameless caller)."""
    maintainer = is_maintainer(caller)
    mine, every = campaigns_of(store, caller.name, maintainer)  # the review rules' listing
    return every if maintainer else mine


def corpus_page_for(store: RunStore, caller: Caller, corpus_id: str) -> dict:
    """A registered corpus as the web front's corpus page shows it to
    `caller`: its versions as ListCorpora shows them (public ids and no
    reference findings on a secret tier), the latest version's mix of
    domains and difficulty tiers, and its flagged references (maintainers
    only; else None). refusals.NotFound for an unknown corpus, Forbidden
    for one `caller` may not read (gold: maintainers)."""
    versions = [corpus for corpus in store.list_corpora() if corpus["id"] == corpus_id]
    if not versions:
        raise NotFound(f"no registered corpus {corpus_id!r}")
    latest = versions[-1]
    check_read(caller, latest["tier"], "corpus page")
    mix = {"domain": Counter(), "difficulty": Counter()}
    for batch in store.corpus_entries(corpus_id, latest["version"]):
        for entry in batch:
            mix["domain"][entry.get("domain") or "—"] += 1
            mix["difficulty"][str(entry.get("difficulty") or "—")] += 1
    return {"versions": [info for info in corpora_for(store, caller) if info["id"] == corpus_id],
            "mix": {key: sorted(counter.items()) for key, counter in mix.items()},
            "flags": store.reference_flags(corpus_id) if is_maintainer(caller) else None}


def store_ready(store: RunStore) -> None:
    """The store answers (the web front's health check); StoreError otherwise."""
    store.ping()


def corpora_for(store: RunStore, caller: Caller) -> list[dict]:
    """The registered versions `caller` may list (gold: maintainers), as
    access.corpus_info_view shows them (a secret tier's check findings
    about references: maintainers only), as ListCorpora does: for the web
    front's corpus pages."""
    maintainer = is_maintainer(caller)
    return [corpus_info_view(info, maintainer) for info in store.list_corpora()
            if may_use_tier(caller.role, info["tier"])]


# --- the public board of a secret tier: the Ladder (issue 33) ------------------------------

def _version_tier(store: RunStore, dataset_id: str, version: str | None) -> str | None:
    """The registered tier of the board's corpus version (None: not registered)."""
    if version is None:
        return None
    try:
        return store.corpus_info(dataset_id, version)["tier"]
    except UnknownCorpus:
        return None


# Stored runs' statistics, the Ladders climbed and the boards' rank ranges,
# kept between board reads (a published run's entries and card change no
# more; a Ladder is keyed by its runs in order, a board's ranges by its
# state: version, metric, direction and ranked runs in order).
_CACHED = 512
_runs: OrderedDict[str, tuple[datetime | None, ComparableRun]] = OrderedDict()
_ladders: OrderedDict[tuple[str, ...], list[Rung]] = OrderedDict()
_ranks: OrderedDict[tuple, tuple[dict[str, dict], str | None]] = OrderedDict()
_cache_lock = Lock()


def _remember(cache: OrderedDict, key, value) -> None:
    with _cache_lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHED:
            cache.popitem(last=False)


def stored_comparable(store: RunStore, run_id: str) -> tuple[datetime | None, ComparableRun]:
    """A published run's publication time (when a maintainer cleared it;
    None: never held) and its per-entry statistics."""
    with _cache_lock:
        found = _runs.get(run_id)
    if found is None:
        card, entries = store.comparable_stats(run_id)
        found = (reviewed_at(card), ComparableRun.from_stored(card, entries))
        _remember(_runs, run_id, found)
    return found


def _ranked(store: RunStore, dataset_id: str, board: dict) -> dict:
    """`board` (the store's) with each row's interval, rank range and
    cluster, and why there are none (`ranks_note`)."""
    group = ranked_group(board["rows"], board["sort"])
    note = unranked_note(board["sort"], len(group))
    if note is not None:
        return with_ranks(board, {}, note)
    run_ids = tuple(row["run_id"] for row in group)
    key = (dataset_id, board["corpus_version"], board["sort"], board["descending"], run_ids)
    with _cache_lock:
        found = _ranks.get(key)
    if found is None:
        runs = [stored_comparable(store, run_id)[1] for run_id in run_ids]
        ranks, note = group_ranks(runs, [row["model_slug"] for row in group], ranked_metric(board["sort"]),
                                  board["descending"])
        found = (dict(zip(run_ids, ranks or [])), note)
        _remember(_ranks, key, found)
    return with_ranks(board, *found)


def _page(board: dict, limit: int | None) -> dict:
    """The board's first `limit` ranked rows and its floor rows (which
    `limit` never counts)."""
    if limit is None:
        return board
    ranked = [row for row in board["rows"] if not row.get("floor")][:limit]
    return {**board, "rows": ranked + [row for row in board["rows"] if row.get("floor")]}


def _published_ladder(store: RunStore, caller: Caller, dataset_id: str, version: str, official: bool = False):
    """(the store's full board, the published runs in publication order as
    (when, created_at, run_id, row, ComparableRun), their Rungs)."""
    full = store.leaderboard(dataset_id, version=version, sort=LADDER_METRIC, all_submissions=True,
                             official=official, hidden_tiers=hidden_tiers(caller))
    entrants = []
    for row in (row for row in full["rows"] if not row.get("floor")):
        published, run = stored_comparable(store, row["run_id"])
        when = published or datetime.fromisoformat(row["created_at"])
        entrants.append((when, row["created_at"], row["run_id"], row, run))
    entrants.sort(key=lambda entrant: entrant[:3])
    key = tuple(entrant[2] for entrant in entrants)
    with _cache_lock:
        rungs = _ladders.get(key)
    if rungs is None:
        rungs = climb([entrant[4] for entrant in entrants], list(key))
        _remember(_ladders, key, rungs)
    return full, entrants, rungs


def ladder_release(store: RunStore, caller: Caller, dataset_id: str, version: str, run_id: str,
                   rows: list[tuple[str, dict]]) -> dict:
    """What the Ladder releases to a non-maintainer about a new run on a
    secret-tier version, in place of its scores (redaction.ladder_only): the
    Rung it gets entering the Ladder after the version's published runs, as
    if it were published next. `rows`: (entry id, {LADDER_METRIC:
    statistics}) per entry. A version of fewer than k entries releases no
    value. One paired bootstrap against the leader, the published runs'
    Rungs being cached per board."""
    try:
        _, entrants, rungs = _published_ladder(store, caller, dataset_id, version)
    except NothingStored:  # the version's first run: nothing published yet
        entrants, rungs = [], []
    run = ComparableRun.from_rows(version, None, {}, rows)
    rung = next_rung([entrant[4] for entrant in entrants], rungs, run_id, run)
    small = store.corpus_info(dataset_id, version)["entries"] < min_shown_entries()
    released = None if small or rung.released is None else round(rung.released, LADDER_DECIMALS)
    margin = None if small or rung.margin is None else round(rung.margin, LADDER_DECIMALS)
    return {"metric": LADDER_METRIC, "released": released, "stepped": rung.stepped, "margin": margin}


def ladder_board(store: RunStore, caller: Caller, dataset_id: str, version: str, limit: int | None,
                 official: bool) -> dict:
    """The public board of a secret-tier corpus version (gateway/card/ladder.py):
    every published run (not held, not disqualified; every submission, not
    one per fingerprint) enters the Ladder in the order it was published
    (cleared by a maintainer, or stored when it was never held); the rows are
    the runs that took the lead, newest first, each with the value the
    Ladder released for it and nothing computed from the references besides.
    The floor runs follow as on every board. The sort and the submission and
    disqualified flags do not apply: there is one Ladder."""
    full, entrants, rungs = _published_ladder(store, caller, dataset_id, version, official)
    floor = [row for row in full["rows"] if row.get("floor")]
    steps = [(entrant[3], rung) for entrant, rung in zip(entrants, rungs) if rung.stepped]
    # A version of fewer than k entries releases no value at all (its rows' other
    # columns are nulled as every listing's are, `_listed`).
    small = store.corpus_info(dataset_id, full["corpus_version"])["entries"] < min_shown_entries()
    rows = [ladder_row(rank, row, LADDER_METRIC, None if small else rung.released, None if small else rung.margin)
            for rank, (row, rung) in enumerate(reversed(steps), start=1)]
    if limit is not None:
        rows = rows[:limit]
    return {"dataset_id": dataset_id, "corpus_version": full["corpus_version"], "sort": LADDER_METRIC,
            "descending": True, "ladder": True, "rows": rows + floor}
