"""Display of exact rationals that may lie beyond the float range (never used for a verdict).

``float(Fraction)`` raises OverflowError above about 1.8e308, and a hostile store can make a
slack chi or a margin that large; a display line must still print.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

_FMAX = Fraction(sys.float_info.max)


def sci(q: Fraction | int | str, digits: int = 3) -> str:
    """Returns ``q`` in scientific notation with ``digits`` significant digits (rounded for
    display), for any size of rational."""
    q = Fraction(q)
    if q == 0:
        return "0"
    if abs(q) <= _FMAX and abs(q) >= Fraction(sys.float_info.min):
        return f"{float(q):.{max(digits - 1, 0)}e}"
    sign = "-" if q < 0 else ""
    q = abs(q)
    # exponent estimate from the digit counts, then corrected exactly
    e = len(str(q.numerator)) - len(str(q.denominator))
    while q >= Fraction(10) ** (e + 1):
        e += 1
    while q < Fraction(10) ** e:
        e -= 1
    mant = q / Fraction(10) ** e  # in [1, 10)
    return f"{sign}{float(mant):.{max(digits - 1, 0)}f}e{e:+d}"


def clamped_float(q: Fraction | int | str) -> float:
    """Returns the float nearest to ``q``, or +-inf beyond the float range (for plotting)."""
    q = Fraction(q)
    if abs(q) > _FMAX:
        return math.copysign(math.inf, q)
    return float(q)
