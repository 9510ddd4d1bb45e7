"""Validity: how well Champollion's metrics agree with expert judgments, on
WMT21 English→German (issue 18's setup; the data in ../shared/data).

1. Meta-evaluation. The 8 MT systems with expert MQM judgments, and the
   human translations A and D as systems, are scored against reference C
   through the embedded stack (every family unless --families), then
   `meta_eval` compares each metric with MQM: on the 8 MT systems, and on
   the 8 plus A and D. The table of system scores shows where the human
   translations land. The check that the pipeline matches sacreBLEU:
   chrF++'s system-level Kendall on the 8 MT systems must be +0.714.
   `--all-systems` also scores the other 12 MT systems and compares every
   system's BLEU with the release's automatic scores (bleu-C).
2. Hallucination detection. A synthetic set from the same segments, scored
   against reference C: detached outputs (reference A of another segment),
   oscillations (the first words of reference A, then a 3-word phrase of it
   repeated 6 times) and untouched human translations (A and D). An entry
   counts as flagged when the behavioral family flags any of its tokens
   (hallucination_rate's per-entry numerator > 0). Printed: the share
   flagged per kind (detection for the first two, false positives for the
   others) and the reasons given.

Run cards are written to --cards (default: a temporary folder) to be
meta-evaluated again with `champollion meta-eval`.

Usage: python bench/validity.py [--families surface,semantic,...] [--systems NAME,...] [--all-systems]
                                [--cards DIR] [--resamples N] [--synthetic N]
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
from tabulate import tabulate  # noqa: E402

from bench.wmt21 import DATA, MQM_SCORES, mqm_name, mqm_systems, read_lines, systems, translations  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from apps.meta_eval.human_judgments import read_judgments  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from apps.meta_eval import TABLE_HEADERS, match_systems, meta_evaluate, table_rows  # noqa: E402
from champollion.core.serving import MAX_MESSAGE_BYTES  # noqa: E402
from apps.client.upload import collect_run_card, request_parts  # noqa: E402
from services.registry import IMPLEMENTED  # noqa: E402

REFERENCE = "C"
HUMAN_SYSTEMS = ("A", "D")
# What sacreBLEU's chrF++ (reference C, all 1002 segments or the 527 MQM judged) gives on the 8 MT systems.
EXPECTED_CHRF_KENDALL = 0.714
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
# The system scores shown beside MQM (those present in the cards).
SHOWN_SCORES = ("chrf_plus_plus", "bleu", "semantic_score", "hallucination_rate", "code_switching_rate",
                "composite")
OSCILLATION_COPIES = 6


def request(dataset: str, slug: str, entries: list[dict], predictions: list[str]) -> gateway_pb2.EvaluateRequest:
    built = gateway_pb2.EvaluateRequest(
        corpus=gateway_pb2.Corpus(id=dataset, source_lang="eng", target_lang="deu"),
        meta=gateway_pb2.RunMeta(model_slug=slug),
    )
    for entry, prediction in zip(entries, predictions):
        built.corpus.entries.add(**entry)
        built.predictions.add(id=entry["id"], prediction=prediction)
    return built


def score(stub, evaluate_request) -> dict:
    return collect_run_card(stub.EvaluateUpload(request_parts(evaluate_request), timeout=3600))


def wmt_entries() -> list[dict]:
    """The test set against reference C; ids are line numbers (the MQM seg_id)."""
    sources, references = read_lines("src.en"), translations(REFERENCE)
    return [{"id": str(line), "source": source, "reference": reference}
            for line, (source, reference) in enumerate(zip(sources, references), start=1)]


def score_systems(stub, names: list[str], folder: Path, reuse: bool) -> dict[str, dict]:
    entries, cards = wmt_entries(), {}
    for name in names:
        path = folder / f"{mqm_name(name)}.json"
        if reuse and path.exists():
            cards[name] = json.loads(path.read_text(encoding="utf-8"))
            continue
        started = time.perf_counter()
        card = score(stub, request(f"wmt21-ende-ref{REFERENCE}", mqm_name(name), entries, translations(name)))
        (folder / f"{mqm_name(name)}.json").write_text(json.dumps(card), encoding="utf-8")
        cards[name] = card
        print(f"scored {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cards


def meta_eval_table(cards: dict[str, dict], names: list[str], title: str, resamples: int,
                    metric_segments: str = "all") -> dict:
    judgments = read_judgments(MQM_SCORES)
    runs = match_systems([(name, cards[name]) for name in names], judgments, {})
    report = meta_evaluate(runs, judgments, lower_is_better=False, resamples=resamples, seed=12345,
                           metric_segments=metric_segments)
    print(f"\n## {title}: {len(names)} systems, {report['segments']['used']} of {report['segments']['total']} "
          f"segments judged, metric scores over {metric_segments} segments; 95% bootstrap CI over segments "
          f"({resamples} resamples)")
    print(tabulate(table_rows(report), headers=TABLE_HEADERS, disable_numparse=True))
    return report


def system_table(cards: dict[str, dict], report: dict) -> None:
    """MQM and the metrics' system scores (over the judged segments), best MQM first."""
    shown = [m for m in SHOWN_SCORES if m in report["metrics"]]
    human = {system["name"]: system["human_score"] for system in report["systems"]}
    rows = [[name, f"{human[name]:.3f}",
             *(_number(report["metrics"][m]["system_scores"][name]) for m in shown)]
            for name in sorted(human, key=human.get, reverse=True)]
    print(f"\nsystem scores over the {report['segments']['used']} judged segments")
    print(tabulate(rows, headers=["system", "MQM", *shown], disable_numparse=True))


