"""Scoring in worker processes, so that an evaluation uses every core.

Scoring is CPU-bound Python (sacreBLEU, the numpy sentence encoder, spaCy,
hfst) that holds the GIL: in the threads of one process, one core does
nearly all the work. A ``WorkerPool`` keeps up to ``size`` processes, each
able to score any family (it builds a family's scorer from a picklable
``ScorerSpec`` on its first batch of that family and keeps it), so one pool
serves all the families of a stack and a core left idle by one family helps
a busy one.

- A batch waits for a free worker in the event loop: a call cancelled while
  it waits never starts; one already computing finishes in its worker.
- Workers are started with 'spawn' (never forked from a process running gRPC
  threads), when first needed, and each limits BLAS to one thread when there
  are several workers.
- A worker that dies mid-batch fails that batch (``WorkerDied``, naming the
  process and its exit) and is replaced; the others go on. A worker
  acknowledges a batch before scoring it: one that died before that (killed
  while idle, before the pool noticed) loses nothing, and its replacement
  takes the batch (``WorkerGone`` only if that one dies too).
- Workers ignore SIGINT and SIGTERM (sent to the process group, they reach
  workers too): their server stops them. ``close`` stops them all; a worker
  whose server process dies sees its pipe close and exits, quietly (mid-batch
  too: its answer has no one to go to), so none is left behind.
"""
from __future__ import annotations

import asyncio
import atexit
import importlib
import json
import multiprocessing
import os
import re
import signal
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from typing import Any

import structlog

from services.contract import BatchContext, splits_work
from services.conversions import entries_from_request, response_from_output
from services.worker_slots import SlotScheduler

log = structlog.get_logger()

START_METHOD = "spawn"
# BLAS/OpenMP libraries read these when they load, threadpoolctl limits those already loaded.
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
# Signals a worker ignores: Ctrl-C reaches the whole process group, and so
# does SIGTERM from a shell (`kill %1`) or supervisord (stopasgroup); the
# server, which drains its batches in flight first, stops its workers.
_SERVER_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class WorkerDied(RuntimeError):
    """A worker process ended while it scored a batch."""


# A worker's first reply to a batch: it has it.
TAKEN = ("taken",)


class WorkerGone(WorkerDied):
    """A worker that died before it took a batch (killed while idle): the
    batch is sent to its replacement."""


class WorkerScoringError(RuntimeError):
    """The family's scorer raised in a worker; the message is its type and text."""


WORKERS_ENV = "CHAMPOLLION_WORKERS"


def default_workers() -> int:
    """$CHAMPOLLION_WORKERS, else one worker per core this process may run on."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        if not re.fullmatch("[0-9]+", value):
            raise ValueError(f"${WORKERS_ENV}: must be a whole number of 0 or more (0: score in threads), got {value!r}")
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ScorerSpec:
    """How a worker builds a family's scorer: `factory`, a "module:function"
    path (services.registry names one per family), called with `options`
    (languages, device, ...). The pool needs no other knowledge of families."""
    family: str
    factory: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.family}:{self.factory}:{json.dumps(self.options, sort_keys=True, default=str)}"

    def build(self):
        """The scorer: the factory imported and called with the options."""
        module, _, name = self.factory.partition(":")
        return getattr(importlib.import_module(module), name)(**self.options)


# --- the worker process --------------------------------------------------------


def _limit_threads(limit: bool) -> None:
    if limit:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=1)


def _exit_now() -> None:
    """Ends the worker at once. Freeing its caches (word lists, token rows:
    over a GB) object by object takes it seconds the server would wait for."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a full non-blocking pipe: what is left there is lost either way
            pass
    os._exit(0)


def _answer(conn: Connection, reply) -> None:
    """Sends `reply` to the server; a pipe that broke meanwhile (its server
    is gone: killed, or ended before this batch did) ends the worker, with
    no traceback: there is no one left to answer."""
    try:
        conn.send(reply)
    except OSError:
        _exit_now()


