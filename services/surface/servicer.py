"""gRPC glue for the surface family."""
from services.servicer import FamilyServicer
from services.surface.metrics import SurfaceScorer


def create_servicer(**_options) -> FamilyServicer:
    return FamilyServicer(SurfaceScorer())
