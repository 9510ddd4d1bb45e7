"""Family time of a `--metrics bleu` run: the surface family scoring the
same batches over gRPC as the gateway sends them when every metric is
wanted (no selection: what every run cost the family before the request
carried one) and with the selection {bleu} (what a `--metrics bleu` run
sends now). The two alternate, batch by batch, in one process, so that
both see the same machine; the BLEU statistics must come back equal.

Usage: python bench/metric_selection.py [--entries N] [--batch-size N] [--rounds N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from apps.launch.embedded import EmbeddedStack  # noqa: E402
from bench.wmt21 import segments  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.eval.v1 import family_pb2, family_pb2_grpc  # noqa: E402


def batches(size: int, batch_size: int) -> list[family_pb2.ScoreBatchRequest]:
    entries, predictions = segments(size)
    requests = []
    for start in range(0, len(entries), batch_size):
        request = family_pb2.ScoreBatchRequest(run_id="bench", source_lang="eng", target_lang="deu")
        for entry, prediction in zip(entries[start:start + batch_size], predictions[start:start + batch_size]):
            request.entries.add(id=entry["id"], source=entry["source"], reference=entry["reference"],
                                prediction=prediction["prediction"])
        requests.append(request)
    return requests


def only_bleu(request: family_pb2.ScoreBatchRequest) -> family_pb2.ScoreBatchRequest:
    selected = family_pb2.ScoreBatchRequest()
    selected.CopyFrom(request)
    selected.selection.metrics.append("bleu")
    return selected


def bleu_statistics(response: family_pb2.ScoreBatchResponse) -> list[list[float]]:
    return [list(entry.stats["bleu"].values) for entry in response.entries]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logs.configure("WARNING")

    everything = batches(args.entries, args.batch_size)
    bleu = [only_bleu(request) for request in everything]
    print(f"{args.entries} entries (WMT21 en-de systems vs ref.A) in {len(everything)} batches of "
          f"{args.batch_size}, {args.rounds} rounds, surface family over gRPC (one process, threads)")
    times: dict[str, list[float]] = {"all metrics (before)": [], "selection {bleu} (after)": []}
    with EmbeddedStack(families=("surface",), workers=0) as stack:
        with grpc.insecure_channel(stack.family_addresses["surface"]) as channel:
            stub = family_pb2_grpc.FamilyStub(channel)
            stub.ScoreBatch(everything[0], timeout=600)  # warm-up: imports, compiled statistics
            for _ in range(args.rounds):
                spent = dict.fromkeys(times, 0.0)
                for full_request, bleu_request in zip(everything, bleu):
                    for name, request in zip(times, (full_request, bleu_request)):
                        started = time.perf_counter()
                        response = stub.ScoreBatch(request, timeout=600)
                        spent[name] += time.perf_counter() - started
                        if name == "all metrics (before)":
                            expected = bleu_statistics(response)
                        else:
                            # The same BLEU, and nothing else computed.
                            assert bleu_statistics(response) == expected
                            assert all(set(entry.stats) == {"bleu"} for entry in response.entries)
                for name, seconds in spent.items():
                    times[name].append(seconds)
    for name, runs in times.items():
        print(f"  {name:26s} median {statistics.median(runs):7.3f} s  (rounds: "
              f"{', '.join(f'{run:.3f}' for run in runs)})")
    before, after = (statistics.median(runs) for runs in times.values())
    print(f"family time, --metrics bleu: after / before = {after / before:.3f} ({before / after:.1f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
