"""Fan-out and reliability: batches cross family boundaries intact, a family
that fails on any batch is null as a whole, health and reflection answer."""
import re

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from champollion.eval.v1 import gateway_pb2_grpc
from gateway.stack import EmbeddedStack
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
