"""Admission: how many runs the gateway scores at once, how many wait for a
turn, and a prompt RESOURCE_EXHAUSTED for the rest; and the limits on
uploads (EvaluateUpload, CompareUpload): how long the gateway waits for a
part, how long for all of them, and how many a caller may have open.

A gateway that takes every run it is sent shares its CPU (and, in the
embedded stack, its event loop) among all of them: every run slows down,
and calls the server has not picked up within gRPC's unrequested-call time
(30 s) end CANCELLED without reaching a handler. Bounding the runs scored at
once keeps each of them quick and the loop free to answer the others at
once: run, wait in the queue, or retry later.

A run sent in one message (Evaluate, EvaluateStream) takes its turn when
the call starts: there is nothing left to wait for from the client. An
upload takes its turn only when scoring starts (`DeferredTurn`): when its
first batch is ready to go to the families, or, on a registered corpus,
once every prediction is in, before its budget is counted. Until then it
waits for its parts without a slot or a queue place, so uploads that send a
header and idle hold no slot (issue 33, finding 11); what they can hold is
bounded per caller (`max_open_uploads`) and in time (`upload_idle_seconds`
between parts, `upload_deadline_seconds` in all). Past its first batch an
upload keeps its slot until its answer is sent, which bounds what an idle
client can hold: max_open_uploads slots for at most upload_deadline_seconds.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import asynccontextmanager
from typing import AsyncIterator

import structlog

from gateway.server.refusals import Exhausted, TimedOut

log = structlog.get_logger()


class Admission:
    """At most `max_running` runs scored at once and `max_queued` waiting
    for a turn (first come, first served); a run beyond both is refused."""

    def __init__(self, max_running: int, max_queued: int):
        self.max_running = max_running
        self.max_queued = max_queued
        self._turns = asyncio.Semaphore(max_running)
        # Runs holding a turn or waiting for one.
        self.admitted = 0

    def refusal(self) -> str:
        return (f"the gateway is busy: {self.max_running} runs are being scored and {self.max_queued} are "
                f"waiting (max_concurrent_runs {self.max_running}, max_queued_runs {self.max_queued}); "
                f"retryable: send the run again later")

    def busy(self) -> bool:
        """Every slot and queue place taken: a run now would be refused."""
        return self.admitted >= self.max_running + self.max_queued

    @asynccontextmanager
    async def turn(self):
        """Holds one of the run slots for the body; refusals.Exhausted when
        every slot and queue place is taken. A caller that leaves while
        waiting gives its place up."""
        if self.busy():
            log.warning("run_refused", family="gateway", reason="busy", admitted=self.admitted)
            raise Exhausted(self.refusal())
        self.admitted += 1
        try:
            async with self._turns:
                yield
        finally:
            self.admitted -= 1

    @asynccontextmanager
    async def deferred(self):
        """A turn taken later, by `DeferredTurn.take` (when scoring starts),
        and given up, taken or waited for, when the body ends."""
        turn = DeferredTurn(self)
        try:
            yield turn
        finally:
            turn.release()


class DeferredTurn:
    """An upload's turn: none until `take`, which waits for a slot (in the
    queue) or raises refusals.Exhausted when the queue is
    full too. `take` may be called more than once; only the first counts."""

    def __init__(self, admission: Admission):
        self._admission = admission
        self._counted = self._held = self._closed = False

    @property
    def taken(self) -> bool:
        return self._held

    async def take(self) -> None:
        admission = self._admission
        if self._counted or self._closed:
            return
        if admission.busy():
            log.warning("run_refused", family="gateway", reason="busy", admitted=admission.admitted)
            raise Exhausted(admission.refusal())
        admission.admitted += 1
        self._counted = True
        await admission._turns.acquire()  # cancelled (the client left): release() gives the place up
        if self._closed:  # the call ended while this waited
            admission._turns.release()
            return
        self._held = True

    def release(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._held:
            self._admission._turns.release()
        if self._counted:
            self._admission.admitted -= 1


# Event-loop turns an upload's end waits for the call's cancellation, if
# that is what ended it (gRPC reports the end first); measured: 2.
CANCEL_TURNS = 4

# Whom an open gateway (no tokens file) counts uploads for: every caller is
# one, as it has no identity to tell callers apart by (the peer's address
# is loopback, or an authenticating proxy's, for all of them).
OPEN_GATEWAY_CALLER = None


class UploadLimits:
    """The limits on uploads: at most `max_open` open at once per token
    (an open gateway's callers count as one), each part awaited at most
    `idle_seconds`, and all of them `deadline_seconds` in all. The time
    counted is the time the gateway waits for the client; while it holds an
    upload back (its fan-out full, or waiting for a slot) the clock stops,
    so a large run on a busy gateway is not ended for the gateway's own pace."""

    def __init__(self, idle_seconds: float, deadline_seconds: float, max_open: int):
        self.idle_seconds = idle_seconds
        self.deadline_seconds = deadline_seconds
        self.max_open = max_open
        # Token name (OPEN_GATEWAY_CALLER on an open gateway) -> uploads open.
        self.open_uploads: Counter = Counter()

    def _too_many(self, name: str | None) -> str:
        who = (f"token {name!r} has" if name is not None
               else "this gateway's callers (it has no tokens, so all count as one) have")
        return (f"too many uploads open: {who} {self.open_uploads[name]} uploads open (max_open_uploads "
                f"{self.max_open}); retryable: send this run once one of them has ended")

    @asynccontextmanager
    async def open(self, name: str | None):
        """Counts one upload open for token `name` for the body; raises
        refusals.Exhausted when the token has max_open
        already, before any part is read."""
        if self.open_uploads[name] >= self.max_open:
            log.warning("upload_refused", family="gateway", reason="max_open_uploads", token=name,
                        open_uploads=self.open_uploads[name])
            raise Exhausted(self._too_many(name))
        self.open_uploads[name] += 1
        try:
            yield
        finally:
            self.open_uploads[name] -= 1
            if not self.open_uploads[name]:
                del self.open_uploads[name]

    async def watch(self, parts: AsyncIterator, context=None) -> AsyncIterator:
        """The upload's parts, each awaited at most idle_seconds and all of
        them deadline_seconds in all (the first included: a call that sends
        nothing is ended too); past either, refusals.TimedOut
        naming the limit. The wait runs in the caller's
        task (asyncio.timeout), as gRPC reads the call's messages.

        gRPC ends the parts of a call the client cancelled as if the upload
        were complete: with `context` (the call's), the end waits a few loop
        turns for the cancellation and raises CancelledError, so that what
        came is not scored as a whole run and nothing is answered to a call
        that is gone (best effort: a cancellation reported later than that
        is found when the answer cannot be sent, as before)."""
        loop = asyncio.get_running_loop()
        iterator = parts.__aiter__()
        waited = 0.0
        number = 0
        while True:
            number += 1
            left = self.deadline_seconds - waited
            idle = left >= self.idle_seconds
            started = loop.time()
            try:
                async with asyncio.timeout(min(self.idle_seconds, left)):
                    part = await iterator.__anext__()
            except StopAsyncIteration:
                if context is not None:
                    # The cancellation, when that is what ended the parts, comes
                    # a loop turn or two after the end (it then raises here).
                    for _ in range(CANCEL_TURNS):
                        await asyncio.sleep(0)
                if context is not None and (context.cancelled() or context.done()):
                    log.info("upload_cancelled", family="gateway", part=number)
                    raise asyncio.CancelledError("the client cancelled the upload") from None
                return
            except TimeoutError:
                raise self._expired(idle, number) from None
            waited += loop.time() - started
            yield part

    def _expired(self, idle: bool, number: int) -> TimedOut:
        if idle:
            reason, message = "upload_idle_seconds", (
                f"upload idle: no part came for {self.idle_seconds:g} s (upload_idle_seconds "
                f"{self.idle_seconds:g}) while part {number} was awaited; the run was dropped: send it again "
                f"without pausing between parts")
        else:
            reason, message = "upload_deadline_seconds", (
                f"upload too slow: its parts took more than {self.deadline_seconds:g} s in all to come "
                f"(upload_deadline_seconds {self.deadline_seconds:g}; ended while part {number} was awaited); "
                f"the run was dropped: send it again in one go")
        log.warning("upload_expired", family="gateway", reason=reason, part=number)
        return TimedOut(message)
