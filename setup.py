"""Builds the compiled modules of champollion/core/native: the sacreBLEU
statistics (stats.cpp) and the sentence encoder's matrix products (matmul.cpp)
and row sums (rows.cpp).

Metadata lives in pyproject.toml; this file only declares the extensions. They
are optional: without a compiler (or without pybind11) installation still
succeeds; champollion.core.sacrebleu_adapter then falls back to sacreBLEU's Python
code, and the sentence encoder is unavailable (semantic_score and the
detached-output check say so).
"""
from setuptools import setup

try:
    from pybind11.setup_helpers import Pybind11Extension
except ImportError:  # no pybind11 at build time: pure-Python install
    ext_modules = []
else:
    ext_modules = [
        Pybind11Extension(
            "champollion.core.native._stats",
            ["champollion/core/native/stats.cpp"],
            cxx_std=17,
            # No fused multiply-add: chrF's F-score must round as Python's floats do.
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        Pybind11Extension(
            "champollion.core.native._rows",
            ["champollion/core/native/rows.cpp"],
            cxx_std=17,
            # Additions in the order written, as numpy's pairwise sums make them.
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        Pybind11Extension(
            "champollion.core.native._matmul",
            ["champollion/core/native/matmul.cpp"],
            cxx_std=17,
            # Only the fused multiply-adds the source writes: the order of roundings is the point.
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
    ]

setup(ext_modules=ext_modules)
