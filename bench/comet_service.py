"""COMET service overhead and micro-batching gain (issue 4, item 5).

1. Overhead: the same segments (default 1,000 WMT21 en-de system outputs with
   their sources and references) scored
     direct   warm model, ``model.predict(samples, batch_size=B)`` (the library's
              API: a Lightning Trainer per call, length-sorted batches)
     service  the semantic family's ScoreBatch over real gRPC, same model,
              same batch size B, one request (and, separately, the gateway's
              Evaluate on top of it)
   ratio = direct time / service time (throughput ratio; target >= 0.9). The
   service runs COMET only here (semantic_score switched off) and, for the
   ratio, exactly predict's batches (B segments, length-sorted); the times with
   the service's default padded-size cap, with semantic_score on, and through
   the gateway are printed beside it.
2. Concurrency: C clients (default 8) each send R requests of E entries
   straight to the semantic family, once with micro-batching and once
   without (each request runs its own batches, one request at a time), both
   with the service's default batch limits;
   gain = throughput with / throughput without (target >= 1.5).

One service and one warm model serve every measurement; the variants are
switched on the running scorer and measured in turns (best of --repeats), so
that a machine whose speed drifts favours none.

Scores are checked equal (1e-5) before any time is reported. The model is the
tests' tiny checkpoint (``--size tiny``), or the same architecture with the
compute of XLM-R base/large and random weights (``--size base|large``, built
under build/comet-<size>/ on first use). Note that the tiny sentencepiece
vocabulary splits WMT German into more pieces than XLM-R would, so sequences
are longer than with a real model.

Usage: python bench/comet_service.py [--segments N] [--batch-size B] [--size tiny|base|large]
                                     [--device cpu|cuda] [--fp16] [--clients C] [--requests R]
                                     [--entries-per-request E] [--concurrent-batch-size B2]
                                     [--scorer-threads T]
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402

from bench.wmt21 import segments  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2, gateway_pb2_grpc  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from champollion.core.run_card import run_card_from_proto  # noqa: E402
from services.semantic.batching import DirectBatcher, MicroBatcher  # noqa: E402
from champollion.core.encoder.embeddings import EmbeddingUnavailable, SentenceEmbedder  # noqa: E402
from services.semantic.metrics import CHARS_PER_SEGMENT, CometPool, SemanticScorer  # noqa: E402
from services.semantic.models import CometModelDirectory  # noqa: E402
from services.servicer import FamilyServicer  # noqa: E402
from tests.tiny_comet import DEFAULT_BUILD_DIR, MODEL_ID, build_comet  # noqa: E402

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


class NoEmbedding(SentenceEmbedder):
    """semantic_score off: the service then does COMET's work only."""

    def encode(self, texts):
        raise EmbeddingUnavailable("semantic_score is off in this benchmark")


def scorer(models: Path, args) -> SemanticScorer:
    pool = CometPool(CometModelDirectory([models]), device=args.device, fp16=args.fp16, max_batch_size=args.batch_size,
                     max_wait_s=args.max_wait_ms / 1000)
    return SemanticScorer(comet=pool, embedder=NoEmbedding(), preload=(MODEL_ID,))


def batch_request(entries, predictions, run_id="bench") -> family_pb2.ScoreBatchRequest:
    request = family_pb2.ScoreBatchRequest(run_id=run_id, source_lang="eng", target_lang="deu",
                                           comet_model=MODEL_ID)
    for entry, prediction in zip(entries, predictions):
        request.entries.add(id=entry["id"], source=entry["source"], reference=entry["reference"],
                            prediction=prediction["prediction"])
    return request


def comet_scores(response) -> list[float]:
    return [entry.values["comet_score"] for entry in response.entries]


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def interleaved(repeats: int, candidates: dict) -> dict:
    """Best time (and last result) of each candidate, run in turns (ABCABC...)
    so that a machine whose speed drifts (shared or throttled CPUs) favours none."""
    best = {name: (float("inf"), None) for name in candidates}
    for _ in range(repeats):
        for name, function in candidates.items():
            seconds, result = timed(function)
            best[name] = (min(best[name][0], seconds), result)
    return best


def direct_model(models: Path, args):
    """The library's API on a warm model: predict(samples) -> scores."""
    from comet import load_from_checkpoint

    model = load_from_checkpoint(str(models / MODEL_ID / "checkpoints" / "model.ckpt"), local_files_only=True)
    if args.device == "cuda":
        model.to("cuda")
    if args.fp16:
        model.half()
    gpus = 1 if args.device == "cuda" else 0
    return lambda samples: model.predict(samples, batch_size=args.batch_size, gpus=gpus, progress_bar=False).scores


