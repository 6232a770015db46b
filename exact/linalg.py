"""Exact rational linear algebra on lists of ``Fraction`` rows (python-flint underneath)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import flint

Matrix = list[list[Fraction]]


def to_fmpq_mat(A: Sequence[Sequence[Fraction]]) -> flint.fmpq_mat:
    """Returns ``A`` as a python-flint ``fmpq_mat`` (exact)."""
    m, n = len(A), len(A[0]) if A else 0
    return flint.fmpq_mat(m, n, [flint.fmpq(x.numerator, x.denominator) for row in A for x in row])


def from_fmpq_mat(M: flint.fmpq_mat) -> Matrix:
    """Returns the entries of ``M`` as ``Fraction`` rows (exact)."""
    return [[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())]
            for i in range(M.nrows())]


def rank(A: Sequence[Sequence[Fraction]]) -> int:
    """Returns the exact rank of the rational matrix ``A``."""
    if not A or not A[0]:
        return 0
    return int(to_fmpq_mat(A).rank())


def matmul(A: Sequence[Sequence[Fraction]], B: Sequence[Sequence[Fraction]]) -> Matrix:
    """Returns the exact product ``A B``."""
    return from_fmpq_mat(to_fmpq_mat(A) * to_fmpq_mat(B))


def inverse(A: Sequence[Sequence[Fraction]]) -> Matrix | None:
    """Returns the exact inverse of the square matrix ``A``, or ``None`` if ``A`` is singular."""
    M = to_fmpq_mat(A)
    if M.nrows() != M.ncols() or M.rank() < M.nrows():
        return None
    return from_fmpq_mat(M.inv())


# Prices of the two exact steps a decoder takes in one piece (no budget check inside), from
# bit sizes alone.  b is the bits of an entry once a row's (a right factor's: a column's)
# denominators are cleared.  Inverse: seconds per p^3 b^2 (measured 3.2e-11 - 4.4e-11 at
# p = 16, and up to 3.2 times a quarter of this at p = 32 on a loaded machine: 2e-10 is
# above both).  Product (p x m)(m x n): seconds per p m n (bL + bR)^1.6 (measured up to
# 8.4e-12): 5e-11.
INVERSE_SECONDS = 2e-10
PRODUCT_SECONDS = 5e-11


def _cleared_bits(M: flint.fmpq_mat, by_rows: bool) -> int:
    rows, cols = M.nrows(), M.ncols()
    if rows == 0 or cols == 0:
        return 0
    outer, inner = (rows, cols) if by_rows else (cols, rows)
    best = 0
    for a in range(outer):
        den = num = 0
        for b in range(inner):
            x = M[a, b] if by_rows else M[b, a]
            den += int(x.q).bit_length()
            num = max(num, int(x.p).bit_length())
        best = max(best, den + num)
    return best


def product_seconds(X: flint.fmpq_mat, Y: flint.fmpq_mat) -> float:
    """Returns an estimate from above of the seconds of the exact product ``X Y``."""
    b = _cleared_bits(X, True) + _cleared_bits(Y, False)
    return PRODUCT_SECONDS * X.nrows() * X.ncols() * Y.ncols() * b**1.6


def inverse_seconds(M: flint.fmpq_mat) -> float:
    """Returns an estimate from above of the seconds :func:`inverse_row1_norm` takes on the
    square rational matrix ``M`` (bit sizes only, no arithmetic)."""
    b = _cleared_bits(M, True)
    return INVERSE_SECONDS * M.nrows() ** 3 * b * b


def inverse_row1_norm(M: flint.fmpq_mat) -> Fraction | None:
    """Returns ||M^{-1}||_inf exactly for the square rational matrix ``M``, or ``None`` if
    ``M`` is singular or not square.  The inverse stays in flint (its entries can have a
    hundred thousand bits: converting them to Fractions took as long as the inverse)."""
    if M.nrows() != M.ncols():
        return None
    try:
        Minv = M.inv()
    except ZeroDivisionError:
        return None
    n = Minv.ncols()
    best = flint.fmpq(0)
    for i in range(Minv.nrows()):
        s = flint.fmpq(0)
        for j in range(n):
            x = Minv[i, j]
            s += x if x >= 0 else -x
        best = s if s > best else best
    return Fraction(int(best.p), int(best.q))


def row1_norm(A: Sequence[Sequence[Fraction]]) -> Fraction:
    """Returns max_i sum_j |A_ij| exactly (the induced infinity-norm, = ||A||_row1)."""
    return max((sum((abs(x) for x in row), Fraction(0)) for row in A), default=Fraction(0))


def row1_error(A: Sequence[Sequence[Fraction]], B: Sequence[Sequence[Fraction]]) -> Fraction:
    """Returns ||A - B||_row1 = max_i sum_j |A_ij - B_ij| exactly."""
    return max(sum((abs(a - b) for a, b in zip(ra, rb, strict=True)), Fraction(0))
               for ra, rb in zip(A, B, strict=True))


def transpose(A: Sequence[Sequence[Fraction]]) -> Matrix:
    """Returns the transpose of ``A``."""
    return [list(col) for col in zip(*A, strict=True)]


def is_row_stochastic(B: Sequence[Sequence[Fraction]]) -> bool:
    """Returns True iff every entry of ``B`` is >= 0 and every row sums to exactly 1."""
    return all(all(x >= 0 for x in row) and sum(row, Fraction(0)) == 1 for row in B)


def simplex_distance(a: Sequence[Fraction]) -> tuple[Fraction, list[Fraction]]:
    """Returns (d, p): d = min over probability vectors p of ||a - p||_1, and a minimiser p.

    d = (sum of negative parts) + |(sum of positive parts) - 1|: every p in the simplex has
    ||a - p||_1 >= sum_{a_j<0} (|a_j| + p_j) + |sum_{a_j>=0} (p_j - a_j)| >= that value, and
    the returned p (zero on negative entries, positive part scaled or topped up) attains it.
    """
    pos = [x if x > 0 else Fraction(0) for x in a]
    neg = sum((-x for x in a if x < 0), Fraction(0))
    P = sum(pos, Fraction(0))
    d = neg + abs(P - 1)
    if P >= 1:
        p = [x / P for x in pos]  # shrink: total change P - 1, all entries move down
    else:
        p = list(pos)
        p[max(range(len(a)), key=lambda j: a[j])] += 1 - P
    return d, p
