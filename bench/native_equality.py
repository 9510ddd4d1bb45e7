"""Compiled statistics (champollion/core/native) against sacreBLEU's own on every
WMT21 en-de system (20 x 1,002 segments) against reference A: asserts that
every segment's TER, chrF++ and BLEU statistics are equal (values and types)
and prints the time each path takes.

Both paths include sacreBLEU's Python preprocessing (tokenizers); each gets a
fresh metric object, so neither profits from the other's tokenizer cache.
Times are wall clock and this process's CPU time (the CPU time is steadier on
a shared machine).

Usage: python bench/native_equality.py [--entries N] [--metrics ter,chrf_plus_plus,bleu] [--references A,C,D]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sacrebleu.metrics import BLEU, CHRF, TER  # noqa: E402

from bench.wmt21 import read_lines, segments  # noqa: E402
from champollion.core import sacrebleu_adapter  # noqa: E402
from champollion.core.native import _stats  # noqa: E402

# The surface family's configurations (sacrebleu_adapter.build_metric), built fresh.
METRICS = {"ter": TER, "chrf_plus_plus": lambda: CHRF(word_order=2), "bleu": BLEU}


def timed(function, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=20 * 1002, help="pairs, system after system (default: all)")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated metric ids")
    parser.add_argument("--references", default="A", help="reference letters, comma-separated (A, C, D)")
    args = parser.parse_args()
    if _stats is None:
        print("champollion.core.native._stats is not built (pip install -e . with a C++ compiler)", file=sys.stderr)
        return 2
    entries, predictions = segments(args.entries)
    ids = [entry["id"] for entry in entries]
    hypotheses = [p["prediction"] for p in predictions]
    letters = args.references.split(",")
    files = {letter: read_lines(f"ref.{letter}.de") for letter in letters}
    # Ids are '<system>:<line>'.
    references = [[files[letter][int(entry_id.rsplit(":", 1)[1]) - 1] for letter in letters] for entry_id in ids]
    assert all(refs[0] == entry["reference"] for refs, entry in zip(references, entries)) or letters[0] != "A"
    streams = sacrebleu_adapter.reference_streams(references)
    print(f"{len(ids)} segments (WMT21 en-de systems vs ref.{'+'.join(letters)})")
    print(f"{'metric':16} {'sacreBLEU wall/cpu s':>22} {'native wall/cpu s':>20} {'speed-up wall/cpu':>18}")
    failures = 0
    for metric_id in args.metrics.split(","):
        build = METRICS[metric_id]
        python_wall, python_cpu, expected = timed(build()._extract_corpus_statistics, hypotheses, streams)
        native_wall, native_cpu, got = timed(sacrebleu_adapter.native_segment_statistics, build(), hypotheses,
                                             references)
        mismatches = [
            index for index, (ours, theirs) in enumerate(zip(got, expected))
            if ours != theirs or [type(v) for v in ours] != [type(v) for v in theirs]
        ]
        if len(got) != len(expected):
            mismatches.append(min(len(got), len(expected)))
        print(f"{metric_id:16} {python_wall:10.2f} / {python_cpu:8.2f} {native_wall:9.2f} / {native_cpu:7.2f} "
              f"{python_wall / native_wall:8.1f}x / {python_cpu / native_cpu:5.1f}x"
              + ("" if not mismatches else f"   {len(mismatches)} MISMATCHES"))
        for index in mismatches[:5]:
            print(f"  {ids[index]}: native {got[index]} sacreBLEU {expected[index]}")
        failures += len(mismatches)
    if failures:
        print(f"FAILED: {failures} segments differ")
        return 1
    print("every segment's statistics are equal (values and types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