def gateway_request(entries, predictions, batch_size: int) -> gateway_pb2.EvaluateRequest:
    request = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="wmt21", source_lang="eng", target_lang="deu"),
        predictions=[gateway_pb2.Prediction(**p) for p in predictions],
        meta=gateway_pb2.RunMeta(comet_model=MODEL_ID))
    for entry in entries:
        request.corpus.entries.add(**entry)
    request.options.batch_size = batch_size
    return request


class Toggles:
    """One service, one warm model; the benchmark switches semantic_score and
    micro-batching on the running scorer between measurements (one gRPC stack
    per process: several asyncio gRPC servers in one process disturb each other)."""

    def __init__(self, bench_scorer: SemanticScorer, args):
        self.scorer = bench_scorer
        self.engine = bench_scorer.comet.loaded()[MODEL_ID]
        runner = self.engine.runner
        # No embedding cache: every repeat pays for every text, as a new corpus would.
        self.embedders = {False: NoEmbedding(), True: SentenceEmbedder(cache_size=0)}
        self.batchers = {
            True: MicroBatcher(runner.predict_batch, args.batch_size, args.max_wait_ms / 1000, runner.length),
            False: DirectBatcher(runner.predict_batch, args.batch_size, runner.length),
        }

    def set(self, embedding: bool = False, micro_batching: bool = True, batch_size: int = 16,
            capped: bool = True) -> None:
        """`capped`: the service's default padded-size cap per batch; off, the
        batches are exactly those of predict (same size, length-sorted)."""
        self.scorer.embedder = self.embedders[embedding]
        batcher = self.batchers[micro_batching]
        batcher.max_batch_size = batch_size
        batcher.max_batch_cost = batch_size * CHARS_PER_SEGMENT if capped else None
        if micro_batching:
            batcher.round_items = batch_size * 8
        self.engine.batcher = batcher


def overhead(stack, toggles: Toggles, entries, predictions, args) -> None:
    samples = [{"src": e["source"], "mt": p["prediction"], "ref": e["reference"]} for e, p in zip(entries, predictions)]
    predict = direct_model(Path(toggles.engine.runner.location.model_dir).parents[1], args)
    predict(samples[: args.batch_size * 2])  # warm-up
    request = batch_request(entries, predictions)
    with grpc.insecure_channel(stack.family_addresses["semantic"], options=CHANNEL_OPTIONS) as channel, \
            grpc.insecure_channel(stack.gateway_address, options=CHANNEL_OPTIONS) as gateway_channel:
        service, gateway = family_pb2_grpc.FamilyStub(channel), gateway_pb2_grpc.GatewayStub(gateway_channel)
        one_batch, small_batches = (gateway_request(entries, predictions, size) for size in (len(entries), 64))

        def served(embedding=False, call=lambda: service.ScoreBatch(request, timeout=600), capped=False):
            toggles.set(embedding=embedding, micro_batching=True, batch_size=args.batch_size, capped=capped)
            return call()

        served(True, lambda: service.ScoreBatch(batch_request(entries[:32], predictions[:32]), timeout=600))
        results = interleaved(args.repeats, {
            "direct": lambda: predict(samples),
            "service": lambda: served(),
            "capped": lambda: served(capped=True),
            "full": lambda: served(embedding=True),
            "gateway-1": lambda: served(call=lambda: run_card_from_proto(gateway.Evaluate(one_batch, timeout=600).run_card)),
            "gateway-64": lambda: served(call=lambda: run_card_from_proto(gateway.Evaluate(small_batches, timeout=600).run_card)),
        })

    direct_s, direct = results["direct"]
    service_s, response = results["service"]
    worst = max(abs(a - b) for a, b in zip(comet_scores(response), direct))
    assert worst <= 1e-5, f"service and predict disagree by {worst}"
    for name in ("gateway-1", "gateway-64"):
        assert abs(results[name][1]["scores"]["comet_score"] - sum(direct) / len(direct)) <= 1e-5
    print(f"{len(samples)} segments, batch size {args.batch_size}, {args.size} model on {args.device}"
          f"{' fp16' if args.fp16 else ''}, best of {args.repeats} interleaved (scores equal within {worst:.1e})")
    print(f"  direct model.predict (warm):                   {direct_s:8.3f} s  {len(samples) / direct_s:8.1f} seg/s")
    capped_s = results["capped"][0]
    print(f"  service ScoreBatch, COMET only:                {service_s:8.3f} s  {len(samples) / service_s:8.1f} seg/s")
    print(f"  same, with the default padded-size cap:        {capped_s:8.3f} s  {len(samples) / capped_s:8.1f} seg/s"
          f"  (ratio {direct_s / capped_s:.3f})")
    print(f"  service ScoreBatch, COMET + semantic_score:    {results['full'][0]:8.3f} s")
    for name, label in (("gateway-1", "one batch"), ("gateway-64", "batches of 64")):
        print(f"  gateway Evaluate ({label:>13}), COMET only: {results[name][0]:8.3f} s  "
              f"(ratio {direct_s / results[name][0]:.3f})")
    print(f"  ratio direct / service: {direct_s / service_s:.3f}  (target >= 0.9)")


