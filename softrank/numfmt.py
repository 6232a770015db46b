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


def _decimal_exponent(q: Fraction) -> int:
    """Returns e with 10^e <= q < 10^(e+1), for q > 0 (exact, any size)."""
    e = len(str(q.numerator)) - len(str(q.denominator))
    while q >= Fraction(10) ** (e + 1):
        e += 1
    while q < Fraction(10) ** e:
        e -= 1
    return e


def _directed4(q: Fraction, up: bool) -> str:
    """Returns a decimal string with 4 significant digits that is <= q (``up`` False) or
    >= q (``up`` True); exact rationals of any size."""
    if q == 0:
        return "0"
    e = _decimal_exponent(abs(q))
    scaled = q / Fraction(10) ** (e - 3)  # |scaled| in [1000, 10000)
    n = math.ceil(scaled) if up else math.floor(scaled)
    if abs(n) >= 10000:  # rounding reached the next power of ten (n = +-10000 exactly)
        n //= 10
        e += 1
    sign = "-" if n < 0 else ""
    digits = str(abs(n))
    if -4 <= e < 6:
        if e >= 3:
            return sign + str(abs(n) * 10 ** (e - 3))
        point = e + 1  # digits before the decimal point (<= 0: leading zeros)
        if point > 0:
            return f"{sign}{digits[:point]}.{digits[point:]}"
        return f"{sign}0.{'0' * -point}{digits}"
    return f"{sign}{digits[0]}.{digits[1:]}e{e:+d}"


def outward4(lo: Fraction | int | str, hi: Fraction | int | str | None = None) -> str:
    """Returns ``[a, b]`` with 4 significant digits each and a <= lo, b >= hi (rounded outward,
    so the printed interval contains [lo, hi]); ``hi`` defaults to ``lo``.  Display only."""
    lo_q = Fraction(lo)
    hi_q = lo_q if hi is None else Fraction(hi)
    return f"[{_directed4(lo_q, up=False)}, {_directed4(hi_q, up=True)}]"


def near4(q: Fraction | int | str) -> str:
    """Returns ``q`` exactly (``1/4``, ``24/25``) when that is short, else ``~`` and 4
    significant digits (rounded to nearest).  Display only."""
    q = Fraction(q)
    if len(str(q)) <= 12:
        return str(q)
    return "~" + sci(q, 4)
