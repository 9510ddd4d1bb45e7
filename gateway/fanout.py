"""Fan-out: every batch to every configured family, concurrently, with deadlines.

A family either answers every batch completely or is reported failed as a
whole: summing statistics over part of a corpus would give a silently wrong
corpus value.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Callable

import grpc

from champollion.eval.v1 import family_pb2, family_pb2_grpc
from champollion.serving import MAX_MESSAGE_BYTES

# gRPC's own machinery for replicas (no home-made balancer): round_robin over
# every address the target resolves to (a Kubernetes headless Service, or
# "ipv4:host:port,host:port"), and retries of the idempotent ScoreBatch and
# Describe on UNAVAILABLE, which the next attempt sends to another replica.
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
    # Find dead connections to idle replicas before a batch is sent there.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


class FamilyClient:
    """One family's channel and stub; created once per gateway process."""

    def __init__(self, name: str, address: str, deadline_seconds: float):
        self.name = name
        self.address = address
        self.deadline_seconds = deadline_seconds
        self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._stub = family_pb2_grpc.FamilyStub(self._channel)

    async def score_batch(self, request: family_pb2.ScoreBatchRequest) -> family_pb2.ScoreBatchResponse:
        """One batch, with one more try when a replica overran the deadline
        (gRPC's retry policy covers UNAVAILABLE, not an expired deadline)."""
        try:
            return await self._stub.ScoreBatch(request, timeout=self.deadline_seconds)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
            return await self._stub.ScoreBatch(request, timeout=self.deadline_seconds)

    async def describe(self, timeout: float = 5.0) -> family_pb2.FamilyDescription:
        return await self._stub.Describe(family_pb2.DescribeRequest(), timeout=timeout)

    async def close(self) -> None:
        await self._channel.close()


@dataclass
class FamilyOutcome:
    family: str
    responses: list[family_pb2.ScoreBatchResponse] | None
    # Why the family has no result; None when it answered every batch.
    failure: str | None = None


def _check_complete(request: family_pb2.ScoreBatchRequest, response: family_pb2.ScoreBatchResponse) -> None:
    expected = [entry.id for entry in request.entries]
    returned = [entry.id for entry in response.entries]
    if returned != expected:
        raise ValueError(f"answered {len(returned)} entries for a batch of {len(expected)} (or out of order)")


def _describe_failure(error: BaseException) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    return f"{type(error).__name__}: {error}"


async def fan_out(
    clients: dict[str, FamilyClient],
    batches: list[family_pb2.ScoreBatchRequest],
    max_in_flight: int,
    on_batch_done: Callable[[], None] | None = None,
) -> dict[str, FamilyOutcome]:
    """Sends every batch to every client; at most `max_in_flight` calls at once."""
    slots = asyncio.Semaphore(max_in_flight)

    async def call(client: FamilyClient, batch):
        async with slots:
            response = await client.score_batch(batch)
        _check_complete(batch, response)
        if on_batch_done is not None:
            on_batch_done()
        return response

    async def run_family(client: FamilyClient) -> FamilyOutcome:
        tasks = [asyncio.ensure_future(call(client, batch)) for batch in batches]
        try:
            responses = await asyncio.gather(*tasks)
        except Exception as error:  # any failed batch fails the family
            for task in tasks:
                task.cancel()
            return FamilyOutcome(client.name, None, _describe_failure(error))
        return FamilyOutcome(client.name, list(responses))

    outcomes = await asyncio.gather(*(run_family(client) for client in clients.values()))
    return {outcome.family: outcome for outcome in outcomes}
