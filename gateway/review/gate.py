"""The gate before an ESA or MQM campaign (Appraise's tutorial and
attention items): what each gate item expects, and whether an answer is
near enough. Pure: no store.

A gate item shows one output. The tutorial shows the entry's reference as
the translation (a good one: the score is expected high, no span needed).
The attention item shows an output with a span replaced by another text's
words (design.degrade): the reviewer must mark that span (each end within
SPAN_TOLERANCE characters) and score it low. Scores are accepted within
SCORE_TOLERANCE points of the expected range. Extra spans are not held
against a reviewer: the gate asks for attention, not for the same taste."""
from __future__ import annotations

from gateway.review import protocol


def changed_span(original: str, changed: str) -> tuple[int, int]:
    """(start, end) in `changed` of what differs from `original`: the text
    between their common prefix and common suffix (at least one character
    when the change only removed text, so that a span can point at it)."""
    start = 0
    while start < min(len(original), len(changed)) and original[start] == changed[start]:
        start += 1
    end_changed, end_original = len(changed), len(original)
    while end_changed > start and end_original > start and original[end_original - 1] == changed[end_changed - 1]:
        end_changed -= 1
        end_original -= 1
    if end_changed == start:  # text only removed: the character after the cut (before it, at the end)
        start = max(0, min(start, len(changed) - 1))
        end_changed = min(start + 1, len(changed))
    return start, end_changed


def expected_answer(kind: str, spans: list[tuple[int, int]]) -> dict:
    """A gate item's expected answer (review_tasks.expected)."""
    score = protocol.TUTORIAL_SCORE if kind == protocol.TUTORIAL else protocol.ATTENTION_SCORE
    return {"score": list(score), "spans": [{"start": start, "end": end} for start, end in spans],
            "span_tolerance": protocol.SPAN_TOLERANCE, "score_tolerance": protocol.SCORE_TOLERANCE}


def gate_failures(expected: dict, score: float, spans: list[dict]) -> list[str]:
    """Why an answer to a gate item is not accepted (empty: it passes), in
    words a reviewer reads before trying again."""
    reasons = []
    low, high = expected["score"]
    slack = expected["score_tolerance"]
    if not low - slack <= score <= high + slack:
        reasons.append(f"the score {score:g} is far from what this translation deserves: a score from "
                       f"{max(0, low - slack)} to {min(100, high + slack)} is expected here")
    tolerance = expected["span_tolerance"]
    marked = [span for span in spans if not span.get("missing")]
    for wanted in expected["spans"]:
        if not any(abs(span["start"] - wanted["start"]) <= tolerance and abs(span["end"] - wanted["end"]) <= tolerance
                   for span in marked):
            reasons.append(f"an error at characters {wanted['start']}-{wanted['end']} is not marked "
                           f"(a span whose ends are within {tolerance} characters of it)")
    return reasons
