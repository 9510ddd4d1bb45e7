"""A scorer for worker processes in tests (a worker builds it from its
import path, "tests.slow_scorer:create_scorer"): the surface family's,
which first creates the file `started` and then waits `seconds`, so that a
test knows a batch is being scored and has time to act meanwhile."""
from __future__ import annotations

import time
from pathlib import Path

from services.surface.factory import create_scorer as create_surface_scorer


def create_scorer(started: str, seconds: float, **options):
    scorer = create_surface_scorer(**options)
    score = scorer.score

    def slowly(entries, context):
        Path(started).touch()
        time.sleep(seconds)
        return score(entries, context)

    scorer.score = slowly
    return scorer
