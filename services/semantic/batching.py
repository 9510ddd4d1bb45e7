"""Micro-batching: segments from concurrent requests share model batches.

The servicer scores each request in its own thread. With a ``MicroBatcher``
those threads only submit their segments and wait; one worker thread takes
a round of work: whatever is queued (up to ``round_batches`` full batches),
waiting at most ``max_wait_s`` for more while it holds less than one full
batch; it sorts the round by length and runs it in batches of at most
``max_batch_size``. Small concurrent requests then share forward passes, and
large ones are sorted together, as ``CometModel.predict`` sorts a whole set. ``DirectBatcher`` is the same interface without the
queue (each call runs its own batches, one call at a time), for comparison.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def sorted_chunks(items: Sequence, size: int, key: Callable[[Any], int] | None,
                  max_cost: int | None = None) -> list[list[int]]:
    """Indices of `items`, sorted by `key` (arrival order without one), cut
    into chunks of at most `size` items and, with `max_cost`, of at most
    `max_cost` padded length (items x longest item): similar lengths share a
    batch, so little of it is padding, and long items come in smaller batches."""
    order = list(range(len(items)))
    if key is None:
        return [order[start:start + size] for start in range(0, len(order), size)]
    lengths = {index: key(items[index]) for index in order}
    order.sort(key=lengths.__getitem__)
    chunks: list[list[int]] = []
    current: list[int] = []
    for index in order:
        too_costly = max_cost is not None and current and (len(current) + 1) * lengths[index] > max_cost
        if len(current) == size or too_costly:
            chunks.append(current)
            current = []
        current.append(index)
    if current:
        chunks.append(current)
    return chunks


@dataclass
class _Job(Generic[Item, Result]):
    items: Sequence[Item]
    results: list = field(default_factory=list)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class BatchCounters:
    def __init__(self):
        self._lock = threading.Lock()
        self.calls = 0
        self.batches = 0
        self.items = 0

    def count(self, calls: int = 0, batches: int = 0, items: int = 0) -> None:
        with self._lock:
            self.calls += calls
            self.batches += batches
            self.items += items


class DirectBatcher(Generic[Item, Result]):
    """Each call sorts and batches its own items; calls run one at a time."""

    def __init__(self, run_batch: Callable[[list[Item]], list[Result]], max_batch_size: int,
                 length: Callable[[Item], int] | None = None, max_batch_cost: int | None = None):
        self.run_batch, self.max_batch_size, self.length = run_batch, max_batch_size, length
        self.max_batch_cost = max_batch_cost
        self.counters = BatchCounters()
        self._lock = threading.Lock()

    def submit(self, items: Sequence[Item]) -> list[Result]:
        self.counters.count(calls=1, items=len(items))
        results: list = [None] * len(items)
        with self._lock:
            for chunk in sorted_chunks(items, self.max_batch_size, self.length, self.max_batch_cost):
                for index, result in zip(chunk, self.run_batch([items[i] for i in chunk])):
                    results[index] = result
                self.counters.count(batches=1)
        return results

    def close(self) -> None:
        pass


class MicroBatcher(Generic[Item, Result]):
    """Groups the items of concurrent ``submit`` calls into shared batches."""

    _STOP = object()

    def __init__(self, run_batch: Callable[[list[Item]], list[Result]], max_batch_size: int = 16,
                 max_wait_s: float = 0.005, length: Callable[[Item], int] | None = None, name: str = "micro-batcher",
                 round_batches: int = 8, max_batch_cost: int | None = None):
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        self.run_batch, self.max_batch_size, self.max_wait_s, self.length = run_batch, max_batch_size, max_wait_s, length
        self.round_items = max_batch_size * max(1, round_batches)
        self.max_batch_cost = max_batch_cost
        self.counters = BatchCounters()
        self._queue: queue.Queue = queue.Queue()
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    def submit(self, items: Sequence[Item]) -> list[Result]:
        """Blocks until every item is scored; re-raises the batch's error."""
        self.counters.count(calls=1, items=len(items))
        if not items:
            return []
        if not self._worker.is_alive():
            raise RuntimeError("micro-batcher is closed")
        job: _Job = _Job(items=items, results=[None] * len(items))
        self._queue.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.results

    def close(self) -> None:
        self._queue.put(self._STOP)
        self._worker.join(timeout=10)

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        """`first` plus what is queued or arrives within max_wait_s: waiting
        only while under one full batch, taking no more than a round."""
        jobs, held = [first], len(first.items)
        deadline = time.monotonic() + self.max_wait_s
        while held < self.round_items:
            remaining = deadline - time.monotonic() if held < self.max_batch_size else 0
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is self._STOP:
                return jobs, True
            jobs.append(job)
            held += len(job.items)
        return jobs, False

    def _work(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is self._STOP:
                break
            jobs, stopping = self._gather(first)
            self._run(jobs)

    def _run(self, jobs: list[_Job]) -> None:
        # Whatever goes wrong, every caller is answered: the worker never dies
        # with callers still waiting.
        try:
            self._run_batches(jobs)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting callers
            for job in jobs:
                job.error = job.error or error
        finally:
            for job in jobs:
                job.done.set()

    def _run_batches(self, jobs: list[_Job]) -> None:
        owners = [(job, index) for job in jobs for index in range(len(job.items))]
        items = [job.items[index] for job, index in owners]
        for chunk in sorted_chunks(items, self.max_batch_size, self.length, self.max_batch_cost):
            self.counters.count(batches=1)
            try:
                results = self.run_batch([items[i] for i in chunk])
                if len(results) != len(chunk):
                    raise RuntimeError(f"batch of {len(chunk)} returned {len(results)} results")
            except Exception as error:  # noqa: BLE001 - this batch's callers get it, the others go on
                for i in chunk:
                    owners[i][0].error = error
                continue
            for i, result in zip(chunk, results):
                job, index = owners[i]
                job.results[index] = result


def make_batcher(run_batch: Callable[[list[Any]], list[Any]], max_batch_size: int, max_wait_s: float,
                 length: Callable[[Any], int], micro_batching: bool = True, name: str = "micro-batcher",
                 max_batch_cost: int | None = None):
    if micro_batching:
        return MicroBatcher(run_batch, max_batch_size, max_wait_s, length, name, max_batch_cost=max_batch_cost)
    return DirectBatcher(run_batch, max_batch_size, length, max_batch_cost)
