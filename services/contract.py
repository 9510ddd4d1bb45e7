"""The plain-Python side of the family contract.

Scorers work on these dataclasses, not on protobuf messages, so metric code
is testable without gRPC; ``FamilyServicer`` converts at the boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from champollion.core.cards import LanguageCard
# The entry and its terms are the core's, shared with the language plugins;
# they are part of this contract as well.
from champollion.core.entries import EntryInput, Term

__all__ = ["BatchContext", "BatchOutput", "ComponentInfo", "EntryInput", "EntryOutput", "FamilyScorer",
           "SplitScorer", "Term", "splits_work"]


@dataclass
class EntryOutput:
    id: str
    # Entry-level values by metric id: numbers, booleans, verdicts, None.
    values: dict[str, Any]
    # Sufficient statistics by metric id, summed by the gateway.
    stats: dict[str, list[float]]


@dataclass
class BatchOutput:
    entries: list[EntryOutput]
    signatures: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Run-level text values by run-card key (e.g. "comet_model").
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchContext:
    source: LanguageCard
    target: LanguageCard
    # The run's glossary.
    glossary: tuple[Term, ...] = ()
    # The run-card metrics to compute; None: all of the family's. A family
    # computes only those of its metrics listed here (none for an empty set).
    metrics: frozenset[str] | None = None
    # Whether the target language's eval-standard plugins run (structural).
    plugins: bool = True
    # The COMET model asked for (semantic); None: the target card's choice.
    comet_model: str | None = None

    def wants(self, metric_id: str) -> bool:
        """Whether the request asks for `metric_id`."""
        return self.metrics is None or metric_id in self.metrics

    def wanted(self, metric_ids) -> tuple[str, ...]:
        """Those of `metric_ids` the request asks for, in their order."""
        return tuple(metric_id for metric_id in metric_ids if self.wants(metric_id))


@dataclass(frozen=True)
class ComponentInfo:
    kind: str
    name: str
    version: str
    detail: str = ""


class FamilyScorer(Protocol):
    name: str
    version: str
    metrics: tuple[str, ...]

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput: ...

    def languages(self) -> list[str]:
        """Target languages served; empty means every carded language."""
        ...

    def components(self) -> list[ComponentInfo]: ...


class SplitScorer(FamilyScorer, Protocol):
    """A family whose work splits between its server process and the worker
    processes (services/workers.py). The workers compute
    ``score_in_worker``; the server adds ``finish_in_server`` to what they
    return, with the scorer it keeps. The semantic family does this so that
    its COMET models stay in the server, one copy per server (one on a GPU),
    and concurrent batches share their micro-batches. ``score`` must equal
    the two parts in turn."""

    def score_in_worker(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput: ...

    def finish_in_server(self, entries: list[EntryInput], context: BatchContext,
                         output: BatchOutput) -> BatchOutput: ...


def splits_work(scorer: FamilyScorer) -> bool:
    """Whether `scorer` keeps part of its work in its server (SplitScorer)."""
    return callable(getattr(scorer, "finish_in_server", None))
