"""Which worker of a pool scores which call (services/workers.py).

Calls carry an affinity key: the families' calls for the same entries share
one. A key is pinned to a worker, the least loaded when its first call
comes, so that the calls of one batch meet in one worker, whose sentence
encoder then holds their texts and token rows (the semantic and behavioral
families encode the same sources, predictions and references). On 10,000
WMT21 entries, with a worker chosen by a hash of the key when free, the
two workers computed 746,000 token rows; with a batch's calls kept
together, 566,000 (row caches of 65,536 rows, oldest first out, before
the clock eviction of champollion/core/encoder/row_cache.py).

A worker never idles while calls wait: one that frees up takes the oldest
call pinned to it, else steals one, preferring a key none of whose calls
is running (moving all of them with it splits nothing), and the stolen
key is pinned to it from then on; a call whose worker is busy while another
is idle goes to the idle one the same way.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict

# Keys remembered; a batch's calls all come within moments of each other.
PINNED_KEYS = 4096


class SlotScheduler:
    """Slots 0..size-1, handed out to waiting calls. Use from one event loop."""

    def __init__(self, size: int):
        self.size = size
        self._free: list[int] = list(range(size))
        self._waiting: list[tuple[object, asyncio.Future, int | None]] = []  # (key, waiter, only slot)
        self._pinned: OrderedDict[object, int] = OrderedDict()
        self._running: dict[int, object] = {}  # slot -> key of its call
        self.steals = 0  # calls sent to another worker than their key's, for logs and tests

    async def acquire(self, key: object, only: int | None = None) -> int:
        """A slot for a call with this key, or only slot `only` (warming
        that worker up); waiting here, a cancelled call never starts."""
        slot = self._pin(key) if only is None else only
        if slot not in self._free and self._free and only is None:
            self.steals += 1
            slot = self._repin(key, self._free[0])
        if slot in self._free:
            self._free.remove(slot)
            return self._start(slot, key)
        waiter = asyncio.get_running_loop().create_future()
        entry = (key, waiter, only)
        self._waiting.append(entry)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # handed a slot just as it was cancelled
            elif entry in self._waiting:  # else a release already dropped it, being done
                self._waiting.remove(entry)
            raise

    def release(self, slot: int) -> None:
        """The call in `slot` is over: the slot goes to a waiting call, or is free."""
        self._running.pop(slot, None)
        self._waiting = [entry for entry in self._waiting if not entry[1].done()]
        chosen = self._next_for(slot)
        if chosen is None:
            self._free.append(slot)
            return
        self._waiting.remove(chosen)
        key, waiter, _ = chosen
        waiter.set_result(self._start(slot, key))

    def _next_for(self, slot: int):
        """The waiting call `slot` takes next (its own oldest, else a stolen one), or None."""
        own = [entry for entry in self._waiting if self._slot_of(entry) == slot]
        if own:
            return own[0]
        movable = [entry for entry in self._waiting if entry[2] is None]
        if not movable:
            return None
        self.steals += 1
        started = set(self._running.values())
        chosen = next((entry for entry in movable if entry[0] not in started), movable[0])
        self._repin(chosen[0], slot)
        return chosen

    def _slot_of(self, entry) -> int | None:
        key, _, only = entry
        return self._pinned.get(key) if only is None else only

    def _start(self, slot: int, key: object) -> int:
        self._running[slot] = key
        return slot

    def _pin(self, key: object) -> int:
        if key in self._pinned:
            self._pinned.move_to_end(key)
            return self._pinned[key]
        return self._repin(key, min(range(self.size), key=self._load))

    def _repin(self, key: object, slot: int) -> int:
        self._pinned[key] = slot
        self._pinned.move_to_end(key)
        while len(self._pinned) > PINNED_KEYS:
            self._pinned.popitem(last=False)
        return slot

    def _load(self, slot: int) -> int:
        """Calls running in or waiting for `slot`."""
        waiting = sum(1 for entry in self._waiting if not entry[1].done() and self._slot_of(entry) == slot)
        return (slot in self._running) + waiting
