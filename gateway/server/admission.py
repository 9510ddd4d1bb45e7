"""Admission: how many runs the gateway scores at once, how many wait for a
turn, and a prompt RESOURCE_EXHAUSTED for the rest.

A gateway that takes every run it is sent shares its CPU (and, in the
embedded stack, its event loop) among all of them: every run slows down,
and calls the server has not picked up within gRPC's unrequested-call time
(30 s) end CANCELLED without reaching a handler. Bounding the runs scored at
once keeps each of them quick and the loop free to answer the others at
once: run, wait in the queue, or retry later.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import grpc
import structlog

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

    @asynccontextmanager
    async def turn(self, context):
        """Holds one of the run slots for the body; aborts the call with
        RESOURCE_EXHAUSTED when every slot and queue place is taken. A
        caller that leaves while waiting gives its place up."""
        if self.admitted >= self.max_running + self.max_queued:
            log.warning("run_refused", family="gateway", reason="busy", admitted=self.admitted)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.refusal())
        self.admitted += 1
        try:
            async with self._turns:
                yield
        finally:
            self.admitted -= 1
