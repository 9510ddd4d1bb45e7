"""structlog set-up: JSON lines on stderr, one event per RPC."""
import logging
import sys

import structlog
from structlog.tracebacks import ExceptionDictTransformer


def configure(level: str = "INFO") -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # exc_info=True (log.exception) becomes the traceback as JSON:
            # exception type, message and frames, never local variables
            # (they may hold the texts being scored).
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        # sys.stderr as it is when an event is written, not when configured:
        # a caller that swaps it (pytest, running the CLI in-process) may
        # close the old one.
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
