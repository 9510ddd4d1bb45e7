"""Fan-out: every batch to every family serving the run, concurrently, with
deadlines, while the run is still arriving.

A family either answers every batch completely or is reported failed as a
whole: summing statistics over part of a corpus would give a silently wrong
corpus value.
"""
from __future__ import annotations

import asyncio
import json
from typing import Callable

import grpc

from champollion.eval.v1 import family_pb2, family_pb2_grpc
from champollion.core.serving import KEEPALIVE_SECONDS, MAX_MESSAGE_BYTES

# gRPC's own machinery for replicas (no home-made balancer): round_robin over
# every address the target resolves to (a Kubernetes headless Service, or
# "ipv4:host:port,host:port"), and retries of the idempotent ScoreBatch and
# Describe on UNAVAILABLE, which the next attempt sends to another replica.
# A family's ACK comes from gRPC's own threads, not from Python, so a busy
# replica still answers pings; only a frozen or unreachable one stays silent.
PING_TIMEOUT_SECONDS = 4
SERVICE_CONFIG = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{
        "name": [{"service": "champollion.eval.v1.Family"}],
        "retryPolicy": {
            "maxAttempts": 4,
            "initialBackoff": "0.1s",
            "maxBackoff": "2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }],
}
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
    ("grpc.enable_retries", 1),
    # A retried call is replayed from a buffer; batches of long texts exceed
    # gRPC's 256 KiB default, which would silently turn retries off.
    ("grpc.per_rpc_retry_buffer_size", 64 * 1024 * 1024),
    ("grpc.retry_buffer_size", 256 * 1024 * 1024),
    # Replicas added behind a headless Service are seen within 10 s.
    ("grpc.dns_min_time_between_resolutions_ms", 10_000),
    # A replica that stops answering (frozen, its machine gone) is found by
    # its silence to HTTP/2 pings within about 6 s, idle or mid-call: its
    # connection is dropped, its calls fail UNAVAILABLE and the retry policy
    # sends them to another replica. The servers accept pings this often
    # (champollion.core.serving.SERVER_OPTIONS). gRPC 1.62 waits for a keepalive
    # ping's answer as long as for any ping (ping_timeout_ms, default 60 s),
    # so both are set.
    ("grpc.keepalive_time_ms", KEEPALIVE_SECONDS * 1000),
    ("grpc.keepalive_timeout_ms", PING_TIMEOUT_SECONDS * 1000),
    ("grpc.http2.ping_timeout_ms", PING_TIMEOUT_SECONDS * 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Keep pinging during a long batch, when no data flows (gRPC's default
    # stops after two pings without data).
    ("grpc.http2.max_pings_without_data", 0),
    # A replica that died is dialled again every second (gRPC's default backs
    # off to 2 minutes), so one restarted by supervisord or Kubernetes serves
    # the next run.
    ("grpc.initial_reconnect_backoff_ms", 1000),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

# A call's deadline grows with its batch, capped by the config's
# deadline_seconds: a small batch stuck somewhere is given up on (and sent
# once more) long before a 256-entry batch could be.
CALL_BASE_SECONDS = 30.0
CALL_SECONDS_PER_ENTRY = 1.0


def call_deadline(entries: int, cap_seconds: float) -> float:
    return min(cap_seconds, CALL_BASE_SECONDS + CALL_SECONDS_PER_ENTRY * entries)


class FamilyClient:
    """One family's channel and stub; created once per gateway process."""

    def __init__(self, name: str, address: str, deadline_seconds: float,
                 credentials: grpc.ChannelCredentials | None = None, metadata: tuple = ()):
        """Over TLS with `credentials` (GatewayConfig.family_credentials), else
        plaintext; `metadata` (GatewayConfig.family_metadata: the gateway's
        token for families served with --auth) goes with every call."""
        self.name = name
        self.address = address
        self.deadline_seconds = deadline_seconds
        self._metadata = metadata or None
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._stub = family_pb2_grpc.FamilyStub(self._channel)

    async def score_batch(self, request: family_pb2.ScoreBatchRequest) -> family_pb2.ScoreBatchResponse:
        """One try, its deadline scaled to the batch (FanOut tries once more)."""
        return await self._stub.ScoreBatch(request, timeout=call_deadline(len(request.entries), self.deadline_seconds),
                                           metadata=self._metadata)

    async def describe(self, timeout: float = 5.0) -> family_pb2.FamilyDescription:
        return await self._stub.Describe(family_pb2.DescribeRequest(), timeout=timeout, metadata=self._metadata)

    async def close(self) -> None:
        await self._channel.close()


def _check_complete(request: family_pb2.ScoreBatchRequest, response: family_pb2.ScoreBatchResponse) -> None:
    expected = [entry.id for entry in request.entries]
    returned = [entry.id for entry in response.entries]
    if returned != expected:
        raise ValueError(f"answered {len(returned)} entries for a batch of {len(expected)} (or out of order)")


def _describe_failure(error: BaseException) -> str:
    """Why a family failed, for the run card: gRPC's own details of an
    unreachable service name internal addresses, so they are left out."""
    if isinstance(error, grpc.aio.AioRpcError):
        if error.code() == grpc.StatusCode.UNAVAILABLE:
            return "UNAVAILABLE: its service could not be reached"
        return f"{error.code().name}: {error.details()}"
    return f"{type(error).__name__}: {error}"


class FanOut:
    """Sends every batch to every family as batches come, at most
    `max_in_flight` calls at once: `submit` waits for room, which holds back
    the upload (gRPC flow control does the rest), so memory stays bounded.

    Answers go to `store(family, batch_index, response)` as they come. A
    family that fails any batch is failed as a whole: its other calls are
    cancelled, no further batch is sent to it, and `failures` says why.
    A family that overran a call's deadline is in `slow` (and in progress
    reports) from then on, whether its second try succeeds or not.
    """

    def __init__(
        self,
        clients: dict[str, FamilyClient],
        max_in_flight: int,
        store: Callable[[str, int, family_pb2.ScoreBatchResponse], None],
        on_progress: Callable[[int, int, list[str]], None] | None = None,
    ):
        self._clients = clients
        self._slots = asyncio.Semaphore(max_in_flight)
        self._store = store
        self._on_progress = on_progress
        self._tasks: dict[str, set[asyncio.Task]] = {name: set() for name in clients}
        self.failures: dict[str, str] = {}
        self.slow: set[str] = set()
        self.scheduled = 0
        self.answered = 0
        # Entries sent, and entries every family has answered (or failed
        # on): what a progress bar counts, as batches differ in size.
        self.entries_sent = 0
        self.entries_scored = 0
        self._awaited: dict[int, tuple[set[str], int]] = {}

    async def submit(self, index: int, batch: family_pb2.ScoreBatchRequest) -> None:
        self.entries_sent += len(batch.entries)
        self._awaited[index] = ({name for name in self._clients if name not in self.failures}, len(batch.entries))
        self._settle(index)
        for name, client in self._clients.items():
            if name in self.failures:
                continue
            await self._slots.acquire()
            if name in self.failures:  # failed while this call waited for room
                self._slots.release()
                continue
            task = asyncio.ensure_future(self._call(client, index, batch))
            # Released when the task ends, even if cancelled before it started.
            task.add_done_callback(lambda _: self._slots.release())
            self._tasks[name].add(task)
            task.add_done_callback(self._tasks[name].discard)
            self.scheduled += 1
        self._report()

    async def _call(self, client: FamilyClient, index: int, batch: family_pb2.ScoreBatchRequest) -> None:
        try:
            response = await self._score(client, batch)
            _check_complete(batch, response)
        except Exception as error:  # any failed batch fails the family
            self._fail(client.name, _describe_failure(error))
            return
        if client.name not in self.failures:
            self._store(client.name, index, response)
            self.answered += 1
            self._awaited[index][0].discard(client.name)
            self._settle(index)
            self._report()

    def _settle(self, index: int) -> None:
        """Counts batch `index`'s entries as scored once no family owes an answer."""
        awaited = self._awaited.get(index)
        if awaited is not None and not awaited[0]:
            del self._awaited[index]
            self.entries_scored += awaited[1]

    def _fail(self, family: str, reason: str) -> None:
        if family in self.failures:
            return
        self.failures[family] = reason
        for index in list(self._awaited):  # its batches owe it nothing more
            self._awaited[index][0].discard(family)
            self._settle(index)
        self._report()
        current = asyncio.current_task()
        for task in self._tasks[family]:
            if task is not current:
                task.cancel()

    async def _score(self, client: FamilyClient, batch: family_pb2.ScoreBatchRequest) -> family_pb2.ScoreBatchResponse:
        """One more try when a replica overran the deadline (gRPC's retry
        policy covers UNAVAILABLE, not an expired deadline); the family is
        reported slow from then on."""
        try:
            return await client.score_batch(batch)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        if client.name not in self.slow:
            self.slow.add(client.name)
            self._report()
        return await client.score_batch(batch)

    def _report(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.answered, self.scheduled, sorted(self.slow))

    async def finish(self) -> None:
        """Waits for every call sent. A family's failure is in `failures`;
        anything else that went wrong (storing an answer: a full disk) is
        the gateway's own and is raised."""
        while any(self._tasks.values()):
            results = await asyncio.gather(
                *(task for tasks in self._tasks.values() for task in tasks), return_exceptions=True
            )
            for result in results:
                if isinstance(result, Exception):
                    raise result

    def cancel(self) -> None:
        for tasks in self._tasks.values():
            for task in tasks:
                task.cancel()
