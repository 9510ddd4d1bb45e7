"""Run store benchmark (spec §11), two figures:

  leaderboard  a SQLite store holding 100,000 runs of one dataset and corpus
               version (25,000 configurations submitted four times each, one
               run in ten with another composite coverage, some null
               composites), filled by a bulk insert into the store's own
               tables; each query timed as the median of several
               (target < 200 ms)
  save_run     storing the run card of a 10,000-entry evaluation (embedded
               gateway, surface family; WMT21 en-de) against the time of that
               evaluation (target < 5%)

Usage: python bench/leaderboard.py [--runs N] [--entries N] [--repeats N]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from bench.surface_overhead import build_request  # noqa: E402
from bench.wmt21 import segments  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.eval.v1 import gateway_pb2_grpc  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from champollion.core.run_card import run_card_from_proto  # noqa: E402
from gateway.store import RunStore  # noqa: E402
from gateway.store.rows import run_row  # noqa: E402
from gateway.store.tables import runs  # noqa: E402

DATASET = "bench-dataset"
VERSION = "bench-version"
MAJORITY = {"chrf_plus_plus": 0.4, "exact_match_rate": 0.3, "semantic_score": 0.3}
SUBMISSIONS = 4  # each configuration stored this many times
OTHER = {"chrf_plus_plus": 0.6, "exact_match_rate": 0.4}


def small_card(index: int, rng: random.Random) -> dict:
    composite = None if index % 50 == 0 else rng.random()
    cost_per_entry = rng.uniform(1e-5, 1e-2)
    return {
        "run_id": f"run-{index:07d}",
        "model_slug": f"model-{index % 400}",
        "condition": "zero-shot",
        "dataset": {"id": DATASET, "language_pair": "eng-deu", "version": VERSION},
        "fingerprint": {"hash": f"fp-{index // SUBMISSIONS:06d}"},
        "elapsed_seconds": rng.uniform(10, 1000),
        "scores": {"composite": composite, "quality_tier": "functional", "chrf_plus_plus": rng.uniform(20, 80),
                   "exact_match_rate": rng.random(), "semantic_score": rng.random(),
                   "cost_adjusted": None if composite is None else composite / (1 + cost_per_entry * 1000)},
        "totals": {"cost_per_entry_usd": cost_per_entry},
        "composite_coverage": {"profile": "B", "weights": OTHER if index % 10 == 0 else MAJORITY, "missing": []},
        "integrity": {"disqualified": False},
    }


def fill(store_url: str, count: int) -> None:
    store = RunStore.open(store_url)
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [run_row(small_card(i, rng), start + timedelta(seconds=i), 1 + i % SUBMISSIONS) for i in range(count)]
    with store._connection(write=True) as connection:  # the benchmark's bulk load, not an API
        connection.execute(insert(runs), rows)
    store.close()


def median_ms(function, repeats: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds: CPU time is what a busy machine
    (other processes on the same cores) does not inflate."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def leaderboard_figures(directory: Path, count: int, repeats: int) -> None:
    url = f"sqlite:///{directory / 'leaderboard.sqlite'}"
    started = time.perf_counter()
    fill(url, count)
    print(f"filled a SQLite store with {count:,} runs in {time.perf_counter() - started:.1f} s")
    store = RunStore.open(url)
    queries = {
        "composite_score desc, first submissions (all rows)": dict(),
        "composite_score desc, top 100": dict(limit=100),
        "cost_adjusted desc, top 100": dict(sort="cost_adjusted", limit=100),
        "chrf_plus_plus asc, top 100": dict(sort="chrf_plus_plus", descending=False, limit=100),
        "all submissions, top 100": dict(all_submissions=True, limit=100),
        "all submissions (all rows)": dict(all_submissions=True),
    }
    for name, options in queries.items():
        rows = len(store.leaderboard(DATASET, **options)["rows"])
        wall, cpu = median_ms(lambda: store.leaderboard(DATASET, **options), repeats)
        print(f"  leaderboard {name:52s} {rows:7,} rows  {wall:7.1f} ms wall, {cpu:7.1f} ms CPU")
    wall, cpu = median_ms(lambda: store.list_runs(dataset_id=DATASET, limit=50), repeats)
    print(f"  list_runs newest 50 {'':57s} {wall:7.1f} ms wall, {cpu:7.1f} ms CPU")
    print(f"  (medians of {repeats}; target < 200 ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    store.close()


def save_figures(directory: Path, entries_count: int) -> None:
    entries, predictions = segments(entries_count)
    request = build_request(entries, predictions, 256)
    with EmbeddedStack(families=("surface",)) as stack:
        with grpc.insecure_channel(stack.gateway_address, options=[("grpc.max_receive_message_length", -1),
                                                                   ("grpc.max_send_message_length", -1)]) as channel:
            started = time.perf_counter()
            card = run_card_from_proto(gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=900).run_card)
            evaluate_s = time.perf_counter() - started
    entries_out = card.pop("entries")
    batches = [entries_out[i:i + 256] for i in range(0, len(entries_out), 256)]
    store = RunStore.open(f"sqlite:///{directory / 'save.sqlite'}")
    started = time.perf_counter()
    store.save_run(card, batches)
    save_s = time.perf_counter() - started
    started = time.perf_counter()
    stored = store.get_run(card["run_id"])
    get_s = time.perf_counter() - started
    assert stored["entries"] == entries_out, "the stored entries differ from the evaluated ones"
    store.close()
    size = (directory / "save.sqlite").stat().st_size
    print(f"evaluate {len(entries_out):,} entries (embedded gateway, surface): {evaluate_s:7.2f} s")
    print(f"save_run of its card (SQLite, {size / 2**20:.1f} MiB on disk):      {save_s:7.2f} s  "
          f"= {100 * save_s / evaluate_s:.1f}% of the evaluation (target < 5%)")
    print(f"get_run of it back:                                       {get_s:7.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    logs.configure("WARNING")
    with tempfile.TemporaryDirectory(prefix="champollion-bench-store-") as directory:
        leaderboard_figures(Path(directory), args.runs, args.repeats)
        save_figures(Path(directory), args.entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