def _number(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def check_bleu(cards: dict[str, dict]) -> None:
    """Every scored MT system's BLEU against the release's bleu-C."""
    with (DATA / "automatic-scores.en-de.tsv").open(encoding="utf-8") as handle:
        released = {row["system"]: float(row["score"]) for row in csv.DictReader(handle, delimiter="\t")
                    if row["metric"] == f"bleu-{REFERENCE}"}
    rows = [[name, _number(card["scores"]["bleu"]), _number(released[name]),
             _number(card["scores"]["bleu"] - released[name])]
            for name, card in cards.items() if name in released and card["scores"]["bleu"] is not None]
    print(f"\nBLEU against reference {REFERENCE}: ours vs the release's automatic scores")
    print(tabulate(rows, headers=["system", "ours", "released", "difference"], disable_numparse=True))


def synthetic_set(size: int, seed: int) -> tuple[list[dict], list[str], list[str]]:
    """(entries, predictions, kind of each): `size` segments per kind."""
    sources, reference, translation_a, translation_d = (read_lines("src.en"), translations(REFERENCE),
                                                        translations("A"), translations("D"))
    rng = random.Random(seed)
    lines = [i for i in range(len(sources)) if len(translation_a[i].split()) >= 6]
    entries, predictions, kinds = [], [], []

    def add(kind: str, line: int, prediction: str) -> None:
        entries.append({"id": f"{kind}:{line + 1}", "source": sources[line], "reference": reference[line]})
        predictions.append(prediction)
        kinds.append(kind)

    for line in rng.sample(lines, size):
        other = rng.choice([i for i in lines if i != line])
        add("detached", line, translation_a[other])
    for line in rng.sample(lines, size):
        words = translation_a[line].split()
        add("oscillation", line, " ".join(words[:3] + words[3:6] * OSCILLATION_COPIES))
    for line in rng.sample(lines, size):
        add("human-A", line, translation_a[line])
    for line in rng.sample(lines, size):
        add("human-D", line, translation_d[line])
    return entries, predictions, kinds


def hallucination_report(stub, size: int) -> None:
    entries, predictions, kinds = synthetic_set(size, seed=18)
    card = score(stub, request("wmt21-ende-hallucination", "synthetic", entries, predictions))
    if card["scores"].get("hallucination_rate") is None:
        print("\nno hallucination_rate (behavioral family not run)")
        return
    flagged, reasons = collections.Counter(), collections.defaultdict(collections.Counter)
    for kind, entry in zip(kinds, card["entries"]):
        if entry["stats"]["hallucination_rate"][0] > 0:
            flagged[kind] += 1
            reasons[kind].update((entry["scores"].get("hallucination_reasons") or {}).keys())
    print(f"\n## hallucination detection ({size} entries per kind; flagged: any token flagged)")
    rows = [[kind, f"{flagged[kind] / size:.1%}", "detection" if kind in ("detached", "oscillation")
             else "false positive", ", ".join(f"{reason} {count}" for reason, count in reasons[kind].most_common())]
            for kind in dict.fromkeys(kinds)]
    print(tabulate(rows, headers=["kind", "flagged", "meaning", "reasons (entries)"], disable_numparse=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(IMPLEMENTED), help="families to run (default: all)")
    parser.add_argument("--systems", help="only these MT systems (hypothesis file names), comma-separated")
    parser.add_argument("--all-systems", action="store_true", help="also the 12 MT systems MQM does not judge")
    parser.add_argument("--cards", type=Path, help="folder for the run cards (default: a temporary one)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--synthetic", type=int, default=200, help="synthetic entries per kind (0: none)")
    parser.add_argument("--reuse-cards", action="store_true",
                        help="take the run cards already in --cards instead of scoring those systems again")
    args = parser.parse_args()
    logs.configure("WARNING")  # the services' per-batch lines would bury the tables
    judged = mqm_systems()
    mt = [name for name in (systems() if args.all_systems else judged)
          if not args.systems or name in args.systems.split(",")]
    folder = args.cards or Path(tempfile.mkdtemp(prefix="champollion-validity-"))
    folder.mkdir(parents=True, exist_ok=True)
    families = tuple(name for name in args.families.split(",") if name)
    with EmbeddedStack(families=families, store=None) as stack:
        with grpc.insecure_channel(stack.gateway_address, options=CHANNEL_OPTIONS) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            cards = score_systems(stub, [*mt, *HUMAN_SYSTEMS], folder, args.reuse_cards)
            if args.synthetic:
                hallucination_report(stub, args.synthetic)
    print(f"\nrun cards in {folder}; families: {', '.join(families)}")
    judged_mt = [name for name in mt if name in judged]
    report = meta_eval_table(cards, judged_mt, "MQM, MT systems", args.resamples)
    # The same over the judged segments alone, as MQM-only studies compute metrics.
    meta_eval_table(cards, judged_mt, "MQM, MT systems", args.resamples, metric_segments="judged")
    with_humans = meta_eval_table(cards, [*judged_mt, *HUMAN_SYSTEMS], "MQM, MT systems and human translations A, D",
                                  args.resamples)
    system_table(cards, with_humans)
    if "chrf_plus_plus" in report["metrics"] and len(judged_mt) == len(judged):
        kendall = report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"]
        verdict = "as expected" if round(kendall, 3) == EXPECTED_CHRF_KENDALL else "UNEXPECTED"
        print(f"\nchrF++ system Kendall on the {len(judged)} MT systems: {kendall:+.3f} "
              f"(sacreBLEU: +{EXPECTED_CHRF_KENDALL}): {verdict}")
    if "bleu" in report["metrics"]:
        check_bleu({name: cards[name] for name in mt})
    human_rates = {name: cards[name]["scores"].get("hallucination_rate") for name in HUMAN_SYSTEMS}
    mt_rates = [cards[name]["scores"].get("hallucination_rate") for name in judged_mt]
    if None not in human_rates.values() and mt_rates and None not in mt_rates:
        print(f"\nhallucination_rate (all 1002 segments): human {human_rates}, "
              f"MT median {statistics.median(mt_rates):.4f} (range {min(mt_rates):.4f}-{max(mt_rates):.4f})")


if __name__ == "__main__":
    main()
