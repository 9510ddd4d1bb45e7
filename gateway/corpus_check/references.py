"""Reference quality (seed 001 §2.3, §4.3, §4.4, §6.1): dual references on
the hardest tiers, documented variants, review by someone other than the
translator, provenance field by field, licences, recency, duplicates and
references left untranslated."""
from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime

from champollion.core.corpus_rules import DATE_FIELDS, LICENCE_CLASSES, RULE
from champollion.core.text import normalise_for_match
from gateway.corpus_check.results import RuleResult, ids_text, plural

_LICENCE_SEPARATORS = re.compile(r"[\s_]+")
_LICENCE_CLASSES = tuple((name, re.compile(pattern)) for name, pattern in LICENCE_CLASSES)
_DATE = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")
# A near-duplicate's skeleton: letters only, digits as '#', case folded.
_NOT_LETTER_OR_DIGIT = re.compile(r"[^\w]|_")
_DIGITS = re.compile(r"\d+")


def _given(value) -> bool:
    return value not in (None, "", [], {}) and not (isinstance(value, str) and not value.strip())


def _provenance(entry: dict) -> dict:
    provenance = entry.get("provenance")
    return provenance if isinstance(provenance, dict) else {}


def licence_class(licence: str) -> str:
    """allowed, needs review, not allowed or unknown."""
    normalised = _LICENCE_SEPARATORS.sub("-", licence.strip().upper())
    for name, pattern in _LICENCE_CLASSES:
        if pattern.search(normalised):
            return name
    return "unknown"


def parse_date(value) -> date | None:
    """YYYY, YYYY-MM or YYYY-MM-DD (a later time part ignored); None otherwise."""
    found = _DATE.match(str(value).strip()) if value is not None else None
    if not found:
        return None
    year, month, day = (int(part) if part else 1 for part in found.groups())
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _same_person(a, b) -> bool:
    return normalise_for_match(str(a)).casefold() == normalise_for_match(str(b)).casefold()


def _skeleton(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_LETTER_OR_DIGIT.sub(" ", _DIGITS.sub("#", folded)).split())


def _groups(keys: dict[str, str]) -> list[list[str]]:
    """Entry ids sharing a key, groups of two or more, in first-seen order."""
    by_key: dict[str, list[str]] = {}
    for entry_id, key in keys.items():
        if key:
            by_key.setdefault(key, []).append(entry_id)
    return [ids for ids in by_key.values() if len(ids) > 1]


def _groups_text(groups: list[list[str]]) -> str:
    shown = "; ".join(" = ".join(ids[:3]) + (" ..." if len(ids) > 3 else "") for ids in groups[:3])
    return shown + (f"; ... ({len(groups)} groups)" if len(groups) > 3 else "")


def _dual_references(entries: list[dict]) -> tuple[dict, RuleResult]:
    tiers = RULE["dual_references"].limit
    hard = [entry for entry in entries if entry.get("difficulty") in tiers]
    single = [entry["id"] for entry in hard if not any(_given(r) for r in entry.get("extra_references") or ())]
    section = {"tiers": list(tiers), "entries": len(hard), "with_second_reference": len(hard) - len(single),
               "without": single}
    label = "-".join(str(t) for t in (tiers[0], tiers[-1]))
    if not hard:
        return section, RuleResult("dual_references", True, f"no tier {label} entries")
    return section, RuleResult(
        "dual_references", not single,
        f"{len(single)} of {len(hard)} tier {label} entries have one reference only ({ids_text(single)})"
        if single else f"all {len(hard)} tier {label} entries have a second reference")


def _variants(entries: list[dict]) -> tuple[dict, RuleResult]:
    without = [entry["id"] for entry in entries if not any(_given(v) for v in entry.get("acceptable_variants") or ())]
    section = {"with_variants": len(entries) - len(without), "without": len(without)}
    return section, RuleResult("acceptable_variants", not without,
                               f"{len(without)} of {len(entries)} entries document no acceptable variant "
                               f"({ids_text(without)})" if without else "every entry documents variants")


def _review(entries: list[dict]) -> tuple[dict, RuleResult]:
    unreviewed, self_reviewed = [], []
    for entry in entries:
        provenance = _provenance(entry)
        if not _given(provenance.get("reviewer")):
            unreviewed.append(entry["id"])
        elif _given(provenance.get("translator")) and _same_person(provenance["reviewer"], provenance["translator"]):
            self_reviewed.append(entry["id"])
    section = {"reviewed_by_another": len(entries) - len(unreviewed) - len(self_reviewed),
               "no_reviewer": len(unreviewed), "reviewer_is_translator": self_reviewed}
    problems = []
    if unreviewed:
        problems.append(f"{len(unreviewed)} entries name no reviewer ({ids_text(unreviewed)})")
    if self_reviewed:
        problems.append(f"{len(self_reviewed)} reviewed by their own translator ({ids_text(self_reviewed)})")
    return section, RuleResult("community_review", not problems, "; ".join(problems) or
                               "every entry reviewed by another person")


