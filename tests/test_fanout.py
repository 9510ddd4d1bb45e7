"""Fan-out and reliability: batches cross family boundaries intact, a family
that fails on any batch is null as a whole, a batch past its deadline is sent
once more, health and reflection answer."""
import asyncio
import re

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from champollion.eval.v1 import gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack, start_family, start_gateway
from champollion.core.run_card import run_card_from_proto
from gateway.server.config import GatewayConfig
from services.contract import BatchOutput
from services.servicer import FamilyServicer
from services.surface.metrics import SurfaceScorer
from tests.conftest import evaluate, make_request

ENTRIES = [{"id": f"e{i}", "reference": f"frase número {i} del corpus"} for i in range(10)]


class FailingOnSecondBatch(SurfaceScorer):
    """A real surface scorer that raises on its second batch."""

    def __init__(self):
        self.calls = 0

    def score(self, entries, context) -> BatchOutput:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("analyzer crashed")
        return super().score(entries, context)


class DroppingAnEntry(SurfaceScorer):
    def score(self, entries, context) -> BatchOutput:
        output = super().score(entries, context)
        output.entries.pop()
        return output


def evaluate_with_scorer(scorer, batch_size=4):
    """A gateway whose surface family runs `scorer` behind real gRPC."""
    with EmbeddedStack(families=(), servicers={"surface": FamilyServicer(scorer)}) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            return evaluate(gateway_pb2_grpc.GatewayStub(channel), make_request(ENTRIES, batch_size=batch_size))


def test_a_failed_batch_fails_the_whole_family():
    card = evaluate_with_scorer(FailingOnSecondBatch())
    assert card["scores"]["chrf_plus_plus"] is None
    assert any("family 'surface' failed (INTERNAL: surface: RuntimeError: analyzer crashed)" in w for w in card["warnings"])


def test_an_incomplete_answer_is_not_summed():
    card = evaluate_with_scorer(DroppingAnEntry())
    assert card["scores"]["chrf_plus_plus"] is None
    assert any(re.search(r"answered \d+ entries for a batch of \d+", w) for w in card["warnings"])


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_batch_size_does_not_change_scores(gateway, batch_size):
    predictions = [{"id": e["id"], "prediction": e["reference"].replace("frase", "oración")} for e in ENTRIES]
    card = evaluate(gateway, make_request(ENTRIES, predictions, batch_size=batch_size))
    reference = evaluate(gateway, make_request(ENTRIES, predictions, batch_size=1000))
    for key in ("chrf_plus_plus", "bleu", "ter", "exact_match_rate", "length_ratio"):
        assert card["scores"][key] == pytest.approx(reference["scores"][key], abs=1e-9)


def test_health_and_reflection_on_every_server(stack):
    for address in [stack.gateway_address, *stack.family_addresses.values()]:
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            responses = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            names = {s.name for r in responses for s in r.list_services_response.service}
            assert "grpc.health.v1.Health" in names
            assert names & {"champollion.eval.v1.Gateway", "champollion.eval.v1.Family"}


class CountingScorer(SurfaceScorer):
    def __init__(self):
        self.batches = 0

    def score(self, entries, context):
        self.batches += 1
        return super().score(entries, context)


def test_round_robin_over_replicas_and_failover_to_a_live_one(gateway):
    """One surface address resolving to two replicas: both get batches; with
    one replica gone, the run completes on the other with the same scores."""
    first, second = CountingScorer(), CountingScorer()
    entries = [{"id": f"e{i}", "reference": f"frase número {i} del corpus"} for i in range(40)]
    undisturbed = evaluate(gateway, make_request(entries, batch_size=4))
    replica_a = EmbeddedStack(families=(), servicers={"surface": FamilyServicer(first)})
    with replica_a as a, EmbeddedStack(families=(), servicers={"surface": FamilyServicer(second)}) as b:
        both = f"ipv4:{a.family_addresses['surface']},{b.family_addresses['surface']}"
        with EmbeddedStack(families=(), remote_families={"surface": both}) as front:
            with grpc.insecure_channel(front.gateway_address) as channel:
                stub = gateway_pb2_grpc.GatewayStub(channel)
                # The first run may start on whichever replica connected first.
                evaluate(stub, make_request(entries, batch_size=4))
                first.batches = second.batches = 0
                card = evaluate(stub, make_request(entries, batch_size=4))
                assert first.batches > 0 and second.batches > 0
                assert first.batches + second.batches == 10
                replica_a.stop_family("surface")
                served_before = second.batches
                after = evaluate(stub, make_request(entries, batch_size=4))
                assert second.batches - served_before == 10
    for key in ("chrf_plus_plus", "bleu", "ter", "exact_match_rate"):
        assert card["scores"][key] == pytest.approx(undisturbed["scores"][key])
        assert after["scores"][key] == pytest.approx(undisturbed["scores"][key])
    assert not any("surface" in w and "failed" in w for w in after["warnings"])


class OverrunningFirstCalls(FamilyServicer):
    """A real surface servicer whose first `overruns` ScoreBatch calls never
    answer: each ends only when the caller's deadline expires and gRPC
    cancels it."""

    def __init__(self, overruns: int):
        super().__init__(SurfaceScorer())
        self.overruns = overruns
        self.calls = 0
        self.cancelled = 0

    async def ScoreBatch(self, request, context):
        self.calls += 1
        if self.calls <= self.overruns:
            try:
                await asyncio.Event().wait()  # never set
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return await super().ScoreBatch(request, context)


DEADLINE_SECONDS = 0.5


async def _evaluate_with_deadline(family: FamilyServicer, request) -> dict:
    """A gateway with a short per-call deadline in front of `family` as its
    only (surface) family, both real servers on loopback."""
    family_server, family_port = await start_family("surface", "127.0.0.1:0", family)
    config = GatewayConfig(families={"surface": f"127.0.0.1:{family_port}"}, deadline_seconds=DEADLINE_SECONDS)
    gateway_server, gateway_port, gateway = await start_gateway(config, "127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway_port}") as channel:
            response = await gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=30)
    finally:
        await gateway.close()
        await gateway_server.stop(None)
        await family_server.stop(None)
    return run_card_from_proto(response.run_card)


def test_a_batch_past_its_deadline_is_sent_once_more(gateway):
    request = make_request(ENTRIES, batch_size=100)  # one batch
    family = OverrunningFirstCalls(overruns=1)
    card = asyncio.run(_evaluate_with_deadline(family, request))
    assert (family.calls, family.cancelled) == (2, 1)
    # Complete, and the card says the family was slow.
    assert [w for w in card["warnings"] if "surface" in w] == [
        "family 'surface' was slow: a batch overran its call deadline and was sent once more; "
        "its scores are complete"], card["warnings"]
    undisturbed = evaluate(gateway, request)
    for key in ("chrf_plus_plus", "bleu", "ter", "exact_match_rate"):
        assert card["scores"][key] == undisturbed["scores"][key]


def test_a_batch_past_its_deadline_twice_fails_the_family():
    family = OverrunningFirstCalls(overruns=2)
    card = asyncio.run(_evaluate_with_deadline(family, make_request(ENTRIES, batch_size=100)))
    assert (family.calls, family.cancelled) == (2, 2), "one more try, not more"
    assert card["scores"]["chrf_plus_plus"] is None
    assert any(w.startswith("family 'surface' failed (DEADLINE_EXCEEDED") for w in card["warnings"]), card["warnings"]
