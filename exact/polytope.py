"""The admissible set of one row of B, and a finite set of its points containing its vertices.

Row i of an admissible B lies in P_i = {b : ||b - a_i||_1 <= eps} (unrestricted) or
P_i = {b : b >= 0, sum b = 1, ||b - a_i||_1 <= eps} (row-stochastic).  Both are polytopes, so
a linear function attains its extremes over P_i at vertices, and every finite set of points of
P_i that contains the vertices has P_i as its convex hull.  :func:`row_points` returns such a
set (exact rationals); proofs in ``proofs_notes/exact.md``, section "Minor-sign certificates".
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import combinations, product

Point = tuple[Fraction, ...]


def in_row_set(b: Sequence[Fraction], a: Sequence[Fraction], eps: Fraction,
               stochastic: bool) -> bool:
    """Returns True iff b lies in the admissible set of the row a (exact)."""
    if sum((abs(x - y) for x, y in zip(b, a, strict=True)), Fraction(0)) > eps:
        return False
    return not stochastic or (all(x >= 0 for x in b) and sum(b, Fraction(0)) == 1)


def row_points(a: Sequence[Fraction], eps: Fraction, stochastic: bool) -> list[Point]:
    """Returns :func:`_row_points` of the row (a copy: callers may change it); the minor
    search asks for each row's points once per (rows, cols) pair, and on big entries
    recomputing them took seconds between two budget checks."""
    return list(_row_points_cached(tuple(Fraction(x) for x in a), Fraction(eps), stochastic))


@lru_cache(maxsize=64)
def _row_points_cached(a: tuple[Fraction, ...], eps: Fraction, stochastic: bool
                       ) -> tuple[Point, ...]:
    return tuple(_row_points(a, eps, stochastic))


def _row_points(a: Sequence[Fraction], eps: Fraction, stochastic: bool) -> list[Point]:
    """Returns a finite list of points of the row's admissible set containing all its vertices.

    Unrestricted: the 2n vertices a +- eps e_j of the l1 ball.  Stochastic: at a vertex b every
    coordinate is 0, a_j (a kink of |b_j - a_j|) or free, and at most two are free (the free
    coordinates are fixed by sum b = 1 and the active ball equation alone); the candidates of
    that form are enumerated and kept when admissible.  Empty list: the set is empty.
    """
    a = tuple(Fraction(x) for x in a)
    n = len(a)
    if not stochastic:
        pts = []
        for j in range(n):
            for s in (eps, -eps):
                pts.append(tuple(a[k] + s if k == j else a[k] for k in range(n)))
        return pts
    found: set[Point] = set()
    for k in range(n):  # vertices of the simplex inside the ball
        e = tuple(Fraction(int(j == k)) for j in range(n))
        if in_row_set(e, a, eps, True):
            found.add(e)
    for size in (1, 2):
        for free in combinations(range(n), size):
            rest = [j for j in range(n) if j not in free]
            choices = [(Fraction(0), a[j]) if a[j] > 0 else (Fraction(0),) for j in rest]
            for vals in product(*choices):
                for b in _solve_free(a, eps, free, rest, vals):
                    if in_row_set(b, a, eps, True):
                        found.add(b)
    return sorted(found)


def _solve_free(a: Point, eps: Fraction, free: tuple[int, ...], rest: list[int],
                vals: tuple[Fraction, ...]) -> list[Point]:
    """Solutions of sum b = 1 and sum |b - a| = eps for the free coordinates (others fixed)."""
    R = 1 - sum(vals, Fraction(0))
    E = eps - sum((abs(v - a[j]) for j, v in zip(rest, vals, strict=True)), Fraction(0))
    if E < 0:
        return []
    sols: list[dict[int, Fraction]] = []
    if len(free) == 1:
        sols.append({free[0]: R})
    else:
        f, g = free
        for s in (1, -1):  # b_f - a_f and b_g - a_g of opposite signs s, -s
            d = s * E + a[f] - a[g]  # b_f - b_g
            bf, bg = (R + d) / 2, (R - d) / 2
            sols.append({f: bf, g: bg})
    out = []
    for sol in sols:
        b = [Fraction(0)] * len(a)
        for j, v in zip(rest, vals, strict=True):
            b[j] = v
        for j, v in sol.items():
            b[j] = v
        out.append(tuple(b))
    return out
