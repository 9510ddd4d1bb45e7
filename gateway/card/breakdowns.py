"""Breakdowns of a run by difficulty tier and provenance, per-tier
confidence intervals, and corpus-size warnings (seed 001 §6.3)."""
from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np

from champollion.core.corpus_rules import POWER_METRIC, RULE, RULE_OF_THUMB
from gateway.card.bootstrap import confidence_intervals, missing_interval_warnings
from gateway.card.composite import compute_composite
from gateway.card.corpus import corpus_values
from gateway.card.metrics import LABELS, TIER_CI_METRICS, WEIGHTS

# Minimum corpus sizes for statistical reliability (seed 001 §6.3), from the
# corpus rules' table: an evaluation set is a holdout's minimum.
MIN_EVALUATION_ENTRIES = RULE["size_minimum"].limit["holdout"]
MIN_DEV_ENTRIES = RULE["size_minimum"].limit["dev"]
MIN_PER_GROUP = RULE["domain_minimum"].limit


def rows_by_key(keys: list[str | None]) -> dict[str, list[int]]:
    """Entry positions grouped by key (None: in no group), keys sorted."""
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        if key is not None:
            groups.setdefault(key, []).append(index)
    return dict(sorted(groups.items()))


def group_scores(stats: dict[str, np.ndarray], rows: np.ndarray, profile: str,
                 composite_stats: dict[str, np.ndarray] | None = None) -> dict:
    """The group's metrics from `stats`, its composite from `composite_stats`
    (the adequacy-gated statistics; `stats` when not given)."""
    values = corpus_values(stats, rows)
    gated = values if composite_stats is None else corpus_values(
        {m: composite_stats[m] for m in WEIGHTS[profile] if m in composite_stats}, rows)
    return {
        "n": int(rows.size),
        "chrf_plus_plus": values.get("chrf_plus_plus"),
        "exact_match_rate": values.get("exact_match_rate"),
        "composite": compute_composite(gated, profile).value,
    }


def breakdown(keys: list[str | None], stats: dict[str, np.ndarray], profile: str,
              composite_stats: dict[str, np.ndarray] | None = None) -> dict:
    """n, chrF++, exact match and composite of each group of entries."""
    return {key: group_scores(stats, np.asarray(rows), profile, composite_stats)
            for key, rows in rows_by_key(keys).items()}


def provenance_key(entry) -> str | None:
    """The group of an entry in `by_provenance`: its provenance.source_doc."""
    if not entry.HasField("provenance"):
        return None
    fields = entry.provenance.fields
    return fields["source_doc"].string_value if "source_doc" in fields else None


def size_warnings(total: int, domains: Counter, difficulties: Counter) -> list[str]:
    """Warnings on a corpus of `total` entries, given how many entries each
    domain and difficulty tier has."""
    warnings = []
    if total < MIN_DEV_ENTRIES:
        warnings.append(f"corpus has {total} entries, below the {MIN_DEV_ENTRIES}-entry minimum of a development set")
    if total < MIN_EVALUATION_ENTRIES:
        warnings.append(
            f"corpus has {total} entries, below the {MIN_EVALUATION_ENTRIES}-entry minimum of an evaluation set: "
            f"the paired bootstrap cannot detect differences under about {RULE_OF_THUMB[0][1]:g} "
            f"{LABELS[POWER_METRIC]} points"
        )
    for label, counts in (("domain", domains), ("difficulty tier", difficulties)):
        small = sorted((key, n) for key, n in counts.items() if n < MIN_PER_GROUP)
        if small:
            listed = ", ".join(f"{key} ({n})" for key, n in small)
            warnings.append(f"fewer than {MIN_PER_GROUP} entries per {label}: {listed}; their scores are unstable")
    return warnings


