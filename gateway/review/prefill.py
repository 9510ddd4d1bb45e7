"""Error spans the metric families suggest to a reviewer (`--prefill lyss`,
issue 36): what the families already found in an output, read from the
entry's stored values, turned into character spans of that output. A
reviewer accepts, edits or rejects each one; those decisions measure how
often a detector is right (gateway/review/detectors.py).

A suggestion names its detector. Something missing from the output is a
zero-width span at its end (`missing`), shown as the [MISSING] marker."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Suggestion:
    detector: str  # which family finding it is, e.g. "fst_rejected"
    start: int  # character offsets in the output (end exclusive)
    end: int
    severity: str  # "minor" or "major": the suggestion's default, the reviewer may change it
    note: str  # what the detector saw, shown beside the span
    missing: bool = False  # a [MISSING] suggestion: start == end == len(output)

    def as_dict(self) -> dict:
        return asdict(self)


def word_spans(output: str, word: str) -> list[tuple[int, int]]:
    """Where `word` stands in `output` as a whole word (not inside a longer one)."""
    if not word:
        return []
    pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
    return [match.span() for match in pattern.finditer(output)]


def _words_found(output: str, words, detector: str, severity: str, note: str) -> list[Suggestion]:
    spans: list[Suggestion] = []
    for word in dict.fromkeys(w for w in words or () if isinstance(w, str)):
        spans.extend(Suggestion(detector, start, end, severity, note.format(word=word))
                     for start, end in word_spans(output, word))
    return spans


def suggestions_for(output: str, source: str, scores: dict) -> list[Suggestion]:
    """The suggested spans of one output, in text order, from its entry's
    stored values (`scores`, as run_entries keeps them)."""
    found = _words_found(output, scores.get("fst_rejected"), "fst_rejected", "minor",
                         "the language's analyzer does not know '{word}'")
    return sorted(found, key=lambda s: (s.start, s.end, s.detector))
