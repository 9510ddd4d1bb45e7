"""The request body limit (issue 33, finding 12): a pure ASGI middleware,
outermost, that refuses a body over `max_bytes` with 413 before anything
parses it. A declared Content-Length over the limit is refused before one
byte of the body is read; a body without one (chunked) is read up to the
limit, at most `max_bytes` + one chunk held, and refused as soon as it goes
over. A body within the limit is handed on whole, so the form and JSON
parsers behind it never see more than `max_bytes`."""
from __future__ import annotations

import json

from starlette.datastructures import Headers

# Forms (sign-in, campaigns) and the rating API's JSON are a few KiB at most.
DEFAULT_MAX_BODY_BYTES = 64 * 1024


class BodyLimitMiddleware:
    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES, headers: dict | None = None):
        if max_bytes < 0:
            raise ValueError(f"max_bytes: a number of bytes, 0 or more, got {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes
        self.headers = dict(headers or {})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await self._refuse(scope, send, 400, "the request's Content-Length is not a number")
                return
            if int(declared) > self.max_bytes:
                await self._refuse(scope, send, 413, self._message(f"declares {int(declared)} bytes"))
                return
            if int(declared) == 0:
                await self.app(scope, receive, send)
                return
        elif "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: nobody to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, send, 413, self._message(f"has more than {self.max_bytes} bytes"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        handed = False

        async def replay():
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _message(self, what: str) -> str:
        return f"request body too large: it {what}; this web front takes at most {self.max_bytes} bytes"

    async def _refuse(self, scope, send, status: int, message: str) -> None:
        """The refusal; the connection closes after it (the body is not read)."""
        if scope.get("path", "").startswith("/api/"):
            body, kind = json.dumps({"error": message}).encode(), b"application/json"
        else:
            body, kind = message.encode() + b"\n", b"text/plain; charset=utf-8"
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
                   (b"cache-control", b"no-store")]
        headers += [(name.encode(), value.encode()) for name, value in self.headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
