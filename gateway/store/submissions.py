"""Submissions to secret-tier corpora (issue 26; seed 001 §8.2): each one
counted against its token's budget for the corpus version before it is
scored, with a hash of each entry's prediction so that a submission whose
predictions differ from an earlier one's in few entries (a probe of the
references) is told apart; and the review of runs held for a maintainer.

Queries on a connection the RunStore hands over, as leaderboard.py's."""
from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy import Connection, func, insert, select, text, update

from gateway.store.errors import BudgetSpent, NotHeld, UnknownRun
from gateway.store.rows import utc
from gateway.store.tables import runs, submissions

# Hex digits of one entry's prediction hash (32 bits: two different
# predictions collide once in four billion entries).
HASH_CHARS = 8
# Review states of a run (column runs.review, integrity.review).
HELD, CLEARED, DISQUALIFIED = "held", "cleared", "disqualified"
DECISIONS = {"clear": CLEARED, "disqualify": DISQUALIFIED}


@dataclass(frozen=True)
class Budget:
    """How much one token may submit to one secret-tier corpus version:
    `limit` submissions in any `window`; a submission whose predictions
    differ from one of the version's `history` latest submissions (any age,
    whichever token sent it: issue 33) in at most max(`near_entries`,
    `near_share` of the entries) is a near-duplicate."""
    limit: int
    window: timedelta
    near_entries: int
    near_share: float
    history: int = 1000

    def near_threshold(self, entries: int) -> int:
        return max(self.near_entries, math.ceil(self.near_share * entries))


@dataclass(frozen=True)
class Admitted:
    """A submission counted: its id, its place in the window (1 = first),
    and the earlier run (or submission) it nearly duplicates, if any, with
    the token that sent that one when it is another (None: the same)."""
    submission_id: str
    used: int
    limit: int
    near_duplicate_of: str | None
    changed_entries: int | None
    near_duplicate_token: str | None = None


def _lock(connection: Connection, key: str) -> None:
    """Two gateways admitting submissions to one version at once must not
    both take a token's last one, nor miss each other's near-duplicates (a
    gateway serialises its own, gateway/server)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"submission:{key}"})


def _hashes(digests: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(digests), dtype=np.uint32)


def admit(connection: Connection, token: str, corpus_id: str, version: str, digests: str, now: datetime,
          budget: Budget) -> Admitted:
    """Counts a submission of `token` to a corpus version whose predictions
    hash to `digests` (HASH_CHARS hex digits per entry, corpus order).
    BudgetSpent when the token's window is full; nothing is recorded then."""
    # One lock per version, not per token: two tokens' submissions of the same
    # predictions at once must see each other (probing across tokens).
    _lock(connection, version)
    mine = (submissions.c.token == token) & (submissions.c.corpus_version == version)
    in_window = connection.execute(
        select(submissions.c.created_at).where(mine, submissions.c.created_at > now - budget.window)
        .order_by(submissions.c.created_at)).scalars().all()
    if len(in_window) >= budget.limit:
        # The window frees a place once enough of its oldest submissions have left it.
        leaving = in_window[len(in_window) - budget.limit]
        raise BudgetSpent(len(in_window), budget.limit, utc(leaving) + budget.window)
    entries = len(digests) // HASH_CHARS
    # Probing across tokens (issue 33): the same predictions sent by a second
    # token are as near to the first token's run as they would be to its own.
    near, changed, near_token = _nearest(connection, submissions.c.corpus_version == version, digests, entries,
                                         budget)
    submission_id = uuid.uuid4().hex
    connection.execute(insert(submissions), [{
        "submission_id": submission_id, "token": token, "corpus_id": corpus_id, "corpus_version": version,
        "created_at": now, "entries": entries, "prediction_hashes": digests,
        "near_duplicate_of": near, "changed_entries": changed, "run_id": None}])
    return Admitted(submission_id, len(in_window) + 1, budget.limit, near, changed,
                    near_token if near_token != token else None)


def _nearest(connection: Connection, on_version, digests: str, entries: int,
             budget: Budget) -> tuple[str | None, int | None, str | None]:
    """The version's latest submission (of `budget.history`, any token)
    whose predictions differ from `digests` in the fewest entries, when that
    is few enough: its run id (else its submission id), how many entries
    differ and the token that sent it. One matrix comparison for them all."""
    earlier = connection.execute(
        select(submissions.c.submission_id, submissions.c.run_id, submissions.c.prediction_hashes,
               submissions.c.token)
        .where(on_version, submissions.c.entries == entries)
        .order_by(submissions.c.created_at.desc()).limit(budget.history)).all()
    if not earlier:
        return None, None, None
    new = _hashes(digests)
    matrix = np.vstack([_hashes(row.prediction_hashes) for row in earlier])
    differing = np.count_nonzero(matrix != new, axis=1)
    best = int(np.argmin(differing))  # the latest of the nearest: rows are newest first
    changed = int(differing[best])
    if changed > budget.near_threshold(entries):
        return None, None, None
    row = earlier[best]
    return row.run_id or f"submission {row.submission_id}", changed, row.token


