"""Paired approximate randomization (`compare --method ar`) against
sacreBLEU's PairedTest(test_type="ar") on WMT21 en-de, reference A.

Each pair of systems is scored by the gateway (surface family), the two run
cards are written to disk and compared by the Compare RPC with method "ar";
sacreBLEU's AR test runs on the same texts with the same seed and number of
trials. The p-values of BLEU, chrF++ and TER are printed side by side and
must be equal (exit 1 otherwise).

Usage: python bench/paired_ar.py [--trials N] [--seed N] [--pair BASELINE:SYSTEM ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from bench.surface_overhead import build_request
from bench.wmt21 import read_lines
from champollion.core import logs
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from apps.inputs import load_run_card_for_compare
from apps.launch.embedded import EmbeddedStack
from champollion.core.run_card import message_to_dict, run_card_from_proto

UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
# A clear gap (about 3.7 BLEU on reference A) and a close pair (0.06 BLEU).
DEFAULT_PAIRS = ("Facebook-AI:happypoet", "Facebook-AI:WeChat-AI")
# Our metric id -> sacreBLEU's name for it and its metric object.
SACREBLEU = {"bleu": ("BLEU", BLEU), "chrf_plus_plus": ("chrF2++", lambda: CHRF(word_order=2)), "ter": ("TER", TER)}


def corpus_and_runs(baseline: str, system: str) -> tuple[list[dict], list[dict], list[dict]]:
    sources, references = read_lines("src.en"), read_lines("ref.A.de")
    entries = [{"id": f"line{n}", "source": s, "reference": r}
               for n, (s, r) in enumerate(zip(sources, references), start=1)]
    runs = [[{"id": e["id"], "prediction": h} for e, h in zip(entries, read_lines(f"hyp.{name}.de"))]
            for name in (baseline, system)]
    return entries, *runs


def gateway_ar(stub, entries, runs, trials: int, seed: int) -> tuple[dict, float]:
    """Both runs scored, their cards written as JSON files, then compared
    from the files (as `champollion compare A.json B.json --method ar`)."""
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index, run in enumerate(runs):
            card = run_card_from_proto(stub.Evaluate(build_request(entries, run, 256), timeout=1200).run_card)
            paths.append(Path(folder) / f"{index}.json")
            paths[-1].write_text(json.dumps(card), encoding="utf-8")
        started = time.perf_counter()
        baseline, system = (load_run_card_for_compare(path) for path in paths)
        request = gateway_pb2.CompareRequest(baseline=baseline, system=system, seed=seed, resamples=trials,
                                             method="ar")
        response = message_to_dict(stub.Compare(request, timeout=600))
        return response, time.perf_counter() - started


def sacrebleu_ar(entries, runs, trials: int, seed: int) -> tuple[dict, float]:
    os.environ["SACREBLEU_SEED"] = str(seed)
    started = time.perf_counter()
    test = PairedTest([(str(i), [p["prediction"] for p in run]) for i, run in enumerate(runs)],
                      {name: build() for name, build in SACREBLEU.values()},
                      [[e["reference"] for e in entries]], test_type="ar", n_samples=trials)
    _, results = test()
    return {m: results[name][1] for m, (name, _) in SACREBLEU.items()}, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000, help="AR trials (default 10000, sacreBLEU's)")
    # sacreBLEU takes SACREBLEU_SEED=0 as "unseeded": the two could not agree.
    parser.add_argument("--seed", type=int, default=12345, help="seed, > 0 (default 12345, sacreBLEU's)")
    parser.add_argument("--pair", action="append", help="BASELINE:SYSTEM (WMT21 system names; repeatable)")
    args = parser.parse_args()
    if args.seed <= 0 or args.trials <= 0:
        parser.error("--seed and --trials must be positive")
    logs.configure("WARNING")

    unequal = 0
    print(f"WMT21 en-de, reference A; paired AR, {args.trials} trials, seed {args.seed}")
    with EmbeddedStack(families=("surface",)) as stack, \
            grpc.insecure_channel(stack.gateway_address, options=UNLIMITED) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        for pair in args.pair or DEFAULT_PAIRS:
            baseline, _, system = pair.partition(":")
            entries, *runs = corpus_and_runs(baseline, system)
            ours, ours_s = gateway_ar(stub, entries, runs, args.trials, args.seed)
            sacre, sacre_s = sacrebleu_ar(entries, runs, args.trials, args.seed)
            assert ours["test"]["method"] == "ar" and ours["test"]["samples"] == args.trials
            print(f"\n{baseline} (baseline) vs {system}, {len(entries)} segments: Compare {ours_s:.2f} s "
                  f"(card files read, AR), sacreBLEU PairedTest {sacre_s:.2f} s (texts, AR)")
            print(f"  {'metric':<15}{'baseline':>9}{'system':>9}{'p (ours)':>12}{'p (sacreBLEU)':>15}  equal")
            for metric_id, result in sacre.items():
                mine = ours["metrics"][metric_id]
                equal = mine["p_value"] == result.p_value and abs(mine["system"] - result.score) < 1e-9
                unequal += not equal
                print(f"  {metric_id:<15}{mine['baseline']:>9.3f}{mine['system']:>9.3f}{mine['p_value']:>12.6f}"
                      f"{result.p_value:>15.6f}  {'yes' if equal else 'NO'}")
    print("\nall p-values equal" if not unequal else f"\n{unequal} p-value(s) differ")
    return 1 if unequal else 0


if __name__ == "__main__":
    sys.exit(main())
