"""The sentence encoder's compiled matrix products (champollion/core/native/matmul.cpp):
each value is fma after fma in order of the inner index, rounded as float32
at each step, so a row's product is the same alone, among any rows, at any
place, read in place from a wider array, on every code path this CPU runs
(AVX-512, AVX2, plain C++), through inner sizes longer than one of the
blocks the products walk the inner index in."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from champollion.core.native import _matmul

pytestmark = pytest.mark.skipif(_matmul is None, reason="champollion.core.native._matmul is not built")


def to_float32(value: Fraction) -> np.float32:
    """`value` rounded to the nearest float32, ties to even (normal range)."""
    if value == 0:
        return np.float32(0.0)
    exponent = math.frexp(abs(value))[1] - 24  # 24 significant bits
    if abs(value) < Fraction(2) ** (exponent + 23):  # frexp of a near power of two can be one too high
        exponent -= 1
    scaled = value / Fraction(2) ** exponent
    whole = math.floor(scaled)
    rest = scaled - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
        whole += 1
    return np.float32(whole * Fraction(2) ** exponent)


def fma_by_definition(rows: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """The product as the module defines it, exactly: each step's x*w + sum
    computed as a fraction and rounded once to float32."""
    out = np.empty((len(rows), matrix.shape[1]), dtype=np.float32)
    for i, row in enumerate(rows):
        for j in range(matrix.shape[1]):
            total = np.float32(0.0)
            for k in range(matrix.shape[0]):
                total = to_float32(Fraction(float(row[k])) * Fraction(float(matrix[k, j])) + Fraction(float(total)))
            out[i, j] = total
    return out


@pytest.mark.parametrize("inner", [40, 300])  # 300: two of the 256-deep blocks, a sum resumed from `out`
def test_a_product_is_fma_after_fma_in_order_on_every_path(inner):
    rng = np.random.default_rng(1)
    # magnitudes over a few decades, so that another order or a rounding more rounds otherwise;
    # 13 rows: a whole AVX-512 tile of 12 and one more, two AVX2 tiles of 6 and one more
    rows = (rng.standard_normal((13, inner)) * 10.0 ** rng.uniform(-2, 2, (13, inner))).astype(np.float32)
    matrix = (rng.standard_normal((inner, 16)) * 10.0 ** rng.uniform(-2, 2, (inner, 16))).astype(np.float32)
    expected = fma_by_definition(rows, matrix)
    product = _matmul.Matrix(matrix)
    assert _matmul.PATHS[-1] == "portable" and set(_matmul.PATHS) <= {"avx512", "avx2", "portable"}
    assert np.array_equal(product.times(rows), expected)
    for path in _matmul.PATHS:
        assert np.array_equal(product.times(rows, path), expected), path
    # and not what a float64 sum rounded once gives: the test tells the orders apart
    assert not np.array_equal((rows.astype(np.float64) @ matrix.astype(np.float64)).astype(np.float32), expected)


def test_a_rows_product_does_not_depend_on_the_other_rows():
    rng = np.random.default_rng(2)
    matrix = rng.standard_normal((320, 64)).astype(np.float32)
    rows = rng.standard_normal((300, 330)).astype(np.float32)[:, 5:325]  # a slice of a wider array
    product = _matmul.Matrix(matrix)
    together = product.times(rows)
    assert together.shape == (300, 64) and together.dtype == np.float32
    assert np.abs(together - rows.astype(np.float64) @ matrix).max() < 1e-3
    for start, count in ((0, 1), (1, 1), (3, 5), (7, 6), (11, 47), (2, 98), (150, 150)):
        assert np.array_equal(product.times(np.ascontiguousarray(rows[start:start + count])),
                              together[start:start + count]), (start, count)
    assert np.array_equal(product.times(rows[::-1]), together[::-1])  # read through a copy
    for path in _matmul.PATHS:
        assert np.array_equal(product.times(rows[:40], path), together[:40]), path
    assert product.times(rows[:0]).shape == (0, 64)


def test_a_matrix_takes_whole_panels_and_rows_of_its_inner_size():
    with pytest.raises(ValueError, match="multiple of 16 columns"):
        _matmul.Matrix(np.zeros((4, 10), dtype=np.float32))
    product = _matmul.Matrix(np.ones((4, 32)))  # float64 is converted
    assert (product.inner, product.columns) == (4, 32)
    assert np.array_equal(product.times(np.ones((2, 4))), np.full((2, 32), 4.0, dtype=np.float32))
    with pytest.raises(ValueError, match="4 columns"):
        product.times(np.ones((2, 5), dtype=np.float32))
    with pytest.raises(ValueError, match="no matrix product path 'sse'"):
        product.times(np.ones((2, 4), dtype=np.float32), "sse")
