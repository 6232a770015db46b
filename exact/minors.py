"""Minor-sign certificates (rank >= p) and zero-determinant witnesses (rank <= n - 1).

For rows R and columns C (|R| = |C| = p), the p x p minor det B[R, C] of an admissible B is a
multilinear function of the rows B[i, C], i in R, and each row ranges over the projection onto
C of its admissible polytope P_i.  Over a product of polytopes a multilinear function attains
its minimum and maximum at products of vertices, and the product is connected, so the minor's
range over all admissible B is exactly [min, max] over the finite point sets of
:func:`exact.polytope.row_points` (projected to C).  If that interval excludes 0, every
admissible B has a nonzero p x p minor: rank B >= p.  For a square cell with R, C = everything,
0 in [min, max] means some admissible B is singular; walking from a product with det <= 0 to
one with det >= 0 one row at a time gives such a B exactly.  Proofs: ``proofs_notes/exact.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations, product

from softrank.certify.rationals import qstr

from .budget import tick
from .linalg import Matrix
from .polytope import Point, row_points

#: Largest number of vertex products examined for one minor.
MAX_PRODUCTS = 200_000


@dataclass(frozen=True)
class MinorRange:
    """Exact range [lo, hi] of det B[rows, cols] over all admissible B, with the vertex
    choices (one point per row, projected to ``cols``) attaining lo and hi."""

    rows: tuple[int, ...]
    cols: tuple[int, ...]
    lo: Fraction
    hi: Fraction
    argmin: tuple[Point, ...]
    argmax: tuple[Point, ...]

    @property
    def sign_invariant(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def to_json(self) -> dict[str, object]:
        return {"rows": list(self.rows), "cols": list(self.cols), "min": qstr(self.lo),
                "max": qstr(self.hi)}


def det(M: Sequence[Sequence[Fraction]]) -> Fraction:
    """Returns det M exactly (Laplace expansion; meant for p <= 5)."""
    p = len(M)
    if p == 1:
        return M[0][0]
    if p == 2:
        return M[0][0] * M[1][1] - M[0][1] * M[1][0]
    total = Fraction(0)
    for j in range(p):
        if M[0][j]:
            sub = [row[:j] + row[j + 1:] for row in M[1:]]
            total += (-1) ** j * M[0][j] * det(sub)
    return total


def _cofactors(rows: Sequence[Sequence[Fraction]], p: int) -> list[Fraction]:
    """Cofactors of the last row of the p x p matrix whose first p - 1 rows are ``rows``."""
    out = []
    for j in range(p):
        sub = [list(r[:j]) + list(r[j + 1:]) for r in rows]
        out.append((-1) ** (p - 1 + j) * det(sub) if sub else Fraction(1))
    return out


def projected_points(A: Matrix, eps: Fraction, stochastic: bool, rows: Sequence[int],
                     cols: Sequence[int]) -> list[list[Point]] | None:
    """Returns, per row in ``rows``, the distinct projections onto ``cols`` of the row's point
    set; None when some admissible set is empty."""
    out = []
    for i in rows:
        pts = row_points(A[i], eps, stochastic)
        if not pts:
            return None
        out.append(sorted({tuple(pt[j] for j in cols) for pt in pts}))
    return out


def minor_range(A: Matrix, eps: Fraction, stochastic: bool, rows: Sequence[int],
                cols: Sequence[int]) -> MinorRange | None:
    """Returns the exact range of det B[rows, cols] over admissible B (see the module doc), or
    None when an admissible set is empty or the vertex products exceed :data:`MAX_PRODUCTS`."""
    pts = projected_points(A, eps, stochastic, rows, cols)
    if pts is None or math.prod(len(p) for p in pts) > MAX_PRODUCTS:
        return None
    p = len(rows)
    lo = hi = None
    arg_lo = arg_hi = ()
    # det is linear in the last row: for each choice of the first p - 1 rows only the
    # cofactors are needed, then the best last row is a max/min of a linear function.
    for head in product(*pts[:-1]):
        tick()  # the oracle's budget (exact.budget): a big-number cell can be slow here
        cof = _cofactors(head, p)
        for last in pts[-1]:
            v = sum((c * x for c, x in zip(cof, last, strict=True)), Fraction(0))
            if lo is None or v < lo:
                lo, arg_lo = v, (*head, last)
            if hi is None or v > hi:
                hi, arg_hi = v, (*head, last)
    assert lo is not None and hi is not None
    return MinorRange(tuple(rows), tuple(cols), lo, hi, arg_lo, arg_hi)


def minor_certificate(A: Matrix, eps: Fraction, stochastic: bool, p: int
                      ) -> MinorRange | None:
    """Returns a p x p minor whose sign is the same for every admissible B (so every admissible
    B has rank >= p), trying every (rows, cols) pair; None if there is none within limits."""
    m, n = len(A), len(A[0])
    if p > min(m, n):
        return None
    for rows in combinations(range(m), p):
        for cols in combinations(range(n), p):
            tick()
            mr = minor_range(A, eps, stochastic, rows, cols)
            if mr is not None and mr.sign_invariant:
                return mr
    return None


def verify_minor(A: Matrix, eps: Fraction, stochastic: bool, mr: MinorRange) -> bool:
    """Re-derives the range of the certificate's minor from (A, eps) and checks its sign."""
    again = minor_range(A, eps, stochastic, mr.rows, mr.cols)
    return (again is not None and again.lo == mr.lo and again.hi == mr.hi
            and again.sign_invariant)


def singular_witness(A: Matrix, eps: Fraction, stochastic: bool) -> Matrix | None:
    """For a square cell: returns an exact admissible B with det B = 0 when the determinant's
    range over admissible B contains 0, else None (also None when out of limits).

    From vertex products V- (det <= 0) and V+ (det >= 0), the matrices B_t (rows 0..t-1 of V+,
    the rest of V-) have dets going from <= 0 to >= 0; consecutive ones differ in one row,
    along which det is affine, so an exact convex combination of that row has det 0.  Each row
    stays in its (convex) admissible set.
    """
    n = len(A)
    if n != len(A[0]):
        return None
    mr = minor_range(A, eps, stochastic, range(n), range(n))
    if mr is None or mr.sign_invariant:
        return None
    lo_rows, hi_rows = [list(r) for r in mr.argmin], [list(r) for r in mr.argmax]
    prev_rows, prev = lo_rows, mr.lo
    for t in range(n + 1):
        cur_rows = hi_rows[:t] + lo_rows[t:]
        cur = det(cur_rows)
        if cur == 0:
            return cur_rows
        if prev <= 0 <= cur and t > 0:
            lam = prev / (prev - cur)  # det(prev + lam (cur - prev)) = 0, lam in [0, 1]
            row = [x + lam * (y - x) for x, y in zip(prev_rows[t - 1], cur_rows[t - 1],
                                                      strict=True)]
            B = [r[:] for r in prev_rows]
            B[t - 1] = row
            return B
        prev_rows, prev = cur_rows, cur
    return None
