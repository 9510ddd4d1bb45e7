"""The corpus check's power estimate from pilot run cards against the
framework's rule of thumb (seed 001 §6.3: under ~100 entries the paired
bootstrap cannot detect differences under ~5 chrF++ points; with 200 or
more, ~2 points at p < 0.05).

WMT21 en-de (../shared/data), reference A: `--systems` (default three) are
scored by the embedded gateway with the surface family only (chrF++, BLEU,
TER; the composite is then the surface metrics' re-normalised share), their
run cards written to `--cards DIR` (kept; `--reuse-cards` reads them back),
and `champollion corpus check`'s power simulation
(gateway/corpus_check/power.py) estimates, for each pair of systems and
each corpus size in `--sizes`, the smallest chrF++ and composite difference
the paired bootstrap (1,000 resamples, p < 0.05) detects with 80% power.

Usage: python bench/corpus_power.py [--systems A,B,C] [--sizes 100,200,1002] [--draws N] [--cards DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.wmt21 import read_lines
from apps.client import Client
from apps.launch.embedded import EmbeddedStack
from champollion.core import logs
from champollion.core.corpus_rules import POWER, RULE_OF_THUMB
from gateway.corpus_check.power import detectable_differences, pilot_from_card, pilot_runs

# A clear gap and a close pair on reference A (bench/paired_ar.py): Facebook-AI
# 57.9 chrF++, WeChat-AI 57.9, happypoet 55.1.
DEFAULT_SYSTEMS = ("Facebook-AI", "WeChat-AI", "happypoet")
DEFAULT_SIZES = (100, 200, 1002)


def score(systems: list[str], cards: Path, reuse: bool) -> list[tuple[str, dict]]:
    sources, references = read_lines("src.en"), read_lines("ref.A.de")
    corpus = {"id": "wmt21-ende-refA", "source_lang": "eng", "target_lang": "deu",
              "entries": [{"id": f"line{n}", "source": s, "reference": r}
                          for n, (s, r) in enumerate(zip(sources, references), start=1)]}
    cards.mkdir(parents=True, exist_ok=True)
    found = []
    missing = [name for name in systems if not (reuse and (cards / f"{name}.json").is_file())]
    if missing:
        with EmbeddedStack(families=("surface",), workers=0) as stack, Client(stack.gateway_address) as client:
            for name in missing:
                started = time.perf_counter()
                predictions = [{"id": e["id"], "prediction": h}
                               for e, h in zip(corpus["entries"], read_lines(f"hyp.{name}.de"))]
                card = client.evaluate(corpus, predictions, meta={"model_slug": name})
                (cards / f"{name}.json").write_text(json.dumps(card), encoding="utf-8")
                print(f"scored {name}: chrF++ {card['scores']['chrf_plus_plus']:.2f} "
                      f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    for name in systems:
        found.append((name, json.loads((cards / f"{name}.json").read_text(encoding="utf-8"))))
    return found


def rule_of_thumb(size: int) -> str:
    band = [row for row in RULE_OF_THUMB if size >= row[0]][-1]
    return f"{'>' if band is RULE_OF_THUMB[0] else '~'}{band[1]:g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--draws", type=int, default=POWER.draws, help="simulated corpora per estimate")
    parser.add_argument("--cards", default="bench-power-cards", help="folder of the pilot run cards")
    parser.add_argument("--reuse-cards", action="store_true", help="read cards already in --cards")
    args = parser.parse_args()
    logs.configure("WARNING")
    systems = args.systems.split(",")
    sizes = [int(size) for size in args.sizes.split(",")]
    settings = replace(POWER, draws=args.draws)
    pilots = pilot_runs([pilot_from_card(name, card) for name, card in score(systems, Path(args.cards),
                                                                             args.reuse_cards)])
    print("| pair (baseline vs system) | pilot chrF++ difference | entries | detectable chrF++ | "
          "detectable composite | rule of thumb (chrF++) | seconds |")
    print("|---|---|---|---|---|---|---|")
    by_size: dict[int, list[float]] = {size: [] for size in sizes}
    for (name_a, run_a), (name_b, run_b) in combinations(pilots, 2):
        for size in sizes:
            started = time.perf_counter()
            found = detectable_differences(run_a, run_b, size, settings)
            chrf, composite = found["detectable"]["chrf_plus_plus"], found["detectable"]["composite"]
            by_size[size].append(chrf)
            print(f"| {name_a} vs {name_b} | {found['pilot_difference']['chrf_plus_plus']:+.2f} | {size} | "
                  f"{chrf:.2f} | {composite:.4f} | {rule_of_thumb(size)} | {time.perf_counter() - started:.1f} |")
    print()
    for size, values in by_size.items():
        print(f"{size} entries: median detectable chrF++ difference {median(values):.2f} points "
              f"(rule of thumb {rule_of_thumb(size)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
