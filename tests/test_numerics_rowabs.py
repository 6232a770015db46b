"""The shared row-l1 maxima of the kernel's arb and exact tiers, against exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import arb, arb_mat, fmpz_mat

from softrank.certify.numerics import arbutil, dyadic


def exact_max_row_abs(X: np.ndarray) -> Fraction:
    return max((sum(abs(Fraction(float(v))) for v in row) for row in X), default=Fraction(0))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("prec", [30, 53, 128])
def test_arb_enclosure_contains_exact_value(seed: int, prec: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((int(rng.integers(1, 7)), int(rng.integers(1, 7)))) * 10.0 ** int(
        rng.integers(-5, 5))
    with arbutil.precision(prec):
        lo, hi = arbutil.max_row_abs_sum(arbutil.matrix(X))
    v = exact_max_row_abs(X)
    assert 0 <= lo <= v <= hi
    if prec >= 128:
        assert hi - lo <= v * Fraction(1, 2**100)


def test_arb_lower_end_is_not_negative_for_balls_around_zero() -> None:
    M = arb_mat(1, 2, [arb(0, 1), arb(0, 2)])  # |.| of a ball around 0 has a negative lower end
    lo, hi = arbutil.max_row_abs_sum(M)
    assert lo == 0 and hi >= 3


def test_arb_empty_and_non_finite() -> None:
    assert arbutil.max_row_abs_sum(arb_mat(0, 3)) == (0, 0)
    assert arbutil.max_row_abs_sum(arb_mat(1, 2, [arb(1), arb("nan")])) is None
    assert arbutil.max_row_abs_sum(arb_mat(1, 2, [arb(1), arb("inf")])) is None


@pytest.mark.parametrize("seed", range(6))
def test_exact_tier_equals_rational_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((int(rng.integers(1, 7)), int(rng.integers(1, 7)))) * 2.0 ** int(
        rng.integers(-60, 60))
    M, e = dyadic.to_int_matrix(X)
    assert dyadic.max_row_abs_sum(M, e) == exact_max_row_abs(X)


def test_exact_tier_empty() -> None:
    assert dyadic.max_row_abs_sum(fmpz_mat(0, 4), -7) == 0
