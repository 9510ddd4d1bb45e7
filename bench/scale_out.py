"""Scale-out: a 100,000-entry run (surface, behavioral and compliance
families) through the multi-process topology (apps.launch.local_cluster: every
family in its own process, the gateway process in front, round_robin over the
replicas), once with 1 and once with 2 replicas of each family.

Entries are WMT21 en-de segments (every system's output against reference A,
as bench/wmt21.py reads them), repeated with new ids once the data runs out.
The run goes through EvaluateUpload, as the CLI sends it: the request in
parts of 2,000 entries, built as they are sent, and the run card back as the
card followed by its entries a batch at a time.

Printed per configuration: entries/second of the upload call (start-up not
counted), batches per replica, the run card's size and largest message, and
the peak resident memory (VmHWM from /proc) of the gateway process and of the
largest family process, read after the run while they still live. Run it at
two sizes (e.g. --entries 20000 and 100000) to see how the gateway's memory
grows with the run. `--words 4` keeps the first four words of every text,
so that runs of half a million entries take minutes, and `--families`
picks the families.

Usage: python bench/scale_out.py [--entries N] [--replicas 1,2] [--batch-size N]
                                 [--words N] [--families surface,behavioral,compliance]
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
from apps.launch.local_cluster import LocalCluster  # noqa: E402
from champollion.core.serving import MAX_MESSAGE_BYTES  # noqa: E402

FAMILIES = ("surface", "behavioral", "compliance")
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
SCORES = ("chrf_plus_plus", "bleu", "ter", "exact_match_rate", "code_switching_rate",
          "hallucination_rate", "number_mismatch_rate", "compliance_index")


PART_SIZE = 2000


def upload_parts(size: int, batch_size: int, words: int):
    """The run as EvaluateUpload parts: the header, then entries with their
    predictions, each part built when gRPC asks for it; texts cut to their
    first `words` words (0: whole)."""
    def clip(text: str) -> str:
        return " ".join(text.split()[:words]) if words else text

    entries, predictions = segments(size)
    available = len(entries)
    header = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="wmt21-ende-scale-out", source_lang="eng", target_lang="deu"))
    header.options.batch_size = batch_size
    yield header
    for start in range(0, size, PART_SIZE):
        part = gateway_pb2.EvaluateRequest()
        for index in range(start, min(size, start + PART_SIZE)):
            entry, prediction = entries[index % available], predictions[index % available]
            entry_id = f"{entry['id']}#{index // available}"
            part.corpus.entries.add(id=entry_id, source=clip(entry["source"]), reference=clip(entry["reference"]))
            part.predictions.add(id=entry_id, prediction=clip(prediction["prediction"]))
        yield part


def mib(kb: int | None) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.0f} MiB"


def run(replicas: int, size: int, batch_size: int, words: int, families: list[str]) -> dict:
    started = time.perf_counter()
    with LocalCluster(families=families, replicas=replicas, startup_timeout=120) as cluster:
        startup_s = time.perf_counter() - started
        with grpc.insecure_channel(cluster.gateway_address, options=CHANNEL_OPTIONS) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            # Describe opens the gateway's channels to every replica first, so
            # round_robin spreads the run from its first batch.
            stub.Describe(family_pb2.DescribeRequest(), timeout=60)
            started = time.perf_counter()
            card, entries, card_bytes, largest_message = None, 0, 0, 0
            try:
                for update in stub.EvaluateUpload(upload_parts(size, batch_size, words), timeout=3600):
                    if update.HasField("run_card"):
                        card = update.run_card
                    elif update.entries:
                        entries += len(update.entries)
                    card_bytes += update.ByteSize() if card is not None else 0
                    largest_message = max(largest_message, update.ByteSize())
            except grpc.RpcError as error:
                return {"replicas": replicas, "error": f"{error.code().name}: {error.details()}"}
            elapsed = time.perf_counter() - started
        assert card is not None and entries == card.scores.total == size, (entries, size)
        family_peaks = {p.name: p.peak_rss_kb() for p in cluster.processes}
        largest = max(family_peaks, key=lambda name: family_peaks[name] or 0)
        events = {p.name: [e for e in p.events("score_batch") if e.get("run_id") == card.run_id]
                  for p in cluster.processes}
        batches = {name: len(found) for name, found in events.items()}
        busy = {name: round(sum(e.get("duration_s", 0) for e in found), 1) for name, found in events.items()}
        spill = [e.get("spill_bytes") for e in cluster.gateway.events("evaluate") if e.get("run_id") == card.run_id]
        return {
            "replicas": replicas,
            "startup_s": startup_s,
            "elapsed_s": elapsed,
            "entries_per_s": size / elapsed,
            "gateway_peak_kb": cluster.gateway.peak_rss_kb(),
            "largest_family": largest,
            "largest_family_peak_kb": family_peaks[largest],
            "family_peaks_kb": family_peaks,
            "batches": batches,
            "busy_s": busy,
            "card_bytes": card_bytes,
            "largest_message_bytes": largest_message,
            "spill_bytes": spill[0] if spill else None,
            "warnings": list(card.warnings),
            "scores": {key: getattr(card.scores, key) if card.scores.HasField(key) else None for key in SCORES},
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--replicas", default="1,2", help="replica counts to compare, comma-separated")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--words", type=int, default=0, help="keep the first N words of every text (0: all)")
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    families = args.families.split(",")

    texts = f"first {args.words} words of each text" if args.words else "whole texts"
    print(f"{args.entries} entries (WMT21 en-de, eng->deu, {texts}), batch size {args.batch_size}, "
          f"families {', '.join(families)}; uploaded in parts of {PART_SIZE} entries", flush=True)
    results = []
    for replicas in (int(part) for part in args.replicas.split(",")):
        result = run(replicas, args.entries, args.batch_size, args.words, families)
        results.append(result)
        if "error" in result:
            print(f"{replicas} replica(s) per family: FAILED: {result['error']}", flush=True)
            continue
        print(f"{replicas} replica(s) per family: {result['entries_per_s']:8.0f} entries/s "
              f"({result['elapsed_s']:.1f} s; start-up {result['startup_s']:.1f} s); "
              f"peak RSS gateway {mib(result['gateway_peak_kb'])}, largest family "
              f"{result['largest_family']} {mib(result['largest_family_peak_kb'])}; "
              f"run card {result['card_bytes'] / 2**20:.1f} MiB, largest message "
              f"{result['largest_message_bytes'] / 2**20:.2f} MiB (limit {MAX_MESSAGE_BYTES / 2**20:.0f} MiB); "
              f"gateway spill on disk {(result['spill_bytes'] or 0) / 2**20:.0f} MiB", flush=True)
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
