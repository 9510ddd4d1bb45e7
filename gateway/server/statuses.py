"""The gRPC status of every refusal the gateway's rules and store raise:
one table, by refusals.kind_of, read by the servicer (`answers_refusals`)
for every RPC. The rules themselves know nothing of gRPC; the web front
maps the same kinds to HTTP in its own table (apps/web/rendering.py)."""
from __future__ import annotations

import functools
import inspect
from contextlib import aclosing

import grpc

from champollion.core.field_errors import abort_invalid
from champollion.core.limits import InvalidField
from gateway.server import refusals
from gateway.server.stored_runs import one_line

STATUSES: dict[type[refusals.Refused], grpc.StatusCode] = {
    refusals.InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    refusals.Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    refusals.NotFound: grpc.StatusCode.NOT_FOUND,
    refusals.Precondition: grpc.StatusCode.FAILED_PRECONDITION,
    refusals.Conflict: grpc.StatusCode.ALREADY_EXISTS,
    refusals.Aborted: grpc.StatusCode.ABORTED,
    refusals.Exhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    refusals.TimedOut: grpc.StatusCode.DEADLINE_EXCEEDED,
    refusals.Unavailable: grpc.StatusCode.UNAVAILABLE,
    refusals.Failed: grpc.StatusCode.INTERNAL,
}
assert set(STATUSES) == set(refusals.KINDS), set(refusals.KINDS) ^ set(STATUSES)


def status_of(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The status and message a refusal (one of refusals.ANSWERED) is
    answered with; a failing store in one line (database drivers' messages
    run over several)."""
    kind = refusals.kind_of(error)
    return STATUSES[kind], one_line(error) if kind is refusals.Unavailable else str(error)


async def _abort(context: grpc.aio.ServicerContext, error: Exception) -> None:
    """Ends the call with the refusal's status; a bad field also as
    google.rpc.BadRequest details (its path and entry id), which the
    client maps to a file and line without reading the text."""
    if isinstance(error, InvalidField):
        await abort_invalid(context, error)
    await context.abort(*status_of(error))


def _answering(handler):
    """`handler` (a servicer method) with its refusals answered by STATUSES."""
    if inspect.isasyncgenfunction(handler):
        @functools.wraps(handler)
        async def streaming(self, request, context):
            try:
                # Closed when the call ends early, so the handler's clean-up runs then.
                async with aclosing(handler(self, request, context)) as messages:
                    async for message in messages:
                        yield message
            except refusals.ANSWERED as error:
                await _abort(context, error)
        return streaming

    @functools.wraps(handler)
    async def unary(self, request, context):
        try:
            return await handler(self, request, context)
        except refusals.ANSWERED as error:
            await _abort(context, error)
    return unary


def answers_refusals(servicer_class: type) -> type:
    """Class decorator: every RPC the class implements (a method named as
    one of its base servicer's) answers refusals by STATUSES."""
    for name, method in list(vars(servicer_class).items()):
        rpc = any(name in vars(base) for base in servicer_class.__mro__[1:])
        if rpc and (inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)):
            setattr(servicer_class, name, _answering(method))
    return servicer_class
