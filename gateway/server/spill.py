"""A run's scratch store on disk: what the gateway must keep of every entry
until the run card is out, but need not hold in memory.

One SQLite database per run, in a temporary directory (``$TMPDIR``) removed
when the run ends. It holds each entry's id, reference, difficulty and
error, and every family's answers as serialized ScoreBatchResponse messages.
SQLite gives the two things a large run needs without loading it: a unique
index (duplicate ids) and a sort on disk (the corpus version hashes the
entries sorted by id).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from champollion.eval.v1 import family_pb2

_SCHEMA = """
CREATE TABLE entries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    reference TEXT NOT NULL,
    difficulty INTEGER,
    error TEXT
);
CREATE TABLE responses (
    family TEXT NOT NULL,
    batch INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (family, batch)
);
"""


class RunSpill:
    def __init__(self):
        self._directory = tempfile.TemporaryDirectory(prefix="champollion-run-")
        # Written from the event loop, read from one worker thread afterwards;
        # never both at once.
        self._path = Path(self._directory.name) / "run.sqlite"
        self._db = sqlite3.connect(self._path, check_same_thread=False)
        # Scratch data: no journal, no fsync.
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)

    def close(self) -> None:
        self._db.close()
        self._directory.cleanup()

    def size_bytes(self) -> int:
        return self._path.stat().st_size

    def __enter__(self) -> "RunSpill":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- entries ---------------------------------------------------------------

    def has_entry(self, entry_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None

    def add_entry(self, seq: int, entry_id: str, reference: str, difficulty: int | None, error: str | None) -> None:
        self._db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?)", (seq, entry_id, reference, difficulty, error))

    def entries(self) -> Iterator[tuple[str, int | None, str | None]]:
        """(id, difficulty, error) of every entry, in corpus order."""
        yield from self._db.execute("SELECT id, difficulty, error FROM entries ORDER BY seq")

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