def _provenance_fields(entries: list[dict]) -> tuple[dict, RuleResult]:
    fields = RULE["provenance"].limit
    missing = {name: [entry["id"] for entry in entries if not _given(_provenance(entry).get(name))]
               for name in fields}
    section = {"fields": {name: {"given": len(entries) - len(ids), "missing": len(ids)}
                          for name, ids in missing.items()}}
    lacking = [f"{name} missing on {len(ids)} ({ids_text(ids, 3)})" for name, ids in missing.items() if ids]
    return section, RuleResult("provenance", not lacking,
                               "; ".join(lacking) if lacking else f"all {len(fields)} fields on every entry")


def _licences(entries: list[dict]) -> tuple[dict, list[RuleResult]]:
    by_class: dict[str, dict[str, list[str]]] = {}
    for entry in entries:
        licence = _provenance(entry).get("source_license")
        if _given(licence):
            by_class.setdefault(licence_class(str(licence)), {}).setdefault(str(licence), []).append(entry["id"])
    section = {name: {licence: len(ids) for licence, ids in found.items()} for name, found in by_class.items()}

    def named(name: str) -> str:
        found = by_class.get(name, {})
        return ", ".join(f"{licence!r} ({ids_text(ids, 3)})" for licence, ids in found.items())

    bad = [f"{name}: {named(name)}" for name in ("not allowed", "unknown") if by_class.get(name)]
    results = [RuleResult("licence", not bad, "; ".join(bad) if bad else "every licence given allows evaluation use"
                          if by_class else "no entry names a licence (see provenance)")]
    review = named("needs review")
    results.append(RuleResult("licence_review", not review, f"needs review: {review}" if review
                              else "none needs review"))
    return section, results


def _recency(entries: list[dict], today: date) -> tuple[dict, RuleResult]:
    years = RULE["recency"].limit
    cutoff = date(today.year - years, today.month, min(today.day, 28))
    dated_by = {name: 0 for name in DATE_FIELDS}
    old, undated = [], 0
    for entry in entries:
        provenance = _provenance(entry)
        found = next(((name, parse_date(provenance.get(name))) for name in DATE_FIELDS
                      if parse_date(provenance.get(name))), None)
        if found is None:
            undated += 1
            continue
        dated_by[found[0]] += 1
        if found[1] < cutoff:
            old.append(entry["id"])
    section = {"dated_by": dated_by, "undated": undated, "older_than_years": years, "older": old}
    if undated == len(entries):
        return section, RuleResult("recency", None, "no entry carries a date")
    return section, RuleResult("recency", not old,
                               f"{len(old)} entries dated more than {years} years ago ({ids_text(old)})" if old
                               else f"every dated entry is from the last {years} years"
                               + (f" ({undated} undated)" if undated else ""))


def _duplicates(entries: list[dict]) -> tuple[dict, list[RuleResult]]:
    ids = [entry["id"] for entry in entries]
    sources = _groups({entry["id"]: normalise_for_match(entry.get("source", "")) for entry in entries})
    references = _groups({entry["id"]: normalise_for_match(entry.get("reference", "")) for entry in entries})
    exact_sources = {entry_id for group in sources for entry_id in group}
    near_sources = [group for group in _groups({i: _skeleton(e.get("source", "")) for i, e in zip(ids, entries)})
                    if not set(group) <= exact_sources]
    near_references = _groups({i: _skeleton(e.get("reference", "")) for i, e in zip(ids, entries)})
    exact_references = {entry_id for group in references for entry_id in group}
    near_references = [group for group in near_references if not set(group) <= exact_references]
    untranslated = [entry["id"] for entry in entries if entry.get("source") and
                    normalise_for_match(entry["source"]).casefold() ==
                    normalise_for_match(entry.get("reference", "")).casefold()]
    section = {"duplicate_sources": sources, "duplicate_references": references,
               "near_duplicate_sources": near_sources, "near_duplicate_references": near_references,
               "reference_is_source": untranslated}
    results = [RuleResult("duplicates", not sources, f"{plural(len(sources), 'source')} appear more than once: "
                          f"{_groups_text(sources)}" if sources else "every source once")]
    near = []
    if references:
        near.append(f"same reference: {_groups_text(references)}")
    if near_sources:
        near.append(f"near-duplicate sources: {_groups_text(near_sources)}")
    if near_references:
        near.append(f"near-duplicate references: {_groups_text(near_references)}")
    results.append(RuleResult("near_duplicates", not near, "; ".join(near) or "none"))
    results.append(RuleResult("untranslated", not untranslated,
                              f"{len(untranslated)} references equal their source ({ids_text(untranslated)})"
                              if untranslated else "none"))
    return section, results


def check_references(entries: list[dict], now: datetime) -> tuple[dict, list[RuleResult]]:
    section, results = {}, []
    for name, check in (("dual_references", _dual_references), ("acceptable_variants", _variants),
                        ("review", _review), ("provenance", _provenance_fields)):
        section[name], result = check(entries)
        results.append(result)
    section["licences"], found = _licences(entries)
    results += found
    section["recency"], result = _recency(entries, now.date())
    results.append(result)
    section["duplicates"], found = _duplicates(entries)
    results += found
    return section, results
