"""A board's rank ranges and intervals (issue 34) against sacreBLEU's paired
bootstrap of the same systems, WMT21 en-de, reference A, chrF++.

The runs: the 20 submitted systems, references C and D as two more, and as
many line-by-line mixtures of two systems (one's even lines, the other's odd
ones) as make `--runs` (default 50), over the first `--lines` segments
(default all 1,002). Each run's per-entry chrF++ statistics (the gateway's
own, champollion.core.sacrebleu_adapter) are stored in a SQLite store; the
board is read as the gateway reads it (readings.leaderboard_for, sorted by
chrf_plus_plus):

  cold   statistics read from the store, ranges computed (both caches empty)
  warm   statistics cached, ranges computed (every pair of runs: n(n-1)/2)
  cached the same board again (its ranges cached)

The peer: sacreBLEU's PairedTest (bs, 1,000 resamples, seed 12345, chrF++),
which tests every system against the first only (n - 1 pairs), extracting
each system's statistics from the text; its time less that extraction (timed
alone) is printed too. The check: our uncorrected p-values of those n - 1
pairs equal sacreBLEU's (exit 1 otherwise). Budget: warm within 1 s for 50
runs of about 1,000 entries. The top rows are printed with their ranges (the
board's p-values: the same test read off the normal fit of the resamples,
gateway/card/pairs.py), and the board's remark where it has one.

Usage: python bench/board_ranks.py [--runs 50] [--lines 1002] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sacrebleu.metrics import CHRF  # noqa: E402
from sacrebleu.significance import PairedTest  # noqa: E402

from bench.wmt21 import read_lines, systems  # noqa: E402
from apps.client import rank_text  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.core.sacrebleu_adapter import build_metric, segment_statistics  # noqa: E402
from champollion.core.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED  # noqa: E402
from gateway.card.corpus import corpus_value  # noqa: E402
from gateway.card.pairs import compare_all  # noqa: E402
from gateway.server import readings  # noqa: E402
from champollion.core.roles import MAINTAINER  # noqa: E402
from gateway.server.callers import Caller  # noqa: E402
from gateway.store import RunStore  # noqa: E402

DATASET = "bench-board-ranks"
VERSION = "b0" * 32  # a content hash, as a corpus version is
METRIC = "chrf_plus_plus"
CALLER = Caller("bench", MAINTAINER, "Leaderboard")


def named_outputs(count: int, lines: int) -> list[tuple[str, list[str]]]:
    """`count` systems' outputs over the first `lines` segments: the WMT21
    systems, references C and D, then mixtures of two systems."""
    real = [(name, read_lines(f"hyp.{name}.de")[:lines]) for name in systems()]
    real += [(f"ref-{name}", read_lines(f"ref.{name}.de")[:lines]) for name in ("C", "D")]
    mixed = []
    for (name_a, a), (name_b, b) in combinations(real[:20], 2):
        if len(real) + len(mixed) >= count:
            break
        mixed.append((f"{name_a}+{name_b}", [a[i] if i % 2 == 0 else b[i] for i in range(lines)]))
    return (real + mixed)[:count]


def card(index: int, name: str, chrf: float) -> dict:
    return {
        "run_id": f"bench-run-{index:03d}", "model_slug": name, "condition": "zero-shot",
        "dataset": {"id": DATASET, "language_pair": "eng-deu", "version": VERSION},
        "fingerprint": {"hash": f"bench-fp-{index:03d}"}, "elapsed_seconds": 1.0,
        "scores": {"composite": None, "quality_tier": "functional", METRIC: chrf},
        "totals": {}, "composite_coverage": {"profile": "B", "weights": {}, "missing": []},
        "integrity": {"disqualified": False, "reasons": []},
    }


def fill(url: str, outputs: list[tuple[str, list[str]]], references: list[str]) -> None:
    metric = build_metric(METRIC)
    store = RunStore.open(url)
    for index, (name, hypotheses) in enumerate(outputs):
        rows = segment_statistics(metric, hypotheses, [[reference] for reference in references])
        value = float(corpus_value(METRIC, np.asarray(rows, dtype=float)))
        entries = [{"id": f"line{i + 1}", "stats": {METRIC: list(map(float, row))}} for i, row in enumerate(rows)]
        store.save_run(card(index, name, value), [entries])
    store.close()


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def clear(*caches) -> None:
    with readings._cache_lock:  # the benchmark empties the gateway's caches, not an API
        for cache in caches:
            cache.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--lines", type=int, default=1002)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logs.configure("WARNING")
    references = read_lines("ref.A.de")[:args.lines]
    outputs = named_outputs(args.runs, args.lines)
    with tempfile.TemporaryDirectory(prefix="champollion-bench-ranks-") as folder:
        url = f"sqlite:///{Path(folder) / 'runs.sqlite'}"
        fill(url, outputs, references)
        store = RunStore.open(url)

        def board() -> dict:
            return readings.leaderboard_for(store, CALLER, DATASET, sort=METRIC, limit=None)

        cold, warm, cached = [], [], []
        for _ in range(args.repeats):
            clear(readings._runs, readings._ranks)
            cold.append(timed(board))
            clear(readings._ranks)
            warm.append(timed(board))
            cached.append(timed(board))
        shown = board()
        runs = [readings.stored_comparable(store, row["run_id"])[1] for row in shown["rows"]]
        store.close()

    os.environ["SACREBLEU_SEED"] = str(DEFAULT_SEED)
    ordered = {row["model_slug"]: position for position, row in enumerate(shown["rows"])}
    texts = sorted(outputs, key=lambda output: ordered[output[0]])  # the board's leader as sacreBLEU's baseline
    extraction = timed(lambda: [CHRF(word_order=2)._extract_corpus_statistics(hypotheses, [references])
                                for _, hypotheses in texts])
    started = time.perf_counter()
    _, sacre = PairedTest(texts, {"chrF2++": CHRF(word_order=2)}, [references], test_type="bs",
                          n_samples=DEFAULT_RESAMPLES)()
    sacre_s = time.perf_counter() - started

    pairs = compare_all(runs, metric_ids=[METRIC], correction="none")["metrics"][METRIC]["pairs"]
    ours_p = {pair["second"]: pair["p_value"] for pair in pairs if pair["first"] == 0}
    theirs_p = {index: result.p_value for index, result in enumerate(sacre["chrF2++"]) if index}
    largest = max(abs(ours_p[index] - theirs_p[index]) for index in theirs_p)

    n = len(runs)
    print(f"{n} runs x {len(references):,} entries (WMT21 en-de, reference A), board by chrF++, "
          f"{n * (n - 1) // 2:,} pairs; medians of {args.repeats}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"  ours, cold (statistics read from the store) {statistics.median(cold):7.3f} s")
    print(f"  ours, warm (statistics cached)              {statistics.median(warm):7.3f} s   (budget 1 s)")
    print(f"  ours, the same board again (cached ranges)  {statistics.median(cached):7.3f} s")
    print(f"  sacreBLEU PairedTest bs, {n - 1} pairs against the leader {sacre_s:7.2f} s, of which statistics "
          f"extraction {extraction:.2f} s")
    rest = sacre_s - extraction
    print(f"  ratio sacreBLEU / ours: whole {sacre_s / statistics.median(cold):.1f}x (cold), "
          f"{sacre_s / statistics.median(warm):.1f}x (warm); less its extraction {rest / statistics.median(warm):.1f}x "
          f"(warm), doing {n - 1} pairs to our {n * (n - 1) // 2:,}")
    print(f"  uncorrected p-values of the {n - 1} pairs with the leader vs sacreBLEU's: largest difference "
          f"{largest:.2e}")
    if shown["ranks_note"]:
        print(f"  the board's remark: {shown['ranks_note']}")
    print("  top of the board:")
    for row in shown["rows"][:8]:
        ci = row["ci"]
        print(f"    {rank_text(row):>6}  {row['model_slug'][:40]:40s} {row[METRIC]:6.2f} "
              f"[{ci['ci_lower']:.2f}, {ci['ci_upper']:.2f}]  cluster {row['cluster']}")
    return 0 if largest <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
