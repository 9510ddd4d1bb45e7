"""Totals (SPEC §5), speed (§6) and cost-adjusted score."""
import math

import numpy as np
import pytest

from gateway.card.costs import (
    EntryUsage,
    Pricing,
    UsageTally,
    compute_speed,
    compute_totals,
    cost_adjusted,
    run_elapsed_seconds,
)


def usage(prompt, completion, reasoning=0, cached=0):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "reasoning_tokens": reasoning, "cached_tokens": cached}


def test_totals_from_provider_costs():
    entries = [
        EntryUsage(usage(100, 20), 0.002, 1.0, source_chars=50),
        EntryUsage(usage(200, 40, reasoning=10, cached=64), 0.004, 3.0, source_chars=150),
    ]
    warnings = []
    totals = compute_totals(UsageTally.of(entries), warnings)
    assert totals["prompt_tokens"] == 300 and totals["completion_tokens"] == 60
    assert totals["reasoning_tokens"] == 10 and totals["cached_tokens"] == 64
    assert totals["total_tokens"] == 360
    assert totals["tokens_per_entry"] == 180
    assert totals["total_cost_usd"] == pytest.approx(0.006)
    assert totals["cost_per_entry_usd"] == pytest.approx(0.003)
    assert totals["cost_per_1k_tokens"] == pytest.approx(0.006 / 360 * 1000)
    assert totals["cost_per_source_char"] == pytest.approx(0.006 / 200)
    assert warnings == []


def test_price_table_charges_cached_prompt_tokens_at_their_price():
    pricing = Pricing(prompt_per_1m=1.0, completion_per_1m=4.0, cached_per_1m=0.5)
    entries = [EntryUsage(usage(1000, 500, cached=400), None, None, source_chars=10)]
    totals = compute_totals(UsageTally.of(entries, pricing), [])
    assert totals["total_cost_usd"] == pytest.approx((600 * 1.0 + 400 * 0.5 + 500 * 4.0) / 1e6)


def test_unknown_cost_is_null_not_zero():
    entries = [EntryUsage(usage(10, 5), None, None, source_chars=10)]
    totals = compute_totals(UsageTally.of(entries), [])
    assert totals["total_cost_usd"] is None
    assert totals["cost_per_entry_usd"] is None and totals["cost_per_1k_tokens"] is None


def test_partial_usage_is_summed_with_a_warning():
    entries = [EntryUsage(usage(10, 5), 0.1, None, 10), EntryUsage(None, None, None, 10)]
    warnings = []
    totals = compute_totals(UsageTally.of(entries), warnings)
    assert totals["total_tokens"] == 15
    assert any("1 of 2 entries" in w for w in warnings)


def test_speed_uses_linear_percentiles():
    latencies = [0.2, 0.4, 0.4, 1.0, 3.0]
    entries = [EntryUsage(None, None, value, 1) for value in latencies] + [EntryUsage(None, None, None, 1)]
    speed = compute_speed(UsageTally.of(entries), elapsed=30.0, total_tokens=600)
    assert speed["avg_latency_seconds"] == pytest.approx(np.mean(latencies))
    assert speed["median_latency_seconds"] == pytest.approx(0.4)
    assert speed["p95_latency_seconds"] == pytest.approx(1.0 + 0.8 * (3.0 - 1.0))
    assert speed["tokens_per_second"] == pytest.approx(20.0)
    assert speed["entries_per_minute"] == pytest.approx(6 / 0.5)


def test_speed_without_inputs_is_null():
    speed = compute_speed(UsageTally.of([EntryUsage(None, None, None, 1)]), elapsed=None, total_tokens=None)
    assert all(value is None for value in speed.values())


def test_elapsed_from_timestamps_or_given():
    assert run_elapsed_seconds(None, "2026-11-20T10:00:00Z", "2026-11-20T10:01:12Z") == 72.0
    assert run_elapsed_seconds(5.0, "2026-11-20T10:00:00Z", "2026-11-20T10:01:12Z") == 5.0
    assert run_elapsed_seconds(None, None, None) is None


def test_cost_adjusted():
    assert cost_adjusted(0.8, 0.002) == pytest.approx(0.8 / math.log2(3))
    assert cost_adjusted(None, 0.002) is None
    assert cost_adjusted(0.8, 0.0) is None
    assert cost_adjusted(0.8, None) is None


def test_uncounted_usage_keys_are_warned_about_entry_by_entry():
    entries = [
        EntryUsage(None, None, None, 10, unrecognised=("tokens_in", "tokens_out")),
        EntryUsage(usage(10, 5), None, None, 10, unrecognised=("usageMetadata.toolUsePromptTokenCount",)),
        EntryUsage(usage(10, 5), None, None, 10),
    ]
    warnings = []
    totals = compute_totals(UsageTally.of(entries), warnings)
    assert totals["prompt_tokens"] == 20
    assert warnings[0] == (
        "usage of 2 entries had an unrecognised shape: keys tokens_in, tokens_out, "
        "usageMetadata.toolUsePromptTokenCount were not counted in the token totals"
    )


def test_uncounted_usage_keys_named_are_bounded():
    entries = [EntryUsage(None, None, None, 1, unrecognised=(f"key{i:02d}",)) for i in range(25)]
    warnings = []
    compute_totals(UsageTally.of(entries), warnings)
    assert warnings[0].startswith("usage of 25 entries had an unrecognised shape: keys key00, key01,")
    assert "key09 and others were not counted" in warnings[0] and "key10" not in warnings[0]
