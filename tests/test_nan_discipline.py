"""Float bounds of the kernel's helpers are never NaN, and non-finite data never becomes a
silently different number: contracts that the float tiers rely on when they abstain."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.numerics import ballmat, dyadic
from softrank.certify.numerics.svd import _Factors, _from_residuals


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_to_int_matrix_refuses_non_finite_entries(bad) -> None:
    """frexp turns inf/NaN into arbitrary integers; the exact tiers must never see them."""
    X = np.array([[1.0, bad]])
    with pytest.raises(ValueError):
        dyadic.to_int_matrix(X)


def test_apriori_residual_bound_is_inf_not_nan_on_overflow() -> None:
    big = np.full((2, 2), 1.5e308)
    X = np.array([[1.5e308, 1.5e308], [0.0, 0.0]])
    for Z in (None, np.zeros((2, 2))):
        r = ballmat.apriori_residual_frob_upper(X, big, Z)
        assert r == math.inf
    assert ballmat._pow2_exponent_upper(np.array([[np.inf]])) == 1024
    # no split fits a non-finite matrix: the bound is +inf, never NaN or a number
    assert ballmat.split_residual_frob_upper(np.array([[np.inf, 1.0]]), np.ones((2, 1)),
                                             None) == math.inf


def test_sym_frob_upper_never_nan() -> None:
    C = np.triu(np.full((3, 3), 1e200))  # squares overflow
    assert ballmat.sym_frob_upper(C) == math.inf


def test_singular_value_bounds_stay_numbers_for_huge_residual_bounds() -> None:
    """Regression: residual bounds f, g near 1e300 (valid, if weak) made the factor
    sqrt((1 + f)(1 + g)) overflow, and a zero approximate singular value times inf gave a NaN
    upper bound (a crash when converted to a Fraction).  ||A||_F bounds every singular value,
    so the bound falls back to it."""
    A = np.array([[1.0, 1.0], [1.0, 1.0]])  # singular values 2 and 0
    fac = _Factors(B=A, U=np.eye(2), s=np.array([2.0, 0.0]), Vt=np.eye(2))
    sv = _from_residuals(A, A, 0, fac, 0.5, 1e300, 1e300, "float64")
    assert not np.isnan(sv.hi_f).any()
    assert all(h >= 2 for h in sv.hi) and all(lo == 0 for lo in sv.lo)
    assert max(sv.hi) <= Fraction(ballmat.frob_upper(A))
