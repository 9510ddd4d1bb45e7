"""Shared fixtures: one embedded stack per test session, a gateway stub, the
run-card schema, and small builders for requests."""
from __future__ import annotations

import json
from pathlib import Path

import grpc
import jsonschema
import pytest

from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from champollion.launch.embedded import EmbeddedStack
from gateway.card.run_card import run_card_from_proto

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "eng-spa"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "run_card.schema.json"


def load_schema() -> dict:
    """The shared run-card schema (copied verbatim from shared/schemas), with
    one correction: it types totals.cost_per_1k_tokens as an integer, but spec
    §6.2 defines it as total_cost_usd / total_tokens x 1000, a fraction of a
    dollar for any real run."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    schema["properties"]["totals"]["properties"]["cost_per_1k_tokens"]["type"] = ["number", "null"]
    return schema


@pytest.fixture(scope="session")
def run_card_validator():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def stack():
    with EmbeddedStack(batch_size=64) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(stack):
    with grpc.insecure_channel(stack.gateway_address) as channel:
        yield gateway_pb2_grpc.GatewayStub(channel)


def make_request(
    entries: list[dict],
    predictions: list[dict] | None = None,
    source_lang: str = "eng",
    target_lang: str = "spa",
    meta: dict | None = None,
    batch_size: int = 0,
) -> gateway_pb2.EvaluateRequest:
    """A request from plain dicts; predictions default to the references."""
    if predictions is None:
        predictions = [{"id": e["id"], "prediction": e["reference"]} for e in entries]
    request = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="test", source_lang=source_lang, target_lang=target_lang),
        predictions=[gateway_pb2.Prediction(**p) for p in predictions],
        meta=gateway_pb2.RunMeta(**(meta or {})),
    )
    for entry in entries:
        request.corpus.entries.add(**{"source": "a source sentence", **entry})
    request.options.batch_size = batch_size
    return request


def evaluate(gateway, request) -> dict:
    return run_card_from_proto(gateway.Evaluate(request, timeout=120).run_card)
