"""Complete rank <= 1 decisions without a size limit: two-row and two-column cells
(unrestricted) and every cell in the row-stochastic mode.

Each function returns ``("witness", B)`` with an exact admissible B of rank <= 1 within eps, or
``("refutation", data)`` with the exact numbers that :func:`verify_thin_refutation` re-derives.
Proofs: ``proofs_notes/exact.md``, section "Thin cells".
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .linalg import Matrix, row1_norm
from .lp import decide

ZERO = Fraction(0)


def _l1(v: Sequence[Fraction]) -> Fraction:
    return sum((abs(x) for x in v), ZERO)


def two_row_breakpoints(a1: Sequence[Fraction], a2: Sequence[Fraction]) -> list[Fraction]:
    """Returns the breakpoints of h(lam) = ||lam a1 - a2||_1 - eps (|lam| + 1): 0 and every
    a2_j / a1_j with a1_j != 0 (sorted, distinct)."""
    return sorted({ZERO} | {y / x for x, y in zip(a1, a2, strict=True) if x})


def two_row_h(a1: Sequence[Fraction], a2: Sequence[Fraction], eps: Fraction,
              lam: Fraction) -> Fraction:
    return _l1([lam * x - y for x, y in zip(a1, a2, strict=True)]) - eps * (abs(lam) + 1)


def rank_one_two_rows(A: Matrix, eps: Fraction) -> tuple[str, Any]:
    """Decides rank <= 1 for a 2 x N cell (unrestricted), any N.

    rank B <= 1 iff b1 = 0 (needs ||a1||_1 <= eps) or b2 = lam b1; for fixed lam != 0 a
    suitable b1 exists iff the l1 balls B(a1, eps) and B(a2/lam, eps/|lam|) meet, i.e.
    h(lam) = ||lam a1 - a2||_1 - eps(|lam| + 1) <= 0 (lam = 0: ||a2||_1 <= eps, = h(0) <= 0).
    h is piecewise linear and tends to +inf at +-inf when ||a1||_1 > eps, so its minimum is
    at a breakpoint.
    """
    a1, a2 = A
    if _l1(a1) <= eps:
        return "witness", [[ZERO] * len(a1), list(a2)]
    best = min(two_row_breakpoints(a1, a2), key=lambda lam: two_row_h(a1, a2, eps, lam))
    if two_row_h(a1, a2, eps, best) > 0:
        return "refutation", {"kind": "two-rows", "breakpoints": two_row_breakpoints(a1, a2)}
    if best == 0:
        return "witness", [list(a1), [ZERO] * len(a1)]
    # a point in both balls: on the segment from a1 to a2/lam, split by the radii
    c2 = [y / best for y in a2]
    r1, r2 = eps, eps / abs(best)
    t = r1 / (r1 + r2)
    b1 = [x + t * (y - x) for x, y in zip(a1, c2, strict=True)]
    return "witness", [b1, [best * x for x in b1]]


def two_column_intervals(A: Matrix, eps: Fraction, chart: int
                         ) -> tuple[Fraction, Fraction] | None:
    """Returns the interval of s in [-1, 1] with |a_i,other - a_i,pivot s| <= eps for every
    row (pivot column ``chart``), or None when it is empty."""
    lo, hi = Fraction(-1), Fraction(1)
    piv, oth = chart, 1 - chart
    for row in A:
        x, y = row[piv], row[oth]
        if x == 0:
            if abs(y) > eps:
                return None
            continue
        u, v = (y - eps) / x, (y + eps) / x
        lo, hi = max(lo, min(u, v)), min(hi, max(u, v))
        if lo > hi:
            return None
    return lo, hi


def rank_one_two_columns(A: Matrix, eps: Fraction) -> tuple[str, Any]:
    """Decides rank <= 1 for an m x 2 cell (unrestricted), any m.

    B = x y^T: row i is within eps iff dist_1(a_i, span y) = |a_i1 y2 - a_i2 y1| /
    max(|y1|, |y2|) <= eps.  Scaling y so that its larger entry is 1 (two charts y = (1, s)
    and y = (s, 1), |s| <= 1) turns every row's condition into an interval for s.
    """
    for chart in (0, 1):
        iv = two_column_intervals(A, eps, chart)
        if iv is not None:
            s = iv[0]
            y = [Fraction(1), s] if chart == 0 else [s, Fraction(1)]
            return "witness", [[row[chart] * y[0], row[chart] * y[1]] for row in A]
    return "refutation", {"kind": "two-columns"}


def stochastic_rank_one(A: Matrix, eps: Fraction) -> tuple[str, Any]:
    """Decides row-stochastic rank <= 1, any size: a row-stochastic B of rank 1 has every row
    equal to one probability vector p, so it exists iff the polyhedron {p >= 0, sum p = 1,
    t_ij >= +-(a_ij - p_j), sum_j t_ij <= eps} is non-empty (exact simplex, Farkas
    certificate otherwise)."""
    m, n = len(A), len(A[0])
    nv = n + m * n
    G: list[list[Fraction]] = []
    h: list[Fraction] = []

    def row(coeffs: dict[int, int]) -> list[Fraction]:
        r = [ZERO] * nv
        for k, c in coeffs.items():
            r[k] = Fraction(c)
        return r

    for j in range(n):
        G.append(row({j: -1}))
        h.append(ZERO)
    G.append(row(dict.fromkeys(range(n), 1)))
    h.append(Fraction(1))
    G.append(row(dict.fromkeys(range(n), -1)))
    h.append(Fraction(-1))
    for i in range(m):
        for j in range(n):
            t = n + i * n + j
            G.append(row({j: -1, t: -1}))  # a_ij - p_j <= t_ij
            h.append(-A[i][j])
            G.append(row({j: 1, t: -1}))  # p_j - a_ij <= t_ij
            h.append(A[i][j])
        G.append(row({n + i * n + j: 1 for j in range(n)}))
        h.append(eps)
    ans = decide(G, h, nv)
    if ans.status == "feasible":
        p = list(ans.vector[:n])
        return "witness", [p[:] for _ in range(m)]
    return "refutation", {"kind": "stochastic-lp", "G": G, "h": h, "farkas": list(ans.vector)}


def thin_applicable(m: int, n: int, stochastic: bool) -> bool:
    """True when a complete thin-cell decision of rank <= 1 exists for an m x n cell."""
    return stochastic or m == 2 or n == 2


def thin_rank_one(A: Matrix, eps: Fraction, stochastic: bool) -> tuple[str, Any]:
    """Dispatches to the complete rank <= 1 decision that applies (see thin_applicable)."""
    if stochastic:
        return stochastic_rank_one(A, eps)
    if len(A) == 2:
        return rank_one_two_rows(A, eps)
    return rank_one_two_columns(A, eps)


def verify_thin_refutation(A: Matrix, eps: Fraction, stochastic: bool,
                           data: dict[str, Any]) -> bool:
    """Re-derives a thin-cell refutation of rank <= 1 from (A, eps)."""
    from .lp import check_farkas

    kind = data.get("kind")
    if stochastic:
        if kind != "stochastic-lp":
            return False
        again = stochastic_rank_one(A, eps)
        return (again[0] == "refutation"
                and check_farkas(again[1]["G"], again[1]["h"], data["farkas"],
                                 len(A[0]) * (len(A) + 1)))
    if kind == "two-rows" and len(A) == 2:
        a1, a2 = A
        return (_l1(a1) > eps and row1_norm([a2]) > eps
                and all(two_row_h(a1, a2, eps, lam) > 0
                        for lam in two_row_breakpoints(a1, a2)))
    if kind == "two-columns" and len(A[0]) == 2:
        return all(two_column_intervals(A, eps, c) is None for c in (0, 1))
    return False
