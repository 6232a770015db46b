"""Exact integer evaluation of squared distances and outward-rounded square roots."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from flint import arb, fmpq, fmpz_mat

from ..numerics.arbutil import endpoints, precision
from ..numerics.dyadic import to_int_matrix


def ints(v: np.ndarray) -> tuple[list[int], int]:
    """Returns (ints, e) with v == ints * 2**e exactly (v a finite float vector)."""
    M, e = to_int_matrix(v.reshape(1, -1))
    return [int(x) for x in M.entries()], e


def max_sq_dist(P: fmpz_mat, e: int, den: int, centre: np.ndarray) -> Fraction:
    """Returns max_i ||P_i 2**e / den - centre||^2 exactly (P integer, den > 0)."""
    cint, ec = ints(centre)
    base = min(e, ec)
    # P_i 2^e / den - c = (P_i 2^(e-base) - den c 2^(ec-base)) 2^base / den
    sp, sc = 2 ** (e - base), den * 2 ** (ec - base)
    cs = [x * sc for x in cint]
    rows, cols = P.nrows(), P.ncols()
    ent = [int(x) for x in P.entries()]
    best = 0
    for i in range(rows):
        s = 0
        for k in range(cols):
            d = ent[i * cols + k] * sp - cs[k]
            s += d * d
        best = max(best, s)
    return Fraction(best) * Fraction(2) ** (2 * base) / (den * den)


def sqrt_up(q: Fraction) -> Fraction:
    """Returns a rational >= sqrt(q) (q >= 0), within about 2^-126 relative."""
    with precision(128):
        return endpoints(arb(fmpq(q.numerator, q.denominator)).sqrt())[1]


def sqrt_down(q: Fraction) -> Fraction:
    """Returns a rational in [0, sqrt(q)] (q >= 0), within about 2^-126 relative."""
    with precision(128):
        return max(Fraction(0), endpoints(arb(fmpq(q.numerator, q.denominator)).sqrt())[0])
