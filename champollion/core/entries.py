"""One entry as scorers read it: the plain-Python form of a batch entry that
the families' scorers (services) and the language plugins (eval_standards)
share, kept in the core so that neither imports the other."""
from __future__ import annotations

from dataclasses import dataclass


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
