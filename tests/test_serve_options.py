"""`champollion serve` passes every family option on: --languages, --device
and --comet-dir reach each family's factory whether it serves the whole stack
(no --family) or named families; --max-text-chars reaches each family's
servicer (and the stack's gateway). The server runs in-process and is stopped by
the SIGTERM it handles in production."""
import asyncio
import os
import signal

import grpc
import pytest

from apps import cli
from apps.cli import serve
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2_grpc
from apps.launch import embedded
from services.registry import IMPLEMENTED
from tests.conftest import make_request


@pytest.fixture
def factory_calls(monkeypatch):
    """The real servicer factory of the stack, wrapped to record the options each family is given."""
    calls = {}
    real = embedded.create_servicer

    def recording(name, languages=None, **options):
        calls[name] = {"languages": languages, **options}
        return real(name, languages, **options)

    monkeypatch.setattr(embedded, "create_servicer", recording)
    return calls


class Started:
    """What the wrapped start functions started, and a way to wait for it."""

    def __init__(self):
        self.things = []
        self.changed = asyncio.Event()

    def add(self, thing):
        self.things.append(thing)
        self.changed.set()

    async def wait_for(self, count: int, task: asyncio.Task):
        while len(self.things) < count:
            self.changed.clear()
            await asyncio.wait([task, asyncio.ensure_future(self.changed.wait())], return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                task.result()  # raises what stopped the server early
                raise AssertionError("serve returned before starting")


@pytest.fixture
def started(monkeypatch):
    """The real start_stack and start_family, reporting what they started."""
    found = Started()
    real_stack, real_family = serve.start_stack, serve.start_family

    async def start_stack(**options):
        stack = await real_stack(**options)
        found.add(stack)
        return stack

    async def start_family(*args, **options):
        server, port = await real_family(*args, **options)
        found.add(port)
        return server, port

    monkeypatch.setattr(serve, "start_stack", start_stack)
    monkeypatch.setattr(serve, "start_family", start_family)
    return found


async def _serve_then_stop(argv, started, expected_starts, check):
    """Runs `champollion serve ARGV` until it has started `expected_starts`
    things, awaits `check()`, then stops it with SIGTERM."""
    task = asyncio.create_task(serve._serve(cli.build_parser().parse_args(argv)))
    await started.wait_for(expected_starts, task)
    try:
        await check()
    finally:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, timeout=30)


def test_serve_without_family_passes_every_option_to_every_family(tmp_path, factory_calls, started):
    argv = ["serve", "--port", "0", "--no-store", "--languages", "nob,spa", "--device", "cpu",
            "--comet-dir", str(tmp_path)]

    async def check():
        (stack,) = started.things
        async with grpc.aio.insecure_channel(stack.gateway_address) as channel:
            described = await gateway_pb2_grpc.GatewayStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
        languages = {status.family: list(status.description.languages) for status in described.families}
        assert languages["structural"] == ["nob", "spa"]

    asyncio.run(_serve_then_stop(argv, started, 1, check))
    expected = {"languages": ["nob", "spa"], "device": "cpu", "comet_dir": str(tmp_path)}
    assert factory_calls == {name: expected for name in IMPLEMENTED}


def test_serve_with_a_family_passes_every_option_to_it(tmp_path, factory_calls, started):
    argv = ["serve", "--family", "semantic", "--port", "0", "--languages", "eus", "--device", "cpu",
            "--comet-dir", str(tmp_path)]

    async def check():
        (port,) = started.things
        assert port > 0

    asyncio.run(_serve_then_stop(argv, started, 1, check))
    assert factory_calls == {"semantic": {"languages": ["eus"], "device": "cpu", "comet_dir": str(tmp_path)}}


async def _details_of_refusal(call) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        return error.details()
    raise AssertionError("the call was not refused")


def _batch(prediction: str) -> family_pb2.ScoreBatchRequest:
    return family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa", entries=[
        family_pb2.BatchEntry(id="a", source="Save", reference="Guardar", prediction=prediction)])


def test_serve_max_text_chars_sets_the_stacks_gateway_and_families(started):
    argv = ["serve", "--port", "0", "--no-store", "--max-text-chars", "100"]

    async def check():
        (stack,) = started.things
        async with grpc.aio.insecure_channel(stack.family_addresses["semantic"]) as channel:
            family = family_pb2_grpc.FamilyStub(channel)
            assert len((await family.ScoreBatch(_batch("x" * 100), timeout=60)).entries) == 1
            details = await _details_of_refusal(family.ScoreBatch(_batch("x" * 101), timeout=60))
        assert details == "entries[0].prediction (id 'a'): a text of 101 characters (at most 100)"
        request = make_request([{"id": "a", "reference": "Hola"}], [{"id": "a", "prediction": "x" * 101}])
        async with grpc.aio.insecure_channel(stack.gateway_address) as channel:
            details = await _details_of_refusal(gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=60))
        assert details == "predictions[0].prediction (id 'a'): a text of 101 characters (at most 100)"

    asyncio.run(_serve_then_stop(argv, started, 1, check))


def test_serve_max_text_chars_reaches_a_named_family(started):
    argv = ["serve", "--family", "surface", "--port", "0", "--max-text-chars", "100"]

    async def check():
        (port,) = started.things
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            details = await _details_of_refusal(family_pb2_grpc.FamilyStub(channel).ScoreBatch(_batch("x" * 101)))
        assert details == "entries[0].prediction (id 'a'): a text of 101 characters (at most 100)"

    asyncio.run(_serve_then_stop(argv, started, 1, check))


def test_serve_refuses_a_max_text_chars_below_1(cli):
    result = cli("serve", "--family", "surface", "--port", "0", "--max-text-chars", "0")
    assert result.exit_code == 2
    assert result.stderr == "champollion: error: --max-text-chars: must be a whole number of at least 1, got 0\n"