def _worker_main(conn: Connection, limit_blas: bool) -> None:
    """A worker's life: score what comes down the pipe until told to stop or
    the pipe closes (its server is gone)."""
    for signum in _SERVER_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    # Blocked since the worker started (_start_shielded); one that came
    # meanwhile is dropped, being ignored now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SERVER_SIGNALS)
    # Stdout may be the command's answer (`evaluate` prints the run card):
    # whatever a worker prints goes to stderr, its log events too.
    os.dup2(2, 1)
    from champollion.core import logs
    logs.configure("WARNING")
    if limit_blas:
        for name in _THREAD_ENV:
            os.environ[name] = "1"
    # Workers load no model ahead of a batch (services.registry.scorer_spec),
    # whatever the server's environment asks it to preload.
    os.environ.pop("CHAMPOLLION_COMET_PRELOAD", None)
    # So torch is of no use here, yet spaCy's thinc imports it where it is
    # installed: a second and 200 MB a worker. Absent from sys.modules, its
    # import fails at once and thinc goes on without it.
    sys.modules.setdefault("torch", None)
    from champollion.eval.v1 import family_pb2

    _limit_threads(limit_blas)
    scorers: dict[str, Any] = {}

    def scorer_for(spec: ScorerSpec):
        if spec.key not in scorers:
            scorers[spec.key] = spec.build()
            _limit_threads(limit_blas)  # libraries the scorer loaded
        return scorers[spec.key]

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            message = None
        if message is None:
            _exit_now()
        kind, *payload = message
        if kind == "warm":
            for spec in payload[0]:
                try:
                    scorer_for(spec)
                except Exception:  # noqa: BLE001 - its first batch will fail and say why
                    pass
            _answer(conn, ("ok", None))
            continue
        spec, request_bytes, context = payload
        # The batch is this worker's from here: a death before this line
        # loses nothing (the server sends it to a fresh worker), after it
        # fails the batch (it may be what killed the worker).
        _answer(conn, TAKEN)
        try:
            scorer = scorer_for(spec)
            entries = entries_from_request(family_pb2.ScoreBatchRequest.FromString(request_bytes))
            if splits_work(scorer):  # the server finishes the batch from this output
                reply = scorer.score_in_worker(entries, context)
            else:
                reply = response_from_output(scorer.name, scorer.score(entries, context)).SerializeToString()
        except Exception as error:  # the batch fails; the worker stays
            _answer(conn, ("error", f"{type(error).__name__}: {error}", traceback.format_exc()))
            continue
        _answer(conn, ("ok", reply))


# --- the server's side ---------------------------------------------------------


_MAIN_LOCK = threading.Lock()


def _start_unprepared(process) -> None:
    """Starts a spawned process without its re-running the parent's main
    module: 'spawn' imports the script or `-m` module a command was started
    from in each child (for `champollion`, the whole CLI: 1.1 s a worker),
    which a worker never needs, its code being in this module. Without the
    main module's path and spec multiprocessing leaves that out."""
    main = sys.modules["__main__"]
    with _MAIN_LOCK:
        # Other threads see __main__ without them for these milliseconds; nothing reads them.
        path, spec = main.__dict__.pop("__file__", None), getattr(main, "__spec__", None)
        main.__spec__ = None  # `python -m module` names the module there
        try:
            process.start()
        finally:
            main.__spec__ = spec
            if path is not None:
                main.__file__ = path


def _start_shielded(process) -> None:
    """Starts a worker with _SERVER_SIGNALS blocked (a process inherits the
    signal mask of the thread that started it), so that one sent to the
    process group while the worker starts waits until it ignores them,
    rather than killing it halfway through its imports. Python's resource
    tracker is started first: starting it unblocks them (its own shield,
    bpo-33613)."""
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SERVER_SIGNALS)
    try:
        _start_unprepared(process)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Worker:
    def __init__(self, context, limit_blas: bool):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, limit_blas), name="champollion-worker",
                                       daemon=True)
        _start_shielded(self.process)
        child.close()  # the worker's end lives in the worker only: its death closes the pipe
        # The pool's close and a call that saw the worker die may stop it at once.
        self._stopping = threading.Lock()

    def call(self, message, on_taken=None):
        """Sends a message and waits for the answer, or for the process to
        end. A batch ("score") is first acknowledged (TAKEN, then
        `on_taken()`): a death before that raises WorkerGone, after it
        WorkerDied."""
        taken = message[0] != "score"
        try:
            self.conn.send(message)
            while True:
                ready = wait([self.conn, self.process.sentinel])
                if self.conn not in ready:
                    break
                reply = self.conn.recv()
                if reply != TAKEN:
                    return reply
                taken = True
                if on_taken is not None:
                    on_taken()
        except (EOFError, OSError):
            pass
        self.process.join(timeout=5)
        if not taken:
            raise WorkerGone(f"worker process {self.process.pid} {_exit_description(self.process.exitcode)} "
                             "before it took the batch")
        raise WorkerDied(f"worker process {self.process.pid} {_exit_description(self.process.exitcode)} "
                         "while scoring this batch; it was replaced")

    def stop(self, timeout: float) -> None:
        """Tells the worker to stop, killing it after `timeout`; once only
        (a second call returns when the first is done)."""
        with self._stopping:
            if self.conn.closed:
                return
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
            self.conn.close()


