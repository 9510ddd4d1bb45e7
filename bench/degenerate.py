"""Systems that ignore their input, scored beside real ones (issue 32): does
any score, the composite or the tier reward not translating?

Corpora (every family, through the embedded stack):
  eng-spa  examples/eng-spa with its predictions (profile A: Spanish analyzer)
  wmt21    the first --lines lines of WMT21 en-de (../shared/data) against
           reference A; real systems Facebook-AI, Online-W, UEdin, Online-G
           (profile B)
  ted      TED en-de with expert MQM (../shared/data), all 13 systems; the
           reference is the system named `ref` (profile B)
Degenerate systems: champollion/core/degenerate.py's floor kinds (constant,
other_reference, source_copy, half_reference, empty) and, from the first real
system's outputs, shifted_outputs and half_outputs.

Printed per corpus: each system's chrF++, semantic_score, adequacy_rate with
the gates that fired, the composite with its interval and tier, and the
composite the alternatives considered would give, recomputed from the same
cards' per-entry statistics:
  ungated        the composite as before the gates (no gate)
  multiplicative the ungated composite x adequacy_rate
  fluency-only   only the fluency inputs (fst_acceptance_rate,
                 orthographic_accuracy, code_switching_rate,
                 hallucination_rate) gated
Then whether every degenerate system ranks below every real one, and is
baseline, under each; on ted (and wmt21 with --mqm) the Kendall of chrF++,
semantic_score and each composite against MQM over the real systems.

Usage: python bench/degenerate.py [--corpora eng-spa,wmt21,ted] [--lines 300] [--cards DIR]
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from scipy.stats import kendalltau  # noqa: E402
from tabulate import tabulate  # noqa: E402

from bench.wmt21 import DATA, MQM_SCORES, mqm_name, read_lines, translations  # noqa: E402
from apps.client import Client  # noqa: E402
from apps.launch.embedded import EmbeddedStack  # noqa: E402
from champollion.core import logs  # noqa: E402
from champollion.core.degenerate import FLOOR_KINDS, SYSTEM_KINDS, floor_outputs, system_outputs  # noqa: E402
from gateway.card.adequacy import gated_statistics  # noqa: E402
from gateway.card.composite import compute_composite, quality_tier  # noqa: E402
from gateway.card.corpus import corpus_values  # noqa: E402
from gateway.card.metrics import WEIGHTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TED = DATA.parent / "mqm-ted-ende"
WMT_SYSTEMS = ("Facebook-AI", "Online-W", "UEdin", "Online-G")
FLUENCY = ("fst_acceptance_rate", "orthographic_accuracy", "code_switching_rate", "hallucination_rate")
ALTERNATIVES = ("gated", "ungated", "multiplicative", "fluency-only")


# --- corpora: (corpus dict, {system: predictions}, extras for evaluate, MQM by system or None) --------------

def eng_spa():
    folder = ROOT / "examples" / "eng-spa"
    corpus = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    predictions = [json.loads(line) for line in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
                   if line.strip()]
    by_id = {p["id"]: p.get("prediction") or "" for p in predictions}
    outputs = [by_id.get(entry["id"], "") for entry in corpus["entries"]]
    extras = {"meta": json.loads((folder / "meta.json").read_text(encoding="utf-8")),
              "glossary": json.loads((folder / "glossary.json").read_text(encoding="utf-8"))}
    return corpus, {"example-llm-mini": outputs}, extras, None


def wmt21(lines: int):
    sources, references = read_lines("src.en")[:lines], translations("A")[:lines]
    corpus = {"id": f"wmt21-ende-first{lines}", "source_lang": "eng", "target_lang": "deu",
              "entries": [{"id": str(i + 1), "source": s, "reference": r}
                          for i, (s, r) in enumerate(zip(sources, references))]}
    return corpus, {name: translations(name)[:lines] for name in WMT_SYSTEMS}, {}, None


def wmt21_mqm(lines: int) -> dict[str, float]:
    judged = collections.defaultdict(list)
    for line in MQM_SCORES.read_text(encoding="utf-8").splitlines()[1:]:
        system, score, segment = line.split()
        if score != "None" and int(segment) <= lines:
            judged[system].append(float(score))
    return {name: float(np.mean(judged[mqm_name(name)])) for name in WMT_SYSTEMS if judged.get(mqm_name(name))}


def ted():
    rows: dict[tuple[str, int], tuple[str, str]] = {}
    for line in (TED / "mqm_ted_ende.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        fields = line.split("\t")
        rows.setdefault((fields[0], int(fields[3])), (fields[5], re.sub(r"</?v>", "", fields[6])))
    segments = sorted(segment for system, segment in rows if system == "ref")
    systems = sorted({system for system, _ in rows} - {"ref"})
    corpus = {"id": "ted-ende-mqm", "source_lang": "eng", "target_lang": "deu",
              "entries": [{"id": str(s), "source": rows[("ref", s)][0], "reference": rows[("ref", s)][1]}
                          for s in segments]}
    outputs = {system: [rows[(system, s)][1] for s in segments] for system in systems
               if all((system, s) in rows for s in segments)}
    scores = collections.defaultdict(list)
    for line in (TED / "mqm_ted_ende.avg_seg_scores.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        system, score, _segment = line.split()
        if score != "None":
            scores[system].append(float(score))
    return corpus, outputs, {}, {system: float(np.mean(scores[system])) for system in outputs}


# --- scoring and the alternatives ---------------------------------------------------------------------------

def degenerate_systems(corpus: dict, real: dict[str, list[str]]) -> dict[str, list[str]]:
    sources = [e["source"] for e in corpus["entries"]]
    references = [e["reference"] for e in corpus["entries"]]
    first = next(iter(real.values()))
    found = {f"floor:{kind}": floor_outputs(kind, sources, references) for kind in FLOOR_KINDS}
    found.update({f"floor:{kind}": system_outputs(kind, first) for kind in SYSTEM_KINDS})
    return found


def evaluate(client: Client, corpus: dict, name: str, outputs: list[str], extras: dict) -> dict:
    predictions = [{"id": entry["id"], "prediction": output} for entry, output in zip(corpus["entries"], outputs)]
    meta = extras.get("meta")
    card = client.evaluate(corpus, predictions, meta=meta, glossary=extras.get("glossary"))
    card["model_slug"] = name
    return card


def composites(card: dict) -> dict[str, float | None]:
    """The card's composite under each alternative, from its entries' statistics."""
    profile = card["composite_coverage"]["profile"]
    entries = card["entries"]
    weighted = [m for m in WEIGHTS[profile]]
    stats = {m: np.array([e["stats"][m] for e in entries], dtype=float) for m in weighted
             if entries and all(m in e["stats"] for e in entries)}
    inadequate = np.array([e["scores"].get("adequate") is False for e in entries])
    ungated = compute_composite(corpus_values(stats), profile).value
    rate = card["scores"]["adequacy_rate"]
    fluency = gated_statistics(stats, inadequate, [m for m in FLUENCY if m in stats])
    return {
        "gated": card["scores"]["composite"],
        "ungated": ungated,
        "multiplicative": None if ungated is None or rate is None else ungated * rate,
        "fluency-only": compute_composite(corpus_values(fluency), profile).value,
    }


def number(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(title: str, cards: dict[str, dict], real: list[str], mqm: dict[str, float] | None) -> None:
    rows, alternative_values = [], {}
    for name, card in cards.items():
        scores = card["scores"]
        gates = ", ".join(f"{gate} {n}" for gate, n in card["adequacy"]["gates"].items() if n)
        interval = scores["confidence_intervals"].get("composite", {})
        values = composites(card)
        alternative_values[name] = values
        rows.append([name, number(scores["chrf_plus_plus"], 1), number(scores["semantic_score"]),
                     number(scores["adequacy_rate"], 2), gates or "-",
                     f"{number(scores['composite'])} [{number(interval.get('ci_lower'))}, "
                     f"{number(interval.get('ci_upper'))}]", scores["quality_tier"],
                     *(number(values[a]) for a in ALTERNATIVES[1:])])
    print(f"\n## {title}: {len(real)} real systems, {len(cards) - len(real)} degenerate, "
          f"{next(iter(cards.values()))['scores']['total']} entries")
    print(tabulate(rows, headers=["system", "chrF++", "semantic", "adequacy", "gates", "composite [95% CI]",
                                  "tier", *ALTERNATIVES[1:]], disable_numparse=True))
    degenerate = [name for name in cards if name not in real]
    summary = []
    for alternative in ALTERNATIVES:
        lowest_real = min(alternative_values[name][alternative] for name in real)
        above = [name for name in degenerate if alternative_values[name][alternative] >= lowest_real]
        baseline = [name for name in degenerate if quality_tier(alternative_values[name][alternative]) == "baseline"]
        tiers = collections.Counter(quality_tier(alternative_values[name][alternative]) for name in real)
        summary.append([alternative, f"{len(degenerate) - len(above)}/{len(degenerate)}", ", ".join(above) or "-",
                        f"{len(baseline)}/{len(degenerate)}", ", ".join(f"{t} {n}" for t, n in sorted(tiers.items()))])
    for metric in ("chrf_plus_plus", "semantic_score"):
        lowest_real = min(cards[name]["scores"][metric] for name in real)
        above = [name for name in degenerate if cards[name]["scores"][metric] >= lowest_real]
        summary.append([metric, f"{len(degenerate) - len(above)}/{len(degenerate)}", ", ".join(above) or "-", "", ""])
    print(tabulate(summary, headers=["composite / metric", "degenerate below every real", "at or above a real one",
                                     "degenerate baseline", "real systems' tiers"], disable_numparse=True))
    if mqm:
        judged = [name for name in real if name in mqm]
        human = [mqm[name] for name in judged]
        taus = [[alternative, number(kendalltau([alternative_values[n][alternative] for n in judged], human).statistic)]
                for alternative in ALTERNATIVES]
        taus += [[metric, number(kendalltau([cards[n]["scores"][metric] for n in judged], human).statistic)]
                 for metric in ("chrf_plus_plus", "semantic_score")]
        print(f"system-level Kendall against MQM over {len(judged)} real systems")
        print(tabulate(taus, headers=["score", "Kendall"], disable_numparse=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default="eng-spa,wmt21,ted")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--mqm", action="store_true", help="Kendall against MQM on the wmt21 lines too")
    parser.add_argument("--cards", type=Path, help="write every run card here")
    args = parser.parse_args()
    logs.configure(level="WARNING")
    folder = args.cards or Path(tempfile.mkdtemp(prefix="champollion-degenerate-"))
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [name.strip() for name in args.corpora.split(",") if name.strip()]
    with EmbeddedStack(store=None) as stack, Client(stack.gateway_address) as client:
        for name in chosen:
            corpus, real, extras, mqm = {"eng-spa": eng_spa, "wmt21": lambda: wmt21(args.lines), "ted": ted}[name]()
            if name == "wmt21" and args.mqm:
                mqm = wmt21_mqm(args.lines)
            cards = {}
            for system, outputs in {**real, **degenerate_systems(corpus, real)}.items():
                cards[system] = evaluate(client, corpus, system, outputs, extras)
                (folder / f"{name}.{system.replace(':', '_')}.json").write_text(json.dumps(cards[system]),
                                                                                encoding="utf-8")
            report(name, cards, list(real), mqm)
    print(f"\nrun cards in {folder}")


if __name__ == "__main__":
    main()
