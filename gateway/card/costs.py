"""Token and cost totals (SPEC §5), speed (§6) and the cost-adjusted score.

Pricing convention (the spec is silent): cached tokens are part of
prompt_tokens and are charged at `cached_per_1m` (the prompt price when
absent); reasoning tokens are part of completion_tokens, as providers report
them, and are not charged twice.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

import numpy as np

from champollion.core.usage import TOKEN_FIELDS

# How many uncounted usage keys a warning names, at most.
NAMED_KEYS = 10
# The largest token total a run card holds (its fields are int64).
MAX_TOKEN_TOTAL = 2**63 - 1


class TokenTotalOverflow(ValueError):
    """Adding an entry's usage would take the run's total of token field
    `name` past MAX_TOKEN_TOTAL."""

    def __init__(self, name: str):
        self.name = name
        self.reason = f"the run's total would pass {MAX_TOKEN_TOTAL}, the largest a run card holds"
        super().__init__(f"{name}: {self.reason}")


@dataclass(frozen=True)
class Pricing:
    prompt_per_1m: float
    completion_per_1m: float
    cached_per_1m: float | None = None

    def cost_of(self, usage: dict[str, int]) -> float:
        prompt = usage.get("prompt_tokens", 0)
        cached = usage.get("cached_tokens", 0)
        cached_price = self.prompt_per_1m if self.cached_per_1m is None else self.cached_per_1m
        return (
            (prompt - cached) * self.prompt_per_1m
            + cached * cached_price
            + usage.get("completion_tokens", 0) * self.completion_per_1m
        ) / 1_000_000


@dataclass(frozen=True)
class EntryUsage:
    """What the client reported for one entry; None where it sent nothing
    (or usage of a shape not recognised). `unrecognised`: the usage
    object's keys that were not counted (champollion.core.usage)."""
    usage: dict[str, int] | None
    cost_usd: float | None
    latency_s: float | None
    source_chars: int
    unrecognised: tuple[str, ...] = ()


class UsageTally:
    """Running totals of what the client reported, entry by entry: all the
    totals and speed blocks need, without keeping the entries (a run may be
    uploaded in parts larger than memory)."""

    def __init__(self, pricing: Pricing | None = None):
        self.pricing = pricing
        self.entries = 0
        self.with_usage = 0
        # Token field -> sum over the entries that reported it.
        self.token_sums: dict[str, int] = {}
        # Provider-reported cost where given, else price table x tokens.
        self.costs_known = 0
        self.total_cost = 0.0
        self.source_chars = 0
        self.latencies = array("d")
        # Entries whose usage had keys not counted, and the first such keys
        # (a few name the problem; all of them could grow with the run).
        self.unrecognised_entries = 0
        self.unrecognised_keys: set[str] = set()
        self.more_unrecognised_keys = False

    @classmethod
    def of(cls, entries: Iterable[EntryUsage], pricing: Pricing | None = None) -> "UsageTally":
        tally = cls(pricing)
        for entry in entries:
            tally.add(entry)
        return tally

    def add(self, entry: EntryUsage) -> None:
        """Raises TokenTotalOverflow, counting nothing of `entry`, when a
        token total would pass what a run card holds."""
        sums = {name: self.token_sums.get(name, 0) + count for name, count in (entry.usage or {}).items()}
        for name, total in sums.items():
            if total > MAX_TOKEN_TOTAL:
                raise TokenTotalOverflow(name)
        self.entries += 1
        self.source_chars += entry.source_chars
        if entry.usage is not None:
            self.with_usage += 1
            self.token_sums.update(sums)
        if entry.cost_usd is not None:
            cost = entry.cost_usd
        elif self.pricing is not None and entry.usage is not None:
            cost = self.pricing.cost_of(entry.usage)
        else:
            cost = None
        if cost is not None:
            self.costs_known += 1
            self.total_cost += cost
        if entry.latency_s is not None:
            self.latencies.append(entry.latency_s)
        if entry.unrecognised:
            self.unrecognised_entries += 1
            for key in entry.unrecognised:
                if len(self.unrecognised_keys) < NAMED_KEYS:
                    self.unrecognised_keys.add(key)
                elif key not in self.unrecognised_keys:
                    self.more_unrecognised_keys = True


def _ratio(numerator, denominator) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def compute_totals(tally: UsageTally, warnings: list[str]) -> dict:
    """The run card's `totals` block; explains every gap in `warnings`."""
    entries = tally.entries
    totals: dict = {name: tally.token_sums.get(name) for name in TOKEN_FIELDS}
    if tally.unrecognised_entries:
        keys = ", ".join(sorted(tally.unrecognised_keys)) + (" and others" if tally.more_unrecognised_keys else "")
        warnings.append(
            f"usage of {tally.unrecognised_entries} entries had an unrecognised shape: keys {keys} "
            "were not counted in the token totals"
        )
    if tally.with_usage and tally.with_usage < entries:
        warnings.append(
            f"token usage reported for {tally.with_usage} of {entries} entries; token totals cover those"
        )
    prompt, completion = totals["prompt_tokens"], totals["completion_tokens"]
    totals["total_tokens"] = prompt + completion if prompt is not None and completion is not None else None
    totals["tokens_per_entry"] = _ratio(totals["total_tokens"], entries)

    if not tally.costs_known:
        total_cost = None
    else:
        total_cost = tally.total_cost
        if tally.costs_known < entries:
            warnings.append(
                f"cost known for {tally.costs_known} of {entries} entries (no cost_usd and no "
                "usage+pricing for the rest); cost totals cover those"
            )
    totals["total_cost_usd"] = total_cost
    totals["cost_per_entry_usd"] = _ratio(total_cost, entries)
    totals["cost_per_1k_tokens"] = None if _ratio(total_cost, totals["total_tokens"]) is None else (
        total_cost / totals["total_tokens"] * 1000
    )
    totals["cost_per_source_char"] = _ratio(total_cost, tally.source_chars)
    return totals


def parse_timestamp(text: str) -> datetime:
    """ISO-8601, with a trailing Z accepted for UTC."""
    return datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)


def run_elapsed_seconds(elapsed: float | None, time_start: str | None, time_end: str | None) -> float | None:
    if elapsed is not None:
        return elapsed
    if time_start and time_end:
        return (parse_timestamp(time_end) - parse_timestamp(time_start)).total_seconds()
    return None


def compute_speed(tally: UsageTally, elapsed: float | None, total_tokens: int | None) -> dict:
    latencies = np.frombuffer(tally.latencies, dtype=float)
    has_latency = latencies.size > 0
    return {
        "tokens_per_second": _ratio(total_tokens, elapsed),
        "entries_per_minute": None if not elapsed else tally.entries / (elapsed / 60),
        "avg_latency_seconds": float(latencies.mean()) if has_latency else None,
        # numpy's default linear interpolation (SPEC §6 decision).
        "median_latency_seconds": float(np.percentile(latencies, 50)) if has_latency else None,
        "p95_latency_seconds": float(np.percentile(latencies, 95)) if has_latency else None,
    }


def cost_adjusted(composite: float | None, cost_per_entry_usd: float | None) -> float | None:
    """composite / log2(1 + cost_per_entry_usd x 1000); null without a composite
    or a positive cost (the formula divides by zero at cost 0)."""
    if composite is None or not cost_per_entry_usd:
        return None
    return composite / math.log2(1 + cost_per_entry_usd * 1000)
