"""The compliance family's scorer, as services.registry builds it."""
from services.compliance.metrics import ComplianceScorer


def create_scorer(**_options) -> ComplianceScorer:
    return ComplianceScorer()
