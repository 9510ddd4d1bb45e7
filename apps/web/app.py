"""The web front's application (Starlette under uvicorn): the request body
limit, the session middleware, the security headers, the routes of
pages.py and review.py, and the static files. `create_app` is what
`champollion web` serves and what the tests start."""
from __future__ import annotations

import asyncio
import contextlib
import secrets
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from apps.web import growth, pages, review
from apps.web.limits import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from apps.web.rendering import CSP, Front
from apps.web.sessions import COOKIE, MAX_AGE_S, TOKENS_POLL_S, Sessions, TokenSource
from gateway.card.breakdowns import min_shown_entries
from gateway.server.tokens import TokenFile
from gateway.store import RunStore, StoreError
from gateway.store.web_sessions import WebSessions

log = structlog.get_logger()
STATIC = Path(__file__).resolve().parent / "static"
SECURITY_HEADERS = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "x-frame-options": "DENY"}


@dataclass(frozen=True)
class WebSettings:
    store_url: str
    tokens_file: str | None = None  # None: an open front, every visitor a maintainer (loopback only)
    secret: str | None = None  # signs the session cookie; None: a random one (sessions end at restart)
    secure_cookie: bool = False  # behind HTTPS
    # The most bytes a request's body may have (forms, the rating API): more is 413, refused before parsing.
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


class SessionMiddleware(BaseHTTPMiddleware):
    """Puts the visitor's session on `request.state`, starts one when there
    is none (or it does not verify, or it ended), writes it back when a
    handler changed it (sign-in, sign-out), and adds the security headers."""

    def __init__(self, app, sessions: Sessions):
        super().__init__(app)
        self.sessions = sessions

    async def dispatch(self, request: Request, call_next):
        cookie = request.cookies.get(COOKIE)
        # A signed-in session is a store read: off the event loop.
        try:
            session = await run_in_threadpool(self.sessions.read, cookie) if cookie else None
        except StoreError:  # the store away: anonymous for now (its pages answer 503)
            session = None
        fresh = session is None
        request.state.session = session or self.sessions.new()
        request.state.new_session = None
        response = await call_next(request)
        out = request.state.new_session or (request.state.session if fresh else None)
        if out is not None:
            response.set_cookie(COOKIE, self.sessions.cookie_value(out), max_age=MAX_AGE_S, httponly=True,
                                samesite="strict", secure=self.sessions.secure_cookie, path="/")
        response.headers.setdefault("content-security-policy", CSP)
        response.headers.update(SECURITY_HEADERS)
        response.headers.setdefault("cache-control", "no-store")
        return response


def create_app(settings: WebSettings) -> Starlette:
    min_shown_entries()  # ValueError now, not on a page, when the deployment sets k wrongly
    store = RunStore.open(settings.store_url)
    stored = WebSessions(store)

    def ended_removed_tokens(tokens: TokenFile) -> None:
        ended = stored.end_all_but(token.sha256 for token in tokens.tokens)
        if ended:
            log.info("web_sessions_ended", family="web", sessions=ended, why="token removed from the tokens file")

    tokens = TokenSource(settings.tokens_file, on_load=ended_removed_tokens) if settings.tokens_file else None
    sessions = Sessions(settings.secret or secrets.token_urlsafe(32), tokens, settings.secure_cookie, stored)
    front = Front(store, sessions)
    routes = [*pages.routes(front), *review.routes(front), *growth.routes(front), Mount("/static", StaticFiles(directory=STATIC), name="static")]

    async def watch_tokens() -> None:
        # Between requests too: a line removed and put back is seen gone if it stayed out TOKENS_POLL_S.
        while True:
            await asyncio.sleep(TOKENS_POLL_S)
            with contextlib.suppress(Exception):  # the store away: tried again next time
                await run_in_threadpool(tokens.tokens)

    @asynccontextmanager
    async def lifespan(app):
        watcher = asyncio.create_task(watch_tokens()) if tokens is not None else None
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            store.close()

    return Starlette(routes=routes,
                     middleware=[Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes,
                                            headers={"content-security-policy": CSP, **SECURITY_HEADERS}),
                                 Middleware(SessionMiddleware, sessions=sessions)],
                     exception_handlers=front.exception_handlers(), lifespan=lifespan)
