"""Stored floats as exact dyadic integers: X = M * 2**e with M an integer matrix.

A float64 is m * 2**q with |m| < 2**53, so an array of them is one integer matrix times a
common power of two.  The integer matrices feed flint's fmpz_mat for exact products.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from flint import fmpz, fmpz_mat


def to_int_matrix(X: np.ndarray) -> tuple[fmpz_mat, int]:
    """Returns (M, e) with X == M * 2**e exactly (X a finite float64 2-D array).

    e is the least exponent among the nonzero entries' least significant bits, so M has no
    common factor of two beyond what is needed.  For an all-zero X, returns (0, 0).
    Raises ValueError for NaN or infinite entries (frexp would turn them into arbitrary
    integers: an internal error, never a silently different matrix).
    """
    X = np.asarray(X, dtype=np.float64)
    rows, cols = X.shape
    if not np.isfinite(X).all():
        raise ValueError("to_int_matrix needs finite entries")
    if X.size == 0 or not np.any(X):
        return fmpz_mat(rows, cols), 0
    mant, ex = np.frexp(X)  # X = mant * 2**ex, 0.5 <= |mant| < 1
    mi = np.ldexp(mant, 53).astype(np.int64)  # exact: 53-bit integers
    ex = ex.astype(np.int64) - 53
    nz = mi != 0
    # strip trailing zero bits so the common exponent is as large as possible
    tz = _trailing_zeros(np.abs(mi[nz]))
    e = int((ex[nz] + tz).min())
    # shift < 0 only where the entry has at least -shift trailing zero bits: exact
    shift = np.where(nz, ex - e, 0)
    if int(shift.max()) <= 9:  # 53 + 9 bits still fit in int64
        ints = np.where(shift >= 0, mi << np.maximum(shift, 0), mi >> np.maximum(-shift, 0))
        entries = ints.ravel().tolist()
    else:
        entries = [m << s if s >= 0 else m >> -s
                   for m, s in zip(mi.ravel().tolist(), shift.ravel().tolist(), strict=True)]
    return fmpz_mat(rows, cols, entries), e


def _trailing_zeros(a: np.ndarray) -> np.ndarray:
    """Number of trailing zero bits of positive int64 values."""
    low = a & -a
    return np.log2(low.astype(np.float64)).astype(np.int64)


def identity(p: int) -> fmpz_mat:
    """Returns the p x p integer identity matrix."""
    eye = fmpz_mat(p, p)
    for i in range(p):
        eye[i, i] = 1
    return eye


def to_fraction(x: float) -> Fraction:
    """Returns the exact rational value of a float."""
    return Fraction(float(x))


def pow2(e: int) -> Fraction:
    """Returns 2**e as an exact rational."""
    return Fraction(2) ** e


def scaled(M: fmpz_mat, s: int) -> fmpz_mat:
    """Returns M * 2**s for s >= 0."""
    return M if s == 0 else M * fmpz(2) ** s


def max_row_abs_sum(M: fmpz_mat, e: int) -> Fraction:
    """Returns exactly max_i sum_j |M_ij| * 2**e (0 for a matrix with no row: a maximum of
    non-negative numbers over an empty set)."""
    cols = M.ncols()
    ent = [abs(int(v)) for v in M.entries()]
    best = max((sum(ent[i * cols:(i + 1) * cols]) for i in range(M.nrows())), default=0)
    return Fraction(best) * pow2(e)
