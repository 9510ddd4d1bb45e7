"""FST lookup throughput: natural English text (WMT21 news sources and TED
talk sources from ../shared/data, then the licence texts every Debian system
carries in /usr/share/common-licenses; >= 50,000 tokens) through the structural
service (ScoreBatch over real gRPC, batches of 256 sentences, analyzer loaded
cold on the first batch) versus the `hfst-optimized-lookup` command-line tool
on the same token stream, with the same analyzer (build/fst/eng.hfstol, from
Debian's Apertium data). Both sides run five times (a fresh service each
time) and the medians are compared. The whole Evaluate through the gateway
(run card, bootstrap intervals and all) is timed too, for information.

The service looks a word up as written, then lower-cased, then capitalised,
and caches per word type; the CLI looks up each token as written, once.
Target: service words/second >= CLI words/second.

Usage: python bench/fst_lookup.py [--tokens N]
"""
from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from bench.surface_overhead import build_request  # noqa: E402
from bench.wmt21 import DATA, read_lines  # noqa: E402
from champollion import logs  # noqa: E402
from champollion.analyzers import DEFAULT_FST_DIR  # noqa: E402
from champollion.cards import default_registry  # noqa: E402
from champollion.eval.v1 import family_pb2, family_pb2_grpc, gateway_pb2_grpc  # noqa: E402
from champollion.launch.embedded import EmbeddedStack  # noqa: E402
from champollion.words import words_of  # noqa: E402
from gateway.card.run_card import run_card_from_proto  # noqa: E402

ANALYZER = DEFAULT_FST_DIR / "eng.hfstol"
# Each side is timed this many times; medians are reported.
REPEATS = 5


def english_sentences() -> list[str]:
    sentences = read_lines("src.en")
    ted = DATA.parent / "mqm-ted-ende" / "mqm_ted_ende.tsv"
    with ted.open(encoding="utf-8", newline="") as handle:
        seen = dict.fromkeys(row["source"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    sentences += list(seen)
    for licence in sorted(Path("/usr/share/common-licenses").glob("*")):
        if licence.is_file():
            text = licence.read_text(encoding="utf-8", errors="replace")
            sentences += [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return sentences


def structural_batches(sentences: list[str], size: int) -> list[family_pb2.ScoreBatchRequest]:
    """The sentences as eng->eng ScoreBatch requests, each its own prediction."""
    batches = []
    for start in range(0, len(sentences), size):
        batch = family_pb2.ScoreBatchRequest(run_id="bench", source_lang="eng", target_lang="eng")
        for index, sentence in enumerate(sentences[start:start + size], start):
            batch.entries.add(id=str(index), source=sentence, reference=sentence, prediction=sentence)
        batches.append(batch)
    return batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=50_000)
    args = parser.parse_args()
    logs.configure("WARNING")
    if not ANALYZER.is_file():
        raise SystemExit(f"{ANALYZER} is missing: run `make fst`")

    keep_hyphenated = default_registry().get("eng").words.keep_hyphenated
    sentences, tokens = [], []
    for sentence in english_sentences():
        sentences.append(sentence)
        tokens += words_of(sentence, keep_hyphenated)
        if len(tokens) >= args.tokens:
            break
    if len(tokens) < args.tokens:
        raise SystemExit(f"only {len(tokens)} tokens of English text found; need {args.tokens}")
    print(f"{len(tokens)} tokens ({len(set(tokens))} types) in {len(sentences)} sentences; analyzer {ANALYZER.name}")

    entries = [{"id": str(i), "source": s, "reference": s} for i, s in enumerate(sentences)]
    predictions = [{"id": str(i), "prediction": s} for i, s in enumerate(sentences)]
    request = build_request(entries, predictions, 256)
    request.corpus.source_lang = request.corpus.target_lang = "eng"
    batches = structural_batches(sentences, 256)
    cold, warm = [], []
    for _ in range(REPEATS):
        # A fresh service each time: analyzer not loaded, word cache empty.
        with EmbeddedStack(families=("structural",)) as stack:
            with grpc.insecure_channel(stack.family_addresses["structural"]) as channel:
                family = family_pb2_grpc.FamilyStub(channel)
                family.Describe(family_pb2.DescribeRequest(), timeout=60)  # connects; loads no analyzer
                started = time.perf_counter()
                responses = [family.ScoreBatch(batch, timeout=600) for batch in batches]
                cold.append(time.perf_counter() - started)
                # A long-lived service keeps its word-type cache across runs.
                started = time.perf_counter()
                for batch in batches:
                    family.ScoreBatch(batch, timeout=600)
                warm.append(time.perf_counter() - started)
    with EmbeddedStack(families=("structural",)) as stack:
        with grpc.insecure_channel(stack.gateway_address) as channel:
            started = time.perf_counter()
            card = run_card_from_proto(gateway_pb2_grpc.GatewayStub(channel).Evaluate(request, timeout=600).run_card)
            gateway_s = time.perf_counter() - started
    words = sum(int(e.stats["fst_acceptance_rate"].values[1]) for r in responses for e in r.entries)
    assert words == len(tokens), (words, len(tokens))

    stream = "\n".join(tokens) + "\n"
    cli = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        output = subprocess.run(["hfst-optimized-lookup", "-q", "-n", "1", str(ANALYZER)],
                                input=stream, capture_output=True, text=True, check=True).stdout
        cli.append(time.perf_counter() - started)
    cli_rejected = sum(1 for line in output.splitlines() if line.endswith("+?"))
    service_s, warm_s, cli_s = statistics.median(cold), statistics.median(warm), statistics.median(cli)

    service_rate, cli_rate = words / service_s, len(tokens) / cli_s
    print(f"structural service, ScoreBatch over gRPC:          {service_rate:10.0f} words/s  ({service_s:.3f} s; "
          f"acceptance {card['scores']['fst_acceptance_rate']:.4f}: as written, lower-cased, capitalised)")
    print(f"hfst-optimized-lookup -n 1 (one process, as written): {cli_rate:10.0f} words/s  ({cli_s:.3f} s; "
          f"acceptance {1 - cli_rejected / len(tokens):.4f})")
    print(f"ratio service / CLI: {service_rate / cli_rate:.2f}  (target >= 1.0)")
    print(f"same stream again, word cache warm:                 {words / warm_s:10.0f} words/s  ({warm_s:.3f} s); "
          f"ratio {words / warm_s / cli_rate:.2f}")
    print(f"whole Evaluate through the gateway (run card, CIs): {words / gateway_s:10.0f} words/s  ({gateway_s:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
