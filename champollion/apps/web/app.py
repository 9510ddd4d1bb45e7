"""The web front's application (Starlette under uvicorn): the session
middleware, the security headers, the routes of pages.py and review.py,
and the static files. `create_app` is what `champollion web` serves and
what the tests start."""
from __future__ import annotations

import secrets
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from champollion.apps.web import pages, review
from champollion.apps.web.rendering import CSP, Front
from champollion.apps.web.sessions import COOKIE, MAX_AGE_S, Sessions, TokenSource
from gateway.store import RunStore

STATIC = Path(__file__).resolve().parent / "static"
@dataclass(frozen=True)
class WebSettings:
    store_url: str
    tokens_file: str | None = None  # None: an open front, every visitor a maintainer (loopback only)
    secret: str | None = None  # signs the session cookie; None: a random one (sessions end at restart)
    secure_cookie: bool = False  # behind HTTPS


class SessionMiddleware(BaseHTTPMiddleware):
    """Puts the visitor's session on `request.state`, starts one when there
    is none (or it does not verify), writes it back when a handler changed
    it (sign-in, sign-out), and adds the security headers."""

    def __init__(self, app, sessions: Sessions):
        super().__init__(app)
        self.sessions = sessions

    async def dispatch(self, request: Request, call_next):
        session = self.sessions.read(request.cookies.get(COOKIE))
        fresh = session is None
        request.state.session = session or self.sessions.new()
        request.state.new_session = None
        response = await call_next(request)
        out = request.state.new_session or (request.state.session if fresh else None)
        if out is not None:
            response.set_cookie(COOKIE, self.sessions.cookie_value(out), max_age=MAX_AGE_S, httponly=True,
                                samesite="strict", secure=self.sessions.secure_cookie, path="/")
        response.headers.setdefault("content-security-policy", CSP)
        response.headers["x-content-type-options"] = "nosniff"
        response.headers["referrer-policy"] = "no-referrer"
        response.headers["x-frame-options"] = "DENY"
        response.headers.setdefault("cache-control", "no-store")
        return response


def create_app(settings: WebSettings) -> Starlette:
    store = RunStore.open(settings.store_url)
    tokens = TokenSource(settings.tokens_file) if settings.tokens_file else None
    sessions = Sessions(settings.secret or secrets.token_urlsafe(32), tokens, settings.secure_cookie)
    front = Front(store, sessions)
    routes = [*pages.routes(front), *review.routes(front), Mount("/static", StaticFiles(directory=STATIC), name="static")]
    @asynccontextmanager
    async def lifespan(app):
        yield
        store.close()

    return Starlette(routes=routes, middleware=[Middleware(SessionMiddleware, sessions=sessions)],
                     exception_handlers=front.exception_handlers(), lifespan=lifespan)
