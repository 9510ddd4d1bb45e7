"""Community review campaigns in the store (migration 0005; issue 28): a
campaign, each reviewer's queue of tasks, the ratings and the reviewers'
flags on references. What a task shows is read from the registered corpus
(the source, and the reference for reference review) and from the stored
runs (each system's output).

Queries on a connection the RunStore hands over, as leaderboard.py's. The
campaign's design (sampling, queues, controls) is gateway/review's."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from gateway.store.errors import CampaignChanged, UnknownCampaign, UnknownTask
from gateway.store.rows import utc
from gateway.store.tables import (
    corpus_entries,
    reference_flags,
    review_audit,
    review_campaigns,
    review_ratings,
    review_tasks,
    run_entries,
    runs,
)

OPEN, CLOSED = "open", "closed"


def _campaign_dict(row) -> dict:
    return {"campaign_id": row.campaign_id, "name": row.name, "corpus_id": row.corpus_id,
            "corpus_version": row.corpus_version, "created_at": utc(row.created_at).isoformat(),
            "created_by": row.created_by, "state": row.state, **row.settings}


def save_campaign(connection: Connection, campaign: dict, tasks: list[dict], now: datetime) -> dict:
    """Stores a campaign ({campaign_id, name, corpus_id, corpus_version,
    created_by, settings}) with every reviewer's tasks ({reviewer, position,
    entry_id, kind, systems, degraded, degraded_text}, and optionally
    suggestions and expected)."""
    connection.execute(insert(review_campaigns), [{**campaign, "created_at": now, "state": OPEN}])
    if tasks:
        connection.execute(insert(review_tasks), [
            {"suggestions": None, "expected": None, **task, "campaign_id": campaign["campaign_id"], "done_at": None}
            for task in tasks])
    return campaign_info(connection, campaign["campaign_id"])


def campaign_info(connection: Connection, campaign_id: str) -> dict:
    row = connection.execute(select(review_campaigns).where(review_campaigns.c.campaign_id == campaign_id)).first()
    if row is None:
        raise UnknownCampaign(campaign_id)
    return _campaign_dict(row)


def list_campaigns(connection: Connection, reviewer: str | None = None) -> list[dict]:
    """Every campaign, newest first (only those with tasks for `reviewer`
    when given), each with its progress: tasks done of all."""
    query = select(review_campaigns).order_by(review_campaigns.c.created_at.desc(), review_campaigns.c.campaign_id)
    progress = select(review_tasks.c.campaign_id, func.count().label("tasks"),
                      func.count(review_tasks.c.done_at).label("done")).group_by(review_tasks.c.campaign_id)
    if reviewer is not None:
        progress = progress.where(review_tasks.c.reviewer == reviewer)
    counts = {row.campaign_id: (row.done, row.tasks) for row in connection.execute(progress)}
    found = []
    for row in connection.execute(query):
        if reviewer is not None and row.campaign_id not in counts:
            continue
        done, total = counts.get(row.campaign_id, (0, 0))
        found.append({**_campaign_dict(row), "tasks_done": done, "tasks": total})
    return found


def set_state(connection: Connection, campaign_id: str, state: str) -> dict:
    campaign_info(connection, campaign_id)
    connection.execute(update(review_campaigns).where(review_campaigns.c.campaign_id == campaign_id)
                       .values(state=state))
    return campaign_info(connection, campaign_id)


def reviewer_progress(connection: Connection, campaign_id: str) -> dict[str, dict]:
    """Reviewer -> {done, tasks, next}: `next` is the first task not done
    (None when the queue is finished), where a reload resumes."""
    rows = connection.execute(
        select(review_tasks.c.reviewer, review_tasks.c.position, review_tasks.c.done_at)
        .where(review_tasks.c.campaign_id == campaign_id).order_by(review_tasks.c.reviewer, review_tasks.c.position))
    progress: dict[str, dict] = {}
    for row in rows:
        entry = progress.setdefault(row.reviewer, {"done": 0, "tasks": 0, "next": None})
        entry["tasks"] += 1
        if row.done_at is not None:
            entry["done"] += 1
        elif entry["next"] is None:
            entry["next"] = row.position
    return progress


def _task_row(connection: Connection, campaign_id: str, reviewer: str, position: int):
    row = connection.execute(select(review_tasks).where(
        review_tasks.c.campaign_id == campaign_id, review_tasks.c.reviewer == reviewer,
        review_tasks.c.position == position)).first()
    if row is None:
        raise UnknownTask(campaign_id, reviewer, position)
    return row


def task(connection: Connection, campaign_id: str, reviewer: str, position: int) -> dict:
    """What one task shows: the source, each system's output in the order
    shown (a control's degraded one replaced), the reference (for reference
    review: the caller decides whether to show it), and the reviewer's
    ratings of it so far."""
    campaign = campaign_info(connection, campaign_id)
    row = _task_row(connection, campaign_id, reviewer, position)
    entry = connection.scalar(select(corpus_entries.c.entry).where(
        corpus_entries.c.corpus_id == campaign["corpus_id"], corpus_entries.c.version == campaign["corpus_version"],
        corpus_entries.c.entry_id == row.entry_id))
    outputs = dict(connection.execute(
        select(run_entries.c.run_id, run_entries.c.prediction)
        .where(run_entries.c.run_id.in_(row.systems), run_entries.c.entry_id == row.entry_id)).all())
    if row.degraded is not None:
        outputs[row.degraded] = row.degraded_text
    ratings = {rating.system: {"score": rating.score, "usable": rating.usable, "spans": rating.spans,
                               "decisions": rating.decisions,
                               "started_at": None if rating.started_at is None else utc(rating.started_at).isoformat(),
                               "rated_at": utc(rating.rated_at).isoformat()}
               for rating in connection.execute(select(review_ratings).where(
                   review_ratings.c.campaign_id == campaign_id, review_ratings.c.reviewer == reviewer,
                   review_ratings.c.position == position))}
    flag = connection.execute(select(reference_flags.c.flag, reference_flags.c.note).where(
        reference_flags.c.corpus_id == campaign["corpus_id"],
        reference_flags.c.corpus_version == campaign["corpus_version"],
        reference_flags.c.entry_id == row.entry_id, reference_flags.c.reviewer == reviewer)).first()
    return {
        "campaign_id": campaign_id, "reviewer": reviewer, "position": position, "entry_id": row.entry_id,
        "kind": row.kind, "done": row.done_at is not None,
        "source": (entry or {}).get("source", ""), "reference": (entry or {}).get("reference", ""),
        # Blind: the page numbers the outputs; the run ids stay server side.
        "systems": list(row.systems), "outputs": [outputs.get(system) or "" for system in row.systems],
        "ratings": ratings, "flag": None if flag is None else {"flag": flag.flag, "note": flag.note},
        # Null: shown without suggestions; a gate item's expected answer (the caller keeps it from the page).
        "suggestions": row.suggestions, "expected": row.expected,
        "document": _document_context(connection, campaign, row.entry_id, (entry or {})),
    }


# Entries of the same document shown around an item, on each side.
CONTEXT_ENTRIES = 2


def document_id(entry: dict) -> str | None:
    """The document a corpus entry comes from: its provenance's `source_doc`
    (SPEC §9's field; a string provenance is read into it); None without."""
    document = (entry.get("provenance") or {}).get("source_doc")
    return None if document in (None, "") else str(document)


def _document_context(connection: Connection, campaign: dict, entry_id: str, entry: dict) -> dict | None:
    """The sources of the entries next to this one in corpus order that
    carry the same document id (`provenance.source_doc`): {doc_id, before,
    after}; None when the entry carries no document id."""
    document = document_id(entry)
    if document is None:
        return None
    key = (corpus_entries.c.corpus_id == campaign["corpus_id"], corpus_entries.c.version == campaign["corpus_version"])
    position = connection.scalar(select(corpus_entries.c.position).where(*key, corpus_entries.c.entry_id == entry_id))
    rows = connection.execute(select(corpus_entries.c.position, corpus_entries.c.entry).where(
        *key, corpus_entries.c.position.between(position - CONTEXT_ENTRIES, position + CONTEXT_ENTRIES))
        .order_by(corpus_entries.c.position)).all()
    same = [(row.position, row.entry.get("source", "")) for row in rows
            if row.position != position and document_id(row.entry) == document]
    return {"doc_id": document, "before": [text for at, text in same if at < position],
            "after": [text for at, text in same if at > position]}


def save_ratings(connection: Connection, campaign_id: str, reviewer: str, position: int, ratings: dict[str, dict],
                 now: datetime, started_at: datetime | None = None) -> None:
    """Replaces the reviewer's ratings of one task ({system: {score, usable,
    spans, decisions}}, every system shown; `started_at`: when the item was
    opened) and marks the task done, in the caller's transaction: a task is
    rated whole or not at all."""
    row = _task_row(connection, campaign_id, reviewer, position)
    key = and_(review_ratings.c.campaign_id == campaign_id, review_ratings.c.reviewer == reviewer,
               review_ratings.c.position == position)
    connection.execute(delete(review_ratings).where(key))
    connection.execute(insert(review_ratings), [
        {"campaign_id": campaign_id, "reviewer": reviewer, "position": position, "system": system,
         "score": ratings[system]["score"], "usable": ratings[system].get("usable"),
         "spans": ratings[system].get("spans") or [], "rated_at": now, "started_at": started_at,
         "decisions": ratings[system].get("decisions")}
        for system in row.systems])
    connection.execute(update(review_tasks).where(
        review_tasks.c.campaign_id == campaign_id, review_tasks.c.reviewer == reviewer,
        review_tasks.c.position == position).values(done_at=now))


def ratings(connection: Connection, campaign_id: str) -> list[dict]:
    """Every rating of the campaign with its task's entry, kind and whether
    the rated output was the degraded one."""
    rows = connection.execute(
        select(review_ratings.c.reviewer, review_ratings.c.system, review_ratings.c.score, review_ratings.c.usable,
               review_ratings.c.spans, review_tasks.c.entry_id, review_tasks.c.kind, review_tasks.c.degraded)
        .join(review_tasks, and_(review_tasks.c.campaign_id == review_ratings.c.campaign_id,
                                 review_tasks.c.reviewer == review_ratings.c.reviewer,
                                 review_tasks.c.position == review_ratings.c.position))
        .where(review_ratings.c.campaign_id == campaign_id)
        .order_by(review_ratings.c.reviewer, review_ratings.c.position, review_ratings.c.system))
    return [{"reviewer": row.reviewer, "system": row.system, "score": row.score, "usable": row.usable,
             "spans": row.spans, "entry_id": row.entry_id, "kind": row.kind,
             "degraded": row.degraded == row.system} for row in rows]


def campaigns_of_runs(connection: Connection, run_ids: list[str]) -> dict[str, list[str]]:
    """Run id -> the campaigns (ids) that review it."""
    found: dict[str, list[str]] = {run_id: [] for run_id in run_ids}
    for row in connection.execute(select(review_campaigns.c.campaign_id, review_campaigns.c.settings)
                                  .order_by(review_campaigns.c.created_at)):
        for system in row.settings.get("systems", []):
            if system in found:
                found[system].append(row.campaign_id)
    return found


def predictions(connection: Connection, run_id: str) -> dict[str, str | None]:
    """Entry id -> the stored output of run `run_id`."""
    return dict(connection.execute(select(run_entries.c.entry_id, run_entries.c.prediction)
                                   .where(run_entries.c.run_id == run_id)).all())


def entry_scores(connection: Connection, run_id: str) -> dict[str, dict]:
    """Entry id -> the entry's stored values (run_entries.scores) of run `run_id`."""
    return dict(connection.execute(select(run_entries.c.entry_id, run_entries.c.scores)
                                   .where(run_entries.c.run_id == run_id)).all())


def run_versions(connection: Connection, run_ids: list[str]) -> dict[str, tuple[str, str, str | None]]:
    """Run id -> (dataset id, corpus version, model slug) of stored runs."""
    return {row.run_id: (row.dataset_id, row.corpus_version, row.model_slug) for row in connection.execute(
        select(runs.c.run_id, runs.c.dataset_id, runs.c.corpus_version, runs.c.model_slug)
        .where(runs.c.run_id.in_(run_ids)))}


def flag_reference(connection: Connection, corpus_id: str, version: str, entry_id: str, reviewer: str, flag: str,
                   note: str, campaign_id: str | None, now: datetime) -> None:
    """Records (or replaces) `reviewer`'s flag on an entry's reference."""
    key = and_(reference_flags.c.corpus_id == corpus_id, reference_flags.c.corpus_version == version,
               reference_flags.c.entry_id == entry_id, reference_flags.c.reviewer == reviewer)
    connection.execute(delete(reference_flags).where(key))
    connection.execute(insert(reference_flags), [{
        "corpus_id": corpus_id, "corpus_version": version, "entry_id": entry_id, "reviewer": reviewer,
        "flag": flag, "note": note, "campaign_id": campaign_id, "created_at": now}])


def unflag_reference(connection: Connection, corpus_id: str, version: str, entry_id: str, reviewer: str) -> None:
    connection.execute(delete(reference_flags).where(
        reference_flags.c.corpus_id == corpus_id, reference_flags.c.corpus_version == version,
        reference_flags.c.entry_id == entry_id, reference_flags.c.reviewer == reviewer))


def flags(connection: Connection, corpus_id: str | None = None, version: str | None = None) -> list[dict]:
    """Reference flags, by corpus, version and entry."""
    query = select(reference_flags).order_by(reference_flags.c.corpus_id, reference_flags.c.corpus_version,
                                             reference_flags.c.entry_id, reference_flags.c.reviewer)
    if corpus_id is not None:
        query = query.where(reference_flags.c.corpus_id == corpus_id)
    if version is not None:
        query = query.where(reference_flags.c.corpus_version == version)
    return [{**row._asdict(), "created_at": utc(row.created_at).isoformat()} for row in connection.execute(query)]


def rated_outputs(connection: Connection, campaign_id: str, kind: str) -> list[dict]:
    """What the detectors' report reads (gateway/review/detectors.py), one row
    per rating of a `kind` task: reviewer, entry id, system, score, spans,
    decisions, `suggestions` (those shown; None when the item was shown
    without), and the rated output, its source and its entry's stored values
    (`scores`), from which the detectors' would-be suggestions are found."""
    campaign = campaign_info(connection, campaign_id)
    rows = connection.execute(
        select(review_ratings.c.reviewer, review_ratings.c.system, review_ratings.c.score, review_ratings.c.spans,
               review_ratings.c.decisions, review_tasks.c.entry_id, review_tasks.c.suggestions)
        .join(review_tasks, and_(review_tasks.c.campaign_id == review_ratings.c.campaign_id,
                                 review_tasks.c.reviewer == review_ratings.c.reviewer,
                                 review_tasks.c.position == review_ratings.c.position))
        .where(review_ratings.c.campaign_id == campaign_id, review_tasks.c.kind == kind)
        .order_by(review_ratings.c.reviewer, review_ratings.c.position, review_ratings.c.system)).all()
    entry_ids = sorted({row.entry_id for row in rows})
    stored = {(row.run_id, row.entry_id): (row.prediction, row.scores) for row in connection.execute(
        select(run_entries.c.run_id, run_entries.c.entry_id, run_entries.c.prediction, run_entries.c.scores)
        .where(run_entries.c.run_id.in_(campaign.get("systems", [])), run_entries.c.entry_id.in_(entry_ids)))}
    sources = {row.entry_id: (row.entry or {}).get("source", "") for row in connection.execute(
        select(corpus_entries.c.entry_id, corpus_entries.c.entry).where(
            corpus_entries.c.corpus_id == campaign["corpus_id"],
            corpus_entries.c.version == campaign["corpus_version"], corpus_entries.c.entry_id.in_(entry_ids)))}
    found = []
    for row in rows:
        prediction, scores = stored.get((row.system, row.entry_id), (None, None))
        found.append({"reviewer": row.reviewer, "entry_id": row.entry_id, "system": row.system, "score": row.score,
                      "spans": row.spans or [], "decisions": row.decisions or [],
                      "suggestions": None if row.suggestions is None else row.suggestions.get(row.system, []),
                      "output": prediction or "", "source": sources.get(row.entry_id, ""), "scores": scores or {}})
    return found


# --- campaigns that grow (issue 36; gateway/review/growth.py): reviewers added, items extended, every change audited --

def queues(connection: Connection, campaign_id: str) -> dict[str, list[tuple[str, str]]]:
    """Reviewer -> (entry id, kind) of each of its tasks, in queue order."""
    campaign_info(connection, campaign_id)
    found: dict[str, list[tuple[str, str]]] = {}
    for row in connection.execute(
            select(review_tasks.c.reviewer, review_tasks.c.entry_id, review_tasks.c.kind)
            .where(review_tasks.c.campaign_id == campaign_id)
            .order_by(review_tasks.c.reviewer, review_tasks.c.position)):
        found.setdefault(row.reviewer, []).append((row.entry_id, row.kind))
    return found


def task_rows(connection: Connection, campaign_id: str) -> list[dict]:
    """Every task of a campaign (reviewer, position, entry id, kind, systems,
    degraded and its text, suggestions, expected), by reviewer and position."""
    campaign_info(connection, campaign_id)
    columns = [review_tasks.c[name] for name in ("reviewer", "position", "entry_id", "kind", "systems", "degraded",
                                                 "degraded_text", "suggestions", "expected")]
    return [dict(row) for row in connection.execute(
        select(*columns).where(review_tasks.c.campaign_id == campaign_id)
        .order_by(review_tasks.c.reviewer, review_tasks.c.position)).mappings()]


def grow(connection: Connection, campaign_id: str, expected: dict, changes: dict, tasks: list[dict],
         by: str | None, action: str, details: dict, now: datetime) -> dict:
    """In the caller's transaction: the campaign's settings changed by `changes`, its new tasks (appended to
    queues: positions after the reviewer's last) and the audit row saying who changed what; ratings are never
    touched. CampaignChanged when a setting is no longer as `expected` (another change came first), the
    campaign's row locked meanwhile (PostgreSQL; SQLite has one writer at a time)."""
    row = connection.execute(select(review_campaigns.c.settings, review_campaigns.c.state)
                             .where(review_campaigns.c.campaign_id == campaign_id).with_for_update()).first()
    if row is None:
        raise UnknownCampaign(campaign_id)
    current = row.settings
    # Closed, or anything grown, since the change was prepared: refused, not applied.
    if row.state != OPEN or any(current.get(key) != value for key, value in expected.items()):
        raise CampaignChanged(f"campaign {campaign_id} changed while this change was prepared: try again")
    settings = {**current, **changes}
    connection.execute(update(review_campaigns).where(review_campaigns.c.campaign_id == campaign_id)
                       .values(settings=settings))
    if tasks:
        connection.execute(insert(review_tasks), [{**task, "campaign_id": campaign_id, "done_at": None}
                                                  for task in tasks])
    connection.execute(insert(review_audit), [{"campaign_id": campaign_id, "at": now, "by": by, "action": action,
                                               "details": details}])
    return campaign_info(connection, campaign_id)


def audit(connection: Connection, campaign_id: str) -> list[dict]:
    """The campaign's changes since its creation, oldest first: {at, by, action, details}."""
    campaign_info(connection, campaign_id)
    rows = connection.execute(select(review_audit).where(review_audit.c.campaign_id == campaign_id)
                              .order_by(review_audit.c.at, review_audit.c.audit_id))
    return [{"at": utc(row.at).isoformat(), "by": row.by, "action": row.action, "details": row.details}
            for row in rows]


def export_rows(connection: Connection, campaign_id: str) -> list[dict]:
    """Every rating of the campaign as an export writes it (gateway/review/exports.py): the rating with its
    spans and times, its task's entry, kind, degraded run and the degraded text shown."""
    campaign_info(connection, campaign_id)
    rows = connection.execute(
        select(review_ratings.c.reviewer, review_ratings.c.position, review_ratings.c.system,
               review_ratings.c.score, review_ratings.c.usable, review_ratings.c.spans, review_ratings.c.started_at,
               review_ratings.c.rated_at, review_tasks.c.entry_id, review_tasks.c.kind, review_tasks.c.degraded,
               review_tasks.c.degraded_text)
        .join(review_tasks, and_(review_tasks.c.campaign_id == review_ratings.c.campaign_id,
                                 review_tasks.c.reviewer == review_ratings.c.reviewer,
                                 review_tasks.c.position == review_ratings.c.position))
        .where(review_ratings.c.campaign_id == campaign_id)
        .order_by(review_ratings.c.reviewer, review_ratings.c.position, review_ratings.c.system))
    return [{"reviewer": row.reviewer, "position": row.position, "system": row.system, "score": row.score,
             "usable": row.usable, "spans": row.spans or [],
             "started_at": utc(row.started_at).isoformat() if row.started_at is not None else None,
             "rated_at": utc(row.rated_at).isoformat(), "entry_id": row.entry_id, "kind": row.kind,
             "degraded": row.degraded == row.system,
             "degraded_text": row.degraded_text if row.degraded == row.system else None} for row in rows]


def set_state_audited(connection: Connection, campaign_id: str, state: str, by: str | None, action: str,
                      now: datetime) -> dict:
    """set_state, and an audit row named `action` when the state changes (from, to), in the caller's transaction."""
    before = campaign_info(connection, campaign_id)["state"]
    changed = set_state(connection, campaign_id, state)
    if before != state:
        connection.execute(insert(review_audit), [{"campaign_id": campaign_id, "at": now, "by": by,
                                                   "action": action, "details": {"from": before, "to": state}}])
    return changed