def attach_run(connection: Connection, submission_id: str, run_id: str) -> None:
    connection.execute(update(submissions).where(submissions.c.submission_id == submission_id)
                       .values(run_id=run_id))


HELD_COLUMNS = ("run_id", "created_at", "dataset_id", "corpus_version", "corpus_tier", "model_slug",
                "submitted_by", "review")


def _held_row(row) -> dict:
    integrity = row.run_card.get("integrity") or {}
    return {
        **{name: getattr(row, name) for name in HELD_COLUMNS},
        "created_at": utc(row.created_at).isoformat(),
        "reasons": list(integrity.get("review_reasons") or []),
        "contaminated_entries": list(integrity.get("contaminated_entries") or []),
        "disqualified": bool(row.disqualified),
    }


def held(connection: Connection, dataset_id: str | None) -> list[dict]:
    """The runs held for review, oldest first, with why."""
    query = (select(*(runs.c[name] for name in HELD_COLUMNS), runs.c.run_card, runs.c.disqualified)
             .where(runs.c.review == HELD).order_by(runs.c.created_at, runs.c.run_id))
    if dataset_id is not None:
        query = query.where(runs.c.dataset_id == dataset_id)
    return [_held_row(row) for row in connection.execute(query)]


def review(connection: Connection, run_id: str, decision: str, note: str, reviewer: str | None,
           now: datetime) -> dict:
    """A maintainer's decision on a held run: `clear` puts it on the
    leaderboard (not disqualified), `disqualify` keeps it off for good. The
    stored card's integrity records the decision, who took it and why."""
    row = connection.execute(select(runs.c.review, runs.c.run_card).where(runs.c.run_id == run_id)).first()
    if row is None:
        raise UnknownRun(run_id)
    if row.review != HELD:
        raise NotHeld(f"run {run_id!r} is not held for review ({row.review or 'never held'}); "
                      f"only a held run is cleared or disqualified")
    state = DECISIONS[decision]
    card = dict(row.run_card)
    integrity = dict(card.get("integrity") or {})
    who = f"token {reviewer!r}" if reviewer else "a maintainer (open gateway)"
    # The line's time is when the run was published (reviewed_at reads it back).
    integrity["review_reasons"] = [*(integrity.get("review_reasons") or []),
                                   f"{state} by {who} at {now.isoformat()}" + (f": {note}" if note else "")]
    integrity.update(review=state, disqualified=state == DISQUALIFIED)
    card["integrity"] = integrity
    connection.execute(update(runs).where(runs.c.run_id == run_id).values(
        review=state, disqualified=state == DISQUALIFIED, run_card=card))
    found = connection.execute(select(*(runs.c[name] for name in HELD_COLUMNS), runs.c.run_card,
                                      runs.c.disqualified).where(runs.c.run_id == run_id)).one()
    return _held_row(found)


_DECIDED = re.compile(r"^(?:cleared|disqualified) by .*? at (\d{4}-\d\d-\d\dT[0-9:.]+(?:[+-]\d\d:\d\d|Z)?)")


def reviewed_at(card: dict) -> datetime | None:
    """When a maintainer decided on a held run (the time `review` wrote on
    its last decision line), None for a run never held or still held: a
    cleared run reaches the public board then (its place in the Ladder)."""
    integrity = card.get("integrity") or {}
    if integrity.get("review") not in (CLEARED, DISQUALIFIED):
        return None
    for line in reversed(integrity.get("review_reasons") or []):
        found = _DECIDED.match(line)
        if found:
            return utc(datetime.fromisoformat(found.group(1).replace("Z", "+00:00")))
    return None


def token_counts(connection: Connection, dataset_id: str, version: str, tokens: set) -> dict[str, int]:
    """Stored runs per token on one corpus version: the cherry-pick flag
    counts a token's submissions whatever their model slug."""
    wanted = sorted(token for token in tokens if token is not None)
    if not wanted:
        return {}
    return dict(connection.execute(
        select(runs.c.submitted_by, func.count())
        .where(runs.c.dataset_id == dataset_id, runs.c.corpus_version == version, runs.c.submitted_by.in_(wanted))
        .group_by(runs.c.submitted_by)).all())
