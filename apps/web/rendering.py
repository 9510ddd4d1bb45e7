"""What every page handler shares: the visitor, templates, CSRF checks,
store calls off the event loop, and errors as pages with a status (never a
traceback)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

import jinja2
import structlog
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from apps.report.render import number, score_text
from apps.web.sessions import CSRF_FIELD, CSRF_HEADER, Sessions, Visitor, csrf_ok
from champollion.core.language_tags import InvalidLanguageTag, parse_tag
from gateway.server import refusals
from gateway.server.readings import check_maintainer, is_maintainer
from gateway.store import RunStore

log = structlog.get_logger()
TEMPLATES = Path(__file__).resolve().parent / "templates"
Result = TypeVar("Result")

# Pages load nothing from elsewhere: scripts, styles and fonts are the
# front's own files. The run report inlines its charts' script and data.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
REPORT_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' "
              "'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
              "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


class PageError(Exception):
    """A request the front answers with an error page (or JSON) and `status`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


_ERROR_TITLES = {400: "Bad request", 401: "Sign in", 403: "Not allowed", 404: "Not found", 409: "Conflict",
                 429: "Too many requests", 503: "Store unavailable", 504: "Too slow"}

# The HTTP status of each kind of refusal the rules and the store raise
# (gateway/server/refusals.py `kind_of`): the web's one table, as
# gateway/server/statuses.py is the gateway's.
_STATUSES: dict[type[refusals.Refused], int] = {
    refusals.InvalidRequest: 400,
    refusals.Forbidden: 403,
    refusals.NotFound: 404,
    refusals.Precondition: 409,
    refusals.Conflict: 409,
    refusals.Aborted: 409,
    refusals.Exhausted: 429,
    refusals.TimedOut: 504,
    refusals.Unavailable: 503,
    refusals.Failed: 500,
}
assert set(_STATUSES) == set(refusals.KINDS), set(refusals.KINDS) ^ set(_STATUSES)


def html_lang(tag: str | None) -> str:
    """A stored language tag (`spa_Latn`, `crk`) as HTML's lang attribute
    (`es-Latn`, `cr`): the browser picks fonts and shaping by it."""
    try:
        parsed = parse_tag(str(tag or ""))
    except InvalidLanguageTag:
        return ""
    return f"{parsed.language}-{parsed.script}" if parsed.script else parsed.language


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                     undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.filters["number"] = number
    environment.filters["score"] = score_text
    environment.filters["short"] = lambda value, n=12: (value or "")[:n]
    environment.filters["html_lang"] = html_lang
    return environment


class Front:
    """The store, the sessions and the templates of one web front."""

    def __init__(self, store: RunStore, sessions: Sessions):
        self.store = store
        self.sessions = sessions
        self.templates = _environment()

    # --- visitors --------------------------------------------------------------

    def visitor(self, request: Request, page: str) -> Visitor:
        return self.sessions.visitor(request.state.session, f"web:{page}")

    def signed_in(self, request: Request, page: str) -> Visitor:
        visitor = self.visitor(request, page)
        if not visitor.signed_in and self.sessions.tokens is not None:
            raise PageError(401, "sign in with your token to see this page")
        return visitor

    def maintainer(self, request: Request, page: str) -> Visitor:
        visitor = self.signed_in(request, page)
        check_maintainer(visitor.caller, page)
        return visitor

    @staticmethod
    def check_csrf(request: Request, sent: str | None) -> None:
        """Refuses a POST without the session's CSRF token (403)."""
        if not csrf_ok(request.state.session, sent or request.headers.get(CSRF_HEADER)):
            raise PageError(403, "the form's CSRF token is missing or stale: reload the page and send it again")

    async def form(self, request: Request):
        """A posted form (Starlette's FormData), its CSRF token checked."""
        # The body is at most the front's limit by now (limits.py); a form uploads no file.
        form = await request.form(max_files=0, max_fields=1000)
        self.check_csrf(request, form.get(CSRF_FIELD))
        return form

    async def json_body(self, request: Request) -> dict:
        """A script's JSON request, its CSRF header checked."""
        self.check_csrf(request, None)
        try:
            body = await request.json()
        except ValueError:
            raise PageError(400, "the request's body is not JSON") from None
        if not isinstance(body, dict):
            raise PageError(400, "the request's body must be a JSON object")
        return body

    # --- store calls -----------------------------------------------------------

    async def call(self, use: Callable[[RunStore], Result]) -> Result:
        return await run_in_threadpool(use, self.store)

    # --- responses -------------------------------------------------------------

    def page(self, request: Request, template: str, status: int = 200, **context) -> HTMLResponse:
        visitor = self.sessions.visitor(getattr(request.state, "new_session", None) or request.state.session,
                                        "web:page")
        html = self.templates.get_template(template).render(
            visitor=visitor, csrf=visitor.session.csrf, open_front=self.sessions.tokens is None,
            maintainer=is_maintainer(visitor.caller), **context)
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, error: Exception) -> Response:
        """An error as a page, or as JSON for a script's request."""
        status, message = self._status(error)
        if request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"error": message}, status_code=status)
        return self.page(request, "error.html.j2", status=status, title=_ERROR_TITLES.get(status, "Error"),
                         message=message, status_code=status)

    def endpoint(self, handler: Callable) -> Callable:
        """`handler` with its errors answered by `error` (inside the session
        middleware, so the answer keeps the session and the headers)."""
        async def handled(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as error:  # noqa: BLE001 - every error becomes a status, never a traceback
                return self.error(request, error)

        return handled

    def exception_handlers(self) -> dict:
        """Starlette's own errors (an unknown path, a wrong method) as pages."""
        async def handle(request: Request, error: HTTPException) -> Response:
            if not hasattr(request.state, "session"):
                request.state.session = self.sessions.new()
                request.state.new_session = None
            return self.error(request, error)

        return {HTTPException: handle}

    @staticmethod
    def _status(error: Exception) -> tuple[int, str]:
        if isinstance(error, PageError):
            return error.status, str(error)
        if isinstance(error, HTTPException):
            return error.status_code, error.detail
        kind = refusals.kind_of(error)
        if kind is not None:
            return _STATUSES[kind], str(error).splitlines()[0] if str(error) else type(error).__name__
        log.exception("web_failed", family="web")
        return 500, f"internal error ({type(error).__name__}); the server's log has the details"
