"""The gateway's side of the run store (gateway/store): every run card it
produces is stored after scoring, and stored runs are read back for
ListRuns, GetRun, Leaderboard and Compare.

Store calls block (SQLAlchemy), so they run in worker threads, never on the
event loop that also serves the other runs.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, TypeVar

import structlog
from google.protobuf import struct_pb2

from champollion.core.run_card import entry_as_dict
from gateway.server.evaluation import ScoredRun
from gateway.store import RunStore, StoreError

log = structlog.get_logger()
Result = TypeVar("Result")


def one_line(error: BaseException) -> str:
    """An error as one line: database drivers' messages run over several."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


class GatewayStore:
    """The gateway's RunStore, opened on first use and again after a failed
    opening, so that a database that is down when the gateway starts (or
    later) costs warnings and UNAVAILABLE answers, not the gateway."""

    def __init__(self, url: str):
        self.url = url
        self._store: RunStore | None = None
        self._lock = threading.Lock()

    def _opened(self) -> RunStore:
        with self._lock:
            if self._store is None:
                self._store = RunStore.open(self.url)  # applies pending migrations
            return self._store

    async def call(self, use: Callable[[RunStore], Result]) -> Result:
        """`use(store)` in a worker thread; StoreError when the store cannot
        be opened or the call fails."""
        return await asyncio.to_thread(lambda: use(self._opened()))

    async def open(self) -> None:
        """Opens the store now (a gateway starting on an empty database
        migrates it). A failure is retried on first use, where it is reported
        (a run card's warning, an UNAVAILABLE answer); logged here at info
        level, so that a CLI's embedded gateway says it once, not twice."""
        try:
            await self.call(lambda store: None)
        except StoreError as error:
            log.info("store_unavailable", family="gateway", error=one_line(error))

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


async def record_run(store: GatewayStore | None, scored: ScoredRun, submitted_by: str | None = None,
                     submission_id: str | None = None) -> None:
    """Stores the scored run (card and entries, one transaction) with the
    name of the token that submitted it (and the submission it was admitted
    as, on a secret tier), and fills the card's
    `integrity.submissions_with_fingerprint`, keeping the rest of the block
    (the contamination check's, from the evaluation); a run that could not
    be stored keeps null there and a warning saying why."""
    integrity = scored.card.setdefault("integrity", {"disqualified": False})
    integrity["submissions_with_fingerprint"] = None
    if store is None:
        return

    def save(run_store: RunStore) -> int:
        predictions = scored.predictions()
        entries = ([{**entry_as_dict(entry), "prediction": next(predictions, None)} for entry in batch]
                   for batch in scored.entry_results())
        return run_store.save_run(scored.card, entries, submitted_by, submission_id)

    started = time.perf_counter()
    try:
        integrity["submissions_with_fingerprint"] = await store.call(save)
        log.info("run_stored", family="gateway", run_id=scored.card["run_id"], token=submitted_by,
                 review=integrity.get("review"), duration_s=round(time.perf_counter() - started, 4))
    except StoreError as error:  # the database: unreachable, full, ...
        scored.card["warnings"].append(f"run card not stored: {one_line(error)}")
    except Exception as error:  # a bug: say so, and still send the run card back
        log.exception("store_failed", family="gateway", run_id=scored.card["run_id"])
        scored.card["warnings"].append(f"run card not stored: {type(error).__name__}: {one_line(error)}")


def as_struct(row: dict) -> struct_pb2.Struct:
    """A store row (JSON values: timestamps come as ISO-8601 text) as a Struct."""
    struct = struct_pb2.Struct()
    struct.update(row)
    return struct
