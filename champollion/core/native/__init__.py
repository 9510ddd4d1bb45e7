"""Compiled modules, each None when the extension was not built (no
compiler at `pip install -e .`):

- ``_stats`` (stats.cpp): sacreBLEU's segment statistics. Only
  ``champollion.core.sacrebleu_adapter`` uses it; it decides per call whether the
  compiled path applies (see ``PURE_SACREBLEU_ENV`` there).
- ``_matmul`` (matmul.cpp): the sentence encoder's matrix products
  (champollion/core/encoder/forward.py), each value computed the same way whatever
  else is multiplied with it.
- ``_rows`` (rows.cpp): the encoder's token rows copied and summed per
  sentence where they lie (champollion/core/encoder/row_cache.py)."""
from __future__ import annotations

try:
    from champollion.core.native import _stats
except ImportError:  # built without a compiler, or not built yet
    _stats = None

try:
    from champollion.core.native import _matmul
except ImportError:  # built without a compiler, or not built yet
    _matmul = None

try:
    from champollion.core.native import _rows
except ImportError:  # built without a compiler, or not built yet
    _rows = None

__all__ = ["_matmul", "_rows", "_stats"]
