"""Exact rationals for tolerances and the exact value of stored floats.

A tolerance is never rounded: "0.1" means 1/10, and the Python float 0.1 means the binary
number 3602879701896397 / 2**55 that it is.
"""

from __future__ import annotations

import math
import numbers
import re
import struct
import sys
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

from .errors import InputError

_RATIO = re.compile(r"^\s*([+-]?\d+)\s*/\s*(\d+)\s*$", re.ASCII)


# A tolerance with more digits than this is refused: Python cannot even print it
# (int-to-str limit) and "1e-100000000" would take minutes to expand.
MAX_BITS = 13_000  # about 3900 decimal digits
MAX_DIGITS = 3914  # 10**3914 > 2**13000: more significant digits than this exceed MAX_BITS


def to_rational(x: object, *, field: str = "value") -> Fraction:
    """Returns the exact rational that ``x`` denotes (see :func:`_to_rational`), refusing
    numerators or denominators above MAX_BITS bits with an InputError.  An error raised by a
    caller's own object (its ``__class__``, ``.p``, ``__int__``) is an InputError naming
    ``field`` too."""
    from .numerics.fpenv import FloatEnvironmentError

    try:
        q = _to_rational(x, field=field)
    except (InputError, FloatEnvironmentError):
        raise
    except Exception as err:  # noqa: BLE001 - foreign code's failure is bad input here
        raise InputError(f"reading the value raised {type(err).__name__}",
                         field=field) from None
    if q.numerator.bit_length() > MAX_BITS or q.denominator.bit_length() > MAX_BITS:
        raise InputError(f"numerator or denominator longer than {MAX_BITS} bits", field=field)
    return q


def _to_rational(x: object, *, field: str = "value") -> Fraction:
    """Returns the exact rational that ``x`` denotes.

    Accepts ``Fraction``, ``int``, Python or NumPy floats (their exact binary value),
    ``Decimal``, objects with ``p``/``q`` (sympy ``Rational``) or ``numerator``/``denominator``,
    and strings such as ``"0.25"``, ``"1/4"``, ``"2.5e-3"``.  Raises :class:`InputError`
    (naming ``field``) for NaN, infinities, booleans and anything non-rational.
    """
    if isinstance(x, bool | np.bool_):
        raise InputError("a boolean is not a number", field=field)
    if isinstance(x, Fraction):
        return x
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, float | np.floating):
        if not math.isfinite(float(x)):  # "nan", not "np.float64(nan)"
            raise InputError(f"must be finite, got {float(x)}", field=field)
        return _float_value(float(x)) if not isinstance(x, np.floating) else _np_float(x, field)
    if isinstance(x, Decimal):
        if not x.is_finite():
            raise InputError(f"must be finite, got {x}", field=field)
        return _decimal_fraction(x, field)
    if isinstance(x, str):
        return _parse_string(x, field)
    for names in (("p", "q"), ("numerator", "denominator")):
        num, den = (_attribute(x, name, field) for name in names)
        if isinstance(num, numbers.Integral) and isinstance(den, numbers.Integral) and den != 0:
            num, den = int(num), int(den)
            if max(num.bit_length(), den.bit_length()) > MAX_BITS:  # before gcd's cost
                raise InputError(f"numerator or denominator longer than {MAX_BITS} bits",
                                 field=field)
            return Fraction(num, den)
    raise InputError(f"not an exact rational: {_safe_repr(x)}", field=field)


def _attribute(x: object, name: str, field: str) -> object:
    """Returns ``x.name`` (None when missing); raises InputError naming ``field`` when
    reading it raises: an entry object is the caller's, and its error is bad input."""
    try:
        return getattr(x, name, None)
    except Exception as err:  # noqa: BLE001 - any error of foreign code is bad input here
        raise InputError(f"reading .{name} of {type(x).__name__} raised "
                         f"{type(err).__name__}", field=field) from None


def _safe_repr(x: object) -> str:
    try:
        return repr(x)  # InputError cuts a long one; shown() escapes it where it is printed
    except Exception:  # noqa: BLE001 - a repr that raises is no reason for a crash
        return f"<{type(x).__name__}>"


def _np_float(x: np.floating, field: str) -> Fraction:
    # float16/32/64 widen exactly to float64; longdouble may not, so refuse it.
    if x.dtype.itemsize > 8:
        raise InputError(f"unsupported float type {x.dtype}", field=field)
    return _float_value(float(x))


