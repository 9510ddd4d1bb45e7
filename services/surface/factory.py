"""The surface family's scorer, as services.registry builds it."""
from services.surface.metrics import SurfaceScorer


def create_scorer(**_options) -> SurfaceScorer:
    return SurfaceScorer()
