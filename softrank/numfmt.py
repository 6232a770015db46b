"""Display of exact rationals, of any size, with a stated rounding direction (never used for a
verdict).

``float(Fraction)`` raises OverflowError above about 1.8e308 and gives 0 below about 1e-324,
and a hostile store (or a proved bound) can make a number that large or that small; a display
line must still print, and it must not claim more than was proved.  So every printed endpoint
of a proved enclosure is rounded *outward*: a lower end toward -inf (``"down"``), an upper end
toward +inf (``"up"``); ``interval`` does both.  A point value (a ratio, a share) is rounded to
``"nearest"`` (half away from zero).  Everything here works on exact ``Fraction``s with
integer arithmetic: no float overflow or underflow, and no decimal string of a huge integer
(Python caps those at a few thousand digits).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal


def exact(q: Fraction | int | str) -> Fraction:
    """Returns ``q`` as an exact Fraction; a string "n" or "n/d" of any length is read with
    flint's fmpz, which has no limit on digits (Python's int(str) refuses past its limit, and
    an exact string from a kernel interval can be longer: reading it must not crash a report)."""
    if not isinstance(q, str):
        return Fraction(q)
    text = q.strip()
    if len(text) <= 4000 or not all(c in "0123456789-/" for c in text):
        return Fraction(text)
    from flint import fmpz

    num, _, den = text.partition("/")
    return Fraction(int(fmpz(num)), int(fmpz(den)) if den else 1)


Rounding = Literal["nearest", "down", "up"]
ROUNDINGS = ("nearest", "down", "up")
_LOG10_2 = 0.30102999566398120


def _pow10(e: int) -> Fraction:
    return Fraction(10**e) if e >= 0 else Fraction(1, 10**-e)


def _round_ratio(num: int, den: int, rounding: Rounding) -> int:
    """Returns num / den (den > 0) rounded to an integer in direction ``rounding`` (nearest:
    half away from zero), by integer division only (no gcd of huge integers)."""
    if rounding == "down":
        return num // den
    if rounding == "up":
        return -((-num) // den)
    if rounding != "nearest":
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    n = (2 * abs(num) + den) // (2 * den)
    return n if num >= 0 else -n


def _round(x: Fraction, rounding: Rounding) -> int:
    """Returns the integer nearest to ``x`` in the given direction (nearest: half away from 0)."""
    return _round_ratio(x.numerator, x.denominator, rounding)


def _scaled(q: Fraction, p: int, rounding: Rounding) -> int:
    """Returns q * 10**p rounded in direction ``rounding``."""
    num, den = q.numerator, q.denominator
    if p >= 0:
        return _round_ratio(num * 10**p, den, rounding)
    return _round_ratio(num, den * 10**-p, rounding)


def _exp10(num: int, den: int) -> int:
    """Returns e with 10**e <= num / den < 10**(e + 1) for integers num, den > 0."""
    # bit lengths give e to within one step; the loops correct it exactly
    e = math.floor((num.bit_length() - den.bit_length()) * _LOG10_2)

    def ge(k: int) -> bool:  # num / den >= 10**k
        return num >= den * 10**k if k >= 0 else num * 10**-k >= den

    while ge(e + 1):
        e += 1
    while not ge(e):
        e -= 1
    return e


def exponent10(a: Fraction | int) -> int:
    """Returns e with 10**e <= a < 10**(e + 1), exactly, for a rational a > 0."""
    a = exact(a)
    if a <= 0:
        raise ValueError("exponent10 needs a > 0")
    return _exp10(a.numerator, a.denominator)


def fixed(q: Fraction | int | str, places: int, rounding: Rounding = "nearest") -> str:
    """Returns ``q`` with exactly ``places`` decimals, rounded in direction ``rounding``: the
    printed decimal is <= q for "down", >= q for "up"."""
    places = max(int(places), 0)
    n = _scaled(exact(q), places, rounding)
    s = str(abs(n)).rjust(places + 1, "0")
    body = s if places == 0 else f"{s[:-places]}.{s[-places:]}"
    return ("-" if n < 0 else "") + body


def mantissa(q: Fraction, digits: int, rounding: Rounding) -> tuple[int, int]:
    """Returns (n, e) with q ~ n * 10**(e - digits + 1), 10**(digits-1) <= |n| < 10**digits,
    n rounded from the exact q in direction ``rounding`` (q != 0)."""
    e = exponent10(abs(q))
    n = _scaled(q, digits - 1 - e, rounding)
    if abs(n) >= 10**digits:  # rounding carried into a new digit: round again one place up
        e += 1
        n = _scaled(q, digits - 1 - e, rounding)
    return n, e


def sci(q: Fraction | int | str, digits: int = 3, rounding: Rounding = "nearest") -> str:
    """Returns ``q`` as d.dd...e+XX with ``digits`` significant digits, rounded in direction
    ``rounding`` from the exact value (any size of rational)."""
    q = exact(q)
    if q == 0:
        return "0"
    digits = max(int(digits), 1)
    n, e = mantissa(q, digits, rounding)
    s = str(abs(n))
    mant = s[0] + ("." + s[1:] if digits > 1 else "")
    return f"{'-' if n < 0 else ''}{mant}e{e:+03d}"


def sig(q: Fraction | int | str, digits: int = 6, rounding: Rounding = "nearest", *,
        strip: bool = True, fixed_below: int | None = None) -> str:
    """Returns ``q`` with ``digits`` significant digits rounded in direction ``rounding`` from
    the exact value, in the style of Python's ``g`` format: plain decimals when the decimal
    exponent e satisfies -4 <= e < ``fixed_below`` (default ``digits``), else d.ddde+XX;
    trailing zeros removed when ``strip``."""
    q = exact(q)
    if q == 0:
        return "0"
    digits = max(int(digits), 1)
    top = digits if fixed_below is None else fixed_below
    n, e = mantissa(q, digits, rounding)
    sign = "-" if n < 0 else ""
    s = str(abs(n))
    if -4 <= e < top:
        if e >= digits - 1:  # an integer: the digits, then zeros
            return sign + s + "0" * (e - digits + 1)
        places = digits - 1 - e
        body = fixed(Fraction(abs(n), 10**places), places)
        if strip and "." in body:
            body = body.rstrip("0").rstrip(".")
        return sign + body
    mant = s[0] + ("." + s[1:] if len(s) > 1 else "")
    if strip and "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{sign}{mant}e{e:+03d}"


def interval(lo: Fraction | int | str | None, hi: Fraction | int | str | None,
             digits: int = 6) -> str:
    """Returns "[lo, hi]" with the lower end rounded down and the upper end rounded up, so the
    printed interval contains the exact one; a missing end prints as "-"."""
    a = "-" if lo is None else sig(lo, digits, "down")
    b = "-" if hi is None else sig(hi, digits, "up")
    return f"[{a}, {b}]"


_FMAX = Fraction(2**1024 - 2**971)  # the largest finite float64


def clamped_float(q: Fraction | int | str) -> float:
    """Returns the float nearest to ``q``, or +-inf beyond the float range (for plotting)."""
    q = exact(q)
    if abs(q) > _FMAX:
        return -math.inf if q < 0 else math.inf
    return float(q)  # correctly rounded; tiny values go to a subnormal or 0


def float_down(q: Fraction | int | str) -> float:
    """Returns the largest float <= ``q`` (-inf below the float range): a plotted lower end."""
    q = exact(q)
    if q > _FMAX:
        return float(_FMAX)
    f = clamped_float(q)
    return math.nextafter(f, -math.inf) if math.isfinite(f) and Fraction(f) > q else f


def float_up(q: Fraction | int | str) -> float:
    """Returns the smallest float >= ``q`` (+inf above the float range): a plotted upper end."""
    q = exact(q)
    if q < -_FMAX:
        return -float(_FMAX)
    f = clamped_float(q)
    return math.nextafter(f, math.inf) if math.isfinite(f) and Fraction(f) < q else f


def outward4(lo: Fraction | int | str, hi: Fraction | int | str | None = None) -> str:
    """Returns ``[a, b]`` with 4 significant digits each and a <= lo, b >= hi (rounded outward,
    so the printed interval contains [lo, hi]); ``hi`` defaults to ``lo``.  Display only."""
    hi = lo if hi is None else hi
    return (f"[{sig(lo, 4, 'down', strip=False, fixed_below=6)}, "
            f"{sig(hi, 4, 'up', strip=False, fixed_below=6)}]")


def near4(q: Fraction | int | str) -> str:
    """Returns ``q`` exactly (``1/4``, ``24/25``) when that is short, else ``~`` and 4
    significant digits (rounded to nearest).  Display only."""
    q = exact(q)
    if max(q.numerator.bit_length(), q.denominator.bit_length()) <= 40 and len(str(q)) <= 12:
        return str(q)
    return "~" + sci(q, 4)