def tier_intervals(difficulties: list[str | None], stats: dict[str, np.ndarray], resamples: int,
                   seed: int) -> tuple[dict, list[str]]:
    """The per-tier intervals of each difficulty tier, each tier resampled on
    its own (as if it were a corpus), and warnings naming those missing."""
    tier_stats = {m: stats[m] for m in TIER_CI_METRICS if m in stats}
    intervals, warnings = {}, []
    for tier, rows in rows_by_key(difficulties).items():
        subset = {m: matrix[rows] for m, matrix in tier_stats.items()}
        found = confidence_intervals(subset, {}, resamples, seed, TIER_CI_METRICS)
        if found.found:
            intervals[tier] = found.found
        warnings += missing_interval_warnings(found.missing, f"in difficulty tier {tier}")
    return intervals, warnings


# --- what a non-maintainer is shown of a secret-tier corpus's card ---------------
# Nothing a submitter sees is a function of fewer than this many entries of a
# holdout or gold corpus (docs/integrity-and-access.md, "Nothing about fewer
# than k entries"): the corpus rules' minimum per group, one number.
MIN_SHOWN_ENTRIES = MIN_PER_GROUP
# A deployment may raise or lower it for the gateway and the web front alike
# (they read the same store, not the same configuration file).
MIN_SHOWN_ENV = "CHAMPOLLION_MIN_GROUP_ENTRIES"


def min_shown_entries() -> int:
    """k: MIN_SHOWN_ENTRIES, or the whole number ($MIN_SHOWN_ENV) a
    deployment sets; ValueError naming the variable for anything else."""
    text = os.environ.get(MIN_SHOWN_ENV, "").strip()
    if not text:
        return MIN_SHOWN_ENTRIES
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{MIN_SHOWN_ENV}: must be a whole number of entries, 1 or more, got {text!r}")
    return int(text)
# The values of a group (GroupScores) that are computed from its entries; `n` is not (a
# difficulty tier's size is public with the sources).
GROUP_VALUES = ("chrf_plus_plus", "exact_match_rate", "composite")
# Score keys that are the submitter's own (usage, timing) or the corpus's size:
# never computed from the references.
# The run's size and its own speed (from the submitter's timings): what a
# secret-tier run still shows when every score is withheld (redaction.ladder_only).
SIZE_AND_SPEED_KEYS = frozenset({"total", "evaluated", "errors", "tokens_per_second", "entries_per_minute",
                                 "avg_latency_seconds", "median_latency_seconds", "p95_latency_seconds"})
OWN_SCORE_KEYS = SIZE_AND_SPEED_KEYS | {"comet_model", "by_difficulty", "by_provenance", "confidence_intervals",
                                        "confidence_intervals_by_tier", "quality_tier"}
_TIER_SCOPE = re.compile(r" in difficulty tier (\S+): ")


def withheld_reason(tier: str, what: str, k: int = MIN_SHOWN_ENTRIES) -> str:
    return (f"{what} withheld: on a {tier} corpus a value computed from fewer than {k} entries is for "
            f"maintainers only (nothing a submitter sees is a function of fewer than {k} of its entries)")


def _small_groups(groups: dict, k: int) -> tuple[dict, set[str], list[str]]:
    """`groups` (a breakdown) with the values of each group of fewer than `k`
    entries null, those groups' names, and each with its size. When the groups
    withheld cover fewer than `k` entries together, the smallest shown ones
    are withheld too, until they cover `k` (or none is left): the corpus's own
    value less the shown groups' would otherwise give the few entries'."""
    sizes = {name: (group or {}).get("n") for name, group in (groups or {}).items()}
    withheld = {name for name, n in sizes.items() if not (isinstance(n, int) and n >= k)}
    shown = sorted((n, name) for name, n in sizes.items() if name not in withheld)
    while withheld and shown and sum(sizes[name] or 0 for name in withheld) < k:
        withheld.add(shown.pop(0)[1])
    kept, small = {}, []
    for name, group in (groups or {}).items():
        if name not in withheld:
            kept[name] = group
            continue
        n = sizes[name]
        kept[name] = {**(group or {}), **{key: None for key in GROUP_VALUES}}
        small.append(f"{name} ({n} entr{'y' if n == 1 else 'ies'})")
    return kept, withheld, small


