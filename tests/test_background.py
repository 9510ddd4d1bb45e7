"""Background stacks (issue 37; apps/launch/background.py): the
first `champollion evaluate` starts one, later ones with the same settings
reuse it and get the cards an embedded stack gives; other settings, another
environment or other code never reach it; a stale socket is cleaned, an idle
stack stops itself, Ctrl-C still ends a command with 130 and nothing of its
run left, and every stack a test starts is stopped at its end."""
from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from apps.cli.common import background_settings
from apps.launch import background
from apps.launch.background_server import CallActivity, _retire, _until_idle
from champollion.core.run_card import reproducible_part
from tests.conftest import EXAMPLE, REPO
from tests.test_reliability import _await_spill, interrupted_evaluate, write_example_run

CORPUS, PREDICTIONS = EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl"


@pytest.fixture
def stacks(monkeypatch):
    """Commands allowed background stacks, in a runtime folder of this test
    (this process sees it too; short: a Unix socket's path is at most 107
    bytes); every stack there is stopped afterwards. Yields the environment
    for the commands."""
    runtime = tempfile.mkdtemp(prefix="champollion-run-")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.setenv(background.DAEMON_ENV, "1")
    yield dict(os.environ)
    left = background.running()
    for stack in left:
        assert background.stop(stack)
    shutil.rmtree(runtime, ignore_errors=True)


