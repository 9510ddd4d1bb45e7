"""All pairs (issue 34): gateway/card/pairs.py's compare_all over N WMT21
en-de systems (reference A) against the N(N-1)/2 `compare` tests it stands
for (gateway/card/compare.py's compare_runs on each pair), in one process
on the same run cards, interleaved over --repeats.

Every system is scored once by the embedded gateway (surface family:
chrF++, BLEU, TER and the composite over them). The benchmark exits 1
unless every uncorrected p-value of compare_all equals its pair's
compare_runs p-value; it prints both times, their ratio, and how many pairs
each correction calls significant on chrF++ (what multiple comparisons do
to "significant").

Usage: python bench/all_pairs.py [--systems N] [--method bs|ar] [--resamples N] [--repeats N]
"""
from __future__ import annotations

import argparse
import sys
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc

from bench.surface_overhead import build_request
from bench.wmt21 import read_lines, systems
from champollion.core import logs
from champollion.core.sampling import BOOTSTRAP, CORRECTIONS, DEFAULT_SEED, METHODS
from apps.launch.embedded import EmbeddedStack
from champollion.eval.v1 import gateway_pb2_grpc
from gateway.card.compare import DEFAULT_SAMPLES, ComparableRun, compare_runs
from gateway.card.pairs import compare_all

UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def scored_runs(names: list[str]) -> list[ComparableRun]:
    """Each system's run card, scored by the embedded gateway, as compare reads it."""
    sources, references = read_lines("src.en"), read_lines("ref.A.de")
    entries = [{"id": f"line{n}", "source": s, "reference": r}
               for n, (s, r) in enumerate(zip(sources, references), start=1)]
    runs = []
    with EmbeddedStack(families=("surface",), store=None, workers=0) as stack, \
            grpc.insecure_channel(stack.gateway_address, options=UNLIMITED) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        for name in names:
            predictions = [{"id": e["id"], "prediction": h} for e, h in zip(entries, read_lines(f"hyp.{name}.de"))]
            request = build_request(entries, predictions, 256)
            request.options.metrics.extend(["chrf", "bleu", "ter"])
            runs.append(ComparableRun.from_proto(stub.Evaluate(request, timeout=1200).run_card))
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", type=int, default=20, help="the first N WMT21 systems by name (default 20: all)")
    parser.add_argument("--method", choices=METHODS, default=BOOTSTRAP)
    parser.add_argument("--resamples", type=int, default=0, help="resamples or trials (0: compare's default)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logs.configure("WARNING")
    names = systems()[:args.systems]
    samples = args.resamples or DEFAULT_SAMPLES[args.method]
    runs = scored_runs(names)
    pairs = list(combinations(range(len(runs)), 2))
    times = {"compare_all": [], "compare each pair": []}
    for _ in range(args.repeats):
        started = time.perf_counter()
        together = compare_all(runs, samples, DEFAULT_SEED, args.method, correction="none", names=names)
        times["compare_all"].append(time.perf_counter() - started)
        started = time.perf_counter()
        alone = {pair: compare_runs(runs[pair[0]], runs[pair[1]], samples, DEFAULT_SEED, args.method)
                 for pair in pairs}
        times["compare each pair"].append(time.perf_counter() - started)
    unequal = [(metric_id, names[verdict["first"]], names[verdict["second"]])
               for metric_id, block in together["metrics"].items() for verdict in block["pairs"]
               if verdict["p_value"] != alone[verdict["first"], verdict["second"]]["metrics"][metric_id]["p_value"]]
    checked = sum(len(block["pairs"]) for block in together["metrics"].values())
    best = {what: min(seconds) for what, seconds in times.items()}
    print(f"{len(names)} systems, {len(pairs)} pairs, {args.method} with {samples} "
          f"{'resamples' if args.method == BOOTSTRAP else 'trials'}, 1,002 entries, metrics: "
          f"{', '.join(together['metrics'])}")
    for what, seconds in times.items():
        print(f"  {what:18} best {best[what]:.2f} s (runs: {', '.join(f'{s:.2f}' for s in seconds)})")
    print(f"  ratio compare_all / compare each pair: {best['compare_all'] / best['compare each pair']:.2f}")
    print(f"  uncorrected p-values equal to the pair's compare: {checked - len(unequal)} of {checked}")
    for correction in CORRECTIONS:
        block = compare_all(runs, samples, DEFAULT_SEED, args.method, correction)["metrics"]["chrf_plus_plus"]
        print(f"  chrF++ pairs significant, {correction:4}: {sum(v['significant'] for v in block['pairs'])} "
              f"of {len(block['pairs'])}; clusters {max(block['clusters'])}")
    if unequal:
        print(f"UNEQUAL: {unequal[:5]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
