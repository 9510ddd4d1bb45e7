"""The corpus check: a corpus against the design framework's rules (the
table in champollion/core/corpus_rules.py; README "Corpus check").

`check_corpus` gives the whole report (a dict: every rule's result, then
each part's details); `summary_of` the part kept with a registered version
(rules and findings, no text of any entry); `gate_failures` the findings
that refuse registering or promoting a version to holdout or gold.
Modules: distribution (sizes, mixes), phenomena, references (reference
quality, provenance, licences, duplicates), coverage (analyzers), power,
rotation."""
from __future__ import annotations

from datetime import datetime, timezone

from champollion.core.analyzers import AnalyzerRegistry
from champollion.core.cards import CardRegistry, UnknownLanguage
from champollion.core.corpus_rules import GATE_RULES, POWER, PURPOSES, RECOMMENDED, REQUIRED, RULES
from champollion.core.tiers import GATED_TIERS
from gateway.card.compare import ComparableRun
from gateway.corpus_check.coverage import analyzer_coverage
from gateway.corpus_check.distribution import check_distribution
from gateway.corpus_check.phenomena import check_phenomena
from gateway.corpus_check.power import PilotRefused, check_power, pilot_from_card
from gateway.corpus_check.references import check_references
from gateway.corpus_check.rotation import check_rotation

__all__ = ["CheckRefused", "PilotRefused", "check_corpus", "gate_failures", "pilot_from_card", "refusal", "summary_of"]


class CheckRefused(ValueError):
    """The check cannot run as asked (an unknown purpose)."""


def _card(cards: CardRegistry, code: str, side: str):
    try:
        return cards.get(code), None
    except UnknownLanguage:
        return None, f"no language card for the {side} language {code!r}: its phenomena are unknown"


def check_corpus(corpus: dict, purpose: str, cards: CardRegistry, analyzers: AnalyzerRegistry | None = None,
                 pilots: list[tuple[str, ComparableRun]] | None = None, registered: dict | None = None,
                 now: datetime | None = None, power_settings=None) -> dict:
    """`corpus`: {id, source_lang, target_lang, entries: [corpus file entries]};
    `analyzers`: where the target analyzer is loaded from (None: coverage
    not computed); `pilots`: (name, run card) of pilot systems for the power
    estimate (pilot_from_card; ComparableRun.from_proto); `registered`: the store's corpus_info when the corpus is a
    registered version (its tier history). Raises CheckRefused, PilotRefused."""
    if purpose not in PURPOSES:
        raise CheckRefused(f"purpose: unknown purpose {purpose!r}; purposes: {', '.join(PURPOSES)}")
    now = now or datetime.now(timezone.utc)
    entries = corpus["entries"]
    target, target_problem = _card(cards, corpus["target_lang"], "target")
    source, source_problem = _card(cards, corpus["source_lang"], "source")
    results = []
    report = {"corpus": {key: corpus.get(key) for key in ("id", "source_lang", "target_lang")},
              "purpose": purpose, "checked_at": now.isoformat()}
    if registered:
        report["corpus"].update({key: registered[key] for key in ("version", "number", "tier")})
    report["distribution"], found = check_distribution(entries, purpose)
    results += found
    report["phenomena"], found = check_phenomena(entries, target, source, target_problem or source_problem)
    results += found
    report["references"], found = check_references(entries, now)
    results += found
    report["analyzer_coverage"] = (analyzer_coverage(entries, target, analyzers) if target
                                   else {"language": corpus["target_lang"], "analyzer": None, "note": target_problem})
    report["power"], result = check_power(len(entries), purpose, pilots, power_settings or POWER)
    results.append(result)
    report["rotation"], result = check_rotation(registered["history"] if registered else None, now)
    results.append(result)
    order = {rule.id: index for index, rule in enumerate(RULES)}
    rules = [result.as_dict() for result in sorted(results, key=lambda r: order[r.rule])]
    failures = [f"{rule['rule']}: {rule['finding']}" for rule in rules
                if rule["passed"] is False and rule["severity"] == REQUIRED]
    advice = [f"{rule['rule']}: {rule['finding']}" for rule in rules
              if rule["passed"] is False and rule["severity"] == RECOMMENDED]
    return {**report, "passed": not failures, "failures": failures, "advice": advice, "rules": rules}


def summary_of(report: dict) -> dict:
    """What is kept with a registered version and listed to anyone: the
    verdict and the rules' findings (ids and counts, never entry text)."""
    return {"purpose": report["purpose"], "passed": report["passed"], "checked_at": report["checked_at"],
            "failures": report["failures"], "advice": report["advice"],
            "gate_failures": gate_failures(report)}


def gate_failures(report: dict) -> list[str]:
    """The findings that keep a version out of holdout and gold: its size
    below the purpose's minimums, missing provenance."""
    if report["purpose"] not in GATED_TIERS:
        return []
    return [f"{rule['rule']}: {rule['finding']}" for rule in report["rules"]
            if rule["rule"] in GATE_RULES and rule["passed"] is False]


def refusal(corpus_id: str, tier: str, failures: list[str]) -> str:
    """One line: why the version cannot enter `tier`, and how to go on."""
    return (f"corpus {corpus_id!r} fails the corpus check for {tier}: {' | '.join(failures)}. A maintainer may "
            f"accept the failures with a reason (accept_check_failures, --accept-check-failures REASON)")
