"""The command as a user meets it, timed beside the `sacrebleu` command on
the same files, in one run (interleaved, so both see the same machine):

  - `champollion --help` and `sacrebleu --help` (and `python -c pass`, the
    interpreter's own start-up);
  - sacreBLEU's BLEU, chrF++ and TER: `sacrebleu REF -i HYP -m bleu chrf ter
    --chrf-word-order 2`, the reference time of every ratio;
  - `champollion evaluate -s SRC -r REF -i HYP` with every family (issue 37:
    target at most 2x), and with `-m bleu,chrf,ter`, the run stored, each
    as a user meets it: the first run, which starts the background stack
    of its settings (every stack stopped before it); the next run of the same
    files on that stack (warm); a run of another system's outputs on it
    (warm, predictions it has not seen: a prompt changed); and with
    --no-daemon, the stack started and stopped by the command itself.

Then the breakdown: where the time of an every-family run goes, by phase,
in the command's process and in each worker process (bench/cli_breakdown.py
runs the command with timestamps taken around its phases), once with
--no-daemon (every start-up cost is in it) and once warm on another
system's outputs.

Data: the first N lines of WMT21 en-de (source, reference A, Facebook-AI;
other systems for the warm runs of other outputs) when ../shared/data has
them (bench/wmt21.py), else synthetic sentences. It checks that BLEU, chrF++
and TER agree with sacreBLEU's (to its printed precision), and that every
way of running an every-family evaluation gives the same scores. Its stacks
live in a folder of its own, stopped at the end.

  python bench/cli_speed.py [--lines 200] [--repeats 3] [--no-breakdown]
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

from bench.cli_breakdown import EVENTS_ENV, LAUNCHED_ENV  # noqa: E402
from bench.wmt21 import DATA, read_lines, systems  # noqa: E402

PYTHON = sys.executable
SACREBLEU = [PYTHON, "-m", "sacrebleu"]
CHAMPOLLION = [PYTHON, "-m", "apps.cli"]
REFERENCE = "sacrebleu BLEU chrF++ TER"
EVERY_FAMILY = "every family"
SURFACE = "-m bleu,chrf,ter"
# How each evaluation runs: (name, --no-daemon?, hypothesis: the first system's, or another's).
WAYS = (("first run (starts the stack)", False, "same"), ("warm, same files", False, "same"),
        ("warm, another system's outputs", False, "other"), ("--no-daemon", True, "same"))


def write_data(folder: Path, lines: int, others: int) -> tuple[Path, Path, Path, list[Path], str]:
    """Source, reference and hypothesis files of `lines` lines, `others`
    other systems' hypotheses; where they came from."""
    if (DATA / "newstest2021.en-de.src.en").exists():
        names = ["Facebook-AI", *[name for name in systems() if name != "Facebook-AI"][:others]]
        texts = [read_lines(name)[:lines] for name in ("src.en", "ref.A.de")]
        texts += [read_lines(f"hyp.{name}.de")[:lines] for name in names]
        origin = f"WMT21 en-de, first {lines} lines (reference A; Facebook-AI; warm runs of {', '.join(names[1:])})"
    else:
        rng = random.Random(7)
        words = "der die das Haus Katze läuft schnell über den Hof und sieht einen Hund im Garten".split()
        references = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 25))) for _ in range(lines)]
        texts = [[f"source sentence {i}" for i in range(lines)], references]
        texts += [[" ".join(w if rng.random() > 0.3 else rng.choice(words) for w in r.split()) for r in references]
                  for _ in range(1 + others)]
        origin = f"{lines} synthetic German-like lines (no WMT21 data in {DATA})"
    paths = [folder / name for name in ("src.en", "ref.de", *(f"hyp{index}.de" for index in range(1 + others)))]
    for path, text in zip(paths, texts):
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return paths[0], paths[1], paths[2], paths[3:], origin


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


def stop_stacks(env: dict) -> None:
    subprocess.run([*CHAMPOLLION, "serve", "--stop"], cwd=REPO, env=env, capture_output=True, timeout=120)


def evaluation(metrics: str, way: tuple, src: Path, ref: Path, hyp: Path) -> list[str]:
    _, embedded, _ = way
    return [*CHAMPOLLION, "evaluate", "-s", str(src), "-r", str(ref), "-i", str(hyp), "--source-lang", "eng",
            "--target-lang", "deu", "--json", *(["-m", "bleu,chrf,ter"] if metrics == SURFACE else []),
            *(["--no-daemon"] if embedded else [])]


def measure(args, src: Path, ref: Path, hyp: Path, others: list[Path], env: dict) -> tuple[dict, dict]:
    """Wall seconds of each command, `repeats` times, interleaved; the last outputs."""
    fixed = {
        "python -c pass": [PYTHON, "-c", "pass"],
        "champollion --help": [*CHAMPOLLION, "--help"],
        "sacrebleu --help": [*SACREBLEU, "--help"],
        REFERENCE: [*SACREBLEU, str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "ter", "--chrf-word-order", "2",
                    "-f", "json"],
    }
    timed(evaluation(SURFACE, WAYS[3], src, ref, hyp), env)  # a first run creates the store: not counted
    times: dict[str, list[float]] = {}
    outputs: dict[str, str] = {}
    for repeat in range(args.repeats):
        runs = dict(fixed)
        for metrics in (EVERY_FAMILY, SURFACE):
            for way in WAYS:
                hypothesis = others[repeat % len(others)] if way[2] == "other" else hyp
                runs[f"{metrics}: {way[0]}"] = evaluation(metrics, way, src, ref, hypothesis)
        for name, command in runs.items():
            if name.endswith(WAYS[0][0]):
                stop_stacks(env)  # the first run finds no stack
            elapsed, outputs[name] = timed(command, env)
            times.setdefault(name, []).append(elapsed)
    return times, outputs


