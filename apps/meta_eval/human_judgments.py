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
A score `None` means "not judged". Scores are read as they are written; the
caller turns lower-is-better judgments around.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from gateway.review.mqm import Annotation, UnknownSeverity, error_weight, segment_scores

FORMATS = ("auto", "system-score", "system-segment-score", "mqm", "mqm-errors")
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
