"""The plain-Python side of the family contract.

Scorers work on these dataclasses, not on protobuf messages, so metric code
is testable without gRPC; ``FamilyServicer`` converts at the boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from champollion.cards import LanguageCard


@dataclass(frozen=True)
class EntryInput:
    id: str
    source: str
    reference: str
    prediction: str
    acceptable_variants: tuple[str, ...] = ()
    raw_prediction: str | None = None
    # The method failed on this entry; `prediction` is then empty.
    failed: bool = False
    # Gold morphology: (reference word, features its translation must show).
    morphology: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Terms prescribed for this entry only.
    terms: tuple["Term", ...] = ()
    # References beyond the primary `reference` (sacreBLEU's further reference streams).
    extra_references: tuple[str, ...] = ()

    @property
    def references(self) -> tuple[str, ...]:
        """Every reference, the primary first."""
        return (self.reference, *self.extra_references)


@dataclass(frozen=True)
class Term:
    """A glossary term: `source` in the entry's source asks for `target` (or
    an alternative) in the output."""
    source: str
    target: str
    alternatives: tuple[str, ...] = ()

    @property
    def renderings(self) -> tuple[str, ...]:
        return (self.target, *self.alternatives)


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
    options: dict[str, str]
    # The run's glossary.
    glossary: tuple[Term, ...] = ()


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
