"""Compliance index of one batch, on the post-processed and the raw output,
with the statistics the gateway sums (SPEC §2.5).

All three metrics travel as [numerator, denominator] rates, so the gateway's
default reducer rebuilds them: compliance_index is the mean over entries,
repair_effectiveness is fixed raw violations / raw violations over the corpus.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from champollion import __version__
from champollion.core.cards import LanguageCard
from services.compliance.placeholders import (
    RECOGNISED_SYNTAXES,
    scan_placeholders,
    variable_integrity,
)
from services.compliance.rules import casing_compliance, quote_compliance
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
)

WEIGHTS = {"variable_integrity": 0.6, "quotes": 0.2, "casing": 0.2}
SIGNATURE = (
    "weights:" + "/".join(f"{weight:g}" for weight in WEIGHTS.values())
    + "|placeholders:" + ",".join(RECOGNISED_SYNTAXES)
    + "|quotes:card|casing:latin-words-in-caseless"
    + f"|version:{__version__}"
)
NO_RATE = [0.0, 0.0]
# Invented placeholders located per entry, at most (the violations list them all).
MAX_LOCATED = 20


@dataclass
class OutputCheck:
    """The compliance of one output text against its source."""
    components: dict[str, float]
    # Multiset of (kind, item) pairs.
    violations: Counter
    # [start, end) of each invented placeholder in the output.
    invented_spans: list[list[int]] = field(default_factory=list)

    @property
    def index(self) -> float:
        return sum(WEIGHTS[name] * value for name, value in self.components.items())


def check_output(source_placeholders: Counter, output: str, target: LanguageCard) -> OutputCheck:
    scan = scan_placeholders(output)
    integrity = variable_integrity(source_placeholders, scan.tokens)
    quotes = quote_compliance(scan.masked, target.quotes)
    casing = casing_compliance(scan.masked, target.casing)
    violations = Counter()
    violations.update(("missing_placeholder", item) for item in integrity.missing.elements())
    violations.update(("invented_placeholder", item) for item in integrity.invented.elements())
    violations.update(("disallowed_quote", item) for item in quotes.violations)
    violations.update(("latin_leakage", item) for item in casing.violations)
    return OutputCheck(
        components={"variable_integrity": integrity.score, "quotes": quotes.score, "casing": casing.score},
        violations=violations,
        invented_spans=_invented_spans(scan.located, integrity.invented),
    )


def _invented_spans(located: list[tuple[str, int, int]], invented: Counter) -> list[list[int]]:
    """Where the invented placeholders stand: of a placeholder the source has
    fewer copies of, the output's last copies are the invented ones."""
    spans = []
    for token, count in invented.items():
        spans += [[start, end] for name, start, end in located if name == token][-count:]
    return sorted(spans)[:MAX_LOCATED]


def _violation_labels(violations: Counter) -> list[str]:
    return [f"{kind}: {item}" for kind, item in sorted(violations.elements())]


def _failed_entry(entry: EntryInput) -> EntryOutput:
    # The method produced nothing: never rewarded, and no raw output to compare.
    return EntryOutput(
        id=entry.id,
        values={
            "compliance_index": 0.0,
            "compliance_index_raw": None,
            "compliance_components": None,
            "compliance_violations": [],
            "invented_placeholder_spans": [],
        },
        stats={"compliance_index": [0.0, 1.0], "compliance_index_raw": NO_RATE, "repair_effectiveness": NO_RATE},
    )


def score_entry(entry: EntryInput, target: LanguageCard) -> EntryOutput:
    if entry.failed:
        return _failed_entry(entry)
    source_placeholders = scan_placeholders(entry.source).tokens
    post = check_output(source_placeholders, entry.prediction, target)
    raw = None if entry.raw_prediction is None else check_output(source_placeholders, entry.raw_prediction, target)
    if raw is None:
        raw_stats, repair_stats = NO_RATE, NO_RATE
    else:
        fixed = raw.violations - post.violations
        raw_stats = [raw.index, 1.0]
        repair_stats = [float(sum(fixed.values())), float(sum(raw.violations.values()))]
    return EntryOutput(
        id=entry.id,
        values={
            "compliance_index": post.index,
            "compliance_index_raw": None if raw is None else raw.index,
            "compliance_components": dict(post.components),
            "compliance_violations": _violation_labels(post.violations),
            "invented_placeholder_spans": post.invented_spans,
        },
        stats={
            "compliance_index": [post.index, 1.0],
            "compliance_index_raw": raw_stats,
            "repair_effectiveness": repair_stats,
        },
    )


class ComplianceScorer:
    name = "compliance"
    version = __version__
    metrics = ("compliance_index", "compliance_index_raw", "repair_effectiveness")

    def languages(self) -> list[str]:
        return []

    def components(self) -> list[ComponentInfo]:
        return []

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        wanted = context.wanted(self.metrics)
        if not wanted:
            return BatchOutput(entries=[EntryOutput(id=entry.id, values={}, stats={}) for entry in entries])
        # The three share one check of each output: computed together, then
        # kept to those asked for.
        outputs = [score_entry(entry, context.target) for entry in entries]
        for output in outputs:
            for metric_id in set(self.metrics).difference(wanted):
                output.stats.pop(metric_id)
                output.values.pop(metric_id, None)
        return BatchOutput(entries=outputs, signatures=dict.fromkeys(wanted, SIGNATURE))
