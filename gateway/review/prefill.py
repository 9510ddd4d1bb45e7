"""Error spans the metric families suggest to a reviewer (`--prefill lyss`,
issue 36): what the families already found in an output, read from the
entry's stored values, turned into character spans of that output. A
reviewer accepts, edits or rejects each one; those decisions measure how
often a detector is right (gateway/review/detectors.py).

A suggestion names its detector. Something missing from the output is a
zero-width span at its end (`missing`), shown as the [MISSING] marker.

DETECTORS is the one table of them: the stored entry value each reads, the
severity it suggests, how it finds the span, and the metric whose findings
it shows (the metric a speaker's verdict on it validates). The families
store what locates a finding (services/*/metrics.py); the gateway never
re-runs their rules."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Callable, Iterator

from champollion.core.scripts import letter_script
from champollion.core.words import normal_form, normal_form_with_offsets

# What a locator yields: (start, end, note, missing).
Found = tuple[int, int, str, bool]


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
    """Where `word` stands in `output` as a whole word, looked for as the
    families found it, in the output's normal form (words_of's), and shown as
    the raw characters it covers (a decomposed ê is two). Whole: no letter,
    digit or mark touches it, but a letter of another script than the word's
    edge may (我的computer坏了: some scripts write no spaces)."""
    word = normal_form(word)
    if not word:
        return []
    text, raw = normal_form_with_offsets(output)
    first, last = _script_at(word, 0), _script_at(word, len(word) - 1)
    spans = []
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if _lengthens(text, start - 1, first) or _lengthens(text, end, last):
            start = text.find(word, start + 1)
            continue
        spans.append((raw[start][0], raw[end - 1][1]))
        start = text.find(word, end)
    return spans


_WORD_CHAR = re.compile(r"\w")


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def _script_at(text: str, at: int) -> str | None:
    """The script of the letter at `at`, or of the letter a mark there sits on."""
    while at > 0 and _is_mark(text[at]):
        at -= 1
    return letter_script(text[at])


def _lengthens(text: str, at: int, script: str | None) -> bool:
    """Whether text[at], beside a word whose edge is of `script`, would be part of it."""
    if not 0 <= at < len(text) or not (_WORD_CHAR.match(text[at]) or _is_mark(text[at])):
        return False
    other = _script_at(text, at)
    return script is None or other is None or other == script


# --- locators: (output, the entry's stored value) -> what was found, where -------------------------------------------

def _listed_words(value) -> list[str]:
    return list(dict.fromkeys(w for w in value or () if isinstance(w, str)))


def _offset(value) -> int | None:
    # Entry values travel as protobuf Structs, whose numbers are floats: 17.0 is offset 17.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def _spans(output: str, value) -> Iterator[tuple[int, int]]:
    """Stored [start, end) pairs that fit the output (a value stored for other text gives none)."""
    for pair in value or ():
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            continue
        start, end = _offset(pair[0]), _offset(pair[1])
        if start is not None and end is not None and 0 <= start < end <= len(output):
            yield start, end


def _rejected_words(output: str, value) -> Iterator[Found]:
    for word in _listed_words(value):
        for start, end in word_spans(output, word):
            yield start, end, f"the language's analyzer does not know '{word}'", False


def _orthography(output: str, value) -> Iterator[Found]:
    # Labels are "word: problem"; one word may break several rules, each its own label.
    problems: dict[str, list[str]] = {}
    for label in value or ():
        if isinstance(label, str) and ": " in label:
            word, problem = label.split(": ", 1)
            problems.setdefault(word, []).append(problem)
    for word, found in problems.items():
        for start, end in word_spans(output, word):
            yield start, end, f"'{word}' breaks the card's spelling rules: {'; '.join(found)}", False


def _switched_words(output: str, value) -> Iterator[Found]:
    for word in _listed_words(value):
        for start, end in word_spans(output, word):
            yield start, end, f"'{word}' is a word of the source language", False


def _numbers(output: str, value) -> Iterator[Found]:
    value = value if isinstance(value, dict) else {}
    for start, end in _spans(output, value.get("unmatched")):
        yield start, end, f"the source has no number {output[start:end]!r}", False
    for number in value.get("missing") or ():
        yield len(output), len(output), f"the source's number {number} is not in the output", True


def _missing_placeholders(output: str, value) -> Iterator[Found]:
    prefix = "missing_placeholder: "
    for label in value or ():
        if isinstance(label, str) and label.startswith(prefix):
            yield len(output), len(output), f"the source's placeholder {label[len(prefix):]} is missing", True


def _invented_placeholders(output: str, value) -> Iterator[Found]:
    for start, end in _spans(output, value):
        yield start, end, f"the source has no placeholder {output[start:end]}", False


def _loops(output: str, value) -> Iterator[Found]:
    value = value if isinstance(value, dict) else {}
    for start, end in _spans(output, value.get("oscillation")):
        yield start, end, "repeats itself beyond what the language (and the reference) allows", False


@dataclass(frozen=True)
class Detector:
    name: str
    key: str  # the entry value it reads (run_entries.scores)
    severity: str  # suggested severity (ESA): the reviewer may change it
    metric: str  # the metric whose findings these are
    locate: Callable[[str, object], Iterator[Found]]
    how: str  # how the span is found, for the docs and the report


DETECTORS: tuple[Detector, ...] = (
    Detector("fst_rejected", "fst_rejected", "minor", "fst_acceptance_rate", _rejected_words,
             "each word the analyzer rejected, wherever it stands as a whole word"),
    Detector("orthography", "orthographic_violations", "minor", "orthographic_accuracy", _orthography,
             "the word of each 'word: problem' label, wherever it stands"),
    Detector("code_switched", "code_switched_words", "minor", "code_switching_rate", _switched_words,
             "each source-language word, wherever it stands"),
    Detector("number_mismatch", "number_mismatches", "major", "number_mismatch_rate", _numbers,
             "the stored spans of output numbers the source lacks; [MISSING] for each source number dropped"),
    Detector("placeholder_missing", "compliance_violations", "major", "compliance_index", _missing_placeholders,
             "[MISSING] for each missing_placeholder violation"),
    Detector("placeholder_invented", "invented_placeholder_spans", "major", "compliance_index",
             _invented_placeholders, "the stored spans of placeholders the source lacks"),
    Detector("hallucination_loop", "hallucination_spans", "major", "hallucination_rate", _loops,
             "the stored spans of the repeated stretches (oscillation)"),
)
DETECTOR_NAMES = tuple(detector.name for detector in DETECTORS)


def suggestions_for(output: str, source: str, scores: dict) -> list[Suggestion]:
    """The suggested spans of one output, in text order, from its entry's
    stored values (`scores`, as run_entries keeps them). `source` is not
    read: the families located their findings when they scored."""
    found = {}
    for detector in DETECTORS:
        for start, end, note, missing in detector.locate(output, scores.get(detector.key)):
            suggestion = Suggestion(detector.name, start, end, detector.severity, note, missing)
            found[(detector.name, start, end, note)] = suggestion  # a word listed twice is one span
    return sorted(found.values(), key=lambda s: (s.start, s.end, s.detector, s.note))
