"""Who is visiting the web front: the session cookie, sign-in by token and
the CSRF token of every form.

Every visitor gets a session cookie, signed (itsdangerous) so it cannot be
forged, HttpOnly so page scripts cannot read it, SameSite=Strict so other
sites cannot send it, and Secure behind HTTPS. It holds a random CSRF token
and, once signed in, the SHA-256 of the visitor's token: the token itself
is never kept, and a token deleted from the tokens file (or expired) ends
its sessions at the next request. Every POST must carry the session's CSRF
token (a form field, or the X-CSRF-Token header of a script's request).

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
from pathlib import Path

from itsdangerous import BadSignature, URLSafeTimedSerializer

from champollion.core.roles import MAINTAINER, REVIEWER
from gateway.server.auth import Caller
from gateway.server.tokens import Token, TokenFile, token_hash

COOKIE = "champollion_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# A session lasts this long after sign-in (the cookie's signature is dated).
MAX_AGE_S = 12 * 3600


@dataclass(frozen=True)
class Session:
    csrf: str
    token_sha256: str | None = None  # None: not signed in


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

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._stamp = None
        self._tokens = self._load()

    def _load(self) -> TokenFile:
        self._stamp = os.stat(self.path).st_mtime_ns
        return TokenFile.load(self.path)

    def tokens(self) -> TokenFile:
        try:
            if os.stat(self.path).st_mtime_ns != self._stamp:
                self._tokens = self._load()
        except (OSError, ValueError):
            pass  # a file being rewritten: keep the tokens read last
        return self._tokens

    def by_hash(self, digest: str) -> Token | None:
        for token in self.tokens().tokens:
            if hmac.compare_digest(token.sha256, digest):
                return token
        return None


class Sessions:
    """Reads and writes the session cookie; `tokens` None: an open front."""

    def __init__(self, secret: str, tokens: TokenSource | None, secure_cookie: bool):
        self._serializer = URLSafeTimedSerializer(secret, salt="champollion-web-session")
        self.tokens = tokens
        self.secure_cookie = secure_cookie

    def read(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=MAX_AGE_S)
        except BadSignature:  # forged, altered or expired: a fresh anonymous session
            return None
        if not isinstance(data, dict) or not isinstance(data.get("csrf"), str):
            return None
        return Session(data["csrf"], data.get("sub"))

    def new(self, token_sha256: str | None = None) -> Session:
        """A fresh session (a new CSRF token too: signing in or out changes both)."""
        return Session(secrets.token_urlsafe(24), token_sha256)

    def cookie_value(self, session: Session) -> str:
        return self._serializer.dumps({"csrf": session.csrf, "sub": session.token_sha256})

    def visitor(self, session: Session, page: str) -> Visitor:
        if self.tokens is None:
            return Visitor(Caller(None, MAINTAINER, page), session, None)
        token = self.tokens.by_hash(session.token_sha256) if session.token_sha256 else None
        if token is None or token.expired():
            return Visitor(Caller(None, REVIEWER, page), session, None)
        return Visitor(Caller(token.name, token.role, page), session, token)

    def sign_in(self, presented: str) -> Session | None:
        """The session of a visitor presenting `presented`; None when no
        (unexpired) token of the file matches."""
        if self.tokens is None:
            return None
        token = self.tokens.tokens().find(presented.strip())
        if token is None or token.expired():
            return None
        return self.new(token_hash(presented.strip()))


def csrf_ok(session: Session, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf.encode(), str(sent).encode())
