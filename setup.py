"""Builds the optional compiled statistics (champollion/core/native/stats.cpp).

Metadata lives in pyproject.toml; this file only declares the extension. It is
optional: without a compiler (or without pybind11) installation still succeeds
and champollion.core.sacrebleu_adapter falls back to sacreBLEU's Python code.
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
        )
    ]

setup(ext_modules=ext_modules)
