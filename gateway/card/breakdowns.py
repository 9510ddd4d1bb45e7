"""Breakdowns of a run by difficulty tier and provenance, per-tier
confidence intervals, and corpus-size warnings (seed 001 §6.3)."""
from __future__ import annotations

from collections import Counter

import numpy as np

from champollion.core.corpus_rules import RULE, RULE_OF_THUMB
from gateway.card.bootstrap import confidence_intervals, missing_interval_warnings
from gateway.card.composite import compute_composite
from gateway.card.corpus import corpus_values
from gateway.card.metrics import TIER_CI_METRICS, WEIGHTS

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
            f"the paired bootstrap cannot detect differences under about {RULE_OF_THUMB[0][1]:g} chrF++ points"
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
