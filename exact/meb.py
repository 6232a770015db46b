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
