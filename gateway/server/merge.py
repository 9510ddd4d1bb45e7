"""Merging family answers: per-metric statistics of the whole run, then the
values of each entry, batch by batch, from the answers kept in the run's
spill."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
from google.protobuf import struct_pb2

from champollion.eval.v1 import family_pb2
from champollion.core.sacrebleu_adapter import merged_signature
from gateway.card.metrics import FAMILIES, PLUGIN_OVERRIDES, may_provide
from gateway.server.spill import RunSpill


@dataclass
class MergedStatistics:
    # Metric id -> (entries x statistics) matrix, rows in corpus order.
    stats: dict[str, np.ndarray]
    signatures: dict[str, str] = field(default_factory=dict)
    # Metric id -> family that produced it.
    sources: dict[str, str] = field(default_factory=dict)
    # Run-level text values (e.g. comet_model), first answer wins.
    labels: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def keep_only(self, keys: frozenset[str]) -> None:
        """Leaves out the metrics (statistics, signatures, labels) not in
        `keys`: a run that asked for some metrics only."""
        for found in (self.stats, self.signatures, self.sources, self.labels):
            for key in [key for key in found if key not in keys]:
                del found[key]


def _takes_precedence(metric_id: str, family: str, current: str | None) -> bool:
    """A language's eval-standard plugin overrides the universal value (DESIGN.md,
    "Language knowledge is data"); the metric table names the plugin's family."""
    return current is None or PLUGIN_OVERRIDES.get(metric_id) == family


def _family_rows(family: str, responses: Iterable[family_pb2.ScoreBatchResponse], merged: MergedStatistics):
    """Metric id -> list of per-batch row blocks, from one family's answers;
    its signatures, labels and warnings go into `merged`."""
    blocks: dict[str, list[np.ndarray]] = {}
    for response in responses:
        # Per metric, its rows' values end to end and each row's length:
        # numpy reads a flat list several times faster than one of
        # repeated fields (0.19 of 0.29 s for 10,000 entries).
        rows: dict[str, tuple[list, list[int]]] = {}
        for entry in response.entries:
            for metric_id, vector in entry.stats.items():
                values, lengths = rows.setdefault(metric_id, ([], []))
                values.extend(vector.values)
                lengths.append(len(vector.values))
        for metric_id, (values, lengths) in rows.items():
            if min(lengths) != max(lengths):
                raise ValueError(f"{family} returned {metric_id} statistics of {min(lengths)} and {max(lengths)} "
                                 f"values in one batch")
            blocks.setdefault(metric_id, []).append(np.array(values, dtype=float).reshape(len(lengths), lengths[0]))
        for metric_id, text in response.signatures.items():
            merged.signatures[metric_id] = merged_signature(merged.signatures.get(metric_id), text)
        for key, text in response.labels.items():
            merged.labels.setdefault(key, text)
        for warning in response.warnings:
            if f"{family}: {warning}" not in merged.warnings:
                merged.warnings.append(f"{family}: {warning}")
    return blocks


def merge_statistics(spill: RunSpill, families: Iterable[str], entry_count: int) -> MergedStatistics:
    """Statistics of every metric of the `families` that answered the whole run."""
    merged = MergedStatistics(stats={})
    answered = set(families)
    for family in FAMILIES:
        if family not in answered:
            continue
        for metric_id, blocks in _family_rows(family, spill.responses(family), merged).items():
            if not may_provide(family, metric_id):
                merged.warnings.append(f"{family} returned statistics for {metric_id}, not one of its metrics; ignored")
                continue
            rows = sum(block.shape[0] for block in blocks)
            if rows != entry_count:
                merged.warnings.append(
                    f"{family} returned {metric_id} statistics for {rows} of {entry_count} entries; ignored"
                )
                continue
            if _takes_precedence(metric_id, family, merged.sources.get(metric_id)):
                merged.stats[metric_id] = np.concatenate(blocks)
                merged.sources[metric_id] = family
    return merged


def merge_entry_scores(responses: dict[str, family_pb2.ScoreBatchResponse], scores: list[struct_pb2.Struct]) -> None:
    """Per entry of one batch, the families' values (metric id -> number,
    verdict, None) merged into its Struct: where several families give a
    value, the first's in FAMILIES order, a language plugin's over the
    universal one (PLUGIN_OVERRIDES). Merged as messages, not as Python
    values and back (a fifth of the time: 0.07 against 0.34 s for 10,000
    entries)."""
    for family in reversed(FAMILIES):  # a later merge replaces a value: the first family's stays
        response = responses.get(family)
        if response is not None:
            for target, entry in zip(scores, response.entries):
                target.MergeFrom(entry.values)
    for metric_id, family in PLUGIN_OVERRIDES.items():
        response = responses.get(family)
        if response is not None:
            for target, entry in zip(scores, response.entries):
                if metric_id in entry.values.fields:
                    target.fields[metric_id].CopyFrom(entry.values.fields[metric_id])