def check_scores(outputs: dict) -> str:
    """BLEU, chrF++ and TER as sacreBLEU prints them; every way of an
    every-family run on the same files gives the same scores."""
    theirs = sacrebleu_scores(outputs[REFERENCE])
    ours = json.loads(outputs[f"{SURFACE}: {WAYS[3][0]}"])["scores"]
    for metric, score in theirs.items():
        if abs(round(ours[metric], 1) - score) > 1e-9:
            raise SystemExit(f"{metric}: champollion {ours[metric]} vs sacreBLEU {score}")
    same = [json.loads(outputs[f"{EVERY_FAMILY}: {way[0]}"])["scores"] for way in WAYS if way[2] == "same"]
    if any(scores != same[0] for scores in same):
        raise SystemExit(f"the every-family runs' scores differ: {same}")
    return ", ".join(f"{metric} {theirs[metric]}" for metric in theirs)


def report(times: dict) -> None:
    median = {name: statistics.median(values) for name, values in times.items()}
    reference = median[REFERENCE]
    for name, values in times.items():
        ratio = "" if name in ("python -c pass", "champollion --help", "sacrebleu --help", REFERENCE) else \
            f"  {median[name] / reference:5.2f}x sacreBLEU"
        print(f"  {name:<58} {median[name]:6.2f}  ({min(values):.2f}-{max(values):.2f}){ratio}")
    print(f"  champollion --help less the interpreter: {median['champollion --help'] - median['python -c pass']:.2f} s; "
          f"{median['champollion --help'] / median['sacrebleu --help']:.2f}x sacrebleu --help")
    warm = median[f"{EVERY_FAMILY}: {WAYS[2][0]}"] / reference
    print(f"every family, warm on another system's outputs: {warm:.2f}x sacreBLEU (target <= 2); the first run "
          f"{median[f'{EVERY_FAMILY}: {WAYS[0][0]}'] / reference:.2f}x, --no-daemon "
          f"{median[f'{EVERY_FAMILY}: {WAYS[3][0]}'] / reference:.2f}x")


def breakdown(command: list[str], env: dict, title: str) -> None:
    """The command run once by bench/cli_breakdown.py; its phases printed,
    seconds from its launch, by process."""
    with tempfile.TemporaryDirectory(prefix="champollion-breakdown-") as folder:
        events_file = Path(folder) / "events.jsonl"
        launched = time.time()
        probe = [PYTHON, "-m", "bench.cli_breakdown", str(events_file), *command[len(CHAMPOLLION):]]
        timed(probe, {**env, EVENTS_ENV: str(events_file), LAUNCHED_ENV: str(launched)})
        ended = time.time()
        events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    print(f"\n{title}: {ended - launched:.2f} s wall; phases, seconds from the launch (start-end, took)")
    main_pid = next(event["pid"] for event in events if event["role"] == "main")
    workers = sorted({event["pid"] for event in events if event["pid"] != main_pid})
    for index, pid in enumerate([main_pid, *workers]):
        print(f"  {'command process' if pid == main_pid else f'worker {index}'}:")
        for event in sorted((e for e in events if e["pid"] == pid), key=lambda e: (e["start"], -e["end"])):
            if event["what"].startswith(("build scorer", "start family server")) and event["end"] - event["start"] < 0.05:
                continue  # each family's share of a phase listed whole
            print(f"    {event['start'] - launched:6.2f}-{event['end'] - launched:6.2f} "
                  f"{event['end'] - event['start']:6.2f}  {event['what']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-breakdown", action="store_true", help="leave the breakdown out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="champollion-cli-speed-") as work:
        folder = Path(work)
        src, ref, hyp, others, origin = write_data(folder, args.lines, max(args.repeats, 2))
        # A store and background stacks of its own (the runs are stored, as a user's are), and no colour.
        env = {**os.environ, "XDG_DATA_HOME": str(folder / "data"), "XDG_RUNTIME_DIR": str(folder / "run"),
               "CHAMPOLLION_DAEMON": "1", "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
        try:
            print(f"data: {origin}; {args.repeats} runs each, interleaved; wall seconds (median, min-max)")
            times, outputs = measure(args, src, ref, hyp, others, env)
            agreed = check_scores(outputs)
            report(times)
            print(f"scores agree with sacreBLEU's: {agreed}; every-family runs of the same files: equal scores")
            if not args.no_breakdown:
                stop_stacks(env)
                breakdown(evaluation(EVERY_FAMILY, WAYS[3], src, ref, hyp), env,
                          "breakdown of an every-family run with --no-daemon")
                timed(evaluation(EVERY_FAMILY, WAYS[0], src, ref, hyp), env)  # the stack started, warm
                breakdown(evaluation(EVERY_FAMILY, WAYS[2], src, ref, others[-1]), env,
                          "breakdown of an every-family run on the warm stack, another system's outputs")
        finally:
            stop_stacks(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
