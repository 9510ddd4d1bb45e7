"""FST lookup throughput: natural English text through the structural family
versus the `hfst-optimized-lookup` command-line tool on the same token stream,
with the same analyzer (build/fst/eng.hfstol, from Debian's Apertium data).

Text: WMT21 news sources and TED talk sources from ../shared/data, then the
licence texts every Debian system carries in /usr/share/common-licenses
(about 80,000 tokens, all the natural English there is offline), repeated
whole until it reaches --tokens (default 500,000). Repetition inflates word-
type cache hits, so the natural text once (no repetition) is measured too.

Three ways through, each --repeats times, interleaved (the machine is shared):
- scorer: StructuralScorer.score, what the service runs for a batch, on
  batches of 256 sentences in a fresh process: cold (analyzer not loaded,
  caches empty: the first batch loads it), then the same batches warm.
- service: ScoreBatch over real gRPC to a fresh structural service process
  (in-process scoring threads), cold then warm; the time includes request and
  response messages (protobuf Struct values per entry).
- CLI: `hfst-optimized-lookup -q -n 1` on the words, one per line, in one
  process: it looks each token up once, as written, and caches nothing; the
  family looks a new word type up as written, lower-cased and capitalised.
Wall-clock and CPU seconds are both printed: on a shared machine CPU seconds
are steadier. Target: scorer cold >= 3x the CLI.

Usage: python bench/fst_lookup.py [--tokens N] [--repeats N]
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.wmt21 import DATA, read_lines  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.core.analyzers import DEFAULT_FST_DIR  # noqa: E402
from champollion.core.cards import default_registry  # noqa: E402
from champollion.core.words import words_of  # noqa: E402

ANALYZER = DEFAULT_FST_DIR / "eng.hfstol"
BATCH = 256


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


def corpus(tokens: int) -> tuple[list[str], int]:
    """The natural sentences repeated whole until they have `tokens` words
    (0: once); also how many words the natural text has."""
    natural = english_sentences()
    natural_words = sum(len(words_of(s, True)) for s in natural)
    passes = max(1, -(-tokens // natural_words))
    return natural * passes, natural_words


def batches_of(sentences: list[str]) -> list[list[str]]:
    return [sentences[start:start + BATCH] for start in range(0, len(sentences), BATCH)]


# --- fresh-process workers -------------------------------------------------------

def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def scorer_worker(tokens: int) -> None:
    """Scores the corpus twice in this (fresh) process; prints JSON timings."""
    from services.contract import BatchContext, EntryInput
    from services.structural.metrics import StructuralScorer

    card = default_registry().get("eng")
    context = BatchContext(source=card, target=card)
    batches = [[EntryInput(id=str(i), source=s, reference=s, prediction=s) for i, s in enumerate(batch)]
               for batch in batches_of(corpus(tokens)[0])]
    scorer = StructuralScorer()
    result = {}
    for phase in ("cold", "warm"):
        wall, cpu = time.perf_counter(), _cpu()
        outputs = [scorer.score(batch, context) for batch in batches]
        result[phase] = [time.perf_counter() - wall, _cpu() - cpu]
    result["words"] = sum(int(e.stats["fst_acceptance_rate"][1]) for o in outputs for e in o.entries)
    result["accepted"] = sum(int(e.stats["fst_acceptance_rate"][0]) for o in outputs for e in o.entries)
    print(json.dumps(result))


def service_worker() -> None:
    """A structural service (scoring in this process's threads) until stdin closes."""
    from apps.launch.embedded import start_family

    async def serve() -> None:
        server, port = await start_family("structural", "127.0.0.1:0")
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await server.stop(None)

    asyncio.run(serve())


# --- the three ways through ----------------------------------------------------

def run_scorer(tokens: int) -> dict:
    output = subprocess.run([sys.executable, __file__, "--worker", "scorer", "--tokens", str(tokens)],
                            capture_output=True, text=True, check=True).stdout
    return json.loads(output)


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_service(sentences: list[str]) -> dict:
    import grpc

    from champollion.eval.v1 import family_pb2, family_pb2_grpc

    requests = []
    for batch in batches_of(sentences):
        request = family_pb2.ScoreBatchRequest(run_id="bench", source_lang="eng", target_lang="eng")
        for index, sentence in enumerate(batch):
            request.entries.add(id=str(index), source=sentence, reference=sentence, prediction=sentence)
        requests.append(request)
    server = subprocess.Popen([sys.executable, __file__, "--worker", "service"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        result = {}
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            family = family_pb2_grpc.FamilyStub(channel)
            family.Describe(family_pb2.DescribeRequest(), timeout=60)  # connects; loads no analyzer
            for phase in ("cold", "warm"):
                wall, cpu = time.perf_counter(), _process_cpu(server.pid)
                responses = [family.ScoreBatch(request, timeout=600) for request in requests]
                result[phase] = [time.perf_counter() - wall, _process_cpu(server.pid) - cpu]
        result["words"] = sum(int(e.stats["fst_acceptance_rate"].values[1]) for r in responses for e in r.entries)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    return result


def run_cli(tokens: list[str]) -> dict:
    """The CLI reads the words from a file and writes to a file: through
    pipes, its line-by-line output costs it a context switch per word."""
    with tempfile.TemporaryDirectory() as folder:
        words, analyses = Path(folder) / "words.txt", Path(folder) / "analyses.txt"
        words.write_text("\n".join(tokens) + "\n", encoding="utf-8")
        with words.open("rb") as stdin, analyses.open("wb") as stdout:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = time.perf_counter()
            subprocess.run(["hfst-optimized-lookup", "-q", "-n", "1", str(ANALYZER)], stdin=stdin, stdout=stdout,
                           check=True)
            wall = time.perf_counter() - wall
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        output = analyses.read_text(encoding="utf-8")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    # One block per token (its analysis lines, then a blank line); "+?" marks no analysis.
    rejected = sum(1 for line in output.splitlines() if line.endswith("+?"))
    return {"run": [wall, cpu], "rejected": rejected}


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):6.3f}  (min {min(values):6.3f}, max {max(values):6.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--worker", choices=("scorer", "service"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    logs.configure("WARNING")
    if args.worker == "scorer":
        scorer_worker(args.tokens)
        return 0
    if args.worker == "service":
        service_worker()
        return 0
    if not ANALYZER.is_file():
        raise SystemExit(f"{ANALYZER} is missing: run `make fst`")

    keep_hyphenated = default_registry().get("eng").words.keep_hyphenated
    sentences, natural_words = corpus(args.tokens)
    natural = corpus(0)[0]
    tokens = [word for sentence in sentences for word in words_of(sentence, keep_hyphenated)]
    natural_tokens = tokens[:natural_words]
    print(f"{len(tokens)} tokens ({len(set(tokens))} types) in {len(sentences)} sentences: the natural text "
          f"({natural_words} tokens) {len(sentences) // len(natural)} times; analyzer {ANALYZER.name}")

    runs: dict[str, list] = {name: [] for name in ("scorer", "service", "cli", "natural", "natural_cli")}
    for repeat in range(args.repeats):
        runs["cli"].append(run_cli(tokens))
        runs["scorer"].append(run_scorer(args.tokens))
        runs["service"].append(run_service(sentences))
        runs["natural_cli"].append(run_cli(natural_tokens))
        runs["natural"].append(run_scorer(0))
        print(f"  run {repeat + 1}: CLI {runs['cli'][-1]['run'][0]:.3f} s, scorer cold "
              f"{runs['scorer'][-1]['cold'][0]:.3f} s, service cold {runs['service'][-1]['cold'][0]:.3f} s",
              file=sys.stderr)
    for result in runs["scorer"] + runs["service"]:
        assert result["words"] == len(tokens), (result["words"], len(tokens))
    assert all(result["words"] == natural_words for result in runs["natural"])

    def report(label: str, name: str, phase: str, cli: str, words: int) -> None:
        for kind, index in (("wall", 0), ("CPU", 1)):
            times = [result[phase][index] for result in runs[name]]
            cli_times = [result["run"][index] for result in runs[cli]]
            ratios = [c / t for c, t in zip(cli_times, times)]
            print(f"{label:<34} {kind:>4} s {_spread(times)}  {words / statistics.median(times):9.0f} words/s"
                  f"  CLI/this {_spread(ratios)}")

    print(f"{'':<34} seconds over {args.repeats} runs; ratio = CLI time / this time, run by run")
    for kind, index in (("wall", 0), ("CPU", 1)):
        times = [result["run"][index] for result in runs["cli"]]
        print(f"{'hfst-optimized-lookup -n 1':<34} {kind:>4} s {_spread(times)}  "
              f"{len(tokens) / statistics.median(times):9.0f} words/s")
    report("scorer, cold (fresh process)", "scorer", "cold", "cli", len(tokens))
    report("scorer, warm (same process again)", "scorer", "warm", "cli", len(tokens))
    report("service ScoreBatch gRPC, cold", "service", "cold", "cli", len(tokens))
    report("service ScoreBatch gRPC, warm", "service", "warm", "cli", len(tokens))
    print(f"natural text once ({natural_words} tokens, no repetition):")
    for kind, index in (("wall", 0), ("CPU", 1)):
        times = [result["run"][index] for result in runs["natural_cli"]]
        print(f"{'  hfst-optimized-lookup -n 1':<34} {kind:>4} s {_spread(times)}")
    report("  scorer, cold (fresh process)", "natural", "cold", "natural_cli", natural_words)
    accepted = runs["scorer"][0]["accepted"] / len(tokens)
    cli_accepted = 1 - runs["cli"][0]["rejected"] / len(tokens)
    print(f"acceptance: family {accepted:.4f} (as written, lower-cased, capitalised), CLI {cli_accepted:.4f} "
          "(as written)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