def concurrency(stack, toggles: Toggles, entries, predictions, args) -> None:
    size = args.entries_per_request
    requests = [batch_request(entries[i:i + size], predictions[i:i + size], run_id=f"r{i}")
                for i in range(0, args.clients * args.requests * size, size)]
    address = stack.family_addresses["semantic"]
    channels = [grpc.insecure_channel(address) for _ in range(args.clients)]
    stubs = [family_pb2_grpc.FamilyStub(channel) for channel in channels]
    runner = toggles.engine.runner

    def run_clients(micro_batching: bool):
        toggles.set(embedding=False, micro_batching=micro_batching, batch_size=args.concurrent_batch_size)
        responses = [None] * len(requests)

        def client(index):
            for k in range(index, len(requests), args.clients):
                responses[k] = stubs[index].ScoreBatch(requests[k], timeout=600)

        batches_before = runner.batches_run
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return responses, runner.batches_run - batches_before

    try:
        results = interleaved(args.repeats, {mb: (lambda mb=mb: run_clients(mb)) for mb in (False, True)})
    finally:
        for channel in channels:
            channel.close()
    total = len(requests) * size
    scores = {mb: [s for r in results[mb][1][0] for s in comet_scores(r)] for mb in results}
    worst = max(abs(a - b) for a, b in zip(scores[True], scores[False]))
    assert worst <= 1e-5, f"micro-batched scores differ by {worst}"
    throughput = {mb: total / results[mb][0] for mb in results}
    print(f"{args.clients} concurrent clients x {args.requests} requests x {size} entries = {total} segments, "
          f"max batch {args.concurrent_batch_size} segments / {args.concurrent_batch_size * CHARS_PER_SEGMENT} padded "
          f"characters, max wait {args.max_wait_ms} ms, best of {args.repeats} interleaved")
    print(f"  without micro-batching: {throughput[False]:8.1f} seg/s  ({results[False][1][1]} model batches)")
    print(f"  with micro-batching:    {throughput[True]:8.1f} seg/s  ({results[True][1][1]} model batches)")
    print(f"  gain: {throughput[True] / throughput[False]:.2f}x  (target >= 1.5)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=16, help="COMET batch size (both sides of part 1)")
    parser.add_argument("--size", choices=("tiny", "base", "large"), default="tiny")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=16, help="requests per client (part 2)")
    parser.add_argument("--entries-per-request", type=int, default=8)
    parser.add_argument("--concurrent-batch-size", type=int, default=16)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--scorer-threads", type=int, default=0,
                        help="threads scoring requests in the service (default: asyncio's default executor)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-concurrency", action="store_true")
    args = parser.parse_args()
    logs.configure("WARNING")

    root = DEFAULT_BUILD_DIR if args.size == "tiny" else DEFAULT_BUILD_DIR.parent / f"comet-{args.size}"
    models = build_comet(root, args.size)
    needed = max(args.segments, args.clients * args.requests * args.entries_per_request)
    entries, predictions = segments(needed)
    bench_scorer = scorer(models, args)
    # As create_servicer builds it: 32 scoring threads, so concurrent requests can wait together.
    embedded = EmbeddedStack(families=(), servicers={"semantic": FamilyServicer(bench_scorer, scoring_threads=32)})
    if args.scorer_threads:
        # FamilyServicer scores on the event loop's default executor
        # (min(32, CPUs + 4) threads: 6 on a 2-CPU machine), which caps the
        # requests in flight, and so what micro-batching can group.
        embedded._loop.set_default_executor(ThreadPoolExecutor(args.scorer_threads))
    with embedded as stack:
        toggles = Toggles(bench_scorer, args)
        if not args.skip_overhead:
            overhead(stack, toggles, entries[: args.segments], predictions[: args.segments], args)
        if not args.skip_concurrency:
            concurrency(stack, toggles, entries, predictions, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
