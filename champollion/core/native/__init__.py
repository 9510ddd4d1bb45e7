"""Compiled sacreBLEU statistics (``_stats``, built from ``stats.cpp`` by
``pip install -e .``), or None when the extension was not built.

Only ``champollion.core.sacrebleu_adapter`` uses it; it decides per call whether the
compiled path applies (see ``PURE_SACREBLEU_ENV`` there)."""
from __future__ import annotations

try:
    from champollion.core.native import _stats
except ImportError:  # built without a compiler, or not built yet
    _stats = None

__all__ = ["_stats"]
