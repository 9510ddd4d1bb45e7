"""Who is visiting the web front: the session cookie, sign-in by token and
the CSRF token of every form.

Every visitor gets a session cookie, signed (itsdangerous) so it cannot be
forged, HttpOnly so page scripts cannot read it, SameSite=Strict so other
sites cannot send it, and Secure behind HTTPS. It holds a random CSRF token
and, once signed in, a random session id: the session itself (which token,
until when, whether it ended) is a row of the store's `web_sessions` table
(gateway/store/web_sessions.py), so that signing out ends it on every
replica of the front, and a copied cookie is worth nothing afterwards. The
token itself is never kept. A token deleted from the tokens file (or
expired) ends its sessions at the next request; the front, reading the
file again, also ends them in the store, so putting the line back revives
none of them: the token signs in anew. Every POST must carry the session's
CSRF token (a form field, or the X-CSRF-Token header of a script's request).

Signed in, a visitor is the gateway's `Caller` for its token (name, role);
anonymous, the least role and no name: the access rules
(gateway/server/access.py) then show what the public may see. Without a
tokens file (`champollion web` on loopback for one's own use) every visitor
is a nameless maintainer, as on an open gateway.
"""
from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable

import structlog
from itsdangerous import BadSignature, URLSafeTimedSerializer

from gateway.server.callers import Caller, anonymous_caller, open_caller
from gateway.server.tokens import Token, TokenFile, token_hash
from gateway.store.web_sessions import SIGNED_IN_AGAIN, SIGNED_OUT, WebSessions

log = structlog.get_logger()
COOKIE = "champollion_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# A session lasts this long after sign-in (the cookie's signature is dated).
MAX_AGE_S = 12 * 3600
# The tokens file is looked at (its modification time) at every request and
# at least this often in between (app.py), so that a line removed and put
# back within a few seconds is still seen gone.
TOKENS_POLL_S = 2.0


@dataclass(frozen=True)
class Session:
    csrf: str
    token_sha256: str | None = None  # None: not signed in
    session_id: str | None = None  # the web_sessions row of a signed-in session


@dataclass(frozen=True)
class Visitor:
    """The visitor of one request: its access-rule caller, its session and
    the token it signed in with (None: anonymous, or an open front)."""
    caller: Caller
    session: Session
    token: Token | None

    @property
    def signed_in(self) -> bool:
        return self.token is not None


class TokenSource:
    """The tokens file, read again when it changes on disk: deleting a line
    revokes that token's sessions without a restart."""

    def __init__(self, path: str | Path, on_load: Callable[[TokenFile], None] | None = None):
        self.path = Path(path)
        self._stamp = None
        self._on_load = on_load
        self._tokens = TokenFile.load(self.path)  # a bad file stops the front (ConfigError)
        self._swept(os.stat(self.path).st_mtime_ns)

    def _swept(self, stamp: int) -> None:
        """Tells `on_load` (the sessions of tokens no longer in the file end
        in the store); the file counts as read only once that is done, so a
        failure (the store away) is tried again at the next look."""
        if self._on_load is not None:
            self._on_load(self._tokens)
        self._stamp = stamp

    def tokens(self) -> TokenFile:
        try:
            stamp = os.stat(self.path).st_mtime_ns
            if stamp != self._stamp:
                self._tokens = TokenFile.load(self.path)
                self._swept(stamp)
        except (OSError, ValueError):
            pass  # a file being rewritten: keep the tokens read last
        except Exception:  # noqa: BLE001 - the store did not answer: the tokens apply here, the sweep comes later
            log.warning("web_sessions_not_swept", family="web", exc_info=True)
        return self._tokens

    def by_hash(self, digest: str) -> Token | None:
        for token in self.tokens().tokens:
            if hmac.compare_digest(token.sha256, digest):
                return token
        return None


class Sessions:
    """Reads and writes the session cookie, and keeps signed-in sessions in
    the store (`stored`); `tokens` None: an open front (nobody signs in)."""

    def __init__(self, secret: str, tokens: TokenSource | None, secure_cookie: bool,
                 stored: WebSessions | None = None):
        self._serializer = URLSafeTimedSerializer(secret, salt="champollion-web-session")
        self.tokens = tokens
        self.secure_cookie = secure_cookie
        self.stored = stored
        if tokens is not None and stored is None:
            raise ValueError("a front with a tokens file keeps its sessions in the store")

    def read(self, cookie: str | None) -> Session | None:
        """The cookie's session; None when it is forged, altered, expired, or
        names a session that ended (signed out, its token removed). Blocking
        (a store read for a signed-in session): call it in a worker thread."""
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=MAX_AGE_S)
        except BadSignature:  # forged, altered or expired: a fresh anonymous session
            return None
        if not isinstance(data, dict) or not isinstance(data.get("csrf"), str):
            return None
        session_id = data.get("sid")
        if session_id is None:
            return Session(data["csrf"])
        if not isinstance(session_id, str) or self.stored is None:
            return None
        if self.tokens is not None:
            self.tokens.tokens()  # a changed file: its removed tokens' sessions end first
        token_sha256 = self.stored.token_of(session_id)
        if token_sha256 is None:
            return None
        return Session(data["csrf"], token_sha256, session_id)

    def new(self, token_sha256: str | None = None, session_id: str | None = None) -> Session:
        """A fresh session (a new CSRF token too: signing in or out changes both)."""
        return Session(secrets.token_urlsafe(24), token_sha256, session_id)

    def cookie_value(self, session: Session) -> str:
        data = {"csrf": session.csrf}
        if session.session_id is not None:
            data["sid"] = session.session_id
        return self._serializer.dumps(data)

    def visitor(self, session: Session, page: str) -> Visitor:
        if self.tokens is None:
            return Visitor(open_caller(page), session, None)
        token = self.tokens.by_hash(session.token_sha256) if session.token_sha256 else None
        if token is None or token.expired():
            return Visitor(anonymous_caller(page), session, None)
        return Visitor(Caller(token.name, token.role, page), session, token)

    def sign_in(self, presented: str, previous: Session | None = None) -> Session | None:
        """The session of a visitor presenting `presented`, recorded in the
        store (the visitor's `previous` signed-in session ends); None when no
        (unexpired) token of the file matches. Blocking: a store write."""
        if self.tokens is None:
            return None
        token = self.tokens.tokens().find(presented.strip())
        if token is None or token.expired():
            return None
        if previous is not None and previous.session_id is not None:
            self.stored.end(previous.session_id, SIGNED_IN_AGAIN)
        session = self.new(token_hash(presented.strip()), secrets.token_urlsafe(32))
        self.stored.start(session.session_id, session.token_sha256, timedelta(seconds=MAX_AGE_S))
        return session

    def sign_out(self, session: Session) -> Session:
        """Ends `session` in the store (on every replica: a copy of its
        cookie is refused from now on); returns a fresh anonymous one.
        Blocking: a store write."""
        if session.session_id is not None and self.stored is not None:
            self.stored.end(session.session_id, SIGNED_OUT)
        return self.new()


def csrf_ok(session: Session, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf.encode(), str(sent).encode())
