"""Which COMET model scores a language, and where its checkpoint lies.

The choice is data: the target language card's ``metricModelSupport.comet``
names a model (AfriCOMET for the African languages carded so) and says
whether the language is among that model's validated ones; a request may
override the model. Checkpoints are local: a model directory maps model ids
to checkpoints, in either layout

    <dir>/models--<Org>--<name>/snapshots/<revision>/checkpoints/model.ckpt   (Hugging Face cache)
    <dir>/<Org>/<name>/checkpoints/model.ckpt                                 (plain)

with ``hparams.yaml`` beside ``checkpoints/`` as COMET expects. Nothing is
ever downloaded.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from champollion.core.cards import LanguageCard

DEFAULT_COMET_MODEL = "Unbabel/wmt22-comet-da"
COMET_DIR_ENV = "CHAMPOLLION_COMET_DIR"
# "Org/name" as on the hub; nothing that could walk out of the model directory.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class CometChoice:
    model_id: str
    # Where the choice came from: "override", "card" or "default".
    origin: str
    # The target language is among the model's validated languages (per card).
    validated: bool


def resolve_comet_model(card: LanguageCard, override: str | None = None) -> CometChoice:
    """The COMET model for a target language: the override when given, else
    the card's ``metricModelSupport.comet.model``, else the default model.

    ``metricModelSupport.comet.validated`` speaks for the card's own model
    only; an override naming another model is not known to be validated."""
    support = card.model_support.comet
    carded = support.model or DEFAULT_COMET_MODEL
    override = (override or "").strip()
    if override:
        return CometChoice(override, "override", support.validated and override == carded)
    return CometChoice(carded, "card" if support.model else "default", support.validated)


@dataclass(frozen=True)
class ModelLocation:
    model_id: str
    checkpoint: Path
    # Hugging Face snapshot (commit) for the cache layout, else None: the
    # checkpoint's SHA-256 then stands for it (see champollion.core.files.sha256_of_file).
    snapshot: str | None
    layout: str  # "hf-cache" or "plain"

    @property
    def model_dir(self) -> Path:
        return self.checkpoint.parents[1]


class ModelNotFound(LookupError):
    """No checkpoint for a model id in any root; the message says where it looked."""


def default_roots() -> list[Path]:
    """``CHAMPOLLION_COMET_DIR`` (os.pathsep-separated), then the Hugging Face
    hub cache, where ``comet-score`` and ``huggingface-cli download`` put models."""
    roots = [Path(p) for p in os.environ.get(COMET_DIR_ENV, "").split(os.pathsep) if p]
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    roots.append(Path(hub))
    return roots


def _snapshot_of(repo: Path) -> Path | None:
    """The snapshot ``refs/main`` points at, else the newest one."""
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        pinned = snapshots / ref.read_text(encoding="utf-8").strip()
        if (pinned / "checkpoints" / "model.ckpt").is_file():
            return pinned
    found = [s for s in snapshots.glob("*") if (s / "checkpoints" / "model.ckpt").is_file()] if snapshots.is_dir() else []
    return max(found, key=lambda s: s.stat().st_mtime) if found else None


class CometModelDirectory:
    """Model id -> local checkpoint, searched root by root. Each root may be a
    hub cache (``models--Org--name``), a directory holding one (``hub/``), or
    a plain ``Org/name`` tree."""

    def __init__(self, roots: list[Path | str] | None = None):
        self.roots = [Path(r) for r in roots] if roots is not None else default_roots()

    def locate(self, model_id: str) -> ModelLocation:
        if not _MODEL_ID.match(model_id):
            raise ModelNotFound(f"COMET model id {model_id!r} is not of the form Org/name")
        org, name = model_id.split("/")
        for root in self.roots:
            for hub in (root, root / "hub"):
                snapshot = _snapshot_of(hub / f"models--{org}--{name}")
                if snapshot is not None:
                    return ModelLocation(model_id, snapshot / "checkpoints" / "model.ckpt", snapshot.name, "hf-cache")
            plain = root / org / name / "checkpoints" / "model.ckpt"
            if plain.is_file():
                return ModelLocation(model_id, plain, None, "plain")
        # Which folders were searched is the server's business: not in a run card.
        raise ModelNotFound(f"no COMET model {model_id} in the model directory (set {COMET_DIR_ENV} "
                            f"or --comet-dir on the semantic service)")

    def hub_cache_root(self, location: ModelLocation) -> Path | None:
        """The hub cache that holds `location` (for finding its encoder), if any."""
        return location.checkpoint.parents[4] if location.layout == "hf-cache" else None


