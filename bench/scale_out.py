"""Scale-out: a 100,000-entry run (surface, behavioral and compliance
families) through the multi-process topology (gateway.local_cluster: every
family in its own process, the gateway process in front, round_robin over the
replicas), once with 1 and once with 2 replicas of each family.

Entries are WMT21 en-de segments (every system's output against reference A,
as bench/wmt21.py reads them), repeated with new ids once the data runs out.
The whole run is one Evaluate call (one gRPC message each way).

Printed per configuration: entries/second of the Evaluate call (start-up not
counted), batches per replica, request and run-card sizes, and the peak
resident memory (VmHWM from /proc) of the gateway process and of the largest
family process, read after the run while they still live.

Usage: python bench/scale_out.py [--entries N] [--replicas 1,2] [--batch-size N]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from bench.wmt21 import segments  # noqa: E402
from champollion.eval.v1 import family_pb2, gateway_pb2, gateway_pb2_grpc  # noqa: E402
from champollion.serving import MAX_MESSAGE_BYTES  # noqa: E402
from gateway.local_cluster import LocalCluster  # noqa: E402

FAMILIES = ("surface", "behavioral", "compliance")
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
SCORES = ("chrf_plus_plus", "bleu", "ter", "exact_match_rate", "code_switching_rate",
          "hallucination_rate", "number_mismatch_rate", "compliance_index")


def build_request(size: int, batch_size: int) -> gateway_pb2.EvaluateRequest:
    entries, predictions = segments(size)
    available = len(entries)
    request = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="wmt21-ende-scale-out", source_lang="eng", target_lang="deu"))
    for index in range(size):
        entry, prediction = entries[index % available], predictions[index % available]
        entry_id = f"{entry['id']}#{index // available}"
        request.corpus.entries.add(id=entry_id, source=entry["source"], reference=entry["reference"])
        request.predictions.add(id=entry_id, prediction=prediction["prediction"])
    request.options.batch_size = batch_size
    return request


def mib(kb: int | None) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.0f} MiB"


def run(replicas: int, request: gateway_pb2.EvaluateRequest) -> dict:
    started = time.perf_counter()
    with LocalCluster(families=FAMILIES, replicas=replicas, startup_timeout=120) as cluster:
        startup_s = time.perf_counter() - started
        with grpc.insecure_channel(cluster.gateway_address, options=CHANNEL_OPTIONS) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            # Describe opens the gateway's channels to every replica first, so
            # round_robin spreads the run from its first batch.
            stub.Describe(family_pb2.DescribeRequest(), timeout=60)
            started = time.perf_counter()
            try:
                response = stub.Evaluate(request, timeout=3600)
            except grpc.RpcError as error:
                return {"replicas": replicas, "error": f"{error.code().name}: {error.details()}"}
            elapsed = time.perf_counter() - started
        card = response.run_card
        family_peaks = {p.name: p.peak_rss_kb() for p in cluster.processes}
        largest = max(family_peaks, key=lambda name: family_peaks[name] or 0)
        events = {p.name: [e for e in p.events("score_batch") if e.get("run_id") == card.run_id]
                  for p in cluster.processes}
        batches = {name: len(found) for name, found in events.items()}
        busy = {name: round(sum(e.get("duration_s", 0) for e in found), 1) for name, found in events.items()}
        return {
            "replicas": replicas,
            "startup_s": startup_s,
            "elapsed_s": elapsed,
            "entries_per_s": len(request.corpus.entries) / elapsed,
            "gateway_peak_kb": cluster.gateway.peak_rss_kb(),
            "largest_family": largest,
            "largest_family_peak_kb": family_peaks[largest],
            "family_peaks_kb": family_peaks,
            "batches": batches,
            "busy_s": busy,
            "card_bytes": card.ByteSize(),
            "warnings": list(card.warnings),
            "scores": {key: getattr(card.scores, key) if card.scores.HasField(key) else None for key in SCORES},
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--replicas", default="1,2", help="replica counts to compare, comma-separated")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    request = build_request(args.entries, args.batch_size)
    print(f"{len(request.corpus.entries)} entries (WMT21 en-de, eng->deu), batch size {args.batch_size}, "
          f"families {', '.join(FAMILIES)}; request {request.ByteSize() / 2**20:.1f} MiB "
          f"(one gRPC message; limit {MAX_MESSAGE_BYTES / 2**20:.0f} MiB)", flush=True)
    results = []
    for replicas in (int(part) for part in args.replicas.split(",")):
        result = run(replicas, request)
        results.append(result)
        if "error" in result:
            print(f"{replicas} replica(s) per family: FAILED: {result['error']}", flush=True)
            continue
        print(f"{replicas} replica(s) per family: {result['entries_per_s']:8.0f} entries/s "
              f"({result['elapsed_s']:.1f} s; start-up {result['startup_s']:.1f} s); "
              f"peak RSS gateway {mib(result['gateway_peak_kb'])}, largest family "
              f"{result['largest_family']} {mib(result['largest_family_peak_kb'])}; "
              f"run card {result['card_bytes'] / 2**20:.1f} MiB", flush=True)
        print(f"  batches per process: {result['batches']}", flush=True)
        print(f"  seconds spent in ScoreBatch per process: {result['busy_s']}", flush=True)
        print(f"  peak RSS per family process: { {k: mib(v) for k, v in result['family_peaks_kb'].items()} }", flush=True)
    done = [r for r in results if "error" not in r]
    if len(done) >= 2:
        base = done[0]
        for other in done[1:]:
            print(f"speed-up {other['replicas']} vs {base['replicas']} replica(s): "
                  f"{other['entries_per_s'] / base['entries_per_s']:.2f}x", flush=True)
            # Same numbers whatever the topology, or the timing means nothing.
            for key, value in base["scores"].items():
                assert other["scores"][key] == value, (key, value, other["scores"][key])
    if done:
        print(f"corpus scores: {done[0]['scores']}", flush=True)
        print(f"warnings: {done[0]['warnings']}", flush=True)
    print(f"bench process peak RSS: {mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)}", flush=True)
    return 0 if len(done) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