def _exit_description(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class WorkerPool:
    """`size` worker processes shared by the families of one server process
    (or one stack), each in a slot of its own. Use from one event loop.

    A batch goes to a worker chosen by its affinity key (services/worker_slots.py,
    services.servicer.affinity_key): the families' batches of the same
    entries meet in one worker, where the sentence encoder (shared by the
    semantic and behavioral families) already holds their texts."""

    def __init__(self, size: int, start_method: str = START_METHOD):
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self._context = multiprocessing.get_context(start_method)
        self._limit_blas = size > 1
        self._workers: list[_Worker | None] = [None] * size  # started when first needed
        self.slots = SlotScheduler(size)
        self._lock = threading.Lock()
        # One thread per worker waits on its pipe; the event loop stays free.
        self._threads = ThreadPoolExecutor(size, "champollion-worker-call")
        self._closed = False
        # Workers ignore SIGTERM, which multiprocessing's own clean-up at exit
        # sends a live daemon process before it joins it, for ever: a pool not
        # closed by then is closed first (atexit runs the last registered first).
        atexit.register(self.close, 1.0)
        self._warming: set[asyncio.Task] = set()
        # Counts, for logs and tests: batches sent to a worker, workers replaced.
        self.batches = 0
        self.replaced = 0

    def pids(self) -> list[int]:
        """The live workers' process ids."""
        with self._lock:
            return sorted(w.process.pid for w in self._workers if w is not None and w.process.is_alive())

    async def score(self, spec: ScorerSpec, request_bytes: bytes, context: BatchContext, affinity: object = ""):
        """The serialized ScoreBatchResponse, or (a scorer that splits its
        work: services.contract.SplitScorer) the worker's BatchOutput. Raises WorkerDied or
        WorkerScoringError."""
        status, *reply = await self._run(("score", spec, request_bytes, context), affinity)
        if status == "error":
            message, worker_traceback = reply
            log.error("worker_batch_failed", family=spec.family, error=message, worker_traceback=worker_traceback)
            raise WorkerScoringError(message)
        return reply[0]

    def warm(self, specs: list[ScorerSpec]) -> None:
        """Starts every worker now, each building these scorers (loading
        their models) before its first batch, while the server starts and
        the run uploads: a first batch then does not wait for it."""
        for slot in range(self.size):
            task = asyncio.get_running_loop().create_task(self._warm_one(list(specs), slot))
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    def warming(self) -> bool:
        """Whether a warm-up is still going on."""
        return bool(self._warming)

    async def _warm_one(self, specs: list[ScorerSpec], slot: int) -> None:
        try:
            await self._run(("warm", specs), ("warm", slot), only=slot)
        except Exception as error:  # noqa: BLE001 - a batch sent to that worker will say what is wrong
            if not self._closed:
                log.warning("worker_warm_up_failed", error=str(error))

    async def _run(self, message, key: object, only: int | None = None):
        """`message` sent to the worker the scheduler gives it, its answer."""
        loop = asyncio.get_running_loop()
        slot = await self.slots.acquire(key, only)
        try:
            future = self._threads.submit(self._call, slot, message)
        except BaseException:
            self.slots.release(slot)
            raise
        # The slot is free when the worker is, not when the caller stops waiting.
        future.add_done_callback(lambda _: _call_soon(loop, self.slots.release, slot))
        return await asyncio.wrap_future(future)

    def _count_batch(self) -> None:
        with self._lock:  # calls run in several threads at once
            self.batches += 1  # counted once the batch is its worker's: a kill from now on fails it

    def _call(self, slot: int, message):
        worker = self._worker_in(slot)
        try:
            try:
                return worker.call(message, self._count_batch)
            except WorkerGone as gone:
                # Killed while idle, not yet noticed: nothing of the batch was
                # done, so its replacement takes it (once: a worker that cannot
                # even take a batch is a failure to report).
                log.error("worker_died", job=message[0], error=str(gone))
                worker.stop(timeout=1)
                worker = self._start_in(slot, replacing=True)
                return worker.call(message, self._count_batch)
        except (WorkerDied, WorkerGone) as error:
            if not self._closed:  # else it was stopped with the pool
                log.error("worker_died", job=message[0], error=str(error))
            worker.stop(timeout=1)
            if not self._closed:
                self._start_in(slot, replacing=True)
            raise

    def _worker_in(self, slot: int) -> _Worker:
        with self._lock:
            worker = self._workers[slot]
        if worker is not None and worker.process.is_alive():
            return worker
        if worker is not None:
            # Died while idle (killed, out of memory): replaced, no batch lost.
            log.error("worker_died", pid=worker.process.pid, exit=_exit_description(worker.process.exitcode))
            worker.stop(timeout=1)
        return self._start_in(slot, replacing=worker is not None)

    def _start_in(self, slot: int, replacing: bool) -> _Worker:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            worker = self._workers[slot] = _Worker(self._context, self._limit_blas)
            self.replaced += replacing
            return worker

    def close(self, timeout: float = 10.0) -> None:
        """Stops every worker: idle ones at once, busy ones after their
        batch (or killed after `timeout`)."""
        atexit.unregister(self.close)
        with self._lock:
            self._closed = True
            workers = [w for w in self._workers if w is not None]
        for worker in workers:
            worker.stop(timeout)
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def aclose(self, timeout: float = 10.0) -> None:
        """close() from the pool's event loop, warm-ups cancelled first."""
        for task in list(self._warming):
            task.cancel()
        await asyncio.to_thread(self.close, timeout)


def _call_soon(loop: asyncio.AbstractEventLoop, callback, *args) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed: nothing waits for the slot
        pass