def champollion(*args, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "apps.cli", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def card(path: Path) -> str:
    return json.dumps(reproducible_part(json.loads(path.read_text(encoding="utf-8"))), sort_keys=True)


def pids() -> list[int]:
    return [stack.pid for stack in background.running()]


def stack_folders() -> list[Path]:
    return [path for path in background.stacks_folder().iterdir() if path.is_dir()]


def test_a_background_stack_gives_the_embedded_stacks_cards_and_serves_the_next_runs(stacks, tmp_path):
    """Every family: the embedded run, the run that starts the stack and a
    run on it warm (its caches holding the texts) give the same card; the
    second and third run on one stack."""
    cards = [tmp_path / f"{name}.json" for name in ("embedded", "first", "warm")]
    champollion("evaluate", CORPUS, PREDICTIONS, "--no-store", "--no-daemon", "-o", cards[0], env=stacks)
    assert pids() == []
    champollion("evaluate", CORPUS, PREDICTIONS, "--no-store", "-o", cards[1], env=stacks)
    started = pids()
    assert len(started) == 1
    champollion("evaluate", CORPUS, PREDICTIONS, "--no-store", "-o", cards[2], env=stacks)
    assert pids() == started
    assert json.loads(cards[0].read_text())["scores"]["semantic_score"] is not None
    assert card(cards[0]) == card(cards[1]) == card(cards[2])


def test_other_settings_environment_or_code_never_reach_a_stack(stacks, tmp_path):
    """Another store, another CHAMPOLLION_ variable: stacks of their own;
    the same again: the first one, which stored its run in its store only."""
    stores = [f"sqlite:///{tmp_path / name}" for name in ("a.sqlite", "b.sqlite")]
    run = ("evaluate", CORPUS, PREDICTIONS, "-m", "chrf")
    champollion(*run, "--store", stores[0], env=stacks)
    champollion(*run, "--store", stores[1], env=stacks)
    champollion(*run, "--store", stores[0], env={**stacks, "CHAMPOLLION_TOKEN_ROW_CACHE_MB": "64"})
    assert len(pids()) == 3
    champollion(*run, "--store", stores[0], env=stacks)
    assert len(pids()) == 3
    listed = champollion("runs", "--store", stores[1], "--json", env=stacks)
    assert len(json.loads(listed.stdout)) == 1
    assert len(json.loads(champollion("runs", "--store", stores[0], "--json", env=stacks).stdout)) == 3


def test_a_relative_sqlite_store_is_the_file_the_command_means(tmp_path, monkeypatch):
    """A stack runs from / and serves commands from any folder: it is given,
    and keyed by, the store's absolute path."""
    monkeypatch.chdir(tmp_path)
    assert background_settings("sqlite:///runs.sqlite").store == f"sqlite:///{tmp_path / 'runs.sqlite'}"
    assert background_settings("postgresql://u@db/x").store == "postgresql://u@db/x"
    assert background_settings(None, ("surface",), 0) == background.StackSettings(None, ("surface",), 0)


def test_the_code_stamp_changes_with_any_file_but_byte_code(tmp_path):
    package = tmp_path / "package"
    (package / "__pycache__").mkdir(parents=True)
    module = package / "module.py"
    module.write_text("A = 1\n")
    stamps = [background.code_stamp([package])]
    (package / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"x")
    assert background.code_stamp([package]) == stamps[0]
    module.write_text("A = 22\n")
    stamps.append(background.code_stamp([package]))
    os.utime(module, ns=(1, 1))
    stamps.append(background.code_stamp([package]))
    (package / "other.py").write_text("")
    stamps.append(background.code_stamp([package]))
    assert len(set(stamps)) == 4


def test_a_killed_stacks_socket_is_cleaned_and_a_new_stack_started(stacks):
    run = ("evaluate", CORPUS, PREDICTIONS, "-m", "chrf", "--no-store")
    champollion(*run, env=stacks)
    [killed] = pids()
    os.killpg(killed, signal.SIGKILL)
    [folder] = stack_folders()
    assert (folder / background.GATEWAY_SOCKET).exists(), "a killed stack leaves its socket"
    champollion(*run, env=stacks)
    [fresh] = pids()
    assert fresh != killed
    assert stack_folders() == [folder]


def test_an_idle_stack_stops_itself_and_leaves_no_folder(stacks):
    champollion("evaluate", CORPUS, PREDICTIONS, "-m", "chrf", "--no-store",
                env={**stacks, background.IDLE_ENV: "1"})
    [pid] = pids()
    deadline = time.monotonic() + 120
    while background._alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not background._alive(pid)
    assert stack_folders() == []


def test_idle_time_counts_from_the_last_call_and_not_while_one_is_in_flight():
    now = [100.0]
    activity = CallActivity(clock=lambda: now[0])
    now[0] = 105.0
    assert activity.idle_for() == 5.0
    activity.begin()
    now[0] = 200.0
    assert activity.idle_for() == 0.0
    activity.end()
    now[0] = 203.0
    assert activity.idle_for() == 3.0


def test_a_stack_held_by_a_command_does_not_retire(tmp_path):
    """Idle long enough, a stack renames its folder away (no command finds
    it then) only when no command holds its lock; told to stop, it does."""
    folder = tmp_path / "k"
    folder.mkdir()
    with background.key_lock(tmp_path, "k", fcntl.LOCK_SH):
        assert not _retire(folder, "k")
        assert folder.exists()
        activity = CallActivity(clock=lambda: 1e9)  # idle for ever
        stop = asyncio.Event()

        async def stopped_later():
            asyncio.get_running_loop().call_later(0.2, stop.set)
            await _until_idle(activity, 1.0, stop, lambda: _retire(folder, "k"))
        asyncio.run(stopped_later())
        assert stop.is_set() and folder.exists()
    assert _retire(folder, "k")
    assert not folder.exists()


def test_two_first_runs_at_once_start_one_stack_and_share_it(stacks):
    """The stack's lock: one command starts the stack, the other waits for
    it and uses it."""
    run = [sys.executable, "-m", "apps.cli", "evaluate", str(CORPUS), str(PREDICTIONS), "-m", "chrf",
           "--no-store"]
    commands = [subprocess.Popen(run, cwd=REPO, env=stacks, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    outcomes = [command.communicate(timeout=300) for command in commands]
    assert [command.returncode for command in commands] == [0, 0], outcomes
    assert outcomes[0][0].splitlines()[:-1] == outcomes[1][0].splitlines()[:-1]  # the summaries, less the run id line
    assert len(pids()) == 1


def test_a_folder_others_may_enter_is_not_used(stacks):
    """Sockets in a folder another user could enter would let them score
    and read the store: the command scores in its own process instead."""
    folder = Path(stacks["XDG_RUNTIME_DIR"]) / "champollion"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(background.BackgroundUnavailable, match="not this user's alone"):
        background.stacks_folder()
    done = champollion("evaluate", CORPUS, PREDICTIONS, "-m", "chrf", "--no-store", env=stacks)
    assert "chrf_plus_plus" in done.stdout
    assert list(folder.iterdir()) == []


def stack_processes(runtime: str) -> list[int]:
    """Processes running a background stack in `runtime`, from their command lines (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:  # not a process, or gone
            continue
        if background.SERVER_MODULE.encode() in command and runtime.encode() in command:
            found.append(int(entry.name))
    return found


def test_ctrl_c_while_a_first_run_waits_for_its_stack_stops_that_stack(stacks):
    """SIGINT while the stack the command started is still starting (its
    folder made, its stack.json not yet written): exit 130, one line, and
    neither the stack's process nor its folder is left."""
    base = Path(stacks["XDG_RUNTIME_DIR"]) / "champollion"

    def starting(command) -> None:
        deadline = time.monotonic() + 60
        while not (base.is_dir() and any((folder / background.LOG_FILE).exists() for folder in stack_folders())):
            assert time.monotonic() < deadline and command.poll() is None, "the command started no stack"
            time.sleep(0.005)
        assert not any((folder / background.INFO_FILE).exists() for folder in stack_folders()), "it started already"

    interrupted_evaluate((CORPUS, PREDICTIONS, "--no-store"), env=stacks, when=starting)
    assert stack_folders() == []
    # A Ctrl-C inside the spawn itself leaves a process the command never got
    # the id of: it reads no request (its stdin closes) and exits on its own.
    deadline = time.monotonic() + 10
    while stack_processes(stacks["XDG_RUNTIME_DIR"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stack_processes(stacks["XDG_RUNTIME_DIR"]) == []


def test_no_daemon_and_the_variable_keep_commands_off_background_stacks(stacks):
    run = ("evaluate", CORPUS, PREDICTIONS, "-m", "chrf", "--no-store")
    champollion(*run, "--no-daemon", env=stacks)
    champollion(*run, env={**stacks, background.DAEMON_ENV: "0"})
    assert pids() == []
    assert stack_folders() == []


def test_serve_background_starts_the_stack_evaluate_uses_and_stop_stops_it(stacks, tmp_path):
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    started = champollion("serve", "--background", "--store", store, "--workers", "0", "--idle-timeout", "600",
                          env=stacks)
    assert started.stdout.startswith("started: pid ")
    [pid] = pids()
    again = champollion("serve", "--background", "--store", store, "--workers", "0", env=stacks)
    assert again.stdout.startswith(f"already running: pid {pid} ")
    champollion("evaluate", CORPUS, PREDICTIONS, "--store", store, "--workers", "0", env=stacks)
    assert pids() == [pid]
    status = champollion("serve", "--status", env=stacks).stdout
    assert f"pid {pid} · every family · store sqlite:///" in status and "0 workers" in status
    assert "stops after 600 s without a run" in status
    stopped = champollion("serve", "--stop", env=stacks)
    assert stopped.stdout == "stopped 1 background stack\n"
    assert not background._alive(pid)
    assert champollion("serve", "--status", env=stacks).stdout == "no background stack runs\n"


@pytest.mark.parametrize("flags", [("--port", "1"), ("--auth", "tokens.yaml"), ("--family", "surface")])
def test_serve_background_refuses_the_flags_of_a_served_gateway(stacks, flags):
    done = champollion("serve", "--background", *flags, env=stacks, check=False)
    assert done.returncode == 2
    assert done.stderr == f"champollion: error: {flags[0]}: not with --background (a background stack serves " \
                          f"every family on this user's Unix socket)\n"
    assert pids() == []


def test_an_input_the_gateway_refuses_is_the_same_one_line_through_a_stack(stacks, tmp_path):
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    corpus["entries"][1]["difficulty"] = 0  # out of range: the gateway refuses it
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    run = ("evaluate", tmp_path / "corpus.json", PREDICTIONS, "-m", "chrf", "--no-store")
    embedded = champollion(*run, "--no-daemon", env=stacks, check=False)
    through_stack = champollion(*run, env=stacks, check=False)
    assert embedded.returncode == through_stack.returncode == 2
    assert through_stack.stderr == embedded.stderr
    assert through_stack.stderr.count("\n") == 1 and "difficulty" in through_stack.stderr
    assert len(pids()) == 1


def test_ctrl_c_on_a_stack_ends_evaluate_with_130_its_run_dropped_and_the_stack_serving(stacks, tmp_path):
    """SIGINT to `champollion evaluate` while the background stack scores
    its run: exit 130, one line, nothing on stdout; the stack cancels the
    run (its spill goes) and serves the next one."""
    corpus, predictions = write_example_run(tmp_path, 5000)
    champollion("evaluate", CORPUS, PREDICTIONS, "--no-store", "-m", "chrf", env=stacks)  # the stack starts
    [pid] = pids()
    spills = interrupted_evaluate((corpus, predictions, "--no-store", "--batch-size", "16", "-m", "chrf"), env=stacks,
                                  when=lambda _: _await_spill(pid, timeout=120))
    deadline = time.monotonic() + 60
    while any(path.exists() for path in spills) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(path.exists() for path in spills)
    champollion("evaluate", CORPUS, PREDICTIONS, "--no-store", "-m", "chrf", env=stacks)
    assert pids() == [pid]
