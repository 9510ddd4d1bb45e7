"""What every part of the check gives back: one result per rule, its
finding in one line. Findings name entries by id and never quote a text:
a registered holdout's check summary is listed to submitters."""
from __future__ import annotations

from dataclasses import dataclass

from champollion.core.corpus_rules import IDS_SHOWN, POWER_METRIC, RULE
from gateway.card.metrics import LABELS


@dataclass(frozen=True)
class RuleResult:
    rule: str
    # None: the rule does not apply (e.g. rotation of a file never registered).
    passed: bool | None
    finding: str

    def as_dict(self) -> dict:
        rule = RULE[self.rule]
        return {"rule": self.rule, "severity": rule.severity, "asks": with_label(rule.asks), "source": rule.source,
                "passed": self.passed, "finding": self.finding}


def with_label(text: str) -> str:
    """The rules' words with the power metric's label (corpus_rules'
    "{metric}")."""
    return text.replace("{metric}", LABELS[POWER_METRIC])


def ids_text(ids: list[str], shown: int = IDS_SHOWN) -> str:
    """'es-001, es-002, ... (36)': the first ids and how many in all."""
    listed = ", ".join(ids[:shown])
    return f"{listed}, ... ({len(ids)})" if len(ids) > shown else listed


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else (words or word + 's')}"


def share(value: float) -> str:
    return f"{value:.0%}"
