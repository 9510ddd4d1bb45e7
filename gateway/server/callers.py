"""Who is calling and what a role allows, without the transport: the
caller the gateway's interceptor (gateway/server/auth.py) or the web front's
session (apps/web/sessions.py) establishes, and the role and tier rules the
decisions of access.py ask."""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from champollion.core.roles import MAINTAINER, REVIEWER, ROLES, SUBMITTER
# Corpus tiers only maintainers may run or read (the tier table's maintainers_only).
from champollion.core.tiers import MAINTAINER_TIERS


@dataclass(frozen=True)
class Caller:
    """Who is calling: the token's name (None on an open gateway), its
    role, and the RPC called."""
    name: str | None
    role: str
    rpc: str


def open_caller(rpc: str) -> Caller:
    """Whoever calls a gateway or web front without a tokens file: a
    nameless maintainer (such a gateway listens on loopback only)."""
    return Caller(None, MAINTAINER, rpc)


def anonymous_caller(rpc: str) -> Caller:
    """A web visitor who has shown no valid token: nameless, the least role."""
    return Caller(None, REVIEWER, rpc)


# Set for the handler's task by the interceptor; unset outside a call.
_CALLER: ContextVar[Caller] = ContextVar("champollion_caller")


def set_caller(caller: Caller) -> None:
    """Makes `caller` the current call's (the interceptor, in the call's task)."""
    _CALLER.set(caller)


def current_caller() -> Caller:
    """Who is calling, as the interceptor established it (a maintainer
    without a name on a gateway without --auth). Outside a call through the
    interceptor, a nameless caller with the least role: nothing private
    leaks by mistake."""
    return _CALLER.get(None) or Caller(None, SUBMITTER, "this call")


def allows(role: str, needed: str) -> bool:
    return ROLES.index(role) >= ROLES.index(needed)


def may_use_tier(role: str, corpus_tier: str | None) -> bool:
    """Whether `role` may run or read a corpus of `corpus_tier` (seed 001
    §5.2: a gold corpus is fully private, maintainers only)."""
    return corpus_tier not in MAINTAINER_TIERS or allows(role, MAINTAINER)
