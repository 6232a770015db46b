"""JSON in and out without passing numbers through float.

Numbers with a fraction or exponent parse to exact ``Fraction``; integers to ``int``.
Writers emit exact rationals as strings ("1/4") so a round trip is exact.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

_MAX_DIGITS = 4000  # beyond this a number is refused rather than expanded


def _exact_float(s: str) -> Fraction:
    d = Decimal(s)
    if d and abs(d.adjusted()) + len(d.as_tuple().digits) > _MAX_DIGITS:
        raise ValueError(f"number with too many digits: {s[:40]}...")
    return Fraction(d)


def _reject_constant(s: str) -> Any:
    raise ValueError(f"non-finite JSON constant {s}")


def loads(text: str) -> Any:
    """Parses JSON text; numbers become ``int`` or exact ``Fraction``; NaN/Infinity are refused."""
    return json.loads(text, parse_float=_exact_float, parse_constant=_reject_constant)


def _default(o: Any) -> Any:
    if isinstance(o, Fraction):
        return str(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any, **kw: Any) -> str:
    """Serialises ``obj``; Fractions become exact strings, NumPy scalars native numbers."""
    return json.dumps(obj, default=_default, allow_nan=False, **kw)
