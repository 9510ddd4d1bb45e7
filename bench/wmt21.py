"""Loading the WMT21 English→German data in ../shared/data (benchmarks only;
the test suite never needs it)."""
from __future__ import annotations

import os
from itertools import count
from pathlib import Path

DATA = Path(os.environ.get("CHAMPOLLION_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data" / "wmt21-ende"


def read_lines(name: str) -> list[str]:
    path = DATA / f"newstest2021.en-de.{name}"
    if not path.exists():
        raise SystemExit(f"missing {path}: the benchmarks need the shared WMT21 data (set CHAMPOLLION_SHARED)")
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def systems() -> list[str]:
    return sorted(p.name.split(".hyp.")[1][: -len(".de")] for p in DATA.glob("newstest2021.en-de.hyp.*.de"))


def segments(size: int, repeat: bool = False) -> tuple[list[dict], list[dict]]:
    """`size` (entry, prediction) pairs: every system's outputs against
    reference A, system after system, as ids '<system>:<line>'. With
    `repeat`, past the 20,040 pairs the systems come round again as
    '<system>~2:<line>', '<system>~3:<line>'... (distinct ids, same texts);
    without, there are 20,040 at most."""
    sources, references = read_lines("src.en"), read_lines("ref.A.de")
    hypotheses = {system: read_lines(f"hyp.{system}.de") for system in systems()}
    entries, predictions = [], []
    for round_number in count(1):
        for system, lines in hypotheses.items():
            name = system if round_number == 1 else f"{system}~{round_number}"
            for line, hypothesis in enumerate(lines, start=1):
                entry_id = f"{name}:{line}"
                entries.append({"id": entry_id, "source": sources[line - 1], "reference": references[line - 1]})
                predictions.append({"id": entry_id, "prediction": hypothesis})
                if len(entries) == size:
                    return entries, predictions
        if not repeat:
            return entries, predictions


def paired_runs(size: int) -> tuple[list[dict], list[dict], list[dict]]:
    """One corpus of `size` entries (slot k, line l: reference A of line l)
    and two runs over it: slot k filled by system k, or by system k+10."""
    sources, references = read_lines("src.en"), read_lines("ref.A.de")
    names = systems()
    half = len(names) // 2
    entries, run_a, run_b = [], [], []
    for slot in range(half):
        hyps_a, hyps_b = read_lines(f"hyp.{names[slot]}.de"), read_lines(f"hyp.{names[slot + half]}.de")
        for line in range(len(sources)):
            entry_id = f"slot{slot}:{line + 1}"
            entries.append({"id": entry_id, "source": sources[line], "reference": references[line]})
            run_a.append({"id": entry_id, "prediction": hyps_a[line]})
            run_b.append({"id": entry_id, "prediction": hyps_b[line]})
            if len(entries) == size:
                return entries, run_a, run_b
    return entries, run_a, run_b


# --- human judgments (bench/validity.py) ----------------------------------------

# Expert MQM scores (Freitag et al. 2021) per segment, for 8 MT systems and the
# references: already negated (0 best, lower worse), "None" where a segment
# was not judged (475 of 1002 lines).
MQM_SCORES = DATA / "mqm_newstest2021_ende.avg_seg_scores.tsv"
# Names of the MQM file where they differ from the hypothesis files'.
_MQM_NAMES = {"NVIDIA-NeMo": "Nemo"}


def mqm_name(system: str) -> str:
    """A hypothesis file's system name (or a reference's letter: 'A') as the
    MQM file writes it."""
    return f"ref-{system}" if len(system) == 1 else _MQM_NAMES.get(system, system)


def mqm_systems() -> list[str]:
    """The MT systems (hypothesis file names) the MQM file judges."""
    judged = {line.split()[0] for line in MQM_SCORES.read_text(encoding="utf-8").splitlines()[1:] if line.strip()}
    return [system for system in systems() if mqm_name(system) in judged]


def translations(system: str) -> list[str]:
    """A system's outputs, or a reference's ('A', 'C', 'D') lines."""
    return read_lines(f"ref.{system}.de" if len(system) == 1 else f"hyp.{system}.de")
