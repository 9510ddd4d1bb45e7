"""The command as a user meets it, timed beside the `sacrebleu` command on
the same files, in one run (interleaved, so both see the same machine):

  - `champollion --help` and `sacrebleu --help` (and `python -c pass`, the
    interpreter's own start-up, under both);
  - a 200-line run of BLEU, chrF++ and TER alone:
    `champollion evaluate -s SRC -r REF -i HYP -m bleu,chrf,ter` (embedded
    stack, the run stored) against `sacrebleu REF -i HYP -m bleu chrf ter
    --chrf-word-order 2` (target: at most 2x);
  - the same 200 lines with every family (`champollion evaluate` without -m).

Data: the first N lines of WMT21 en-de (source, reference A, Facebook-AI)
when ../shared/data has them (bench/wmt21.py), else synthetic sentences. It
checks that the two commands agree on BLEU, chrF++ and TER (to sacreBLEU's
printed precision) and prints wall times (median of --repeats) and ratios.

  python bench/cli_speed.py [--lines 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.wmt21 import DATA, read_lines  # noqa: E402

PYTHON = sys.executable
SACREBLEU = [PYTHON, "-m", "sacrebleu"]
CHAMPOLLION = [PYTHON, "-m", "champollion.apps.cli"]


def write_data(folder: Path, lines: int) -> tuple[Path, Path, Path, str]:
    """Source, reference and hypothesis files of `lines` lines; where they came from."""
    if (DATA / "newstest2021.en-de.src.en").exists():
        texts = [read_lines(name)[:lines] for name in ("src.en", "ref.A.de", "hyp.Facebook-AI.de")]
        origin = f"WMT21 en-de, first {lines} lines (reference A, Facebook-AI)"
    else:
        rng = random.Random(7)
        words = "der die das Haus Katze läuft schnell über den Hof und sieht einen Hund im Garten".split()
        references = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 25))) for _ in range(lines)]
        hypotheses = [" ".join(w if rng.random() > 0.3 else rng.choice(words) for w in r.split()) for r in references]
        texts = [[f"source sentence {i}" for i in range(lines)], references, hypotheses]
        origin = f"{lines} synthetic German-like lines (no WMT21 data in {DATA})"
    paths = [folder / name for name in ("src.en", "ref.de", "hyp.de")]
    for path, text in zip(paths, texts):
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return *paths, origin


def timed(command: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return elapsed, result.stdout


def sacrebleu_scores(stdout: str) -> dict[str, float]:
    names = {"BLEU": "bleu", "chrF2++": "chrf_plus_plus", "TER": "ter"}
    return {names[item["name"]]: item["score"] for item in json.loads(stdout)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="champollion-cli-speed-") as work:
        folder = Path(work)
        src, ref, hyp, origin = write_data(folder, args.lines)
        # A store of its own (the runs are stored, as a user's are), and no colour.
        env = {**os.environ, "XDG_DATA_HOME": str(folder / "data"), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
        plain = [*CHAMPOLLION, "evaluate", "-s", str(src), "-r", str(ref), "-i", str(hyp), "--source-lang", "eng",
                 "--target-lang", "deu", "--json"]
        commands = {
            "python -c pass": [PYTHON, "-c", "pass"],
            "champollion --help": [*CHAMPOLLION, "--help"],
            "sacrebleu --help": [*SACREBLEU, "--help"],
            "sacrebleu BLEU chrF++ TER": [*SACREBLEU, str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "ter",
                                          "--chrf-word-order", "2", "-f", "json"],
            "champollion -m bleu,chrf,ter": [*plain, "-m", "bleu,chrf,ter"],
            "champollion, every family": plain,
        }
        print(f"data: {origin}; {args.repeats} runs each, interleaved; wall seconds (median, min-max)")
        timed(commands["champollion -m bleu,chrf,ter"], env)  # a first run creates the store: not counted
        times: dict[str, list[float]] = {name: [] for name in commands}
        outputs: dict[str, str] = {}
        for _ in range(args.repeats):
            for name, command in commands.items():
                elapsed, outputs[name] = timed(command, env)
                times[name].append(elapsed)
        ours = json.loads(outputs["champollion -m bleu,chrf,ter"])["scores"]
        theirs = sacrebleu_scores(outputs["sacrebleu BLEU chrF++ TER"])
        for metric, score in theirs.items():
            if abs(round(ours[metric], 1) - score) > 1e-9:
                raise SystemExit(f"{metric}: champollion {ours[metric]} vs sacreBLEU {score}")
        median = {name: statistics.median(values) for name, values in times.items()}
        for name, values in times.items():
            print(f"  {name:<30} {median[name]:7.2f}  ({min(values):.2f}-{max(values):.2f})")
        print(f"ratios: --help {median['champollion --help'] / median['sacrebleu --help']:.2f}x sacreBLEU's "
              f"(champollion --help less the interpreter: "
              f"{median['champollion --help'] - median['python -c pass']:.2f} s); "
              f"BLEU/chrF++/TER {median['champollion -m bleu,chrf,ter'] / median['sacrebleu BLEU chrF++ TER']:.2f}x "
              f"sacreBLEU (target <= 2); every family "
              f"{median['champollion, every family'] / median['sacrebleu BLEU chrF++ TER']:.2f}x sacreBLEU")
        print("scores agree with sacreBLEU's: " + ", ".join(f"{m} {theirs[m]}" for m in theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
