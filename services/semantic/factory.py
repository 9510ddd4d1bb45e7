"""The semantic family's scorer, as services.registry builds it.

Options (from `champollion serve`, else a deployment's environment):
device ("cpu" | "cuda"; env CHAMPOLLION_COMET_DEVICE), fp16 (cuda only; env
CHAMPOLLION_COMET_FP16), comet_dir (model directory; env CHAMPOLLION_COMET_DIR),
preload (comma-separated model ids loaded at start rather than by the first
request; env CHAMPOLLION_COMET_PRELOAD), max_batch_size, max_batch_chars
(0: no cap), max_wait_ms, micro_batching."""
from __future__ import annotations

import os

from services.semantic.metrics import CometPool, SemanticScorer
from services.semantic.models import CometModelDirectory, default_roots

DEVICE_ENV = "CHAMPOLLION_COMET_DEVICE"
FP16_ENV = "CHAMPOLLION_COMET_FP16"
PRELOAD_ENV = "CHAMPOLLION_COMET_PRELOAD"


def _flag(value) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


def _ids(value) -> tuple[str, ...]:
    if not value:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(item.strip() for item in items if item.strip())


def create_scorer(languages: list[str] | None = None, **options) -> SemanticScorer:
    comet_dir = options.get("comet_dir")
    directory = CometModelDirectory([comet_dir, *default_roots()] if comet_dir else None)
    pool = CometPool(
        directory,
        device=options.get("device") or os.environ.get(DEVICE_ENV, "cpu"),
        fp16=_flag(options.get("fp16", os.environ.get(FP16_ENV, False))),
        max_batch_size=int(options.get("max_batch_size", 16)),
        max_wait_s=float(options.get("max_wait_ms", 5.0)) / 1000,
        micro_batching=_flag(options.get("micro_batching", True)),
        max_batch_chars=int(options["max_batch_chars"]) if options.get("max_batch_chars") is not None else None,
    )
    preload = _ids(options.get("preload") or os.environ.get(PRELOAD_ENV))
    return SemanticScorer(languages=languages, comet=pool, preload=preload)
