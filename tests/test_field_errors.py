"""INVALID_ARGUMENT as data: the gateway's refusals carry google.rpc.BadRequest
field violations (and the entry ids), the client reads them back, and the
CLI points at the file and line from them alone, never from the text."""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from apps.client import Client, InvalidArgument
from champollion.core.field_errors import field_violations, invalid_argument
from champollion.core.limits import InvalidField
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2_grpc
from tests.test_bad_input import invalid_input_line, write_run


class DetailsOnlyGateway(gateway_pb2_grpc.GatewayServicer):
    """Refuses every upload with a message that says nothing: what is wrong
    travels in the details only."""

    def __init__(self, violations: list[InvalidField]):
        self.violations = violations

    def EvaluateUpload(self, request_iterator, context):
        for _ in request_iterator:  # the whole upload, as the gateway reads it
            pass
        context.abort_with_status(invalid_argument("invalid", self.violations))


@pytest.fixture
def details_only():
    """A real gRPC server whose refusals say nothing but their details; set
    `.violations` before calling it."""
    servicer = DetailsOnlyGateway([])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.address = f"127.0.0.1:{port}"
    yield servicer
    server.stop(None)


def test_the_cli_finds_file_and_line_from_the_details_alone(cli, details_only, tmp_path):
    details_only.violations = [InvalidField("predictions[1].latency_s", "must not be negative, got -1.0", "b")]
    # Sent in corpus order: prediction 1 is b's, on the file's first line.
    corpus, predictions = write_run(tmp_path, prediction_lines=[
        '{"id": "b", "prediction": "Adiós"}', '{"id": "a", "prediction": "Hola"}'])
    line = invalid_input_line(cli("evaluate", corpus, predictions, "--gateway", details_only.address))
    assert line == (f"champollion: error: {predictions}:1: predictions[1].latency_s (id 'b'): "
                    "must not be negative, got -1.0\n")


@pytest.mark.parametrize("field, entry_id, expected", [
    ("corpus.entries[1].id", "a", "{corpus}: corpus.entries[1].id (id 'a'): duplicate"),
    ("meta.temperature", None, "{meta}: meta.temperature: duplicate"),
    ("options.seed", None, "--seed: duplicate"),
    ("corpus.target_lang", None, "--target-lang: duplicate"),
])
def test_the_cli_names_the_file_or_flag_of_other_fields(cli, details_only, tmp_path, field, entry_id, expected):
    details_only.violations = [InvalidField(field, "duplicate", entry_id)]
    corpus, predictions = write_run(tmp_path)
    meta = tmp_path / "meta.json"
    meta.write_text('{"model_slug": "m"}', encoding="utf-8")
    line = invalid_input_line(cli("evaluate", corpus, predictions, "--meta", meta, "--target-lang", "spa",
                                  "--gateway", details_only.address))
    assert line == f"champollion: error: {expected.format(corpus=corpus, meta=meta)}\n"


def test_the_gateways_refusal_carries_the_field_and_entry_id(stack):
    with Client(stack.gateway_address) as client, pytest.raises(InvalidArgument) as refused:
        client.evaluate([{"id": "a", "source": "Hi", "reference": "Hola"}],
                        [{"id": "a", "prediction": "Hola", "latency_s": -1.0}], source_lang="eng", target_lang="spa")
    [violation] = refused.value.violations
    assert (violation.field, violation.entry_id) == ("predictions[0].latency_s", "a")
    assert violation.message == "must not be negative, got -1.0"


def test_a_family_refuses_an_overlong_text_with_details(stack):
    with grpc.insecure_channel(stack.family_addresses["surface"]) as channel:
        request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
        request.entries.add(id="long", source="x", reference="y", prediction="z " * 20_000)
        with pytest.raises(grpc.RpcError) as refused:
            family_pb2_grpc.FamilyStub(channel).ScoreBatch(request, timeout=60)
    [violation] = field_violations(refused.value)
    assert (violation.field, violation.entry_id) == ("entries[0].prediction", "long")


def test_a_refusal_without_details_has_no_violations(details_only):
    """An older gateway: the client keeps its message, and finds no field."""
    with grpc.insecure_channel(details_only.address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            family_pb2_grpc.FamilyStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED and field_violations(refused.value) == []


def test_an_id_refused_for_its_length_travels_cut(stack):
    with Client(stack.gateway_address) as client, pytest.raises(InvalidArgument) as refused:
        client.evaluate([{"id": "i" * 2**19, "source": "Hi", "reference": "Hola"}],
                        [{"id": "i" * 2**19, "prediction": "Hola"}], source_lang="eng", target_lang="spa")
    [violation] = refused.value.violations
    assert violation.field == "corpus.entries[0].id" and violation.entry_id == "i" * 80 + "..."


def test_overlong_texts_travel_cut_so_the_refusal_stays_a_refusal():
    """Trailers past 8 KiB end a call with RESOURCE_EXHAUSTED: the message,
    the path and the description are cut, each id keyed by its violation's
    place (ErrorInfo's keys are short names, not field paths)."""
    status = invalid_argument("m" * 20_000, [InvalidField("f" * 20_000, "d" * 20_000, "an id"),
                                             InvalidField("g", "bad", "other")])
    sent = sum(len(key) + len(value) for key, value in status.trailing_metadata)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT and sent < 8_192
    assert len(status.details) <= 1_000


def test_overlong_metric_names_are_refused_as_invalid(stack):
    with Client(stack.gateway_address) as client, pytest.raises(InvalidArgument) as refused:
        client.evaluate([{"id": "a", "source": "Hi", "reference": "Hola"}], [{"id": "a", "prediction": "Hola"}],
                        source_lang="eng", target_lang="spa", metrics=["m" * 5_000])
    assert "unknown metric" in str(refused.value)
