"""Exact decision of small systems of linear inequalities G y <= h (y free).

The decision is made by an exact rational phase-1 simplex (Bland's rule, so it terminates) on
the Farkas alternative

    either  G y <= h  has a solution y,
    or      lam >= 0,  G^T lam = 0,  h^T lam = -1  has a solution lam        (never both).

The simplex runs on the second system.  If phase 1 reaches 0 its basic solution is a Farkas
certificate ``lam``; otherwise its final simplex multipliers give a point ``y`` of the first
system.  Either answer is re-checked exactly by :func:`check_point` / :func:`check_farkas`
before it is returned, so a bug can only raise, never produce a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from flint import fmpq

from .budget import tick

Row = Sequence[Fraction]


@dataclass(frozen=True)
class LPAnswer:
    """``status == "feasible"``: ``vector`` is a point y with G y <= h (exactly).
    ``status == "infeasible"``: ``vector`` is lam >= 0 with G^T lam = 0 and h^T lam < 0."""

    status: Literal["feasible", "infeasible"]
    vector: tuple[Fraction, ...]


def check_point(G: Sequence[Row], h: Row, y: Row) -> bool:
    """Returns True iff G y <= h holds exactly."""
    return all(sum((g * v for g, v in zip(row, y, strict=True)), Fraction(0)) <= b
               for row, b in zip(G, h, strict=True))


def check_farkas(G: Sequence[Row], h: Row, lam: Row, nvars: int) -> bool:
    """Returns True iff lam >= 0, G^T lam = 0 and h^T lam < 0 hold exactly.

    Such a lam proves that G y <= h has no solution: any solution would give
    0 = (G^T lam)^T y = lam^T (G y) <= lam^T h < 0.
    """
    if len(lam) != len(G) or any(x < 0 for x in lam):
        return False
    for c in range(nvars):
        if sum((l_k * row[c] for l_k, row in zip(lam, G, strict=True) if l_k), Fraction(0)):
            return False
    return sum((l_k * b for l_k, b in zip(lam, h, strict=True) if l_k), Fraction(0)) < 0


def _frac(x: fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


def decide(G: Sequence[Row], h: Row, nvars: int) -> LPAnswer:
    """Decides exactly whether {y in Q^nvars : G y <= h} is non-empty.

    Returns an :class:`LPAnswer` whose vector has been verified exactly (point or Farkas
    certificate).  Exponential worst case (simplex), meant for small systems.
    """
    K = len(G)
    if K == 0:
        return LPAnswer("feasible", tuple(Fraction(0) for _ in range(nvars)))
    r = nvars + 1
    # The pivoting runs on python-flint fmpq (exact, ~10x faster than Fraction).
    zero, one = fmpq(0), fmpq(1)

    def q(x: Fraction) -> fmpq:
        return fmpq(x.numerator, x.denominator)

    # Rows of the standard-form system M lam = b: G^T lam = 0 and (-h)^T lam = 1 (b >= 0).
    M = [[q(G[k][c]) for k in range(K)] for c in range(nvars)] + [[-q(h[k]) for k in range(K)]]
    ncol = K + r  # lam columns, then one artificial per row
    T = []
    for i in range(r):
        row = M[i] + [one if j == i else zero for j in range(r)]
        row.append(one if i == nvars else zero)
        T.append(row)
    basis = [K + i for i in range(r)]
    # Reduced costs of the phase-1 objective sum(artificials); last entry = -objective value.
    d = [-sum((T[i][j] for i in range(r)), zero) for j in range(K)]
    d += [zero] * r
    d.append(-sum((T[i][ncol] for i in range(r)), zero))
    while True:
        tick()  # a pivot on a large cell takes long: the oracle's time budget ends it here
        enter = next((j for j in range(ncol) if d[j] < 0), None)  # Bland: lowest index
        if enter is None:
            break
        leave, best = None, None
        for i in range(r):
            a = T[i][enter]
            if a > 0:
                ratio = T[i][ncol] / a
                if best is None or ratio < best or (ratio == best and basis[i] < basis[leave]):
                    leave, best = i, ratio
        if leave is None:  # cannot happen: phase 1 is bounded below by 0
            raise RuntimeError("phase-1 simplex unbounded")
        piv = T[leave][enter]
        prow = [x / piv for x in T[leave]]
        T[leave] = prow
        for i in range(r):
            if i != leave:
                tick()  # one pivot on a 3000-row tableau of big rationals takes seconds
                f = T[i][enter]
                if f:
                    T[i] = [x - f * p for x, p in zip(T[i], prow, strict=True)]
        f = d[enter]
        d = [x - f * p for x, p in zip(d, prow, strict=True)]
        basis[leave] = enter
    value = -d[ncol]
    if value == 0:
        lam = [Fraction(0)] * K
        for i, j in enumerate(basis):
            if j < K:
                lam[j] = _frac(T[i][ncol])
        if not check_farkas(G, h, lam, nvars):
            raise RuntimeError("exact simplex produced an invalid Farkas certificate")
        return LPAnswer("infeasible", tuple(lam))
    # Multipliers pi: reduced cost of artificial i is 1 - pi_i.  Optimality gives
    # M^T pi <= 0 and b^T pi = value > 0; u = -pi = (v, nu) then has G v >= nu h, nu < 0.
    pi = [1 - d[K + i] for i in range(r)]
    nu = -pi[nvars]
    y = [_frac((-pi[c]) / nu) for c in range(nvars)]
    if not check_point(G, h, y):
        raise RuntimeError("exact simplex produced an infeasible point")
    return LPAnswer("feasible", tuple(y))
