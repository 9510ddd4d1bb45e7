"""A run's scratch store on disk: what the gateway must keep of every entry
until the run card is out, but need not hold in memory.

One SQLite database per run, removed when the run ends, in one folder per
user (``$TMPDIR/champollion-spill-<uid>/``, or the ``directory`` given; the
folder is removed with its last spill, so nothing stays in $TMPDIR) where
a restarted gateway finds what a killed one left: each file is named after
its gateway's process id and flock()ed while in use, and ``remove_stale``
(at gateway start) deletes those whose lock is free and whose process is
gone. It holds each entry's id, reference, difficulty, error, output and
what the adequacy gates need of its texts, and every family's answers as serialized ScoreBatchResponse messages.
SQLite gives the two things a large run needs without loading it: a unique
index (duplicate ids) and a sort on disk (the corpus version hashes the
entries sorted by id).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Iterable, Iterator

from champollion.eval.v1 import family_pb2
from gateway.card.adequacy import EntryGates

_SCHEMA = """
CREATE TABLE entries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    reference TEXT NOT NULL,
    difficulty INTEGER,
    error TEXT,
    prediction TEXT,
    -- The adequacy gates' view of the entry (gateway/card/adequacy.py):
    -- folded texts' keys, and the text gates it fails (JSON, NULL: none).
    source_key TEXT,
    reference_key TEXT,
    output_key TEXT,
    gates TEXT
);
CREATE TABLE responses (
    family TEXT NOT NULL,
    batch INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (family, batch)
);
"""


_SPILL_NAME = re.compile(r"run-(\d+)-[0-9a-f]{32}\.sqlite")


def default_directory() -> Path:
    return Path(tempfile.gettempdir()) / f"champollion-spill-{os.getuid()}"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_stale(directory: Path | None = None) -> list[Path]:
    """Deletes the spills of gateways that are gone (killed before their runs
    ended); those in use are locked by their gateway and stay. Returns what
    was removed."""
    directory = directory or default_directory()
    removed = []
    for path in directory.glob("run-*.sqlite") if directory.is_dir() else ():
        match = _SPILL_NAME.fullmatch(path.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        try:
            with open(path, "rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                path.unlink()
        except (BlockingIOError, FileNotFoundError):
            continue  # in use after all, or removed by another gateway
        removed.append(path)
    if removed:
        try:
            directory.rmdir()  # empty now, unless a run is in it
        except OSError:
            pass
    return removed


# Tries at creating a spill while another run's close removes the empty folder.
_CREATE_TRIES = 5


def _create_locked(path: Path):
    """The new file `path`, flock()ed, its folder made (owner only) if
    needed; again when a spill closing elsewhere removed the folder between
    the two."""
    for attempt in range(_CREATE_TRIES):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            handle = open(path, "xb")
        except FileNotFoundError:
            if attempt == _CREATE_TRIES - 1:
                raise
            continue
        fcntl.flock(handle, fcntl.LOCK_EX)
        return handle


class RunSpill:
    def __init__(self, directory: Path | None = None):
        directory = directory or default_directory()
        self._path = directory / f"run-{os.getpid()}-{uuid.uuid4().hex}.sqlite"
        # Locked before SQLite opens it, held until it is deleted (flock and
        # SQLite's own fcntl locks do not interfere).
        self._lock = _create_locked(self._path)
        # Written from the event loop, read from one worker thread afterwards;
        # never both at once.
        self._db = sqlite3.connect(self._path, check_same_thread=False)
        # Scratch data: no journal, no fsync.
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        self._db.close()
        self._path.unlink(missing_ok=True)
        self._lock.close()
        # The folder goes with the last spill in it, so that no run leaves
        # anything in $TMPDIR; it fails, as it should, while others are in it.
        try:
            self._path.parent.rmdir()
        except OSError:
            pass

    def size_bytes(self) -> int:
        return self._path.stat().st_size

    def __enter__(self) -> "RunSpill":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- entries ---------------------------------------------------------------

    def has_entry(self, entry_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None

    def add_entry(self, seq: int, entry_id: str, reference: str, difficulty: int | None, error: str | None,
                  prediction: str | None = None, gates: EntryGates | None = None) -> None:
        keys = (None, None, None, None) if gates is None else (
            gates.source_key, gates.reference_key, gates.output_key,
            json.dumps(gates.failed, ensure_ascii=False) if gates.failed else None)
        self._db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (seq, entry_id, reference, difficulty, error, prediction, *keys))

    def text_gates(self) -> Iterator[tuple[str | None, str | None]]:
        """(output_key, failed text gates as JSON) of every entry, in corpus order."""
        yield from self._db.execute("SELECT output_key, gates FROM entries ORDER BY seq")

    def repeated_outputs(self, min_sources: int) -> dict[str, tuple[int, int]]:
        """Output key -> (entries, distinct sources) of each output given
        for entries with at least `min_sources` different sources and as
        many different references."""
        rows = self._db.execute(
            "SELECT output_key, COUNT(*), COUNT(DISTINCT source_key) FROM entries WHERE output_key IS NOT NULL "
            "GROUP BY output_key HAVING COUNT(DISTINCT source_key) >= ? AND COUNT(DISTINCT reference_key) >= ?",
            (min_sources, min_sources))
        return {key: (entries, sources) for key, entries, sources in rows}

    def entries(self) -> Iterator[tuple[str, int | None, str | None]]:
        """(id, difficulty, error) of every entry, in corpus order."""
        yield from self._db.execute("SELECT id, difficulty, error FROM entries ORDER BY seq")

    def predictions(self) -> Iterator[str | None]:
        """Each entry's prediction (None: the entry had none), in corpus order."""
        for (prediction,) in self._db.execute("SELECT prediction FROM entries ORDER BY seq"):
            yield prediction

    def corpus_version(self) -> str:
        """The same SHA-256 as gateway.card.identity.corpus_version (canonical JSON
        of the [id, reference] pairs sorted by id), streamed from disk.
        SQLite compares TEXT as UTF-8 bytes, which orders as code points do,
        as Python's sort does."""
        digest = hashlib.sha256(b"[")
        rows = self._db.execute("SELECT id, reference FROM entries ORDER BY id")
        for index, pair in enumerate(rows):
            text = json.dumps(list(pair), ensure_ascii=False, separators=(",", ":"))
            digest.update((("," if index else "") + text).encode("utf-8"))
        digest.update(b"]")
        return digest.hexdigest()

    # --- family answers --------------------------------------------------------

    def add_response(self, family: str, batch: int, response: family_pb2.ScoreBatchResponse) -> None:
        self._db.execute("INSERT INTO responses VALUES (?, ?, ?)", (family, batch, response.SerializeToString()))

    def responses(self, family: str) -> Iterator[family_pb2.ScoreBatchResponse]:
        """`family`'s answers in batch order."""
        rows = self._db.execute("SELECT body FROM responses WHERE family = ? ORDER BY batch", (family,))
        for (body,) in rows:
            yield family_pb2.ScoreBatchResponse.FromString(body)

    def batch_responses(self, batch: int, families: Iterable[str]) -> dict[str, family_pb2.ScoreBatchResponse]:
        found = {}
        for family in families:
            row = self._db.execute(
                "SELECT body FROM responses WHERE family = ? AND batch = ?", (family, batch)
            ).fetchone()
            if row is not None:
                found[family] = family_pb2.ScoreBatchResponse.FromString(row[0])
        return found
