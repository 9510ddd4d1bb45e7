"""Families scoring in worker processes (services/workers.py): the same run
card as scoring in threads, a killed worker failing only its batch and being
replaced, cancelled calls never started, no process left after stop, the
families' batches of one affinity key in one worker, and workers started
without importing their command's main script."""
from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

from champollion.core.cards import default_registry
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2_grpc
from apps.launch.embedded import EmbeddedStack, start_family
from champollion.core.run_card import reproducible_part
from services.contract import BatchContext
from services.registry import scorer_spec
from services.workers import ScorerSpec, WorkerDied, WorkerPool, WorkerScoringError, _Worker
from tests.conftest import EXAMPLE, REPO, evaluate, make_request


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _differences(a, b, path: str = "") -> list[str]:
    """Where two cards differ, as paths (a readable failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b)) for d in _differences(a.get(key), b.get(key), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r:.80} != {b!r:.80}"]


def _example_card(cli, gateway_address: str) -> dict:
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--glossary", EXAMPLE / "glossary.json", "--batch-size", "5", "--gateway", gateway_address, "--json",
                 "--entries")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_two_workers_give_the_card_of_scoring_in_threads(cli):
    # Stacks one after the other: gRPC's asyncio poller logs spurious
    # BlockingIOErrors when two stacks' event loops serve at once.
    with EmbeddedStack(workers=0, store=None) as running:
        assert running.worker_pools == []
        in_threads = _example_card(cli, running.gateway_address)
    with EmbeddedStack(workers=2, store=None) as running:
        in_workers = _example_card(cli, running.gateway_address)
        (pool,) = running.worker_pools
        pids = pool.pids()
    # 36 entries in batches of 5 for each of 5 families went to the pool of two started workers.
    assert len(pids) == 2 and pool.batches >= 5 * 8
    assert not _differences(reproducible_part(in_threads), reproducible_part(in_workers))
    assert not any(_alive(pid) for pid in pids), "no worker outlives its stack"


def test_one_worker_or_none_scores_in_threads():
    for workers in (0, 1):
        with EmbeddedStack(families=("surface",), workers=workers, store=None) as running:
            assert running.worker_pools == []


def _long_entries(count: int, prefix: str = "long") -> list[dict]:
    sentence = "the quick brown fox jumps over the lazy dog while the cat watches from the warm window sill"
    return [{"id": f"{prefix}-{i}", "source": sentence, "reference": f"{sentence} {i}"} for i in range(count)]


@contextlib.contextmanager
def _surface_with_two_workers():
    """A gateway over the surface family scored by 2 workers, warm: (stub, pool)."""
    with EmbeddedStack(families=("surface",), workers=2, store=None) as running, \
            grpc.insecure_channel(running.gateway_address) as channel:
        (pool,) = running.worker_pools
        _wait_until_warm(pool)
        yield gateway_pb2_grpc.GatewayStub(channel), pool


def _wait_until_warm(pool: WorkerPool) -> None:
    deadline = time.monotonic() + 120
    while (pool.warming() or not pool.pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool.warming()


def test_a_killed_worker_fails_its_batch_clearly_and_is_replaced():
    with _surface_with_two_workers() as (gateway, pool):
        victims = pool.pids()
        assert len(victims) == 2, "the stack started its workers"
        # One batch that takes seconds: its worker (either) is killed while it scores.
        entries = _long_entries(6000)
        # Predictions far from their references: TER's shift search takes its time.
        predictions = [{"id": e["id"], "prediction": " ".join(reversed(e["reference"].split()))} for e in entries]
        request = make_request(entries, predictions, batch_size=6000)
        cards = []
        caller = threading.Thread(target=lambda: cards.append(evaluate(gateway, request)))
        caller.start()
        deadline = time.monotonic() + 60
        while pool.batches < 1 and time.monotonic() < deadline:  # the batch has reached a worker
            time.sleep(0.01)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        caller.join(timeout=120)
        (card,) = cards
        assert card["scores"]["chrf_plus_plus"] is None
        failures = [w for w in card["warnings"] if w.startswith("family 'surface' failed (INTERNAL: surface: worker "
                                                                "process ")]
        assert len(failures) == 1, card["warnings"]
        assert any(f"worker process {pid} was killed by SIGKILL while scoring this batch; it was replaced)" in failures[0]
                   for pid in victims), failures

        # The stack goes on: the next run is complete.
        again = evaluate(gateway, make_request(_long_entries(10)))
        assert again["scores"]["chrf_plus_plus"] is not None
        assert not [w for w in again["warnings"] if "surface" in w]
        assert pool.replaced >= 1 and not set(victims) & set(pool.pids())
        pids = pool.pids()
    assert pids and not any(_alive(pid) for pid in [*pids, *victims]), "no worker outlives its stack"


def test_a_worker_killed_while_idle_is_replaced_without_failing_a_batch():
    """The batch is sent at once, before the pool can have noticed the
    deaths: a worker acknowledges a batch before scoring it, so one that died
    without acknowledging it loses nothing and its replacement takes it."""
    with _surface_with_two_workers() as (gateway, pool):
        for pid in pool.pids():
            os.kill(pid, signal.SIGKILL)
        card = evaluate(gateway, make_request(_long_entries(4), batch_size=2))
        assert card["scores"]["chrf_plus_plus"] is not None
        assert not [w for w in card["warnings"] if "surface" in w]
        assert pool.replaced >= 1


def _batch(entries: int, prefix: str = "long") -> bytes:
    request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
    for entry in _long_entries(entries, prefix):
        request.entries.add(prediction=entry["reference"][:40], **entry)
    return request.SerializeToString()


def test_a_call_cancelled_while_it_waits_for_a_worker_never_starts():
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))
    spec = scorer_spec("surface", None, {})

    async def scenario():
        pool = WorkerPool(1)
        try:
            busy = asyncio.create_task(pool.score(spec, _batch(300), context))
            waiting = asyncio.create_task(pool.score(spec, _batch(3), context))
            # Cancelled as soon as the worker has taken the busy batch (a fixed
            # wait could outlast that batch on a fast machine: the waiting call
            # would then have run).
            while pool.batches < 1:
                await asyncio.sleep(0.001)
            waiting.cancel()
            response = family_pb2.ScoreBatchResponse.FromString(await busy)
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert len(response.entries) == 300
            assert pool.batches == 1, "the cancelled call was not sent to a worker"
            after = family_pb2.ScoreBatchResponse.FromString(await pool.score(spec, _batch(3), context))
            assert [e.id for e in after.entries] == ["long-0", "long-1", "long-2"]
        finally:
            pool.close()

    asyncio.run(scenario())


def test_a_scorer_error_in_a_worker_fails_the_batch_with_its_message():
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))

    async def scenario():
        pool = WorkerPool(1)
        try:
            with pytest.raises(WorkerScoringError) as raised:
                await pool.score(ScorerSpec("no-such-family", "services.no_such_family:create_scorer"), _batch(1),
                                 context)
            assert str(raised.value) == "ModuleNotFoundError: No module named 'services.no_such_family'"
            # The worker survived its batch's failure.
            assert len(pool.pids()) == 1 and pool.replaced == 0
        finally:
            pool.close()

    asyncio.run(scenario())


def _workers_running() -> set[int]:
    return {child.pid for child in multiprocessing.active_children() if child.name == "champollion-worker"}


def test_a_family_served_alone_scores_in_workers_of_its_own_until_it_stops():
    request = family_pb2.ScoreBatchRequest.FromString(_batch(20))

    async def scenario():
        answers = {}
        for workers in (2, 0):
            before = _workers_running()
            server, port = await start_family("surface", "127.0.0.1:0", workers=workers)
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    answers[workers] = await family_pb2_grpc.FamilyStub(channel).ScoreBatch(request, timeout=120)
                started = _workers_running() - before
                assert len(started) == (2 if workers else 0)
            finally:
                await server.stop(None)
            await asyncio.sleep(0)  # the server's closer stops its workers
            deadline = time.monotonic() + 30
            while _workers_running() & started and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not _workers_running() & started
        assert answers[2] == answers[0]

    asyncio.run(scenario())


def test_the_families_batches_of_one_affinity_key_are_scored_by_one_worker(monkeypatch):
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))
    specs = {family: scorer_spec(family, None, {}) for family in ("surface", "compliance")}
    scored_by = []  # (family, first entry id, worker pid) of each batch a worker received
    send = _Worker.call

    def send_recording_the_worker(worker, message, on_taken=None):
        kind, *payload = message
        if kind == "score":
            spec, request_bytes, _ = payload
            first_id = family_pb2.ScoreBatchRequest.FromString(request_bytes).entries[0].id
            scored_by.append((spec.family, first_id, worker.process.pid))
        return send(worker, message, on_taken)

    monkeypatch.setattr(_Worker, "call", send_recording_the_worker)

    async def score_together(pool: WorkerPool, batches: list[tuple[str, str]]) -> None:
        await asyncio.gather(*(pool.score(specs[family], _batch(3, key), context, affinity=f"{key}-0")
                               for family, key in batches))

    async def scenario():
        pool = WorkerPool(2)
        try:
            # Each key pinned to a worker of its own by its first batch...
            await score_together(pool, [("surface", "first"), ("surface", "second")])
            # ...and both workers free again (a slot is released before its
            # caller resumes), the next family's batches go to their key's
            # worker, though they arrive in the other order.
            await score_together(pool, [("compliance", "second"), ("compliance", "first")])
            return pool.slots.steals
        finally:
            pool.close()

    steals = asyncio.run(scenario())
    workers_of = {key: {pid for _, first_id, pid in scored_by if first_id == f"{key}-0"} for key in ("first", "second")}
    assert sorted(family for family, _, _ in scored_by) == ["compliance", "compliance", "surface", "surface"]
    assert len(workers_of["first"]) == 1 and len(workers_of["second"]) == 1, scored_by
    assert workers_of["first"] != workers_of["second"], "each key had a worker of its own"
    assert steals == 0


# A command's main script, as the `champollion` command is one. 'spawn'
# imports the parent's main script in each child under another name
# (__mp_main__): that import leaves a file beside the script.
COMMAND_SCRIPT = '''
import sys
from pathlib import Path

if __name__ != "__main__":
    Path(__file__).with_name(f"imported-as-{__name__}").touch()

if __name__ == "__main__":
    import asyncio

    from champollion.core.cards import default_registry
    from champollion.eval.v1 import family_pb2
    from services.contract import BatchContext
    from services.registry import scorer_spec
    from services.workers import WorkerPool

    script_path = sys.modules["__main__"].__file__
    request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
    request.entries.add(id="e1", source="a black cat", reference="un gato negro", prediction="un gato negro")
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))

    async def score_one_batch():
        pool = WorkerPool(1)
        try:
            return await pool.score(scorer_spec("surface", None, {}), request.SerializeToString(), context)
        finally:
            pool.close()

    response = family_pb2.ScoreBatchResponse.FromString(asyncio.run(score_one_batch()))
    assert [entry.id for entry in response.entries] == ["e1"], response
    assert sys.modules["__main__"].__file__ == script_path, "the main script's path was not put back"
'''


def test_a_worker_does_not_import_its_commands_main_script(tmp_path):
    script = tmp_path / "command.py"
    script.write_text(COMMAND_SCRIPT, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": python_path},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["command.py"], "a worker imported the script"


def test_a_batchs_affinity_key_is_the_smallest_hash_of_its_sources():
    """Batches of two systems over mostly the same corpus lines share their
    key when the smallest hash falls in the lines they share; an entry
    without a source counts by its id."""
    import zlib

    from champollion.eval.v1 import family_pb2
    from services.servicer import affinity_key

    def request(sources, ids=None):
        batch = family_pb2.ScoreBatchRequest()
        for index, source in enumerate(sources):
            batch.entries.add(id=(ids or [f"e{index}" for index in range(len(sources))])[index], source=source)
        return batch

    lines = [f"Line {number} of the corpus." for number in range(40)]
    smallest = min(range(40), key=lambda number: zlib.crc32(lines[number].encode()))
    first = lines[max(0, smallest - 20):smallest + 1]
    second = lines[smallest:smallest + 20]  # another system's batch, shifted, sharing that line
    assert affinity_key(request(first)) == affinity_key(request(second)) == zlib.crc32(lines[smallest].encode())
    assert affinity_key(request(lines[:smallest] + lines[smallest + 1:])) != affinity_key(request(first))
    assert affinity_key(request(["", "b"], ids=["x", "y"])) == min(zlib.crc32(b"x"), zlib.crc32(b"b"))
    assert affinity_key(family_pb2.ScoreBatchRequest()) == 0


# A server that dies (SIGKILL) while its one worker scores a batch that takes
# 2 s (tests/slow_scorer.py); it prints the worker's pid first.
ORPHANING_SCRIPT = '''
import asyncio
import os
import signal
import sys
from pathlib import Path

from champollion.core.cards import default_registry
from champollion.eval.v1 import family_pb2
from services.contract import BatchContext
from services.workers import ScorerSpec, WorkerPool

started = Path(sys.argv[1])
request = family_pb2.ScoreBatchRequest(source_lang="eng", target_lang="spa")
request.entries.add(id="e1", source="a black cat", reference="un gato negro", prediction="un gato negro")
cards = default_registry()
context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))
spec = ScorerSpec("surface", "tests.slow_scorer:create_scorer", {"started": str(started), "seconds": 2.0})


async def die_mid_batch():
    pool = WorkerPool(1)
    batch = asyncio.create_task(pool.score(spec, request.SerializeToString(), context))
    while not started.exists() and not batch.done():
        await asyncio.sleep(0.01)
    print(*pool.pids(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(die_mid_batch())
'''


def test_a_worker_whose_server_dies_mid_batch_ends_without_a_traceback(tmp_path):
    """Its answer finds the pipe broken: the worker ends, saying nothing
    (it used to print a BrokenPipeError traceback). The script's stderr,
    which the worker shares, closes only once the worker is gone."""
    script, started = tmp_path / "server.py", tmp_path / "started"
    script.write_text(ORPHANING_SCRIPT, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script), str(started)], check=False, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": python_path}, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert started.exists() and len(result.stdout.split()) == 1, "the worker was not scoring when its server died"
    assert result.stderr == ""


def test_a_pool_closed_while_a_batch_runs_past_its_timeout_kills_that_worker_once(tmp_path, monkeypatch):
    """close() kills a worker still busy after `timeout`, while the call
    waiting for its batch sees it die and stops it too: the worker is
    stopped once, close() raises nothing (both used to close the pipe, the
    second with EBADF, which left the other workers running), the batch fails."""
    from multiprocessing.connection import Connection

    real_close = Connection._close

    def slow_close(self):
        time.sleep(0.3)  # the moment in which a second stop() would find the pipe still open
        real_close(self)

    monkeypatch.setattr(Connection, "_close", slow_close)
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("spa"))
    started = tmp_path / "started"
    spec = ScorerSpec("surface", "tests.slow_scorer:create_scorer", {"started": str(started), "seconds": 30.0})

    async def scenario():
        pool = WorkerPool(2)
        batch = asyncio.create_task(pool.score(spec, _batch(1), context))
        while not started.exists():
            await asyncio.sleep(0.01)
        pids = pool.pids()
        await pool.aclose(timeout=0.2)
        with pytest.raises(WorkerDied):
            await batch
        return pids

    pids = asyncio.run(scenario())
    assert pids and not any(_alive(pid) for pid in pids)
