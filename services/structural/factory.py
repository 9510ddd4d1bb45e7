"""The structural family's scorer, as services.registry builds it."""
from __future__ import annotations

from services.structural.metrics import StructuralScorer


def create_scorer(languages: list[str] | None = None, **_options) -> StructuralScorer:
    return StructuralScorer(languages=languages)
