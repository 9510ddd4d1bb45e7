"""RunStore: every run card remembered, in SQLite or PostgreSQL (spec §11)."""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator

from sqlalchemy import Connection, func, insert, or_, select, text

from gateway.store import corpora as registered
from gateway.store import leaderboard as board
from gateway.store import reviews
from gateway.store import submissions as submitted
from gateway.store.errors import UnknownCorpus, UnknownRun
from gateway.store.location import database_errors, open_engine, parse_store_url
from gateway.store.migrate import upgrade_to_head
from gateway.store.prefixes import MIN_PREFIX, by_prefix
from gateway.store.rows import (
    card_without_entries,
    entry_from_row,
    entry_row,
    run_row,
    utc,
    with_submission_count,
)
from gateway.store.tables import run_entries, runs

# What a card's entry is read from (the stored output is for review, not the card).
ENTRY_COLUMNS = ("position", "entry_id", "difficulty", "error", "scores", "stats")
RUN_SUMMARY = ("run_id", "created_at", "dataset_id", "corpus_version", "model_slug", "condition",
               "composite_score", "quality_tier", "fingerprint_hash", "corpus_tier", "submitted_by", "review",
               "floor_kind")


class RunStore:
    """One store; safe to share between threads (SQLAlchemy's pool)."""

    def __init__(self, url, engine):
        self._url = url
        self._engine = engine

    @classmethod
    def open(cls, url: str) -> "RunStore":
        """Opens the store at `url`, creating a SQLite file and applying
        pending migrations, so an empty database is ready to use."""
        parsed = parse_store_url(url)
        store = cls(parsed, open_engine(parsed))
        try:
            store.upgrade()
        except BaseException:
            store.close()
            raise
        return store

    def ping(self) -> None:
        """A round trip to the database (StoreError when it does not answer)."""
        with self._connection() as connection:
            connection.execute(text("SELECT 1"))

    def upgrade(self) -> None:
        with self._connection(write=True) as connection:
            upgrade_to_head(connection)

    @contextmanager
    def _connection(self, write: bool = False) -> Iterator[Connection]:
        """A connection; with write=True, one transaction committed at the end."""
        with database_errors(self._url):
            with (self._engine.begin() if write else self._engine.connect()) as connection:
                yield connection

    def save_run(self, card: dict, entries: Iterable[list[dict]], submitted_by: str | None = None,
                 submission_id: str | None = None, floor_kind: str | None = None) -> int:
        """Stores a run in one transaction, submitted with the token named
        `submitted_by` (as its submission `submission_id`, when it was
        counted against a budget); returns how many stored runs, this one
        included, share its fingerprint. `floor_kind`: a floor run (the
        gateway's own degenerate system), never counted with other runs'
        fingerprints; a second floor run of one kind on a version is refused
        by the unique index idx_floor (StoreError)."""
        stored = card_without_entries(card)
        fingerprint = (stored.get("fingerprint") or {}).get("hash")
        with self._connection(write=True) as connection:
            if fingerprint is not None and connection.dialect.name == "postgresql":
                # Two gateways storing one configuration at once must not both count themselves first.
                connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:fingerprint))"),
                                   {"fingerprint": fingerprint})
            earlier = 0 if fingerprint is None or floor_kind is not None else connection.scalar(
                select(func.count()).select_from(runs).where(runs.c.fingerprint_hash == fingerprint,
                                                             runs.c.floor_kind.is_(None)))
            stored = with_submission_count(stored, earlier + 1)
            connection.execute(insert(runs), [run_row(stored, datetime.now(timezone.utc), earlier + 1, submitted_by,
                                                      floor_kind)])
            if submission_id is not None:
                submitted.attach_run(connection, submission_id, stored["run_id"])
            position = 0
            for batch in entries:
                if batch:
                    rows = [entry_row(stored["run_id"], position + i, entry) for i, entry in enumerate(batch)]
                    connection.execute(insert(run_entries), rows)  # executemany
                    position += len(rows)
        return earlier + 1

    # Floor runs (migration 0006; docs/store-and-corpora.md "Floor runs").

    def floor_kinds(self, dataset_id: str, version: str) -> set[str]:
        """The floor kinds stored on the dataset's corpus `version` (its full hash)."""
        with self._connection() as connection:
            return set(connection.scalars(select(runs.c.floor_kind).where(
                runs.c.dataset_id == dataset_id, runs.c.corpus_version == version, runs.c.floor_kind.is_not(None))))

    def floor_runs(self, dataset_id: str, version: str) -> list[dict]:
        """The version's floor runs, by kind: {run_id, floor_kind, composite,
        interval (the composite's {ci_lower, ci_upper}, or None)}, from the cards
        (every digit: PostgreSQL's real column keeps about 7)."""
        with self._connection() as connection:
            rows = connection.execute(select(runs.c.run_id, runs.c.floor_kind, runs.c.run_card).where(
                runs.c.dataset_id == dataset_id, runs.c.corpus_version == version, runs.c.floor_kind.is_not(None))
                .order_by(runs.c.floor_kind)).all()
        found = []
        for row in rows:
            scores = row.run_card.get("scores") or {}
            found.append({"run_id": row.run_id, "floor_kind": row.floor_kind, "composite": scores.get("composite"),
                          "interval": (scores.get("confidence_intervals") or {}).get("composite")})
        return found

    def version_scores(self, dataset_id: str, version: str) -> list[dict]:
        """Every stored run of the version that is not disqualified, floor
        runs included: {run_id, model_slug, floor_kind, scores (the card's
        scores block), weights (the composite's)}, oldest first."""
        with self._connection() as connection:
            rows = connection.execute(select(runs.c.run_id, runs.c.model_slug, runs.c.floor_kind, runs.c.run_card)
                                      .where(runs.c.dataset_id == dataset_id, runs.c.corpus_version == version,
                                             runs.c.disqualified.is_(False))
                                      .order_by(runs.c.created_at, runs.c.run_id)).all()
        return [{"run_id": row.run_id, "model_slug": row.model_slug, "floor_kind": row.floor_kind,
                 "scores": row.run_card.get("scores") or {},
                 "weights": (row.run_card.get("composite_coverage") or {}).get("weights") or {}} for row in rows]

    @staticmethod
    def _run_id(connection: Connection, text: str) -> str:
        """The id of the stored run `text` names: its id, or a unique prefix
        of MIN_PREFIX or more characters (AmbiguousPrefix lists the ids a
        shared prefix starts)."""
        run_id = by_prefix(connection, runs.c.run_id, text, "run id")
        if run_id is None:
            short = len(text) < MIN_PREFIX
            raise UnknownRun(text, f" (give an id, or at least its first {MIN_PREFIX} characters)" if short else "")
        return run_id

    def _card(self, connection: Connection, run_id: str) -> dict:
        return connection.scalar(select(runs.c.run_card).where(runs.c.run_id == self._run_id(connection, run_id)))

    def get_run(self, run_id: str) -> dict:
        """The stored card (`run_id`: its id or a unique prefix), entries
        included, in corpus order."""
        with self._connection() as connection:
            card = self._card(connection, run_id)
        card["entries"] = [entry for batch in self.iter_entries(card["run_id"]) for entry in batch]
        return card

    def iter_entries(self, run_id: str, batch: int = 2000) -> Iterator[list[dict]]:
        """The run's entries a batch at a time, one short query per batch."""
        with self._connection() as connection:
            run_id = self._run_id(connection, run_id)
        return self._entry_batches(run_id, batch)

    def _entry_batches(self, run_id: str, batch: int) -> Iterator[list[dict]]:
        def fetch(connection: Connection, position: int) -> list[tuple[int, dict]]:
            rows = connection.execute(
                select(*(run_entries.c[name] for name in ENTRY_COLUMNS))
                .where(run_entries.c.run_id == run_id, run_entries.c.position >= position)
                .order_by(run_entries.c.position).limit(batch)).all()
            return [(row.position, entry_from_row(row)) for row in rows]

        return self._in_batches(fetch)

    def _in_batches(self, fetch: Callable[[Connection, int], list[tuple[int, dict]]]) -> Iterator[list[dict]]:
        """Items a batch at a time: `fetch(connection, position)` gives the
        next batch's (position, item) pairs from `position` on, one short
        query per batch, so a slow reader never holds a connection."""
        position = 0
        while True:
            with self._connection() as connection:
                found = fetch(connection, position)
            if not found:
                return
            yield [item for _, item in found]
            position = found[-1][0] + 1

    def list_runs(self, dataset_id: str | None = None, model_slug: str | None = None,
                  limit: int | None = None, hidden_tiers: tuple[str, ...] = (), include_floor: bool = False) -> list[dict]:
        """Stored runs, newest first, optionally of one dataset or model,
        without those scored on a corpus of `hidden_tiers`, and without floor
        runs unless `include_floor` (their rows name their floor_kind)."""
        query = select(*(runs.c[name] for name in RUN_SUMMARY)).order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        if not include_floor:
            query = query.where(runs.c.floor_kind.is_(None))
        if hidden_tiers:
            query = query.where(or_(runs.c.corpus_tier.is_(None), runs.c.corpus_tier.not_in(hidden_tiers)))
        if dataset_id is not None:
            query = query.where(runs.c.dataset_id == dataset_id)
        if model_slug is not None:
            query = query.where(runs.c.model_slug == model_slug)
        if limit is not None:
            query = query.limit(limit)
        with self._connection() as connection:
            rows = connection.execute(query).all()
        return [{**row._asdict(), "created_at": utc(row.created_at).isoformat()} for row in rows]

    def leaderboard(self, dataset_id: str, version: str | None = None, sort: str = "composite_score",
                    descending: bool = True, all_submissions: bool = False, include_disqualified: bool = False,
                    limit: int | None = None, official: bool = False, hidden_tiers: tuple[str, ...] = ()) -> dict:
        """Runs of one corpus version (the latest by default; else its hash
        or a unique prefix) ranked by `sort` (one of SORT_COLUMNS, or a
        run-card metric: bleu, ter...); official: only runs scored against a
        registered holdout or gold corpus; none scored on a corpus of
        `hidden_tiers`. See leaderboard.py for the rules."""
        with self._connection() as connection:
            return board.leaderboard(connection, dataset_id, version, sort, descending,
                                     all_submissions, include_disqualified, limit, official, hidden_tiers)

    # Registered corpora (corpora.py; seed 001 §5, §8.1).

    def register_corpus(self, corpus: dict, tier: str, new_version: bool = False, check: dict | None = None,
                        accepted: dict | None = None, refusal: str | None = None) -> dict:
        """Registers `corpus` ({id, source_lang, target_lang, entries}) in one
        transaction: {id, version, number, tier, entries, created, check, ...}.
        The same content again gives its registered version (created False,
        tier unchanged); other content under the id is a CorpusConflict unless
        `new_version`, which records it as the next number. `check`: the
        corpus check's summary kept with it; `accepted`: {reason, failures,
        by} when a maintainer accepted the check's gate failures; `refusal`:
        a new version is refused with this message (CheckGateRefused)."""
        with self._connection(write=True) as connection:
            return registered.register(connection, corpus, tier, new_version, datetime.now(timezone.utc),
                                       check, accepted, refusal)

    def list_corpora(self) -> list[dict]:
        """Every registered version with its tier and tier history."""
        with self._connection() as connection:
            return registered.list_all(connection)

    def corpus_info(self, corpus_id: str, version: str | None = None) -> dict:
        """One version: the latest by default; `version` is its hash, a unique
        hash prefix of 6 or more characters, or its number."""
        with self._connection() as connection:
            return registered.info(connection, registered.resolve(connection, corpus_id, version))

    def corpus_entries(self, corpus_id: str, version: str | None, batch: int = 2000) -> Iterator[list[dict]]:
        """The version's whole entries (references included: server side
        only) in registration order, a batch at a time."""
        with self._connection() as connection:
            row = registered.resolve(connection, corpus_id, version)
        return self._in_batches(lambda connection, position: registered.entries_from(connection, row, position, batch))

    def set_corpus_tier(self, corpus_id: str, version: str | None, tier: str, check: dict | None = None,
                        accepted: dict | None = None, refusal: str | None = None) -> dict:
        """Rotation (seed 001 §5.3): moves a version (the latest by default)
        to `tier`, its history kept, with its corpus `check` for that tier,
        what was `accepted` and a `refusal` (as register_corpus); returns
        its corpus_info."""
        with self._connection(write=True) as connection:
            return registered.set_tier(connection, corpus_id, version, tier, datetime.now(timezone.utc),
                                       check, accepted, refusal)

    def entry_fingerprints(self, corpus_id: str, version: str | None) -> dict[str, str]:
        """Entry id -> content-derived fingerprint, in registration order."""
        with self._connection() as connection:
            return registered.fingerprints(connection, registered.resolve(connection, corpus_id, version))

    def registered_tier(self, corpus_id: str) -> str | None:
        """The tier of a registered corpus's latest version; None when the
        id is not registered."""
        with self._connection() as connection:
            try:
                return registered.info(connection, registered.resolve(connection, corpus_id, None))["tier"]
            except UnknownCorpus:
                return None

    def run_access(self, run_id: str) -> tuple[str | None, str | None]:
        """What deciding who may read a stored run needs: the tier of its
        registered corpus (None: a corpus the client sent) and the name of
        the token that submitted it (None: an open gateway, or stored before
        tokens were recorded)."""
        with self._connection() as connection:
            found = connection.execute(select(runs.c.corpus_tier, runs.c.submitted_by)
                                       .where(runs.c.run_id == self._run_id(connection, run_id))).first()
        return found.corpus_tier, found.submitted_by

    # Submissions to secret-tier corpora (submissions.py; issue 26).

    def admit_submission(self, token: str, corpus_id: str, version: str, digests: str,
                         budget: submitted.Budget) -> submitted.Admitted:
        """Counts a submission against `token`'s budget for the version
        (BudgetSpent when it is used up) and finds the earlier one it nearly
        duplicates."""
        with self._connection(write=True) as connection:
            return submitted.admit(connection, token, corpus_id, version, digests, datetime.now(timezone.utc), budget)

    def held_runs(self, dataset_id: str | None = None) -> list[dict]:
        """Runs held for a maintainer's review, oldest first, with why."""
        with self._connection() as connection:
            return submitted.held(connection, dataset_id)

    def review_run(self, run_id: str, decision: str, note: str = "", reviewer: str | None = None) -> dict:
        """Clears or disqualifies a held run (`decision`: clear, disqualify)."""
        with self._connection(write=True) as connection:
            return submitted.review(connection, self._run_id(connection, run_id), decision, note, reviewer,
                                    datetime.now(timezone.utc))

    def comparable_stats(self, run_id: str) -> tuple[dict, list[tuple[str, dict, bool]]]:
        """What compare needs: the card without entries and each entry's
        (id, statistics, whether it is marked inadequate), in corpus order."""
        adequate = run_entries.c.scores["adequate"].as_boolean()
        with self._connection() as connection:
            card = self._card(connection, run_id)
            rows = connection.execute(
                select(run_entries.c.entry_id, run_entries.c.stats, adequate.label("adequate"))
                .where(run_entries.c.run_id == card["run_id"]).order_by(run_entries.c.position)).all()
        # An entry stored before the adequacy gates has no mark: adequate.
        return card, [(row.entry_id, row.stats, row.adequate is False) for row in rows]

    # Community review (reviews.py; issue 28).

    def save_campaign(self, campaign: dict, tasks: list[dict]) -> dict:
        """Stores a campaign and every reviewer's queue in one transaction."""
        with self._connection(write=True) as connection:
            return reviews.save_campaign(connection, campaign, tasks, datetime.now(timezone.utc))

    def campaign(self, campaign_id: str) -> dict:
        with self._connection() as connection:
            return reviews.campaign_info(connection, campaign_id)

    def list_campaigns(self, reviewer: str | None = None) -> list[dict]:
        with self._connection() as connection:
            return reviews.list_campaigns(connection, reviewer)

    def set_campaign_state(self, campaign_id: str, state: str) -> dict:
        with self._connection(write=True) as connection:
            return reviews.set_state(connection, campaign_id, state)

    def reviewer_progress(self, campaign_id: str) -> dict[str, dict]:
        with self._connection() as connection:
            return reviews.reviewer_progress(connection, campaign_id)

    def review_task(self, campaign_id: str, reviewer: str, position: int) -> dict:
        with self._connection() as connection:
            return reviews.task(connection, campaign_id, reviewer, position)

    def save_ratings(self, campaign_id: str, reviewer: str, position: int, ratings: dict[str, dict],
                     started_at: datetime | None = None) -> None:
        with self._connection(write=True) as connection:
            reviews.save_ratings(connection, campaign_id, reviewer, position, ratings, datetime.now(timezone.utc),
                                 started_at)

    def campaign_ratings(self, campaign_id: str) -> list[dict]:
        with self._connection() as connection:
            reviews.campaign_info(connection, campaign_id)
            return reviews.ratings(connection, campaign_id)

    def rated_outputs(self, campaign_id: str, kind: str) -> list[dict]:
        """Each rating of a `kind` task with its suggestions, decisions and output (reviews.rated_outputs)."""
        with self._connection() as connection:
            return reviews.rated_outputs(connection, campaign_id, kind)

    def campaigns_of_runs(self, run_ids: list[str]) -> dict[str, list[str]]:
        with self._connection() as connection:
            return reviews.campaigns_of_runs(connection, run_ids)

    def run_predictions(self, run_id: str) -> dict[str, str | None]:
        with self._connection() as connection:
            return reviews.predictions(connection, self._run_id(connection, run_id))

    def run_entry_scores(self, run_id: str) -> dict[str, dict]:
        """Entry id -> the run's stored values of that entry (what prefill reads)."""
        with self._connection() as connection:
            return reviews.entry_scores(connection, self._run_id(connection, run_id))

    def run_versions(self, run_ids: list[str]) -> dict[str, tuple[str, str, str | None]]:
        """Run id -> (dataset id, corpus version, model slug); each id whole
        or a unique prefix (UnknownRun otherwise)."""
        with self._connection() as connection:
            ids = {text: self._run_id(connection, text) for text in run_ids}
            found = reviews.run_versions(connection, list(ids.values()))
        return {ids[text]: found[ids[text]] for text in run_ids}

    def flag_reference(self, corpus_id: str, version: str, entry_id: str, reviewer: str, flag: str, note: str,
                       campaign_id: str | None = None) -> None:
        with self._connection(write=True) as connection:
            reviews.flag_reference(connection, corpus_id, version, entry_id, reviewer, flag, note, campaign_id,
                                   datetime.now(timezone.utc))

    def unflag_reference(self, corpus_id: str, version: str, entry_id: str, reviewer: str) -> None:
        with self._connection(write=True) as connection:
            reviews.unflag_reference(connection, corpus_id, version, entry_id, reviewer)

    def reference_flags(self, corpus_id: str | None = None, version: str | None = None) -> list[dict]:
        with self._connection() as connection:
            return reviews.flags(connection, corpus_id, version)

    # Campaigns that grow (reviews.py; issue 36: gateway/review/growth.py).

    def campaign_task_rows(self, campaign_id: str) -> list[dict]:
        with self._connection() as connection:
            return reviews.task_rows(connection, campaign_id)

    def campaign_queues(self, campaign_id: str) -> dict[str, list[tuple[str, str]]]:
        with self._connection() as connection:
            return reviews.queues(connection, campaign_id)

    def grow_campaign(self, campaign_id: str, expected: dict, changes: dict, tasks: list[dict], by: str | None,
                      action: str, details: dict) -> dict:
        """Settings changed (those in `expected` still as read), new tasks and the audit row, in one
        transaction."""
        with self._connection(write=True) as connection:
            return reviews.grow(connection, campaign_id, expected, changes, tasks, by, action, details,
                                datetime.now(timezone.utc))

    def set_campaign_state_audited(self, campaign_id: str, state: str, by: str | None, action: str) -> dict:
        """set_campaign_state, the change audited."""
        with self._connection(write=True) as connection:
            return reviews.set_state_audited(connection, campaign_id, state, by, action, datetime.now(timezone.utc))

    def campaign_audit(self, campaign_id: str) -> list[dict]:
        with self._connection() as connection:
            return reviews.audit(connection, campaign_id)

    def campaign_export_rows(self, campaign_id: str) -> list[dict]:
        with self._connection() as connection:
            return reviews.export_rows(connection, campaign_id)

    def close(self) -> None:
        self._engine.dispose()
