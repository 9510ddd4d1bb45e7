"""A bounded per-process cache of per-type results, for token streams.

Text is Zipfian: most tokens repeat, so work done once per distinct type (an
FST lookup, splitting a whitespace-separated chunk into words) is kept and
reused. `get_many` answers a whole sequence of keys with C-level dict lookups
and computes the keys it lacks in one call, each distinct key once.

Bounded: when it would hold more than `limit` keys, the cache keeps the newer
half. Eviction builds a new dict instead of deleting from the one in use, so a
thread reading the old dict never sees a key vanish; only writers take the lock.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from itertools import islice
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Types per cache. For scale: 80,133 tokens of English news, talks and
# licences have 8,307 word types and 11,583 whitespace-separated chunk types.
DEFAULT_LIMIT = 100_000


class TypeCache(Generic[K, V]):
    def __init__(self, compute: Callable[[list[K]], Sequence[V]], limit: int = DEFAULT_LIMIT):
        """`compute` maps a list of distinct keys to their values, in order."""
        if limit < 2:
            raise ValueError(f"limit must be at least 2, got {limit}")
        self._compute = compute
        self.limit = limit
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: K) -> V:
        values = self._values
        if key in values:
            return values[key]
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[K]) -> list[V]:
        """The value of each key, in order."""
        values = self._values
        try:
            return list(map(values.__getitem__, keys))  # the common case: every type seen before
        except KeyError:
            pass
        # `values` only ever gains keys (eviction replaces the dict), so what
        # is in it now stays readable here.
        found: dict[K, V] = {}
        missing: list[K] = []
        for key in dict.fromkeys(keys):
            if key in values:
                found[key] = values[key]
            else:
                missing.append(key)
        computed = self._compute(missing)
        if len(computed) != len(missing):
            raise ValueError(f"compute gave {len(computed)} values for {len(missing)} keys")
        new = dict(zip(missing, computed))
        found.update(new)
        self._store(new)
        return list(map(found.__getitem__, keys))

    def _store(self, new: dict[K, V]) -> None:
        with self._lock:
            current = self._values
            current.update(new)
            if len(current) > self.limit:
                self._values = dict(islice(current.items(), len(current) - self.limit // 2, None))
