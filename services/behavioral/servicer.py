"""gRPC glue for the behavioral family."""
from services.behavioral.metrics import BehavioralScorer
from services.servicer import FamilyServicer


def create_servicer(**_options) -> FamilyServicer:
    return FamilyServicer(BehavioralScorer())
