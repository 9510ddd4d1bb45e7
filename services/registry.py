"""Families implemented in this build, by name, for `champollion serve` and
the embedded stack. A family absent here is reported as not configured."""
from __future__ import annotations

from typing import Callable

import grpc

from services.behavioral.servicer import create_servicer as create_behavioral
from services.compliance.servicer import create_servicer as create_compliance
from services.semantic.servicer import create_servicer as create_semantic
from services.servicer import FamilyServicer
from services.structural.servicer import create_servicer as create_structural
from services.structural.servicer import register_extra as register_structural_extra
from services.surface.servicer import create_servicer as create_surface
from services.workers import ScorerSpec

IMPLEMENTED: dict[str, Callable[..., FamilyServicer]] = {
    "surface": create_surface,
    "structural": create_structural,
    "semantic": create_semantic,
    "behavioral": create_behavioral,
    "compliance": create_compliance,
}

# Family-specific services served beside the Family contract; each returns
# the names it registered.
EXTRA_SERVICES: dict[str, Callable[[grpc.aio.Server, FamilyServicer], list[str]]] = {
    "structural": register_structural_extra,
}


def scorer_spec(name: str, languages: list[str] | None, options: dict) -> ScorerSpec:
    """What a worker process needs to build family `name`'s scorer as its
    factory here builds it (services/workers.py)."""
    return ScorerSpec(name, {"languages": list(languages) if languages else None, **options})
