"""Admission (issue 15): a gateway scores at most max_concurrent_runs runs at
once, queues max_queued_runs more, and refuses the rest at once with a
retryable RESOURCE_EXHAUSTED, never a dropped call."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack
from gateway.server.admission import Admission
from gateway.server.config import ConfigError, GatewayConfig
from tests.conftest import make_request

ENTRIES = [{"id": "a", "reference": "Hola"}, {"id": "b", "reference": "Adiós"}]


@pytest.fixture
def small_gateway(stack):
    """A gateway over the session's families that scores one run at once and queues one."""
    with EmbeddedStack(families=(), remote_families=stack.family_addresses) as running:
        running.gateway.admission = Admission(max_running=1, max_queued=1)
        yield running


def wait_until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        threading.Event().wait(0.01)


def test_runs_beyond_the_slots_and_the_queue_are_refused_at_once(small_gateway):
    admission = small_gateway.gateway.admission
    release = threading.Event()
    request = make_request(ENTRIES, batch_size=len(ENTRIES))

    def held_upload():
        """An upload that holds its turn until `release`: its first batch is
        ready (the part after the entries' lets them go), so scoring has
        started and it has its slot (an upload that idles before that holds
        none: tests/test_upload_limits.py); its end comes on `release`."""
        yield request
        yield gateway_pb2.EvaluateRequest()
        release.wait(60)

    with grpc.insecure_channel(small_gateway.gateway_address) as channel, ThreadPoolExecutor(2) as pool:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        running = pool.submit(lambda: list(stub.EvaluateUpload(held_upload(), timeout=120)))
        wait_until(lambda: admission.admitted == 1)
        queued = pool.submit(stub.Evaluate, request, timeout=120)
        wait_until(lambda: admission.admitted == 2)
        started = time.perf_counter()
        with pytest.raises(grpc.RpcError) as refused:
            stub.Evaluate(request, timeout=120)
        assert time.perf_counter() - started < 5
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "retryable" in refused.value.details()
        assert "max_concurrent_runs 1, max_queued_runs 1" in refused.value.details()
        release.set()
        assert running.result(timeout=120)[-1] is not None
        assert queued.result(timeout=120).run_card.scores.total == 2
    assert admission.admitted == 0


def test_a_caller_that_leaves_the_queue_gives_its_place_up(small_gateway):
    admission = small_gateway.gateway.admission
    release = threading.Event()

    def parts():
        yield make_request(ENTRIES, batch_size=len(ENTRIES))
        yield gateway_pb2.EvaluateRequest()  # the first batch is ready: the upload takes its slot
        release.wait(60)

    with grpc.insecure_channel(small_gateway.gateway_address) as channel, ThreadPoolExecutor(1) as pool:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        holding = pool.submit(lambda: list(stub.EvaluateUpload(parts(), timeout=120)))
        wait_until(lambda: admission.admitted == 1)
        waiting = stub.Evaluate.future(make_request(ENTRIES), timeout=120)
        wait_until(lambda: admission.admitted == 2)
        waiting.cancel()
        wait_until(lambda: admission.admitted == 1)
        release.set()
        holding.result(timeout=120)
    wait_until(lambda: admission.admitted == 0)


@pytest.mark.parametrize("setting, value", [("max_concurrent_runs", 0), ("max_queued_runs", -1),
                                            ("max_text_chars", "20k"), ("max_concurrent_runs", True)])
def test_admission_and_limit_settings_are_checked(setting, value):
    with pytest.raises(ConfigError, match=setting):
        GatewayConfig(**{setting: value})
