"""gRPC glue for the compliance family."""
from services.compliance.metrics import ComplianceScorer
from services.servicer import FamilyServicer


def create_servicer(**_options) -> FamilyServicer:
    return FamilyServicer(ComplianceScorer())
