"""Families implemented in this build (the family table's), by name, for `champollion serve` and
the embedded stack. A family absent here is reported as not configured.

Each family is named by the import path of its scorer factory (as COMET
names a model class by a string id): a family is imported only when it is
built, and a worker process builds a scorer from a ScorerSpec without
importing this registry."""
from __future__ import annotations

from typing import Callable

import grpc

from champollion.core.families import TABLE as FAMILY_TABLE
from champollion.core.limits import DEFAULT_MAX_TEXT_CHARS
from services.contract import FamilyScorer
from services.servicer import FamilyServicer
from services.workers import ScorerSpec

# The family table (champollion/core/families.py) names each factory.
SCORER_FACTORIES: dict[str, str] = {family.name: family.factory for family in FAMILY_TABLE}
IMPLEMENTED: tuple[str, ...] = tuple(SCORER_FACTORIES)


def _structural_extra(server: grpc.aio.Server, family: FamilyServicer) -> list[str]:
    from services.structural.servicer import register_extra
    return register_extra(server, family)


# Family-specific services served beside the Family contract; each returns
# the names it registered.
EXTRA_SERVICES: dict[str, Callable[[grpc.aio.Server, FamilyServicer], list[str]]] = {
    "structural": _structural_extra,
}


def create_scorer(name: str, languages: list[str] | None = None, **options) -> FamilyScorer:
    """Family `name`'s scorer; `options` as `champollion serve` passes them
    (semantic: device, comet_dir, ...). KeyError for an unknown family."""
    return ScorerSpec(name, SCORER_FACTORIES[name], {"languages": languages, **options}).build()


def create_servicer(name: str, languages: list[str] | None = None, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
                    **options) -> FamilyServicer:
    """Family `name`'s servicer: its scorer (see create_scorer), refusing
    texts longer than `max_text_chars` (the servicer's limit, not a factory option)."""
    return FamilyServicer(create_scorer(name, languages, **options), max_text_chars=max_text_chars)


def scorer_spec(name: str, languages: list[str] | None, options: dict) -> ScorerSpec:
    """What a worker process needs to build family `name`'s scorer as
    create_scorer builds it here. Workers load no model ahead of a batch
    (a split family's models stay in its server: services.contract.SplitScorer),
    so `preload` is left out."""
    worker_options = {key: value for key, value in options.items() if key != "preload"}
    return ScorerSpec(name, SCORER_FACTORIES[name],
                      {"languages": list(languages) if languages else None, **worker_options})