def _counted_view(adequacy: dict, k: int) -> tuple[dict, bool]:
    """The adequacy block with every count that sets apart fewer than `k`
    entries (on either side: a gate's few failures, or the few entries that
    passed) withheld; whether its rate and inadequate count are."""
    entries = adequacy.get("entries") or 0

    def shown(count) -> bool:
        return isinstance(count, int) and count >= k and entries - count >= k

    gates = {gate: count for gate, count in (adequacy.get("gates") or {}).items() if shown(count)}
    if shown(adequacy.get("inadequate")):
        return {**adequacy, "gates": gates}, False
    # The block counts nothing: `inadequate` and `entries` are integers in the card's form.
    return {**adequacy, "rate": None, "entries": 0, "inadequate": 0, "gates": gates}, True


def fewer_than_k_withheld(card: dict, tier: str, k: int = MIN_SHOWN_ENTRIES) -> dict:
    """A copy of a secret-tier corpus's corpus-level `card` as a
    non-maintainer sees it: every value computed from fewer than `k` of the
    corpus's entries null, with a warning giving the reason. Groups (difficulty
    tiers, provenance documents) of fewer than `k` entries lose their values
    and intervals, decided by their size alone (public with the sources); the
    adequacy counts, each a count of entries with a property that reads the
    references, are withheld when they set apart fewer than `k` entries, and
    adequacy_rate (one of them over the corpus size) with them; a corpus of
    fewer than `k` entries shows no score at all."""
    scores = dict(card.get("scores") or {})
    notes = []
    by_difficulty, withheld_tiers, small_tiers = _small_groups(scores.get("by_difficulty"), k)
    by_provenance, _, small_documents = _small_groups(scores.get("by_provenance"), k)
    if "by_difficulty" in scores:
        scores["by_difficulty"] = by_difficulty
    if "by_provenance" in scores:
        scores["by_provenance"] = by_provenance
    # A tier's interval is shown only beside its shown breakdown (a tier the breakdown lacks: withheld).
    large = set(by_difficulty) - withheld_tiers
    tier_intervals_ = scores.get("confidence_intervals_by_tier") or {}
    dropped = sorted(set(tier_intervals_) - large)
    if "confidence_intervals_by_tier" in scores:
        scores["confidence_intervals_by_tier"] = {name: found for name, found in tier_intervals_.items()
                                                  if name in large}
    if small_tiers or dropped:
        listed = ", ".join(small_tiers) or ", ".join(dropped)
        notes.append(withheld_reason(tier, f"by_difficulty and confidence_intervals_by_tier of difficulty tier "
                                           f"{listed}", k))
    if small_documents:
        notes.append(withheld_reason(tier, f"by_provenance of {len(small_documents)} group(s)", k))
    adequacy = card.get("adequacy")
    withheld_adequacy = False
    if adequacy:
        adequacy, withheld_adequacy = _counted_view(adequacy, k)
        if withheld_adequacy:
            scores["adequacy_rate"] = None
            intervals = dict(scores.get("confidence_intervals") or {})
            intervals.pop("adequacy_rate", None)
            scores["confidence_intervals"] = intervals
            notes.append(withheld_reason(tier, "adequacy_rate and the adequacy gates' counts", k) +
                         "; a count of entries is shown when it and the rest both cover at least that many")
        elif len(adequacy["gates"]) < len(card["adequacy"].get("gates") or {}):
            notes.append(withheld_reason(tier, "the counts of adequacy gates failed by fewer entries", k))
    total = scores.get("total")
    if isinstance(total, int) and total < k:
        for key in list(scores):
            if key not in OWN_SCORE_KEYS:
                scores[key] = None
        scores["confidence_intervals"] = {}
        scores["confidence_intervals_by_tier"] = {}
        scores["quality_tier"] = "unscored"
        notes.append(withheld_reason(tier, f"every score (the corpus has {total} entries)", k))
    # A missing interval's reason reads a withheld tier's entries (e.g. all resamples equal).
    warnings = [warning for warning in card.get("warnings") or []
                if not ((match := _TIER_SCOPE.search(warning)) and match.group(1) not in large)]
    found = {**card, "scores": scores, "warnings": [*warnings, *notes]}
    if adequacy:
        found["adequacy"] = adequacy
    return found
