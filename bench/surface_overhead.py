"""Surface family overhead: a 10,000-entry run through the embedded gateway
(real gRPC, batching, merging, run card) against the same entry and corpus
values computed with sacreBLEU directly in one process.

Three direct baselines are timed:
  public API  sentence_score per entry + corpus_score per metric (what a
              user calling sacreBLEU would write; extracts statistics twice)
  one pass    sacreBLEU's statistics extracted once per segment and summed
  adapter     the same one pass through champollion.core.sacrebleu_adapter, i.e.
              the compiled statistics when built (the same work the service
              does, no gRPC): the strict baseline
The ratio reported against the target (<= 1.3) is service / adapter one pass;
service / one pass says what the service gains over plain sacreBLEU.

Usage: python bench/surface_overhead.py [--entries N] [--batch-size N]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
from sacrebleu.metrics import BLEU, CHRF, TER  # noqa: E402

from bench.wmt21 import segments  # noqa: E402
from champollion.core import (
    logs,  # noqa: E402
    sacrebleu_adapter,  # noqa: E402
)
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from champollion.core.text import normalise_for_match  # noqa: E402
from champollion.core.run_card import run_card_from_proto  # noqa: E402


def direct_public_api(hypotheses, references):
    chrf, bleu, ter = CHRF(word_order=2), BLEU(), TER()
    entries = []
    for hypothesis, reference in zip(hypotheses, references):
        entries.append({
            "chrf_plus_plus": chrf.sentence_score(hypothesis, [reference]).score,
            "ter": ter.sentence_score(hypothesis, [reference]).score,
            "exact_match_rate": float(normalise_for_match(hypothesis) == normalise_for_match(reference)),
            "length_ratio": len(normalise_for_match(hypothesis)) / len(normalise_for_match(reference)),
        })
    corpus = {
        "chrf_plus_plus": chrf.corpus_score(hypotheses, [references]).score,
        "bleu": bleu.corpus_score(hypotheses, [references]).score,
        "ter": ter.corpus_score(hypotheses, [references]).score,
    }
    return entries, corpus


def direct_one_pass(hypotheses, references):
    chrf, bleu, ter = CHRF(word_order=2), BLEU(), TER()
    stats = {name: m._extract_corpus_statistics(hypotheses, [references])
             for name, m in (("chrf_plus_plus", chrf), ("bleu", bleu), ("ter", ter))}
    entries = []
    for index, (hypothesis, reference) in enumerate(zip(hypotheses, references)):
        entries.append({
            "chrf_plus_plus": chrf._compute_score_from_stats(stats["chrf_plus_plus"][index]).score,
            "ter": ter._compute_score_from_stats(stats["ter"][index]).score,
            "exact_match_rate": float(normalise_for_match(hypothesis) == normalise_for_match(reference)),
            "length_ratio": len(normalise_for_match(hypothesis)) / len(normalise_for_match(reference)),
        })
    corpus = {name: metric._compute_score_from_stats([sum(c) for c in zip(*stats[name])]).score
              for name, metric in (("chrf_plus_plus", chrf), ("bleu", bleu), ("ter", ter))}
    return entries, corpus


def direct_adapter_one_pass(hypotheses, references):
    """One pass as the surface family makes it (compiled statistics when built)."""
    metrics = {"chrf_plus_plus": CHRF(word_order=2), "bleu": BLEU(), "ter": TER()}
    per_entry = [[reference] for reference in references]
    stats = {name: sacrebleu_adapter.segment_statistics(m, hypotheses, per_entry) for name, m in metrics.items()}
    entries = []
    for index, (hypothesis, reference) in enumerate(zip(hypotheses, references)):
        entries.append({
            "chrf_plus_plus": sacrebleu_adapter.score_from_statistics(metrics["chrf_plus_plus"],
                                                                      stats["chrf_plus_plus"][index]),
            "ter": sacrebleu_adapter.score_from_statistics(metrics["ter"], stats["ter"][index]),
            "exact_match_rate": float(normalise_for_match(hypothesis) == normalise_for_match(reference)),
            "length_ratio": len(normalise_for_match(hypothesis)) / len(normalise_for_match(reference)),
        })
    corpus = {name: sacrebleu_adapter.score_from_statistics(metric, [sum(c) for c in zip(*stats[name])])
              for name, metric in metrics.items()}
    return entries, corpus


def build_request(entries, predictions, batch_size):
    request = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id="wmt21-ende", source_lang="eng", target_lang="deu"),
        predictions=[gateway_pb2.Prediction(**p) for p in predictions],
    )
    for entry in entries:
        request.corpus.entries.add(**entry)
    request.options.batch_size = batch_size
    return request


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    logs.configure("WARNING")

    entries, predictions = segments(args.entries)
    hypotheses = [p["prediction"] for p in predictions]
    references = [e["reference"] for e in entries]
    print(f"{len(entries)} entries (WMT21 en-de systems vs ref.A), batch size {args.batch_size}")

    public_s, (public_entries, public_corpus) = timed(direct_public_api, hypotheses, references)
    one_pass_s, (one_pass_entries, one_pass_corpus) = timed(direct_one_pass, hypotheses, references)
    adapter_s, (adapter_entries, adapter_corpus) = timed(direct_adapter_one_pass, hypotheses, references)
    compiled = sacrebleu_adapter.native_statistics_enabled()

    request = build_request(entries, predictions, args.batch_size)
    startup_started = time.perf_counter()
    with EmbeddedStack(families=("surface",), workers=0) as stack:
        startup_s = time.perf_counter() - startup_started
        with grpc.insecure_channel(stack.gateway_address, options=[("grpc.max_receive_message_length", -1),
                                                                   ("grpc.max_send_message_length", -1)]) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            service_s, card = timed(lambda: run_card_from_proto(stub.Evaluate(request, timeout=600).run_card))

    # The service must compute the same numbers, or the timing means nothing.
    for name, value in one_pass_corpus.items():
        assert abs(card["scores"][name] - value) <= 1e-6, (name, card["scores"][name], value)
        assert abs(public_corpus[name] - value) <= 1e-6
    for ours, direct in zip(card["entries"], one_pass_entries):
        for name, value in direct.items():
            assert abs(ours["scores"][name] - value) <= 1e-6, (ours["id"], name)
    assert public_entries[0]["chrf_plus_plus"] == one_pass_entries[0]["chrf_plus_plus"]
    assert adapter_corpus == one_pass_corpus and adapter_entries == one_pass_entries

    print(f"direct sacreBLEU, public API (sentence + corpus): {public_s:8.2f} s")
    print(f"direct sacreBLEU, one pass over statistics:       {one_pass_s:8.2f} s")
    print(f"direct, one pass through the adapter ({'compiled' if compiled else 'sacreBLEU'}):  {adapter_s:8.2f} s")
    print(f"service (embedded gateway + surface family):      {service_s:8.2f} s  (+ {startup_s:.2f} s start-up)")
    print(f"ratio service / adapter one pass: {service_s / adapter_s:.3f}  (target <= 1.3)")
    print(f"ratio service / one pass:   {service_s / one_pass_s:.3f}")
    print(f"ratio service / public API: {service_s / public_s:.3f}")
    print(f"corpus chrF++ {card['scores']['chrf_plus_plus']:.4f}  BLEU {card['scores']['bleu']:.4f}  "
          f"TER {card['scores']['ter']:.4f} (equal to sacreBLEU's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
