"""Exact minimum-enclosing-ball radii for point sets whose ball is fixed by a diameter pair.

rad(X) = inf_a max_i ||X_i - a||_2.  For any pair (i, k): rad >= ||X_i - X_k|| / 2 (a ball
containing both has diameter at least their distance); for any centre c: rad <= max_i
||X_i - c||.  When the midpoint of a farthest pair encloses every point within half the pair's
distance, the two bounds meet and rad is known exactly (as the square root of a rational).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import flint
import sympy


@dataclass(frozen=True)
class RadiusProof:
    """lower_sq <= rad(X)^2 <= upper_sq, proved by ``pair`` (lower) and ``center`` (upper)."""

    center: tuple[Fraction, ...]
    upper_sq: Fraction
    pair: tuple[int, int]
    lower_sq: Fraction

    @property
    def exact(self) -> bool:
        return self.lower_sq == self.upper_sq

    @property
    def radius(self) -> sympy.Expr:
        """rad(X) as an exact sympy number (only when :attr:`exact`)."""
        if not self.exact:
            raise ValueError("radius is only bracketed")
        return sympy.sqrt(sympy.Rational(self.upper_sq.numerator, self.upper_sq.denominator))


def _sq(u: Sequence[Fraction], v: Sequence[Fraction]) -> Fraction:
    return sum(((a - b) ** 2 for a, b in zip(u, v, strict=True)), Fraction(0))


def enclosing_radius(points: Sequence[Sequence[Fraction]]) -> RadiusProof:
    """Returns exact bounds on the minimum enclosing ball radius of ``points`` (rationals).

    The farthest pair is found by exhaustive search (O(n^2)); the upper bound uses its midpoint.
    """
    pts = [tuple(Fraction(x) for x in p) for p in points]
    best, pair = Fraction(-1), (0, 0)
    for i in range(len(pts)):
        for k in range(i, len(pts)):
            d = _sq(pts[i], pts[k])
            if d > best:
                best, pair = d, (i, k)
    a, b = pts[pair[0]], pts[pair[1]]
    center = tuple((x + y) / 2 for x, y in zip(a, b, strict=True))
    upper = max(_sq(p, center) for p in pts)
    return RadiusProof(center, upper, pair, best / 4)


def enclosing_radius_scaled(rows: Sequence[Sequence[int]], d: int) -> RadiusProof:
    """Returns the same :class:`RadiusProof` as ``enclosing_radius`` of the points rows[i] / d
    (integer rows, d >= 1), the same farthest pair included (the first in the order i <= k).

    The squared distances d^2 ||x_i - x_k||^2 = g_ii + g_kk - 2 g_ik come from one integer
    Gram matrix g (flint), so the O(n^2) pair search compares integers instead of summing
    Fractions: on the 1024 points of the r = 10 grid that is the difference between about
    20 s and well under one.
    """
    if not isinstance(d, int) or d < 1:
        raise ValueError("d must be a positive integer")
    n = len(rows)
    M = flint.fmpz_mat([[int(x) for x in r] for r in rows])
    G = (M * M.transpose()).tolist()
    diag = [G[i][i] for i in range(n)]
    best, pair = -1, (0, 0)
    for i in range(n):
        gi, di = G[i], diag[i]
        for k in range(i, n):
            v = di + diag[k] - 2 * gi[k]
            if v > best:
                best, pair = v, (i, k)
    best = int(best)
    a, b = rows[pair[0]], rows[pair[1]]
    # the centre (a + b) / (2 d): 4 d^2 ||x_p - c||^2 = ||2 row_p - a - b||^2, all integers
    upper4 = max(sum((2 * int(x) - int(y) - int(z)) ** 2 for x, y, z in zip(r, a, b, strict=True))
                 for r in rows)
    center = tuple(Fraction(int(y) + int(z), 2 * d) for y, z in zip(a, b, strict=True))
    return RadiusProof(center, Fraction(upper4, 4 * d * d), pair, Fraction(best, 4 * d * d))
