"""Reliability: runs that give the same card whatever their batching, and
faults that cost a run seconds, not minutes: a family past its deadline named
while the run goes on, a frozen replica, a killed gateway's spill, Ctrl-C."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from champollion.eval.v1 import gateway_pb2_grpc
from apps.launch.embedded import start_family, start_gateway
from apps.launch.local_cluster import REPO, LocalCluster
from champollion.core.run_card import reproducible_part, run_card_from_proto
from gateway.server.config import GatewayConfig
from gateway.server.spill import RunSpill
from gateway.server.spill import default_directory as default_spill_directory
from tests.conftest import EXAMPLE, evaluate, make_request
from tests.test_fanout import DEADLINE_SECONDS, OverrunningFirstCalls
from tests.test_multiprocess import evaluate as evaluate_at
from tests.test_multiprocess import example_run


def comparable(card: dict) -> str:
    """The card as canonical JSON, less what differs between two runs of the
    same entries by design (champollion.core.run_card.reproducible_part)."""
    return json.dumps(reproducible_part(card), sort_keys=True)


def test_batch_size_does_not_change_a_single_bit_of_the_card(gateway):
    """Every family, semantic included: batches of 32 and of 256 entries
    give the same card, float for float."""
    entries, predictions = example_run(360)
    cards = [evaluate(gateway, make_request(entries, predictions, batch_size=size)) for size in (32, 256)]
    assert cards[0]["scores"]["semantic_score"] is not None
    assert cards[0]["run_id"] != cards[1]["run_id"]
    assert comparable(cards[0]) == comparable(cards[1])


# --- a family that overruns its deadline is named while the run goes on ---------


async def _stream_with_overrun(request) -> tuple[list, dict]:
    """EvaluateStream through a gateway with a short call deadline, in front
    of a surface family whose first call never answers."""
    family = OverrunningFirstCalls(overruns=1)
    family_server, family_port = await start_family("surface", "127.0.0.1:0", family)
    config = GatewayConfig(families={"surface": f"127.0.0.1:{family_port}"}, deadline_seconds=DEADLINE_SECONDS)
    gateway_server, gateway_port, servicer = await start_gateway(config, "127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway_port}") as channel:
            updates = [u async for u in gateway_pb2_grpc.GatewayStub(channel).EvaluateStream(request, timeout=30)]
    finally:
        await servicer.close()
        await gateway_server.stop(None)
        await family_server.stop(None)
    progress = [u for u in updates if not u.HasField("run_card") and not u.entries]
    card = next(u.run_card for u in updates if u.HasField("run_card"))
    return progress, run_card_from_proto(card)


def test_a_family_past_its_deadline_is_named_in_the_progress_and_the_card():
    entries, predictions = example_run(20)
    progress, card = asyncio.run(_stream_with_overrun(make_request(entries, predictions, batch_size=10)))
    assert progress[-1].slow_families == ["surface"]
    assert all(list(u.slow_families) in ([], ["surface"]) for u in progress)
    assert card["scores"]["chrf_plus_plus"] is not None
    assert any(w.startswith("family 'surface' was slow") for w in card["warnings"]), card["warnings"]


# --- a frozen replica --------------------------------------------------------------


@pytest.fixture(scope="module")
def two_structural_replicas(tmp_path_factory):
    with LocalCluster(families=("surface", "structural"), replicas={"structural": 2}, languages=["spa"],
                      log_dir=tmp_path_factory.mktemp("frozen")) as running:
        yield running


def _timed_run(address: str, request) -> tuple[float, dict]:
    started = time.monotonic()
    card = evaluate_at(address, request)
    return time.monotonic() - started, card


def test_a_frozen_replica_costs_a_run_seconds_not_minutes(two_structural_replicas):
    """SIGSTOP (the process stays, its sockets stay open, nothing answers) to
    one of two structural replicas while a run is in flight: keepalive finds
    it silent, its calls go to the other replica, and the run ends complete
    and equal to an undisturbed one, less than 10 s later than it."""
    cluster = two_structural_replicas
    entries, predictions = example_run(600)
    request = make_request(entries, predictions, batch_size=8)
    undisturbed_seconds, undisturbed = _timed_run(cluster.gateway_address, request)

    victim = cluster.replicas("structural")[0]
    served_before = len(victim.events("score_batch"))
    finished = threading.Event()
    frozen: list[bool] = []

    def freeze_when_busy():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not finished.is_set():
            if len(victim.events("score_batch")) - served_before >= 5:
                os.kill(victim.pid, signal.SIGSTOP)
                frozen.append(not finished.is_set())
                return
            finished.wait(0.02)

    freezer = threading.Thread(target=freeze_when_busy, name="freezer")
    freezer.start()
    try:
        disturbed_seconds, disturbed = _timed_run(cluster.gateway_address, request)
    finally:
        finished.set()
        freezer.join(timeout=60)
        os.kill(victim.pid, signal.SIGCONT)
    print(f"undisturbed {undisturbed_seconds:.1f} s, with a frozen replica {disturbed_seconds:.1f} s")
    assert frozen == [True], "the replica was not frozen while the run was in flight"
    assert comparable(disturbed) == comparable(undisturbed)
    assert disturbed_seconds - undisturbed_seconds < 10


# --- a killed gateway's spill -------------------------------------------------------


def test_a_killed_gateways_spill_is_removed_when_a_gateway_starts(tmp_path):
    """SIGKILL to a gateway process mid-run leaves its spill on disk (nothing
    of it runs any more); the next gateway to start removes it, and leaves
    alone the spill of a run still in flight elsewhere (this process's)."""
    with LocalCluster(families=("surface",), log_dir=tmp_path) as cluster:
        gateway = cluster.gateway
        entries, predictions = example_run(3000)
        request = make_request(entries, predictions, batch_size=4)
        outcome: list = []
        caller = threading.Thread(target=lambda: outcome.append(_try_evaluate(gateway.address, request)))
        caller.start()
        with RunSpill() as in_use:
            try:
                spills = _await_spill(gateway.pid)
            finally:
                cluster.kill(gateway)
                # Checked at once: supervisord's new gateway takes seconds to start.
                left_behind = all(path.exists() for path in spills)
                caller.join(timeout=60)
            assert outcome and outcome[0] is not None, "the run was cut short by the kill"
            assert left_behind
            cluster.restart(gateway)  # waits for supervisord's new gateway to serve
            assert not any(path.exists() for path in spills)
            assert in_use.path.exists()


def _try_evaluate(address: str, request) -> grpc.StatusCode | None:
    try:
        evaluate_at(address, request)
    except grpc.RpcError as error:
        return error.code()
    return None


def _await_spill(pid: int, timeout: float = 30) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(default_spill_directory().glob(f"run-{pid}-*.sqlite"))
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no spill of gateway {pid} appeared")


# --- Ctrl-C ---------------------------------------------------------------------------


def write_example_run(folder, size: int) -> tuple:
    """`size` entries of the bundled example (unique ids) as CORPUS and PREDICTIONS files."""
    entries, predictions = example_run(size)
    corpus = folder / "corpus.json"
    corpus.write_text(json.dumps({"id": "reliability", "source_lang": "eng", "target_lang": "spa",
                                  "entries": entries}), encoding="utf-8")
    lines = folder / "predictions.jsonl"
    lines.write_text("".join(json.dumps(p) + "\n" for p in predictions), encoding="utf-8")
    return corpus, lines


def test_ctrl_c_ends_evaluate_with_130_and_one_line(tmp_path):
    """SIGINT to `champollion evaluate` while its embedded stack scores (its
    spill is on disk): exit 130, one line on stderr, no traceback, no task
    destroyed pending, no spill left."""
    corpus, predictions = write_example_run(tmp_path, 5000)
    spills = interrupted_evaluate((corpus, predictions, "--no-store", "--batch-size", "16"))
    assert not any(path.exists() for path in spills)


def interrupted_evaluate(arguments: tuple, env: dict | None = None, when=None):
    """`champollion evaluate ARGUMENTS` sent SIGINT once `when(command)` has
    returned (by default once the command's run's spill is on disk), checked
    to end with 130, one line on stderr and nothing on stdout; what `when`
    returned (the spill files)."""
    command = subprocess.Popen([sys.executable, "-m", "apps.cli", "evaluate", *map(str, arguments)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        found = (when or (lambda started: _await_spill(started.pid, timeout=120)))(command)
        # Stopping takes seconds: the stack lets batches in flight end.
        command.send_signal(signal.SIGINT)
        stdout, stderr = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    assert command.returncode == 130, stderr
    assert stderr == "champollion: interrupted\n"
    assert stdout == ""
    return found


def test_a_ctrl_c_that_code_swallows_still_ends_the_command_with_130():
    """Python raises KeyboardInterrupt in whatever code runs when Ctrl-C
    comes; code that swallows every exception there (gRPC's channel
    finalizer has a bare except) used to make a run go on to exit 0."""
    import argparse

    from apps import cli

    def command_that_swallows_it(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here and raises
        except BaseException:  # noqa: BLE001 - what a finalizer does
            pass
        return 0

    args = argparse.Namespace(command="evaluate", handler=command_that_swallows_it)
    with pytest.raises(KeyboardInterrupt):
        cli._run(args)
    # The previous handler is back: Ctrl-C in the test runner works as before.
    assert signal.getsignal(signal.SIGINT) is not cli._on_interrupt


def test_a_sigterm_that_code_swallows_still_ends_the_command_with_143():
    """SIGTERM is noted as Ctrl-C is, and tells main() to end with 143 and
    `champollion: terminated`."""
    import argparse

    from apps import cli
    from apps.cli.common import INTERRUPTED

    def command_that_swallows_it(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except BaseException:  # noqa: BLE001, S110 - what a finalizer does
            pass
        return 0

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        cli._run(argparse.Namespace(command="evaluate", handler=command_that_swallows_it))
    assert INTERRUPTED.ending() == ("terminated", 143)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_while_a_gateway_call_is_in_flight_cancels_it_rather_than_raising_there():
    """Inside gateway_client (INTERRUPTED.cancelling) the signal handler
    closes the client's channel from a thread of its own and returns: a
    KeyboardInterrupt raised inside gRPC's waits could leave its state half
    updated (closing the channel then hung). The command ends interrupted
    once its call has failed, or once it is done."""
    import argparse

    from apps import cli
    from apps.cli.common import INTERRUPTED

    cancelled = threading.Event()

    def command_with_a_call_in_flight(args) -> int:
        with INTERRUPTED.cancelling(cancelled.set):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # the handler runs here, and does not raise
            assert cancelled.wait(5)
        return 0

    with pytest.raises(KeyboardInterrupt):
        cli._run(argparse.Namespace(command="evaluate", handler=command_with_a_call_in_flight))
    assert INTERRUPTED.ending() == ("interrupted", 130)


# --- SIGTERM (issue 23) ------------------------------------------------------------------


def _evaluate_with_workers(folder, **popen) -> tuple[subprocess.Popen, Path]:
    """`champollion evaluate` of 5,000 entries with two worker processes,
    its spills in a folder of `folder` ($TMPDIR); the command and that folder."""
    corpus, predictions = write_example_run(folder, 5000)
    temporary = folder / "tmp"
    temporary.mkdir()
    command = subprocess.Popen(
        [sys.executable, "-m", "apps.cli", "evaluate", str(corpus), str(predictions), "--no-store",
         "--batch-size", "16"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CHAMPOLLION_WORKERS": "2", "TMPDIR": str(temporary)}, **popen,
    )
    return command, temporary / f"champollion-spill-{os.getuid()}"


def _worker_pids(pid: int) -> list[int]:
    """The worker processes among process `pid`'s children (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except FileNotFoundError:  # already gone
                pass
    return found


def _await_run(command: subprocess.Popen, spills, timeout: float = 120) -> tuple[list, list[int]]:
    """The command's spill, once it exists (its run is being scored, as the
    Ctrl-C test above waits for it), and its two worker processes (busy
    loading their models or scoring: tests/test_workers.py has a worker
    whose server dies mid-batch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and command.poll() is None:
        found, workers = list(spills.glob("run-*.sqlite")), _worker_pids(command.pid)
        if found and len(workers) == 2:
            return found, workers
        time.sleep(0.05)
    raise AssertionError(f"no run with two workers: spills {list(spills.glob('*'))}, exit {command.poll()}")


@pytest.mark.parametrize("target", ["command", "process group"])
def test_sigterm_ends_evaluate_as_ctrl_c_does_with_143_and_one_line(tmp_path, target):
    """SIGTERM to `champollion evaluate` (or, as `kill %1` or supervisord
    sends it, to its process group, worker processes included) while its
    run is scored: exit 143, one line on stderr, no traceback or log line
    from the command or its workers (which ignore it: their server stops
    them), no spill left, no worker left."""
    command, spills = _evaluate_with_workers(tmp_path, start_new_session=True)
    try:
        found, workers = _await_run(command, spills)
        if target == "command":
            command.send_signal(signal.SIGTERM)
        else:
            os.killpg(command.pid, signal.SIGTERM)
        stdout, stderr = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    assert command.returncode == 143, stderr
    assert stderr == "champollion: terminated\n"
    assert stdout == ""
    assert not any(path.exists() for path in found)
    assert not list(spills.glob("run-*.sqlite"))
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived its command"



@pytest.mark.parametrize("difficulty", [3, 0])
def test_no_folder_is_left_in_tmpdir_after_a_run_or_a_refusal(tmp_path, difficulty):
    """A run (difficulty 3) or one the gateway refuses (difficulty 0 is out
    of range): the spill folder goes with the run's spill, so $TMPDIR is as
    the command found it (issue 37: an empty champollion-spill-N stayed)."""
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    corpus["entries"] = corpus["entries"][:3]
    corpus["entries"][1]["difficulty"] = difficulty
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    predictions = [line for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
                   if json.loads(line)["id"] in {entry["id"] for entry in corpus["entries"]}]
    (tmp_path / "predictions.jsonl").write_text("\n".join(predictions) + "\n", encoding="utf-8")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "apps.cli", "evaluate", str(tmp_path / "corpus.json"),
         str(tmp_path / "predictions.jsonl"), "--no-store", "--metrics", "chrf"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == (0 if difficulty else 2), done.stderr
    assert not list(temporary.iterdir())
