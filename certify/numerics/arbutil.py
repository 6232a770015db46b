"""Small helpers around python-flint's arb balls: precision scoping and exact endpoints."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import flint
import numpy as np
from flint import arb, arb_mat, arf

from .blocks import row_blocks


@contextmanager
def precision(bits: int) -> Iterator[None]:
    """Runs the block with flint's working precision set to ``bits``, then restores it."""
    old = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = old


def arf_to_fraction(x: arf) -> Fraction:
    """Returns the exact value of a finite arf (an arb midpoint or radius)."""
    man, exp = x.man_exp()
    return dyadic(int(man), int(exp))


# Beyond 2**EXP_LIMIT (or below 2**-EXP_LIMIT) an exact Fraction would need a numerator or
# denominator of more than a million bits: the tanh of a 1e40 ball has a radius near
# 2**(-7e39), whose Fraction would never finish.  Tiny parts are widened outward instead.
EXP_LIMIT = 1 << 20


def endpoints(x: arb, *, floor_exp: int = EXP_LIMIT) -> tuple[Fraction, Fraction]:
    """Returns exact (lo, hi) with the ball ``x`` contained in [lo, hi].

    A radius below 2**-floor_exp is replaced by 2**-floor_exp, and a midpoint below it by 0
    with that much more radius (outward, so [lo, hi] still contains the ball).  Raises
    ValueError for a non-finite ball or one with a part above 2**EXP_LIMIT (the caller treats
    that as undecided).
    """
    if not x.is_finite():
        raise ValueError("non-finite ball")
    mman, mexp = (int(v) for v in x.mid().mid().man_exp())
    rman, rexp = (int(v) for v in x.rad().mid().man_exp())
    mtop, rtop = mexp + abs(mman).bit_length(), rexp + rman.bit_length()
    if max(mtop, rtop) > EXP_LIMIT:
        raise ValueError("ball beyond 2**EXP_LIMIT: no exact endpoints")
    small_rad = bool(rman) and rtop < -floor_exp
    small_mid = bool(mman) and mtop < -floor_exp
    if small_rad or small_mid:  # 2**-floor_exp is a large integer: built only when needed
        tiny = Fraction(1, 1 << floor_exp)
        rad = tiny if small_rad else dyadic(rman, rexp)
        if small_mid:
            return -(rad + tiny), rad + tiny
    else:
        rad = dyadic(rman, rexp)
    mid = dyadic(mman, mexp)
    return mid - rad, mid + rad


def dyadic(man: int, exp: int) -> Fraction:
    """Returns man * 2**exp exactly."""
    return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)


def from_fraction(q: Fraction) -> arb:
    """Returns a ball containing the rational ``q`` (exact when q is dyadic and fits)."""
    return arb(flint.fmpq(q.numerator, q.denominator))


def matrix(X: np.ndarray) -> arb_mat:
    """Returns the float64 matrix ``X`` as an exact arb_mat (zero radii)."""
    rows, cols = X.shape
    if rows == 0 or cols == 0:
        return arb_mat(rows, cols)
    return arb_mat(X.tolist())


def left_product(D: np.ndarray, A: np.ndarray) -> arb_mat:
    """Returns a ball matrix that contains D A (float64 D, A taken as exact), formed as the
    sum over row blocks of A of D[:, b] A[b]: one block of A is held as balls at a time."""
    out = arb_mat(D.shape[0], A.shape[1])
    for b in row_blocks(*A.shape):
        out = out + matrix(np.ascontiguousarray(D[:, b])) * matrix(A[b])
    return out


def right_product(A: np.ndarray, B: arb_mat) -> arb_mat:
    """Returns a ball matrix that contains A B (float64 A taken as exact), formed a row block
    of A at a time (rows of A B are independent): one block of A is held as balls."""
    rows: list[list[arb]] = []
    for b in row_blocks(*A.shape):
        part = matrix(A[b]) * B
        rows += [[part[i, j] for j in range(part.ncols())] for i in range(part.nrows())]
    return arb_mat(rows) if rows and B.ncols() else arb_mat(A.shape[0], B.ncols())


def identity(p: int) -> arb_mat:
    """Returns the p x p identity as an exact arb_mat."""
    eye = arb_mat(p, p)
    for i in range(p):
        eye[i, i] = 1
    return eye


def row_abs_sums(M: arb_mat) -> list[arb]:
    """Returns balls containing sum_j |M_ij| for every row i."""
    rows, cols = M.nrows(), M.ncols()
    e = M.entries()
    return [sum((abs(v) for v in e[i * cols:(i + 1) * cols]), arb(0)) for i in range(rows)]


def max_row_abs_sum(M: arb_mat) -> tuple[Fraction, Fraction] | None:
    """Returns exact (lo, hi) with 0 <= lo <= max_i sum_j |M_ij| <= hi for every matrix in the
    ball matrix ``M`` ((0, 0) for a matrix with no row, the safe value of a maximum of
    non-negative numbers over an empty set); None when a row sum's endpoints cannot be formed
    (``endpoints`` refused them), so the caller escalates."""
    lo = hi = Fraction(0)
    for s in row_abs_sums(M):
        try:
            a, b = endpoints(s)
        except ValueError:
            return None
        lo, hi = max(lo, a), max(hi, b)
    return lo, hi


def signed_min(entries: Iterable[tuple[Any, float]]) -> tuple[Fraction, Fraction] | None:
    """Returns (lo, hi) with lo <= min_k s_k x_k <= hi for balls x_k and signs s_k (the sign
    is applied by flipping the exact endpoints); None when there is no entry or a ball's
    endpoints cannot be formed (``endpoints`` refused them), so the caller escalates."""
    lo = hi = None
    for x, s in entries:
        try:
            a, b = endpoints(x)
        except ValueError:
            return None
        if s < 0:
            a, b = -b, -a
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else min(hi, b)
    if lo is None or hi is None:
        return None
    return lo, hi
