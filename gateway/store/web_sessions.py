"""The web front's signed-in sessions in the run store (migration 0007;
docs/integrity-and-access.md, "Web sessions and limits").

A session is a random id the cookie carries (signed); the store keeps its
SHA-256 (a reader of the store cannot forge a cookie from it, nor can one
without the cookie's key), the token it signed in with (the token's own
SHA-256, as in the tokens file), and when it ends. Every replica of the
front on one store reads the same rows, so signing out on one ends the
session on all, and a token that leaves the tokens file ends its sessions
in the store: putting the line back revives none of them. Blocking calls:
the front runs them in a worker thread."""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Iterable

from sqlalchemy import delete, insert, select, update

from gateway.store.rows import utc
from gateway.store.store import RunStore
from gateway.store.tables import web_sessions

SIGNED_OUT = "signed out"
TOKEN_REMOVED = "token removed from the tokens file"
SIGNED_IN_AGAIN = "signed in again"
# Rows of sessions ended or expired this long ago are deleted at sign-in.
KEEP_ENDED = timedelta(days=7)


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class WebSessions:
    """The `web_sessions` table of one store."""

    def __init__(self, store: RunStore):
        self._store = store

    def _connection(self, write: bool = False):
        return self._store._connection(write=write)  # noqa: SLF001 - the store's own package

    def start(self, session_id: str, token_sha256: str, lasts: timedelta) -> None:
        """Records a signed-in session (and forgets long-ended ones)."""
        now = datetime.now(timezone.utc)
        with self._connection(write=True) as connection:
            connection.execute(delete(web_sessions).where(web_sessions.c.expires_at < now - KEEP_ENDED))
            connection.execute(insert(web_sessions), [{
                "session_sha256": session_hash(session_id), "token_sha256": token_sha256, "created_at": now,
                "expires_at": now + lasts, "ended_at": None, "ended_why": None}])

    def token_of(self, session_id: str) -> str | None:
        """The token hash of a session in force; None when it is unknown,
        ended or expired."""
        with self._connection() as connection:
            row = connection.execute(select(web_sessions.c.token_sha256, web_sessions.c.expires_at,
                                            web_sessions.c.ended_at)
                                     .where(web_sessions.c.session_sha256 == session_hash(session_id))).first()
        if row is None or row.ended_at is not None or utc(row.expires_at) <= datetime.now(timezone.utc):
            return None
        return row.token_sha256

    def end(self, session_id: str, why: str = SIGNED_OUT) -> None:
        with self._connection(write=True) as connection:
            connection.execute(update(web_sessions).where(
                web_sessions.c.session_sha256 == session_hash(session_id), web_sessions.c.ended_at.is_(None))
                .values(ended_at=datetime.now(timezone.utc), ended_why=why))

    def end_all_but(self, token_hashes: Iterable[str], why: str = TOKEN_REMOVED) -> int:
        """Ends every session in force whose token is not in `token_hashes`
        (the tokens file as just read); returns how many it ended."""
        present = sorted(set(token_hashes))
        with self._connection(write=True) as connection:
            return connection.execute(update(web_sessions).where(
                web_sessions.c.ended_at.is_(None), web_sessions.c.token_sha256.not_in(present))
                .values(ended_at=datetime.now(timezone.utc), ended_why=why)).rowcount
