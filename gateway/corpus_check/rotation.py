"""Rotation (seed 001 §5.3): how long a registered version has been in its
tier, and whether a holdout is due for replacement."""
from __future__ import annotations

from datetime import datetime

from champollion.core.corpus_rules import RULE
from gateway.corpus_check.results import RuleResult

DAYS_PER_MONTH = 365.25 / 12


def months_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds() / 86400 / DAYS_PER_MONTH


def check_rotation(history: list[dict] | None, now: datetime) -> tuple[dict | None, RuleResult]:
    """`history`: the registered version's tier spans ({tier, since, ...},
    oldest first); None for a corpus that is not registered."""
    if not history:
        return None, RuleResult("rotation", None, "not a registered corpus: no tier history")
    current = history[-1]
    months = months_between(datetime.fromisoformat(current["since"]), now)
    limit = RULE["rotation"].limit
    section = {"history": history, "tier": current["tier"], "months_in_tier": round(months, 1),
               "rotate_after_months": limit}
    if current["tier"] != "holdout":
        return section, RuleResult("rotation", None, f"{current['tier']} for {months:.1f} months; rotation "
                                                     "applies to holdout sets")
    if months < limit:
        section["advice"] = f"replace after {limit} months in use: {limit - months:.1f} months left"
        return section, RuleResult("rotation", True, f"holdout for {months:.1f} months (of {limit})")
    section["advice"] = ("start building its successor; once the successor is promoted to holdout, retire this "
                         "version to dev (`champollion corpus retire ID --version N --to dev`)")
    return section, RuleResult("rotation", False, f"holdout for {months:.1f} months (more than {limit}): "
                                                  f"{section['advice']}")
