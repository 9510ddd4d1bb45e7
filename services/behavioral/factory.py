"""The behavioral family's scorer, as services.registry builds it."""
from services.behavioral.metrics import BehavioralScorer


def create_scorer(**_options) -> BehavioralScorer:
    return BehavioralScorer()
