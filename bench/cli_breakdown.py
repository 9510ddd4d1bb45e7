"""Where a `champollion` command's time goes: the command run in this
process (as `python -m apps.cli` runs it) with timestamps taken
around its phases, in the command's process and in every worker process it
starts; bench/cli_speed.py prints them.

  python -m bench.cli_breakdown EVENTS.jsonl evaluate -s SRC -r REF -i HYP ...

Each event is a JSON line {"pid", "role", "what", "start", "end"} (time.time()
seconds) appended to EVENTS.jsonl. The phases are found by wrapping the
functions that do them (the measurement touches no product code); what a
wrapped function does not cover (an import, the parser) is timed around it.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

EVENTS_ENV = "BREAKDOWN_EVENTS"
# time.time() when the command was launched (set by the caller) and when a worker was (set here).
LAUNCHED_ENV = "BREAKDOWN_LAUNCHED"
STARTED = time.time()  # this module is the first thing the probe imports


def record(what: str, start: float, end: float | None = None, role: str = "main") -> None:
    path = os.environ.get(EVENTS_ENV)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "role": role, "what": what, "start": start,
                       "end": time.time() if end is None else end})
    with open(path, "a", encoding="utf-8") as handle:  # one short write a line: lines of processes do not mix
        handle.write(line + "\n")


def _wrap(owner, name: str, what, role: str, first_only: bool = False) -> None:
    """Replaces owner.name by a function recording each call (`what`: a label,
    or a function of the call's arguments giving one)."""
    original = getattr(owner, name)
    seen = []

    @functools.wraps(original)
    def timed(*args, **kwargs):
        if first_only and seen:
            return original(*args, **kwargs)
        seen.append(True)
        start = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            record(what(*args, **kwargs) if callable(what) else what, start, role=role)

    setattr(owner, name, timed)


def _wrap_async(owner, name: str, what, role: str = "main") -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args, **kwargs):
        start = time.time()
        try:
            return await original(*args, **kwargs)
        finally:
            record(what(*args, **kwargs) if callable(what) else what, start, role=role)

    setattr(owner, name, timed)


def _launched() -> float:
    return float(os.environ.get(LAUNCHED_ENV) or STARTED)


def _loads(role: str) -> None:
    """What a family loads on its first batch, wherever it is scored."""
    from champollion.core.encoder import embeddings
    from services.behavioral import lexicons, table_cache

    _wrap(embeddings.SentenceEmbedder, "_loaded", "load: sentence encoder (weights, tokenizer)", role,
          first_only=True)
    _wrap(table_cache, "cached", lambda name, build: f"load: word list {name}", role)
    lexicons.cached = table_cache.cached
    _wrap(lexicons, "_like_num", "load: spaCy (number words)", role, first_only=True)


def worker_main(conn, limit_blas: bool) -> None:
    """services.workers._worker_main, timed: the worker's start, each
    family's scorer built, each batch."""
    from services import workers
    record("worker: interpreter and imports", _launched(), role="worker")
    _loads("worker")
    _wrap(workers.ScorerSpec, "build", lambda spec: f"build scorer: {spec.family}", "worker")
    original_recv, original_answer = type(conn).recv, workers._answer
    batch: list = []  # (family, when it came) of the batch being scored

    def recv(self):
        message = original_recv(self)
        if message and message[0] == "score":
            batch[:] = [message[1].family, time.time()]
        return message

    def answer(connection, reply) -> None:
        if batch and reply[0] in ("ok", "error"):
            record(f"batch: {batch[0]}", batch[1], role="worker")
            batch.clear()
        original_answer(connection, reply)

    type(conn).recv = recv
    workers._answer = answer
    workers._worker_main(conn, limit_blas)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Times module `name`'s import when the command imports it (a run on a
    background stack never does), then calls `then(module)`."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            start = time.time()
            run(module)
            record("embedded stack imports (gateway, families, store)", start)
            self.then(module)

        spec.loader.exec_module = exec_module
        return spec


def _wrap_embedded(embedded) -> None:
    _wrap_async(embedded, "start_family", lambda name, *a, **k: f"start family server: {name}")
    _wrap_async(embedded, "start_gateway", "start gateway (store opened)")
    _wrap(embedded.EmbeddedStack, "__enter__", "stack started (all servers)", "main")
    _wrap(embedded.EmbeddedStack, "__exit__", "stack stopped", "main")


def probe(argv: list[str]) -> int:
    """`champollion ARGV` with its phases timed (the events file: argv[0])."""
    os.environ[EVENTS_ENV] = str(Path(argv[0]).resolve())
    record("interpreter start", _launched(), STARTED)
    start = time.time()
    from apps import cli
    from apps.cli import common, scoring
    record("CLI imports (parser, client, inputs)", start)
    sys.meta_path.insert(0, _AfterImport("apps.launch.embedded", _wrap_embedded))
    from apps.client import Client
    from apps.launch import background
    from services import workers

    _loads("main")
    _wrap(scoring, "_load_run", "read the input files", "main")
    _wrap(Client, "send_evaluation", "evaluation (upload, scoring, card)", "main")
    _wrap(scoring, "_print_evaluation", "summary printed", "main")
    _wrap(background, "identity", "background stack: code stamp and identity", "main")
    _wrap(background, "_serving", "background stack: found serving", "main")
    _wrap(background, "_start", "background stack: started (until ready)", "main")
    workers._worker_main = worker_main
    spawn = workers._start_unprepared

    def start_unprepared(process) -> None:
        os.environ[LAUNCHED_ENV] = str(time.time())  # the worker inherits it
        spawn(process)

    workers._start_unprepared = start_unprepared
    _wrap(common, "store_url", "store URL (the store's modules imported)", "main")
    start = time.time()
    code = cli.main(argv[1:])
    record("command (main)", start)
    return code


if __name__ == "__main__":
    # Imported by name, so that worker processes find worker_main (spawn
    # pickles it by its module's name, and __main__ is not theirs).
    from bench import cli_breakdown

    sys.exit(cli_breakdown.probe(sys.argv[1:]))
