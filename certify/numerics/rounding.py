"""A-priori rounding bounds for IEEE binary64 arithmetic in round-to-nearest.

Assumptions (see proofs_notes/rounding.md): binary64 with round-to-nearest-even as set at
start-up (this module never changes the rounding mode); matrix products by a BLAS that
evaluates each entry as some ordering of the dot product, with or without FMA, never a
Strassen-type algorithm; no overflow (every routine checks that its results are finite).
Underflow is charged explicitly with ``ETA`` per product term.

Every bound computed here is itself computed in round-to-nearest and then moved one ulp
outward with ``np.nextafter``; that step dominates the rounding of the bound computation,
so the returned numbers are rigorous.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..rationals import float_up

U = Fraction(1, 2**53)  # unit roundoff of binary64
ETA = Fraction(1, 2**1074)  # smallest positive subnormal: absolute underflow error per product
ETA_F = float(ETA)


@lru_cache(maxsize=4096)
def gamma(n: int) -> Fraction:
    """Returns gamma_n = n u / (1 - n u) exactly (requires n u < 1)."""
    nu = n * U
    if nu >= 1:
        raise OverflowError("n u >= 1: no a-priori bound")
    return nu / (1 - nu)


@lru_cache(maxsize=4096)
def gamma_up(n: int) -> float:
    """Returns a float64 >= gamma_n."""
    return float_up(gamma(n))


@lru_cache(maxsize=4096)
def inv_one_minus_gamma_up(n: int) -> float:
    """Returns a float64 >= 1 / (1 - gamma_n)."""
    return float_up(1 / (1 - gamma(n)))


@lru_cache(maxsize=4096)
def one_plus_gamma_up(n: int) -> float:
    """Returns a float64 >= 1 + gamma_n."""
    return float_up(1 + gamma(n))


@lru_cache(maxsize=4096)
def inv_one_plus_gamma_down(n: int) -> float:
    """Returns a float64 <= 1 / (1 + gamma_n)."""
    q = 1 / (1 + gamma(n))
    f = float(q)
    return f if Fraction(f) <= q else float(np.nextafter(f, -np.inf))


def up(x: np.ndarray | float) -> np.ndarray | float:
    """Returns values >= the exact result of the round-to-nearest operation that produced ``x``.

    One ulp upward covers the half-ulp error of round-to-nearest, also for subnormals.
    """
    return np.nextafter(x, np.inf)


def down(x: np.ndarray | float) -> np.ndarray | float:
    """Returns values <= the exact result of the round-to-nearest operation that produced ``x``."""
    return np.nextafter(x, -np.inf)


def nonneg_sum_upper(fl_sum: np.ndarray | float, n_terms: int) -> np.ndarray | float:
    """Upper bound for an exact sum of ``n_terms`` nonnegative floats summed in any order.

    Returns values >= sum_j x_j given ``fl_sum`` = fl(sum_j x_j): the computed sum satisfies
    fl >= (1 - gamma_{n-1}) sum (additions do not underflow), so sum <= fl / (1 - gamma_{n-1}).
    """
    c = inv_one_minus_gamma_up(max(n_terms - 1, 1))
    return up(fl_sum * c)


def dot_error_upper(abs_dot_fl: np.ndarray | float, k: int) -> np.ndarray | float:
    """Upper bound on |fl(x^T y) - x^T y| for length-k dot products.

    ``abs_dot_fl`` must be fl(|x|^T |y|) computed in any order (or an upper bound of
    |x|^T |y| in the same form).  Uses |fl(x^T y) - x^T y| <= gamma_k |x|^T |y| + k eta and
    |x|^T |y| <= (fl(|x|^T|y|) + k eta) / (1 - gamma_k).
    """
    if k == 0:
        return np.zeros_like(abs_dot_fl) if isinstance(abs_dot_fl, np.ndarray) else 0.0
    g = gamma_up(k)
    c = inv_one_minus_gamma_up(k)
    kd = float_up(k * ETA)
    true_abs = up(up(abs_dot_fl + kd) * c)
    return up(up(true_abs * g) + kd)
