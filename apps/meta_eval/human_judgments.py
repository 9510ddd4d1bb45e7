"""Reading human quality judgments for `champollion meta-eval`: WMT-style
TSV files and the MQM average segment scores of the WMT21 release.

Formats (README "Meta-evaluation"):
  system-score          `system<TAB>score`, one line per segment, each system's
                        lines in segment order (segment k = its k-th line);
  system-segment-score  `system<TAB>segment<TAB>score`, segment = an entry id
                        of the run cards, or a 1-based position in the corpus;
  mqm                   a header line `system mqm_avg_score seg_id`, then
                        `system score seg_id` separated by tabs or spaces;
  mqm-errors            MQM error annotations, one error (or No-error) a row:
                        a header naming at least the columns system, seg_id,
                        rater, category and severity (the WMT MQM releases'
                        `system doc doc_id seg_id rater source target category
                        severity comment`), tab-separated; each segment's
                        score is gateway.review.mqm's (its errors weighted,
                        summed per rater, averaged over raters, negated).
  wmt-esa               JSON lines, one ESA rating a line: `review export
                        --format wmt-esa` (gateway/review/exports.py) and the
                        ESA dump of WMT24 (`wmt24_esa.jsonl`); fields system,
                        esa_score, segment_id (else line_id, 0-based) and,
                        when present, item_type (only TGT lines count) and
                        excluded (true: left out);
  appraise              an Appraise export: its CSV (ExportSystemScoresToCSV,
                        WMT24's `esa_generalMT2024_wave*.csv`: annotator,
                        system, segment, item type, source and target
                        language, score, ...; no header) or its JSON lines
                        (ExportSystemScoresToJSONL: annotator, target_id,
                        item_id, item_type, score); only TGT items count.
                        A segment id of digits is Appraise's 0-based line
                        number (read as the 1-based position it is), any
                        other an entry id.
In the two rating formats a segment's score is the mean of its ratings.
A score `None` means "not judged". Scores are read as they are written; the
caller turns lower-is-better judgments around.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from champollion.core.review_protocols import WMT_ESA
from gateway.review.exports import TGT
from gateway.review.mqm import Annotation, UnknownSeverity, error_weight, segment_scores

APPRAISE = "appraise"
FORMATS = ("auto", "system-score", "system-segment-score", "mqm", "mqm-errors", WMT_ESA, APPRAISE)
# Appraise's item types (its CSV's fourth column).
_APPRAISE_TYPES = ("TGT", "CHK", "BAD", "REF")
# The columns an MQM error file must name in its header.
_MQM_ERROR_COLUMNS = ("system", "seg_id", "rater", "category", "severity")
# What a judgment file writes for a segment nobody judged (the MQM release's word).
NOT_JUDGED = "None"
_MQM_HEADER = ("system", "mqm_avg_score", "seg_id")


class JudgmentError(ValueError):
    """A judgment file that cannot be read; the message names file and line."""


@dataclass
class Judgments:
    path: Path
    format: str
    # True: segment labels are 1-based positions (system-score format); False:
    # entry ids, or positions where the labels are not the cards' ids.
    by_position: bool
    # System -> segment label -> score (None: not judged).
    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)


def detect_format(path: Path, first_line: str) -> str:
    """The format of a file from its first line: the MQM header, or else the
    number of tab-separated fields."""
    if tuple(first_line.split()) == _MQM_HEADER:
        return "mqm"
    if first_line.lstrip().startswith("{"):
        return WMT_ESA if '"esa_score"' in first_line else APPRAISE
    cells = next(csv.reader([first_line]))
    if len(cells) >= 7 and cells[3] in _APPRAISE_TYPES:
        return APPRAISE
    fields = first_line.rstrip("\n").split("\t")
    if set(_MQM_ERROR_COLUMNS) <= set(fields):
        return "mqm-errors"
    if len(fields) == 2:
        return "system-score"
    if len(fields) == 3:
        return "system-segment-score"
    raise JudgmentError(f"{path}:1: cannot tell the format: expected system<TAB>score, "
                        f"system<TAB>segment<TAB>score or the MQM header {' '.join(_MQM_HEADER)!r}")


def _score(path: Path, number: int, text: str) -> float | None:
    if text == NOT_JUDGED:
        return None
    try:
        value = float(text)
    except ValueError:
        raise JudgmentError(f"{path}:{number}: score: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise JudgmentError(f"{path}:{number}: score: must be finite, got {text!r}")
    return value


def _fields(path: Path, number: int, line: str, file_format: str) -> tuple[str, str | None, str]:
    """(system, segment label or None, score text) of one line."""
    if file_format == "mqm":
        parts = line.split()
        expected = "system score seg_id"
    else:
        parts = line.split("\t")
        expected = "system<TAB>score" if file_format == "system-score" else "system<TAB>segment<TAB>score"
    width = 2 if file_format == "system-score" else 3
    if len(parts) != width or not all(part.strip() for part in parts):
        raise JudgmentError(f"{path}:{number}: expected {expected}, got {len(parts)} field(s)")
    parts = [part.strip() for part in parts]
    if file_format == "mqm":
        return parts[0], parts[2], parts[1]
    if file_format == "system-score":
        return parts[0], None, parts[1]
    return parts[0], parts[1], parts[2]


def read_judgments(path: Path, file_format: str = "auto") -> Judgments:
    if file_format not in FORMATS:
        raise JudgmentError(f"--format: must be one of {', '.join(FORMATS)}, got {file_format!r}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise JudgmentError(f"{path}: cannot read: {error}") from None
    if not any(line.strip() for line in lines):
        raise JudgmentError(f"{path}: no judgments")
    if file_format == "auto":
        file_format = detect_format(path, lines[0])
    if file_format == "mqm-errors":
        return _mqm_error_judgments(path, lines)
    if file_format in (WMT_ESA, APPRAISE):
        return _rating_judgments(path, lines, file_format)
    judgments = Judgments(path, file_format, by_position=file_format == "system-score")
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (number == 1 and file_format == "mqm" and tuple(line.split()) == _MQM_HEADER):
            continue
        system, segment, score_text = _fields(path, number, line, file_format)
        by_segment = judgments.scores.setdefault(system, {})
        segment = segment if segment is not None else str(len(by_segment) + 1)
        if segment in by_segment:
            raise JudgmentError(f"{path}:{number}: system {system!r} segment {segment!r} is judged twice")
        by_segment[segment] = _score(path, number, score_text)
    return judgments


def _mqm_error_judgments(path: Path, lines: list[str]) -> Judgments:
    """Segment scores from MQM error rows (format mqm-errors)."""
    header = lines[0].split("\t")
    missing = [name for name in _MQM_ERROR_COLUMNS if name not in header]
    if missing:
        raise JudgmentError(f"{path}:1: an MQM error file's header names {', '.join(_MQM_ERROR_COLUMNS)}; "
                            f"missing: {', '.join(missing)}")
    column = {name: header.index(name) for name in _MQM_ERROR_COLUMNS}
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            raise JudgmentError(f"{path}:{number}: {len(cells)} tab-separated fields, the header names {len(header)}")
        row = Annotation(*(cells[column[name]].strip() for name in _MQM_ERROR_COLUMNS))
        if not row.system or not row.segment or not row.rater:
            raise JudgmentError(f"{path}:{number}: system, seg_id and rater must not be empty")
        try:
            error_weight(row.category, row.severity)
        except UnknownSeverity as error:
            raise JudgmentError(f"{path}:{number}: {error}") from None
        rows.append(row)
    judgments = Judgments(path, "mqm-errors", by_position=False)
    for (system, segment), score in segment_scores(rows).items():
        judgments.scores.setdefault(system, {})[segment] = score
    return judgments


# --- ratings, one a line: WMT's ESA JSON lines and Appraise's exports ------------------------------------------------

def _number(path: Path, number: int, value, field_name: str) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise JudgmentError(f"{path}:{number}: {field_name}: not a number: {value!r}") from None
    if not math.isfinite(score):
        raise JudgmentError(f"{path}:{number}: {field_name}: must be finite, got {value!r}")
    return score


def _appraise_segment(segment: str) -> str:
    """Appraise's segment id as meta-eval's label: its 0-based line number as a 1-based position."""
    return str(int(segment) + 1) if segment.isdigit() else segment


def _esa_rating(path: Path, number: int, line: str) -> tuple[str, str, float] | None:
    """(system, segment, score) of a wmt-esa line; None for a line that is no judgment of a system."""
    row = _json_object(path, number, line)
    if row.get("item_type", TGT) != TGT or row.get("excluded") is True:
        return None
    if row.get("segment_id") is not None:
        segment = str(row["segment_id"])
    elif isinstance(row.get("line_id"), int) and row["line_id"] >= 0:
        segment = str(row["line_id"] + 1)
    else:
        raise JudgmentError(f"{path}:{number}: needs segment_id or line_id (a 0-based line number)")
    return _system(path, number, row.get("system")), segment, _number(path, number, row.get("esa_score"),
                                                                       "esa_score")


def _appraise_rating(path: Path, number: int, line: str) -> tuple[str, str, float] | None:
    """(system, segment, score) of an Appraise CSV row or JSON line; None for an item that is not TGT."""
    if line.lstrip().startswith("{"):
        row = _json_object(path, number, line)
        system, segment, kind, score = row.get("target_id"), row.get("item_id"), row.get("item_type"), row.get("score")
    else:
        cells = next(csv.reader([line]))
        if len(cells) < 7:
            raise JudgmentError(f"{path}:{number}: an Appraise CSV row has at least 7 fields (annotator, system, "
                                f"segment, item type, source and target language, score), got {len(cells)}")
        system, segment, kind, score = cells[1], cells[2], cells[3], cells[6]
    if kind != TGT:
        return None
    if segment is None or not str(segment).strip():
        raise JudgmentError(f"{path}:{number}: the segment id is empty")
    return _system(path, number, system), _appraise_segment(str(segment).strip()), _number(path, number, score,
                                                                                          "score")


def _json_object(path: Path, number: int, line: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise JudgmentError(f"{path}:{number}: not a JSON object: {error}") from None
    if not isinstance(row, dict):
        raise JudgmentError(f"{path}:{number}: not a JSON object")
    return row


def _system(path: Path, number: int, system) -> str:
    if not isinstance(system, str) or not system.strip():
        raise JudgmentError(f"{path}:{number}: the system is missing or empty")
    return system.strip()


def _rating_judgments(path: Path, lines: list[str], file_format: str) -> Judgments:
    """Each (system, segment)'s mean score over its rating lines (formats wmt-esa and appraise)."""
    rating = _esa_rating if file_format == WMT_ESA else _appraise_rating
    sums: dict[str, dict[str, list[float]]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = rating(path, number, line)
        if found is not None:
            system, segment, score = found
            sums.setdefault(system, {}).setdefault(segment, []).append(score)
    if not sums:
        raise JudgmentError(f"{path}: no rating of a system ({TGT} item) to read")
    judgments = Judgments(path, file_format, by_position=False)
    judgments.scores = {system: {segment: sum(scores) / len(scores) for segment, scores in by_segment.items()}
                        for system, by_segment in sums.items()}
    return judgments
