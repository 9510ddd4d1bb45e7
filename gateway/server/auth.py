"""Access control on the gateway: who may call which RPC.

Every gateway server has the `AccessControl` interceptor. With a tokens
file (`serve --auth FILE`, gateway/server/tokens.py) each call must carry
`authorization: Bearer <token>` metadata naming a configured token
(UNAUTHENTICATED otherwise) whose role is enough for the RPC by `RPC_ROLES`
(PERMISSION_DENIED otherwise). Without one the gateway is open (every caller
a maintainer), which `serve` allows on loopback only. Health checks and
reflection stay open either way, for probes.

Handlers ask `current_caller()` (gateway/server/callers.py) for finer rules,
which are gateway/server/access.py's (a gold corpus's runs, another token's
runs, a budget) and raise refusals, not gRPC statuses.

A call refused here is refused before its request is read
(`_refusing`): an unauthenticated caller cannot make the gateway take in a
256 MiB message.
"""
from __future__ import annotations

import inspect
from contextlib import aclosing

import grpc
import structlog

from champollion.eval.v1 import gateway_pb2
from champollion.core.roles import MAINTAINER, SUBMITTER
from gateway.server.callers import Caller, allows, open_caller, set_caller
from gateway.server.tokens import TokenFile

log = structlog.get_logger()


GATEWAY_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].full_name
# Services any caller may use without a token.
OPEN_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection")

# The one table of who may call what: the least role each Gateway RPC needs.
# An RPC not listed needs a maintainer. Finer rules (gold corpora, private
# references) are access.py's, asked by the handlers.
RPC_ROLES = {
    "Evaluate": SUBMITTER,
    "EvaluateStream": SUBMITTER,
    "EvaluateUpload": SUBMITTER,
    "Compare": SUBMITTER,
    "CompareUpload": SUBMITTER,
    "ComparePairs": SUBMITTER,
    "ComparePairsUpload": SUBMITTER,
    "Describe": SUBMITTER,
    "ListRuns": SUBMITTER,
    "GetRun": SUBMITTER,
    "Leaderboard": SUBMITTER,
    "ListCorpora": SUBMITTER,
    "GetSources": SUBMITTER,  # dev and holdout; gold sources need a maintainer
    "RegisterCorpus": MAINTAINER,
    "SetCorpusTier": MAINTAINER,
    "CheckCorpus": MAINTAINER,  # reads references and provenance
}


MISSING = ("missing token: send gRPC metadata 'authorization: Bearer <token>' "
           "(champollion: --token or CHAMPOLLION_TOKEN)")
MALFORMED = "malformed authorization header: expected exactly one 'authorization: Bearer <token>'"
UNKNOWN = "unknown token: not in this gateway's tokens file (revoked, mistyped, or for another gateway)"
EXPIRED = "expired token: {name!r} expired at {expires} (ask for a new one)"


def role_for(method: str) -> str | None:
    """The least role full method name `method` needs; None when it is open."""
    service, _, rpc = method.lstrip("/").rpartition("/")
    if service in OPEN_SERVICES:
        return None
    if service == GATEWAY_SERVICE:
        return RPC_ROLES.get(rpc, MAINTAINER)
    return MAINTAINER


def _denied(action: str, needed: str, caller: Caller) -> str:
    log.info("permission_denied", family="gateway", rpc=caller.rpc, action=action, token=caller.name,
             role=caller.role)
    return f"{action}: needs the {needed} role; token {caller.name!r} has the {caller.role} role"


class AccessControl(grpc.aio.ServerInterceptor):
    """Authenticates each call by its bearer token (none asked for when
    `tokens` is None: an open gateway) and checks its role."""

    def __init__(self, tokens: TokenFile | None):
        self.tokens = tokens

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        needed = role_for(method)
        if handler is None or needed is None:
            return handler
        rpc = method.rpartition("/")[2]
        if self.tokens is None:
            caller = open_caller(rpc)
        else:
            caller, problem = self._authenticate(handler_call_details.invocation_metadata or (), rpc)
            if caller is None:
                log.info("unauthenticated", family="gateway", rpc=rpc, reason=problem.partition(":")[0])
                return _refusing(grpc.StatusCode.UNAUTHENTICATED, problem)
        if not allows(caller.role, needed):
            return _refusing(grpc.StatusCode.PERMISSION_DENIED, _denied(rpc, needed, caller))
        return _as_caller(handler, caller)

    def _authenticate(self, metadata, rpc: str) -> tuple[Caller | None, str]:
        """The caller named by the bearer token in `metadata`, or None and
        why not (missing, malformed, unknown); the token itself is never logged."""
        values = [value for key, value in metadata if key == "authorization"]
        if not values:
            return None, MISSING
        scheme, _, token = values[0].partition(" ") if isinstance(values[0], str) else ("", "", "")
        if len(values) > 1 or scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
            return None, MALFORMED
        found = self.tokens.find(token)
        if found is None:
            return None, UNKNOWN
        if found.expired():
            return None, EXPIRED.format(name=found.name, expires=found.expires.isoformat())
        log.debug("authenticated", family="gateway", rpc=rpc, token=found.name, role=found.role)
        return Caller(found.name, found.role, rpc), ""


def _behavior_field(handler: grpc.RpcMethodHandler) -> str:
    """The name of the handler's behavior: unary_unary, unary_stream, ..."""
    return f"{'stream' if handler.request_streaming else 'unary'}_{'stream' if handler.response_streaming else 'unary'}"


def _refusing(code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler that refuses the call before reading its request. Taken as
    client-streaming whatever the RPC, so gRPC hands the call over before any
    request message is received: a unary handler would only run once the
    whole message (up to 256 MiB) had been read into memory. The client's
    message then stays unread (HTTP/2 flow control holds it back) and the
    call ends with the refusal."""
    async def refuse(request_iterator, context):
        await context.abort(code, message)

    return grpc.stream_unary_rpc_method_handler(refuse)


def _as_caller(handler: grpc.RpcMethodHandler, caller: Caller) -> grpc.RpcMethodHandler:
    """`handler` run with `caller` set for callers.current_caller. The
    variable is set inside the call's own task, which is where the handler
    (and every task or thread it starts, which copy the context) runs."""
    field = _behavior_field(handler)
    behavior = getattr(handler, field)
    if inspect.isasyncgenfunction(behavior):
        async def wrapped(request, context):
            set_caller(caller)
            # Closed when the call ends early, so the handler's clean-up runs then.
            async with aclosing(behavior(request, context)) as responses:
                async for response in responses:
                    yield response
    elif inspect.iscoroutinefunction(behavior):
        async def wrapped(request, context):
            set_caller(caller)
            return await behavior(request, context)
    else:
        raise TypeError(f"{caller.rpc}: the gateway's handlers are coroutines or async generators")
    return handler._replace(**{field: wrapped})
