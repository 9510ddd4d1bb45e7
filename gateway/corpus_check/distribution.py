"""Sizes and mixes (seed 001 §2.2, §3.3, §6.3): the corpus's size, the
entries per domain and per difficulty tier against the minimums, and the
shares against the targets."""
from __future__ import annotations

from collections import Counter

from champollion.core.corpus_rules import DOMAIN_TARGETS, RULE, TIER_TARGETS
from gateway.corpus_check.results import RuleResult, ids_text, plural, share


def _tier(entry: dict) -> int | None:
    value = entry.get("difficulty")
    return value if isinstance(value, int) and value in TIER_TARGETS else None


def _domain(entry: dict) -> str | None:
    value = entry.get("domain")
    return value if value in DOMAIN_TARGETS else None


def _table(counts: Counter, targets: dict, total: int) -> list[dict]:
    """One row per target group (absent ones too) and per group outside
    the targets: count, share, target and deviation (share - target)."""
    rows = []
    for key in [*targets, *sorted((k for k in counts if k not in targets), key=str)]:
        count = counts.get(key, 0)
        portion = count / total if total else 0.0
        target = targets.get(key)
        rows.append({"group": key, "count": count, "share": portion, "target": target,
                     "deviation": None if target is None else portion - target})
    return rows


def _below(rows: list[dict], limit: int, present_only: bool) -> list[str]:
    return [f"{row['group']} {row['count']}" for row in rows
            if row["target"] is not None and row["count"] < limit and (row["count"] or not present_only)]


def _off_target(rows: list[dict], tolerance: float) -> list[str]:
    return [f"{row['group']} {share(row['share'])} (target {share(row['target'])})" for row in rows
            if row["target"] is not None and abs(row["deviation"]) > tolerance + 1e-9]


def check_distribution(entries: list[dict], purpose: str) -> tuple[dict, list[RuleResult]]:
    total = len(entries)
    domains = Counter(entry.get("domain") or "(none)" for entry in entries)
    tiers = Counter(entry.get("difficulty") if entry.get("difficulty") is not None else "(none)"
                    for entry in entries)
    domain_rows = _table(domains, DOMAIN_TARGETS, total)
    tier_rows = _table(tiers, TIER_TARGETS, total)
    section = {"entries": total, "domains": domain_rows, "difficulty": tier_rows}

    results = []
    for rule_id in ("size_minimum", "size_recommended"):
        limit = RULE[rule_id].limit_for(purpose)
        results.append(RuleResult(rule_id, total >= limit,
                                  f"{plural(total, 'entry', 'entries')}; a {purpose} set needs {limit}"
                                  if total < limit else f"{plural(total, 'entry', 'entries')} (≥ {limit})"))

    unlabelled = [entry["id"] for entry in entries if _domain(entry) is None]
    untiered = [entry["id"] for entry in entries if _tier(entry) is None]
    problems = []
    if unlabelled:
        problems.append(f"{plural(len(unlabelled), 'entry', 'entries')} without a domain of "
                        f"{', '.join(DOMAIN_TARGETS)} ({ids_text(unlabelled)})")
    if untiered:
        problems.append(f"{plural(len(untiered), 'entry', 'entries')} without a difficulty tier 1-5 "
                        f"({ids_text(untiered)})")
    results.append(RuleResult("labels", not problems, "; ".join(problems) or "every entry has both"))

    for rule_id, rows, what, present_only in (
            ("domain_minimum", domain_rows, "domains", True), ("tier_minimum", tier_rows, "tiers", True),
            ("domain_recommended", domain_rows, "domains", False), ("tier_recommended", tier_rows, "tiers", False)):
        limit = RULE[rule_id].limit
        below = _below(rows, limit, present_only)
        results.append(RuleResult(rule_id, not below, f"{what} below {limit}: {', '.join(below)}" if below
                                  else f"every {what[:-1]}{' present' if present_only else ''} has {limit} or more"))
    for rule_id, rows, what in (("domain_mix", domain_rows, "domains"), ("tier_mix", tier_rows, "tiers")):
        tolerance = RULE[rule_id].limit
        off = _off_target(rows, tolerance)
        results.append(RuleResult(rule_id, not off, f"{what} off target by more than {tolerance * 100:.0f} points: "
                                                    f"{', '.join(off)}" if off else "every share within tolerance"))
    return section, results
