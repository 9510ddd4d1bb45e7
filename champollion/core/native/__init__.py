"""Compiled modules, each None when the extension was not built (no
compiler at `pip install -e .`):

- ``_stats`` (stats.cpp): sacreBLEU's segment statistics. Only
  ``champollion.core.sacrebleu_adapter`` uses it; it decides per call whether the
  compiled path applies (see ``PURE_SACREBLEU_ENV`` there).
- ``_matmul`` (matmul.cpp): the sentence encoder's matrix products
  (champollion/core/encoder/forward.py), each value computed the same way whatever
  else is multiplied with it."""
from __future__ import annotations

try:
    from champollion.core.native import _stats
except ImportError:  # built without a compiler, or not built yet
    _stats = None

try:
    from champollion.core.native import _matmul
except ImportError:  # built without a compiler, or not built yet
    _matmul = None

__all__ = ["_matmul", "_stats"]
