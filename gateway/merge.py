"""Merging family answers into per-entry values and per-metric statistics."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from google.protobuf import json_format

from gateway.fanout import FamilyOutcome
from gateway.layout import FAMILIES

# A language's eval-standard plugin (run by the structural family) overrides
# the universal value of these metrics (DESIGN.md, "Language knowledge is data").
PLUGIN_OVERRIDES = {"equivalent_match_rate": "structural", "semantic_score": "structural"}


@dataclass
class MergedScores:
    # Per entry, in corpus order: metric id -> value (numbers, verdicts, None).
    entry_values: list[dict]
    # Metric id -> (entries x statistics) matrix, rows in corpus order.
    stats: dict[str, np.ndarray]
    signatures: dict[str, str] = field(default_factory=dict)
    # Metric id -> family that produced it.
    sources: dict[str, str] = field(default_factory=dict)
    # Run-level text values (e.g. comet_model), first answer wins.
    labels: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _takes_precedence(metric_id: str, family: str, current: str | None) -> bool:
    return current is None or PLUGIN_OVERRIDES.get(metric_id) == family


def merge_outcomes(outcomes: dict[str, FamilyOutcome], entry_count: int) -> MergedScores:
    merged = MergedScores(entry_values=[{} for _ in range(entry_count)], stats={})
    for family in FAMILIES:
        outcome = outcomes.get(family)
        if outcome is None or outcome.responses is None:
            continue
        rows: dict[str, list[list[float]]] = {}
        values_by_entry = []
        for response in outcome.responses:
            for entry in response.entries:
                values_by_entry.append(json_format.MessageToDict(entry.values))
                for metric_id, vector in entry.stats.items():
                    rows.setdefault(metric_id, []).append(list(vector.values))
            for metric_id, text in response.signatures.items():
                merged.signatures.setdefault(metric_id, text)
            for key, text in response.labels.items():
                merged.labels.setdefault(key, text)
            for warning in response.warnings:
                if f"{family}: {warning}" not in merged.warnings:
                    merged.warnings.append(f"{family}: {warning}")
        for metric_id, metric_rows in rows.items():
            if len(metric_rows) != entry_count:
                merged.warnings.append(
                    f"{family} returned {metric_id} statistics for {len(metric_rows)} of {entry_count} entries; ignored"
                )
                continue
            if _takes_precedence(metric_id, family, merged.sources.get(metric_id)):
                merged.stats[metric_id] = np.asarray(metric_rows, dtype=float)
                merged.sources[metric_id] = family
        for index, values in enumerate(values_by_entry):
            target = merged.entry_values[index]
            for metric_id, value in values.items():
                if metric_id not in target or PLUGIN_OVERRIDES.get(metric_id) == family:
                    target[metric_id] = value
    return merged
