"""Bootstrap cost and paired comparison against sacreBLEU, 10,000 entries of
WMT21 en-de text, 1,000 resamples, in one run:

 (a) the time the confidence intervals (every core metric, the composite and
     the per-tier intervals) add to an Evaluate call (target <= 10%);
 (b) `compare` of two stored run cards (JSON files on disk, Compare RPC)
     versus sacreBLEU's PairedTest (paired bootstrap, n=1000) on the same two
     runs' texts for chrF++ and BLEU: times, ratio (target >= 10x), largest
     CI bound difference against sacreBLEU's percentile points and p-value
     differences (target <= 1e-6 when seeded alike).

Usage: python bench/bootstrap.py [--entries N]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import numpy as np  # noqa: E402
from sacrebleu.metrics import BLEU, CHRF  # noqa: E402
from sacrebleu.significance import PairedTest, _bootstrap_resample  # noqa: E402

from bench.surface_overhead import build_request  # noqa: E402
from bench.wmt21 import paired_runs  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from apps.inputs import load_run_card_for_compare  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from gateway.card.bootstrap import confidence_intervals  # noqa: E402
from gateway.card.breakdowns import tier_intervals  # noqa: E402
from champollion.core.run_card import message_to_dict, run_card_from_proto  # noqa: E402

UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def card_stats(card: dict) -> dict[str, np.ndarray]:
    metrics = card["entries"][0]["stats"].keys()
    return {m: np.asarray([e["stats"][m] for e in card["entries"]], dtype=float) for m in metrics}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    logs.configure("WARNING")

    entries, run_a, run_b = paired_runs(args.entries)
    for index, entry in enumerate(entries):
        entry["difficulty"] = 1 + index % 5  # five tiers, for the per-tier intervals
    print(f"{len(entries)} entries, 1000 resamples, seed 12345")

    with EmbeddedStack(families=("surface",)) as stack, grpc.insecure_channel(stack.gateway_address, options=UNLIMITED) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        cards = []
        for run in (run_a, run_b):
            started = time.perf_counter()
            cards.append(run_card_from_proto(stub.Evaluate(build_request(entries, run, 256), timeout=1200).run_card))
            evaluate_s = time.perf_counter() - started

        # (a) the CI step alone, on the same statistics the gateway had.
        stats = card_stats(cards[1])
        started = time.perf_counter()
        confidence_intervals(stats, cards[1]["composite_coverage"]["weights"], 1000, 12345)
        tier_intervals([str(e["difficulty"]) for e in entries], stats, 1000, 12345)
        ci_s = time.perf_counter() - started
        print(f"(a) Evaluate call {evaluate_s:.2f} s, of which confidence intervals {ci_s:.3f} s "
              f"= {100 * ci_s / evaluate_s:.2f}% (target <= 10%)")

        # (b) compare two stored run cards.
        with tempfile.TemporaryDirectory() as folder:
            paths = [Path(folder) / "a.json", Path(folder) / "b.json"]
            for path, card in zip(paths, cards):
                path.write_text(json.dumps(card), encoding="utf-8")
            started = time.perf_counter()
            baseline, system = (load_run_card_for_compare(path) for path in paths)
            response = stub.Compare(gateway_pb2.CompareRequest(baseline=baseline, system=system), timeout=600)
            ours_s = time.perf_counter() - started
    ours = message_to_dict(response)["metrics"]

    hypotheses_a = [p["prediction"] for p in run_a]
    hypotheses_b = [p["prediction"] for p in run_b]
    references = [[e["reference"] for e in entries]]
    started = time.perf_counter()
    test = PairedTest([("a", hypotheses_a), ("b", hypotheses_b)], {"chrf": CHRF(word_order=2), "bleu": BLEU()},
                      references, test_type="bs", n_samples=1000)
    _, sacre = test()
    sacre_s = time.perf_counter() - started
    print(f"(b) compare of stored run cards {ours_s:.2f} s; sacreBLEU PairedTest (bs, 1000) {sacre_s:.2f} s; "
          f"ratio {sacre_s / ours_s:.1f}x faster (target >= 10x)")

    p_differences, bound_differences = [], []
    for ours_key, sacre_key, metric in (("chrf_plus_plus", "chrF2++", CHRF(word_order=2)), ("bleu", "BLEU", BLEU())):
        p_differences.append(abs(ours[ours_key]["p_value"] - sacre[sacre_key][1].p_value))
        print(f"    {ours_key}: difference {ours[ours_key]['difference']:+.4f}, p {ours[ours_key]['p_value']:.6f} "
              f"(sacreBLEU {sacre[sacre_key][1].p_value:.6f}), significant {ours[ours_key]['significant']}")
        for card, hypotheses in zip(cards, (hypotheses_a, hypotheses_b)):
            _, scores = _bootstrap_resample(metric._extract_corpus_statistics(hypotheses, references), metric, 1000)
            ordered = sorted(s.score for s in scores)
            interval = card["scores"]["confidence_intervals"][ours_key]
            bound_differences += [abs(interval["ci_lower"] - ordered[25]), abs(interval["ci_upper"] - ordered[974])]
    print(f"largest CI bound difference vs sacreBLEU {max(bound_differences):.2e}; "
          f"largest p-value difference {max(p_differences):.2e} (target <= 1e-6)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
