"""One COMET model, loaded once and kept warm, scoring batches in a plain loop.

``CometModel.predict`` is a command-line tool's API: it builds a Lightning
Trainer on every call and, with ``gpus > 1``, switches to DDP where non-zero
ranks call ``exit()``. A server instead loads the model once (offline:
``local_files_only`` and the Hugging Face offline switches, or a hub name
hangs for minutes before failing) and runs the model's own
``prepare_for_inference`` + ``predict_step`` under ``torch.inference_mode``:
the same computation ``predict`` runs, minus the Trainer. One model per process
(or GPU); scale with replicas.

Not applied: ``set_embedding_cache()``. Its cache keys a whole batch tensor by
an abbreviated ``repr`` (the library warns this "can lead to false cache
hits"), and it only helps when an identical batch recurs, which mixing
concurrent requests into batches makes rare: a wrong number is not worth it.
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog

from champollion.core.files import sha256_of_file
from services.semantic.batching import sorted_chunks
from services.semantic.models import (
    CometModelDirectory,
    ModelLocation,
)

log = structlog.get_logger()

DEVICES = ("cpu", "cuda")


class CometUnavailable(RuntimeError):
    """COMET cannot score here (package, device or checkpoint missing); the
    message says which, and ends up in a run-card warning."""


def comet_version() -> str | None:
    try:
        return metadata.version("unbabel-comet")
    except metadata.PackageNotFoundError:
        return None


def _offline_environment(hub_cache: Path | None) -> None:
    """Before comet (and so transformers) is first imported: never reach the
    hub, and find encoders in the model directory when it is a hub cache."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if hub_cache is not None and "HF_HUB_CACHE" not in os.environ and "transformers" not in sys.modules:
        os.environ["HF_HUB_CACHE"] = str(hub_cache)


def _to_device(batch: Any, device) -> Any:
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device)
    if isinstance(batch, dict):
        return type(batch)({key: _to_device(value, device) for key, value in batch.items()})
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(value, device) for value in batch)
    return batch


@dataclass(frozen=True)
class CometInfo:
    model_id: str
    revision: str
    comet_version: str
    device: str
    precision: str
    # Segments the model reads, in COMET's names ("src", "mt", "ref").
    input_segments: tuple[str, ...]
    class_identifier: str

    @property
    def uses_reference(self) -> bool:
        return "ref" in self.input_segments

    def signature(self) -> str:
        return (f"model:{self.model_id}|rev:{self.revision}|comet:{self.comet_version}"
                f"|device:{self.device}|precision:{self.precision}|refs:{int(self.uses_reference)}")


def _input_segments(model) -> tuple[str, ...]:
    declared = model.hparams.get("input_segments")
    if declared:  # unified models (XCOMET, AfriCOMET-MTL, CometKiwi-style)
        return tuple(declared)
    return ("src", "mt", "ref") if model.requires_references() else ("src", "mt")


class CometRunner:
    """A loaded COMET model on one device. ``predict_batch`` runs one batch;
    calls are serialised (one forward pass at a time on the device)."""

    def __init__(self, location: ModelLocation, device: str = "cpu", fp16: bool = False,
                 directory: CometModelDirectory | None = None):
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        if fp16 and device != "cuda":
            raise ValueError("fp16 needs device 'cuda'")
        version = comet_version()
        if version is None:
            raise CometUnavailable("unbabel-comet is not installed (install the [comet] extra)")
        _offline_environment((directory or CometModelDirectory([])).hub_cache_root(location))
        import torch
        from comet import load_from_checkpoint

        if device == "cuda" and not torch.cuda.is_available():
            raise CometUnavailable("device cuda was requested but torch sees no CUDA device")
        self._torch = torch
        self.location = location
        self.device = torch.device(device)
        try:
            model = load_from_checkpoint(str(location.checkpoint), local_files_only=True)
        except Exception as error:  # a broken checkpoint or a missing encoder
            # The details name files on the server: its log has them, the run card does not.
            log.exception("comet_model_failed_to_load", model=location.model_id, checkpoint=str(location.checkpoint))
            raise CometUnavailable(f"COMET model {location.model_id} failed to load ({type(error).__name__}; "
                                   f"the semantic service's log has the details)") from error
        model.eval()
        model.to(self.device)
        if fp16:
            model.half()
        self.model = model
        revision = location.snapshot or f"sha256:{sha256_of_file(location.checkpoint)[:16]}"
        self.info = CometInfo(
            model_id=location.model_id,
            revision=revision,
            comet_version=version,
            device=device,
            precision="fp16" if fp16 else "fp32",
            input_segments=_input_segments(model),
            class_identifier=str(model.hparams.get("class_identifier", type(model).__name__)),
        )
        self._lock = threading.Lock()
        self.batches_run = 0

    def sample(self, source: str, prediction: str, reference: str) -> dict[str, str]:
        """The model's input for one segment: only the segments it reads (a
        reference-free model is never sent a reference)."""
        segments = {"src": source, "mt": prediction, "ref": reference}
        return {name: segments[name] for name in ("src", "mt", "ref") if name in self.info.input_segments}

    @staticmethod
    def length(sample: dict[str, str]) -> int:
        return sum(len(text) for text in sample.values())

    def predict_batch(self, samples: list[dict[str, str]]) -> list[float]:
        """Scores of one batch, in order."""
        if not samples:
            return []
        torch = self._torch
        with self._lock, torch.inference_mode():
            batch = _to_device(self.model.prepare_for_inference(samples), self.device)
            scores = self.model.predict_step(batch)["scores"]
            self.batches_run += 1
            return scores.float().cpu().view(-1).tolist()

    def predict(self, samples: list[dict[str, str]], batch_size: int = 16) -> list[float]:
        """Scores of any number of samples: sorted by length, batched, restored to order."""
        scores: list[float] = [0.0] * len(samples)
        for chunk in sorted_chunks(samples, batch_size, self.length):
            for index, score in zip(chunk, self.predict_batch([samples[i] for i in chunk])):
                scores[index] = score
        return scores
