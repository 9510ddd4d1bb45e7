"""A reviewer's answer to one task, checked before it is stored: a score
for every output shown, a usable verdict, error spans (with [MISSING] and,
in MQM campaigns, a category), and a decision on every suggested span.
Also a reference flag's check. Pure: no store; gateway/review/reviewing.py
applies these to what the store holds."""
from __future__ import annotations

import math

from gateway.review import mqm, protocol
from gateway.review.errors import CampaignRefused

MAX_NOTE = 2_000
# The MQM categories a reviewer may give a span: the typology less "No-error"
# (a span is an error).
MQM_SPAN_CATEGORIES = tuple(category for category in mqm.CATEGORIES if category != mqm.NO_ERROR)


def _score(sent: dict, index: int) -> float:
    try:
        score = float(sent.get("score"))
    except (TypeError, ValueError):
        raise CampaignRefused(f"ratings[{index}].score: must be a number from {protocol.DA_MIN} to "
                              f"{protocol.DA_MAX}") from None
    if not (math.isfinite(score) and protocol.DA_MIN <= score <= protocol.DA_MAX):
        raise CampaignRefused(f"ratings[{index}].score: must be from {protocol.DA_MIN} to {protocol.DA_MAX}, "
                              f"got {score:g}")
    return score


def _span(span, where: str, length: int, kind: str) -> dict:
    """One span, checked: inside the output (0 <= start < end <= length), or
    a [MISSING] one (start == end == length) where the protocol has them."""
    try:
        start, end, severity = int(span["start"]), int(span["end"]), span["severity"]
    except (KeyError, TypeError, ValueError):
        raise CampaignRefused(f"{where}: needs start, end and severity") from None
    if severity not in protocol.SEVERITIES:
        raise CampaignRefused(f"{where}.severity: one of {', '.join(protocol.SEVERITIES)}, got {str(severity)[:20]!r}")
    missing = bool(span.get("missing", False))
    if missing:
        if kind not in protocol.SPAN_PROTOCOLS:
            raise CampaignRefused(f"{where}.missing: {protocol.MISSING_MARKER} spans are for the "
                                  f"{' and '.join(protocol.SPAN_PROTOCOLS)} protocols")
        if not start == end == length:
            raise CampaignRefused(f"{where}: a {protocol.MISSING_MARKER} span has start == end == {length} "
                                  f"(the output's end)")
    elif not 0 <= start < end <= length:
        raise CampaignRefused(f"{where}: 0 <= start < end <= {length} (the output's length)")
    checked = {"start": start, "end": end, "severity": severity}
    if kind in protocol.SPAN_PROTOCOLS:
        checked["missing"] = missing
    if kind == protocol.MQM:
        category = span.get("category")
        if category not in MQM_SPAN_CATEGORIES:
            raise CampaignRefused(f"{where}.category: one of the MQM categories ({', '.join(MQM_SPAN_CATEGORIES)})")
        checked["category"] = category
    return checked


def _decisions(sent, suggested: list[dict], spans: list[dict], where: str, length: int, kind: str) -> list[dict]:
    """One decision per suggestion shown, in the order shown; an accepted or
    edited one's final span is among the reviewer's spans (it is an error the
    reviewer stands by), an accepted one keeps the suggestion's extent and
    severity. The final span is checked and kept as a span ([MISSING] as the
    suggestion has it, an MQM category), so that the item sent again is
    the same answer."""
    sent = sent if sent is not None else []
    if not isinstance(sent, list) or len(sent) != len(suggested):
        raise CampaignRefused(f"{where}: one decision per suggested span ({len(suggested)})")
    marked = [_identity(span) for span in spans]
    checked = []
    for number, (decision, suggestion) in enumerate(zip(sent, suggested)):
        at = f"{where}[{number}]"
        if not isinstance(decision, dict) or decision.get("decision") not in protocol.DECISIONS:
            raise CampaignRefused(f"{at}.decision: one of {', '.join(protocol.DECISIONS)}")
        if (decision.get("detector"), decision.get("start"), decision.get("end")) != (
                suggestion["detector"], suggestion["start"], suggestion["end"]):
            raise CampaignRefused(f"{at}: names suggestion {number} ({suggestion['detector']} at "
                                  f"{suggestion['start']}-{suggestion['end']}) as shown")
        final = None
        if decision["decision"] != protocol.REJECTED:
            final = _span({**(decision.get("final") or {}), "missing": suggestion.get("missing", False)},
                          f"{at}.final", length, kind)
            if decision["decision"] == protocol.ACCEPTED:
                if (final["start"], final["end"]) != (suggestion["start"], suggestion["end"]):
                    raise CampaignRefused(f"{at}: an accepted suggestion keeps its extent; a changed one is edited")
                if final["severity"] != suggestion["severity"]:
                    raise CampaignRefused(f"{at}.final.severity: an accepted suggestion keeps its severity "
                                          f"({suggestion['severity']}); a changed one is edited")
            if _identity(final) not in marked:
                raise CampaignRefused(f"{at}.final: not among the output's spans")
        checked.append({"detector": suggestion["detector"], "start": suggestion["start"], "end": suggestion["end"],
                        "decision": decision["decision"], "final": final})
    return checked


def _identity(span: dict) -> tuple:
    # What makes two checked spans the same error: extent, severity, [MISSING] and category.
    return span["start"], span["end"], span["severity"], span.get("missing"), span.get("category")


def checked_ratings(systems: list[str], form: dict[str, dict], outputs: list[str] | None = None,
                    kind: str = protocol.DA, suggestions: dict[str, list[dict]] | None = None) -> dict[str, dict]:
    """A task's ratings as sent ({system: {score, usable, spans, decisions}}
    for every system shown, `outputs` the texts shown in the same order),
    checked: a score from 0 to 100 for each, a verdict yes, no or none,
    spans inside the output with a known severity, and a decision on each
    suggestion shown (`suggestions`: system -> the task's suggested spans)."""
    checked = {}
    for index, system in enumerate(systems):
        sent = form.get(system)
        if sent is None:
            raise CampaignRefused(f"ratings[{index}]: output {index + 1} has no score")
        score = _score(sent, index)
        usable = sent.get("usable")
        if usable not in (True, False, None):
            raise CampaignRefused(f"ratings[{index}].usable: yes, no or unanswered")
        length = len(outputs[index]) if outputs is not None else math.inf
        spans = [_span(span, f"ratings[{index}].spans[{number}]", length, kind)
                 for number, span in enumerate(sent.get("spans") or [])]
        suggested = (suggestions or {}).get(system) or []
        decisions = _decisions(sent.get("decisions"), suggested, spans, f"ratings[{index}].decisions", length, kind)
        checked[system] = {"score": score, "usable": usable, "spans": spans,
                           "decisions": decisions if suggestions is not None else None}
    return checked


def check_flag(flag: str, note: str) -> None:
    if flag not in protocol.REFERENCE_FLAGS:
        raise CampaignRefused(f"flag: one of {', '.join(protocol.REFERENCE_FLAGS)}, got {flag[:40]!r}")
    if len(note) > MAX_NOTE:
        raise CampaignRefused(f"note: at most {MAX_NOTE} characters")
    if flag == "other" and not note.strip():
        raise CampaignRefused("note: say what is wrong with the reference")