def _float_value(x: float) -> Fraction:
    """Returns the exact value of ``x``; FloatEnvironmentError where this process reads a
    subnormal as 0 (denormals-are-zero: Python's conversion and comparisons then see 0
    while the bits say 2^-1074 or more)."""
    q = Fraction(x)
    if q == 0 and struct.unpack("<Q", struct.pack("<d", x))[0] << 1 & (1 << 64) - 1:
        from .numerics.fpenv import FloatEnvironmentError

        raise FloatEnvironmentError("a subnormal number reads as 0 in this process "
                                    "(denormals-are-zero): its exact value cannot be taken; "
                                    "run in a fresh process")
    return q


def _parse_string(s: str, field: str) -> Fraction:
    # Python's int() and Decimal() read any Unicode digits ("\u0663/\u0662\u0660" is 3/20)
    # and full-width ones; a tolerance must read the same to every reader and tool, so
    # only ASCII spellings are numbers here
    if not s.isascii() or "_" in s:
        # int() and Decimal() also read "1_0" as 10, which the replayer and C's strtod do not
        raise InputError(f"not a rational number (ASCII digits only, no '_'): {s[:80]!r}",
                         field=field)
    m = _RATIO.match(s)
    if m:
        # refuse before int(): a 60,000-digit string would hit Python's int-parsing limit,
        # and any integer of MAX_DIGITS + 1 significant digits exceeds MAX_BITS anyway
        num, den = (_bounded_int(g, field) for g in m.groups())
        if den == 0:
            raise InputError(f"zero denominator in {s[:80]!r}", field=field)
        return Fraction(num, den)
    try:
        d = Decimal(s.strip())
    except InvalidOperation:
        raise InputError(f"not a rational number: {s!r}", field=field) from None
    if not d.is_finite():
        raise InputError(f"must be finite, got {s!r}", field=field)
    return _decimal_fraction(d, field)


def _bounded_int(g: str, field: str) -> int:
    sign, digits = ("-", g[1:]) if g[:1] == "-" else ("", g.lstrip("+"))
    digits = digits.lstrip("0") or "0"  # leading zeros count against int()'s own limit
    if len(digits) > MAX_DIGITS:
        raise InputError(f"numerator or denominator longer than {MAX_BITS} bits", field=field)
    return int(sign + digits)


def _decimal_fraction(d: Decimal, field: str) -> Fraction:
    # refuse before expanding: digits and exponent say how long numerator and denominator
    # get (D 10^k is D with k zeros, or over 10^-k).  The bound is the one of the "p/q"
    # form, so the "p/q" (or plain integer) a writer spells any accepted value as reads back
    t = d.as_tuple()
    k = int(t.exponent)
    if d and max(len(t.digits) + max(k, 0), 1 + max(-k, 0)) > MAX_DIGITS:
        raise InputError(f"too many digits to take exactly: {d!r:.40}", field=field)
    return Fraction(d)


def parse_eps(x: object, *, field: str = "eps") -> Fraction:
    """Returns the exact tolerance ``x`` denotes; raises :class:`InputError` unless ``x > 0``."""
    q = to_rational(x, field=field)
    if q <= 0:
        raise InputError(f"must be > 0, got {q}", field=field)
    return q


_FMAX = sys.float_info.max
_FMAX_Q = Fraction(_FMAX)


def float_down(q: Fraction) -> float:
    """Returns the largest float64 that is <= q (``-inf`` below the float range)."""
    if q > _FMAX_Q:
        return _FMAX
    if q < -_FMAX_Q:
        return -math.inf
    f = float(q)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """Returns the smallest float64 that is >= q (``inf`` above the float range)."""
    if q > _FMAX_Q:
        return math.inf
    if q < -_FMAX_Q:
        return -_FMAX
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def qstr(q: Fraction | int) -> str:
    """Returns the exact decimal spelling of ``q`` ("n" or "n/d", as ``str(Fraction)`` spells
    it) at any size.

    Python's ``str`` refuses integers of more than ``sys.get_int_max_str_digits()`` digits
    (4300 by default). Every parsed input stays below that (MAX_BITS), but a threshold built
    from two of them (t = eps + chi, m t^2) or an exact value built on it need not; flint's
    fmpz has no such limit, and every such number is bounded by the inputs' sizes."""
    q = Fraction(q)
    n, d = q.numerator, q.denominator
    if max(n.bit_length(), d.bit_length()) <= MAX_BITS:
        return str(q)
    from flint import fmpz

    s = str(fmpz(n))
    return s if d == 1 else f"{s}/{fmpz(d)}"
