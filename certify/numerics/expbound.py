"""Vectorised float64 exp of non-positive arguments with a proved relative error bound.

No libm function is called: e^x = 2^k e^r with our own range reduction (Cody-Waite, ln 2 split
so that k * C1 is exact) and a degree-11 Taylor polynomial evaluated by Horner's rule.  Every
constant of the error bound is derived below in exact rational arithmetic at import time; the
derivation is in proofs_notes/slack.md ("float64 tier").

The rounding model is IEEE 754 binary64 +, -, *, / in ANY rounding mode:
fl(a op b) = (a op b)(1 + d), |d| <= U = 2^-52, when the result is normal, and an absolute
error below 2^-1074 when it is subnormal (+ and - are then exact).  numpy's elementwise
float64 operations are single IEEE operations (no fused multiply-add, no extended precision).
"""

from __future__ import annotations

from fractions import Fraction
from math import factorial

import numpy as np

from ..rationals import float_down, float_up

U = Fraction(1, 2**52)  # bound on |d| above, valid in every IEEE rounding mode
X_MIN = -700.0  # below this the entry is only bounded: e^x <= 2^-1000
TINY = Fraction(1, 2**1000)  # e^x <= TINY whenever the computed argument is below X_MIN
DEGREE = 11
R_MAX = Fraction(35, 100)  # |r| <= R_MAX is checked at run time for every entry
K_MAX = 1011  # |k| <= K_MAX for every argument in [X_MIN, 0]


class FloatTierError(ArithmeticError):
    """The float tier cannot vouch for this input (the caller falls back to arb)."""


def gamma(n: int) -> Fraction:
    """gamma_n = n U / (1 - n U): the relative error of n chained roundings (Higham 3.1)."""
    return n * U / (1 - n * U)


def _ln2_enclosure() -> tuple[Fraction, Fraction]:
    # ln 2 = sum_{k>=1} 1/(k 2^k); the tail after K terms is < 2^-K / (K + 1) * 2
    K = 130
    s = sum((Fraction(1, k * 2**k) for k in range(1, K + 1)), Fraction(0))
    return s, s + Fraction(2, (K + 1) * 2**K)


def _exp_upper(y: Fraction) -> Fraction:
    """An upper bound of e^y for 0 <= y <= 1 (Taylor sum plus 2 * first omitted term)."""
    return sum((y**i / factorial(i) for i in range(31)), Fraction(0)) + 2 * y**31 / factorial(31)


def _exp_neg_lower(y: Fraction) -> Fraction:
    """A lower bound of e^-y for 0 <= y <= 1 (alternating series, stop after a minus term)."""
    return sum((Fraction((-1) ** i) * y**i / factorial(i) for i in range(32)), Fraction(0))


LN2_LO, LN2_HI = _ln2_enclosure()
C1 = Fraction(int(LN2_LO * 2**40), 2**40)  # <= 40 bits: k * C1 is exact for |k| < 2^12
C2 = float_up(LN2_LO - C1)
C3_ABS = max(abs(LN2_LO - C1 - Fraction(C2)), abs(LN2_HI - C1 - Fraction(C2)))  # |ln2-C1-C2|
INV_LN2 = float_up(1 / LN2_LO)  # any value works: it only chooses k
COEFFS = [float_up(Fraction(1, factorial(i))) if i > 1 else 1.0 for i in range(DEGREE + 1)]

_EXP_R = _exp_upper(R_MAX)
_EXP_MR = _exp_neg_lower(R_MAX)
# |e^r - p(r)| <= E_P for |r| <= R_MAX, p the computed Horner value (absolute error)
_E_TRUNC = R_MAX ** (DEGREE + 1) / factorial(DEGREE + 1) * _EXP_R
_E_COEF = sum((abs(Fraction(c) - Fraction(1, factorial(i))) * R_MAX**i
               for i, c in enumerate(COEFFS)), Fraction(0))
_E_HORNER = gamma(2 * DEGREE) * sum((Fraction(c) * R_MAX**i for i, c in enumerate(COEFFS)),
                                    Fraction(0)) + Fraction(1, 2**1060)
E_P = _E_TRUNC + _E_COEF + _E_HORNER
EPS_P = E_P / (_EXP_MR - E_P)  # |e^r / p - 1| <= EPS_P since p >= e^-R_MAX - E_P
# |(computed r) - (x~ - k ln2)|: three roundings of magnitude <= R_MAX + |k C2|, and k C3
_KC2 = K_MAX * abs(Fraction(C2)) * (1 + U)
RHO = (U * (R_MAX / (1 - U) + (R_MAX / (1 - U) + _KC2) / (1 - U) + _KC2)
       + K_MAX * C3_ABS)
# the argument itself: |x - x~| <= T1 |x~| + T0 (x~ = fl(b~ * fl(L - M)), see the note)
_G3 = (1 + U) ** 3 - 1
T1 = _G3 / (1 - _G3) * (1 + Fraction(1, 2**40))
T0 = Fraction(1, 2**1072)
_DELTA_MAX = RHO + T0 + T1 * 700
assert _DELTA_MAX < Fraction(1, 10**12)
_C = (1 + EPS_P) * (1 + _DELTA_MAX)
ALPHA0 = EPS_P + _C * (RHO + T0)  # |e^x / e~ - 1| <= ALPHA0 + ALPHA1 |x~|
ALPHA1 = _C * T1


def exp_nonpos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (e, small) for a float64 array x of computed arguments, all <= 0 (-inf allowed).

    Contract: where ``small`` is False, x_j >= X_MIN and, for every real y with
    |y - x_j| <= T1 |x_j| + T0, |e^y - e_j| <= (ALPHA0 + ALPHA1 |x_j|) e_j; e_j is a
    normal float64 > 0 (and e_j = 1 exactly where x_j = 0).  Where ``small`` is True, e_j = 0
    and every such y has e^y <= TINY.  Raises FloatTierError if an entry is NaN or positive or
    the range reduction leaves |r| > R_MAX (never observed; the bound would not apply).
    """
    x = np.asarray(x, dtype=np.float64)
    if not (x <= 0).all():  # also catches NaN
        raise FloatTierError("exp_nonpos needs arguments <= 0")
    small = x < X_MIN
    xc = np.maximum(x, X_MIN)  # small entries get a harmless in-range value, zeroed below
    k = np.rint(xc * INV_LN2)
    if k.size and not k.min() >= -K_MAX:  # written so that a NaN never passes
        raise FloatTierError("range reduction out of range")
    r = xc - k * float(C1)  # k * C1 is exact; the subtraction is charged in RHO
    r -= k * C2
    if r.size and not np.abs(r).max() <= float(R_MAX):  # a NaN never passes
        raise FloatTierError("range reduction out of range")
    p = np.full_like(r, COEFFS[DEGREE])
    for c in reversed(COEFFS[:DEGREE]):
        p *= r
        p += c
    # 2^k built from its bit pattern (normal: k >= -1011): the product with p is exact
    scale = ((k.astype(np.int64) + 1023) << 52).view(np.float64)
    p *= scale
    if small.any():
        p[small] = 0.0
    return p, small


def alpha_bound(xmin: float) -> Fraction:
    """Returns ALPHA0 + ALPHA1 |xmin|: the worst relative bound over arguments >= xmin."""
    return ALPHA0 + ALPHA1 * abs(Fraction(xmin))


__all__ = ["ALPHA0", "ALPHA1", "FloatTierError", "T0", "T1", "TINY", "U", "X_MIN", "exp_nonpos",
           "gamma", "float_down", "float_up"]
