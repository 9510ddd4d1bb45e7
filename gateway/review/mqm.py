"""MQM scoring (issue 36): the weights of Google's MQM annotations of WMT
(Freitag et al. 2021), as the WMT21 TED en-de expert data uses them, and
the segment score they give: each rater's errors summed, averaged over the
segment's raters, negated (0 is best, higher is better).

Weights: a Major error 5, a Minor one 1, a Minor punctuation error
(Fluency/Punctuation) 0.1, a non-translation (category Non-translation,
whatever its severity) 25; Neutral and No-error rows count 0 (a No-error row
says that rater saw the segment and found nothing). Pure: no store."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

MAJOR, MINOR, NEUTRAL, NO_ERROR = "Major", "Minor", "Neutral", "No-error"
SEVERITY_WEIGHTS = {MAJOR: 5.0, MINOR: 1.0, NEUTRAL: 0.0, NO_ERROR: 0.0}
# Category-specific weights that override the severity's.
NON_TRANSLATION, NON_TRANSLATION_WEIGHT = "Non-translation", 25.0
PUNCTUATION, MINOR_PUNCTUATION_WEIGHT = "Fluency/Punctuation", 0.1
# The typology of the WMT21 TED annotations (category/subcategory).
CATEGORIES = (
    "Accuracy/Addition", "Accuracy/Mistranslation", "Accuracy/Omission", "Accuracy/Untranslated text",
    "Fluency/Display", "Fluency/Grammar", "Fluency/Inconsistency", "Fluency/Punctuation", "Fluency/Register",
    "Fluency/Spelling", "Style/Awkward", "Terminology/Inappropriate for context",
    "Terminology/Inconsistent use of terminology", NON_TRANSLATION, "Other", NO_ERROR,
)


class UnknownSeverity(ValueError):
    """A severity the weights do not know."""


@dataclass(frozen=True)
class Annotation:
    """One row of an MQM annotation: a rater's error (or No-error) on a
    system's output of a segment."""
    system: str
    segment: str
    rater: str
    category: str
    severity: str


def error_weight(category: str, severity: str) -> float:
    """The penalty of one annotated error."""
    if category.split("/")[0] == NON_TRANSLATION:
        return NON_TRANSLATION_WEIGHT
    if severity not in SEVERITY_WEIGHTS:
        raise UnknownSeverity(f"severity {severity!r}: one of {', '.join(SEVERITY_WEIGHTS)}")
    if severity == MINOR and category == PUNCTUATION:
        return MINOR_PUNCTUATION_WEIGHT
    return SEVERITY_WEIGHTS[severity]


def segment_scores(annotations: Iterable[Annotation]) -> dict[tuple[str, str], float]:
    """(system, segment) -> the MQM score: minus the mean, over the raters
    who annotated that output, of each rater's summed error weights."""
    penalties: dict[tuple[str, str], dict[str, float]] = {}
    for row in annotations:
        by_rater = penalties.setdefault((row.system, row.segment), {})
        by_rater[row.rater] = by_rater.get(row.rater, 0.0) + error_weight(row.category, row.severity)
    return {key: -sum(by_rater.values()) / len(by_rater) for key, by_rater in penalties.items()}


# --- an mqm review campaign's ratings (gateway/review/results.py mqm_results) ----------------------------------------

# A review span's severity ("minor" | "major", gateway/review/protocol.py) as the MQM data writes it.
_SPAN_SEVERITIES = {"minor": MINOR, "major": MAJOR}
# A span without a category is still an error: counted as the typology's "Other".
OTHER = "Other"


def rating_annotations(system: str, segment: str, rater: str, spans) -> list[Annotation]:
    """One review rating's spans ({severity, category?, ...}) as MQM rows; a rating without spans is one
    No-error row, so that the rater counts (with 0) in the segment's mean."""
    if not spans:
        return [Annotation(system, segment, rater, NO_ERROR, NO_ERROR)]
    rows = []
    for span in spans:
        severity = _SPAN_SEVERITIES.get(span.get("severity"))
        if severity is None:
            raise UnknownSeverity(f"severity {span.get('severity')!r}: one of {', '.join(_SPAN_SEVERITIES)}")
        rows.append(Annotation(system, segment, rater, span.get("category") or OTHER, severity))
    return rows


def weights_note() -> str:
    """The weights, as the results state them."""
    return (f"{MAJOR} {SEVERITY_WEIGHTS[MAJOR]:g}, {MINOR} {SEVERITY_WEIGHTS[MINOR]:g}, {MINOR} {PUNCTUATION} "
            f"{MINOR_PUNCTUATION_WEIGHT:g}, {NON_TRANSLATION} {NON_TRANSLATION_WEIGHT:g}; summed per rater, "
            "averaged over raters, negated")
