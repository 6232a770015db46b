"""The softmax-visible interaction C = P_m (log A) P_n, enclosed from stored numbers.

P_k = I - 1 1^T / k.  Row constants of log A (the log of each row's normaliser) and column
constants are annihilated by the two projections, so:

* from logits H with A = rowsoftmax(beta H):   C = P_m (beta H) P_n   (exact rational),
* from a positive block with A = rownormalise(block):  C = P_m log(block) P_n,
* from a positive A alone:                      C = P_m log(A) P_n.

An :class:`Interaction` carries a float64 midpoint matrix ``mid`` and one rigorous uniform
radius ``rad`` with |C_ij - mid_ij| <= rad, plus :meth:`Interaction.row_balls` for arb
enclosures of whole rows at higher precision (exact rationals rounded to ``prec`` bits for
logits).  See proofs_notes/intrinsic_interaction.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from flint import arb, fmpq, fmpz_mat

from ..arrays import as_matrix
from ..errors import InputError
from ..numerics.arbutil import endpoints, precision
from ..numerics.dyadic import to_int_matrix
from ..numerics.fpenv import quiet_floats
from ..numerics.rounding import ETA, U
from ..rationals import float_up, to_rational

_FMAX = Fraction(np.finfo(np.float64).max)


@dataclass
class Interaction:
    """An enclosure of C = P_m (log A) P_n: |C_ij - mid_ij| <= rad for every entry.

    ``source`` is ``"logits"``, ``"block"`` or ``"A"``.  ``mid`` is float64 (m x n) and
    ``rad`` a float64 whose exact value is the bound.
    """

    source: str
    mid: np.ndarray
    rad: float
    _data: np.ndarray = field(repr=False)
    _beta: Fraction = field(repr=False, default=Fraction(1))
    _cache: dict = field(repr=False, default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.mid.shape[0])

    @property
    def n(self) -> int:
        return int(self.mid.shape[1])

    def row_balls(self, rows: list[int], prec: int) -> list[list[arb]]:
        """Returns arb balls containing C_ij for i in ``rows`` and every j, computed at
        ``prec`` bits (for logits from the exact rational value of C_ij)."""
        with precision(prec):
            if self.source == "logits":
                R, K, G = self._exact_sums()
                m, n = self.m, self.n
                out = []
                for i in rows:
                    base = -R[i] / n + G / (m * n)
                    row = []
                    for j, x in enumerate(self._data[i].tolist()):
                        q = self._beta * (Fraction(x) + base - K[j] / m)
                        row.append(arb(fmpq(q.numerator, q.denominator)))
                    out.append(row)
                return out
            logs = self._log_balls(prec)
            m, n = self.m, self.n
            rsum = [sum(row, arb(0)) / n for row in logs]
            csum = [sum((logs[i][j] for i in range(m)), arb(0)) / m for j in range(n)]
            g = sum(rsum, arb(0)) / m
            return [[logs[i][j] - rsum[i] - csum[j] + g for j in range(n)] for i in rows]

    def _exact_sums(self) -> tuple[list[Fraction], list[Fraction], Fraction]:
        """Exact row sums, column sums and total of the stored logits (cached)."""
        if "sums" not in self._cache:
            Z, e = to_int_matrix(self._data)
            m, n = self._data.shape
            rs = Z * fmpz_mat(n, 1, [1] * n)
            cs = fmpz_mat(1, m, [1] * m) * Z
            s = Fraction(2) ** e
            R = [int(rs[i, 0]) * s for i in range(m)]
            K = [int(cs[0, j]) * s for j in range(n)]
            self._cache["sums"] = (R, K, sum(R, Fraction(0)))
        return self._cache["sums"]

    def _log_balls(self, prec: int) -> list[list[arb]]:
        key = ("logs", prec)
        if key not in self._cache:
            with precision(prec):
                self._cache[key] = [[arb(x).log() for x in row] for row in self._data.tolist()]
        return self._cache[key]


@quiet_floats
def interaction_from_logits(logits: object, beta: object = 1, *,
                            field: str = "logits") -> Interaction:
    """Returns an enclosure of C = P_m (beta H) P_n for the stored logits H.

    The operator of record is A = rowsoftmax(beta H); masked (-inf) or NaN logits raise
    :class:`InputError` (the visible interaction is undefined for a masked operator).
    """
    H = _finite_or_masked(logits, field)
    b = to_rational(beta, field="beta")
    if b <= 0:
        raise InputError(f"must be > 0, got {b}", field="beta")
    if b > _FMAX:
        raise InputError("must be below the float64 range (about 1.8e308): the enclosure "
                         "of beta H is computed in float64 first", field="beta")
    mid, rad = _centre_float(H, b, Fraction(0))
    return Interaction("logits", mid, rad, H, b)


@quiet_floats
def interaction_from_positive(B: object, *, field: str = "A") -> Interaction:
    """Returns an enclosure of C = P_m log(B) P_n for an entrywise positive B.

    ``field`` is ``"A"`` (B is the attention matrix) or ``"block"`` (B is a nonnegative block
    whose row renormalisation is the operator; the row constants cancel).  A zero or negative
    entry raises :class:`InputError`: log B, hence the visible interaction, is undefined.
    """
    if field not in ("A", "block"):
        # the field is also the interaction's source, and "logits" there would make the
        # arb tier read B as logits while mid and rad enclose P log(B) P
        raise ValueError(f"field must be 'A' or 'block', got {field!r}")
    X = _finite_or_masked(B, field)
    bad = np.argwhere(~(X > 0))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise InputError(f"entry ({i}, {j}) is {X[i, j]!r}: the visible interaction "
                         "P log A P is undefined for this operator (zero, masked or underflowed "
                         "entries; pass logits instead)", field=field)
    logs = _log_enclosure(X)
    mid_log, rad_log = logs
    mid, rad = _centre_float(mid_log, Fraction(1), rad_log)
    return Interaction(field, mid, rad, X)


@quiet_floats
def interaction_from_operator(A: object = None, *, logits: object = None, block: object = None,
                              beta: object = 1) -> Interaction:
    """Returns the interaction of an operator record: from logits when present, else from the
    block, else from A (see the three constructors)."""
    if logits is not None:
        return interaction_from_logits(logits, beta)
    if block is not None:
        return interaction_from_positive(block, field="block")
    if A is None:
        raise InputError("an operator needs A, logits or block", field="A")
    return interaction_from_positive(A, field="A")


def _finite_or_masked(x: object, fld: str) -> np.ndarray:
    X = as_matrix(x, fld, check_finite=False)
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise InputError(f"must be non-empty, got shape {X.shape}", field=fld)
    if not np.isfinite(X).all():
        i, j = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
        what = "masked (-inf)" if X[i, j] == -np.inf else "not a finite number"
        raise InputError(f"entry ({i}, {j}) is {what}: the visible interaction P log A P is "
                         "undefined for this operator (causal or padding masks are out of "
                         "scope)", field=fld)
    # the arb tiers read the data long after the float enclosure was made: a caller who
    # reuses its buffer must not give the two tiers two different matrices
    X = X.copy()
    X.flags.writeable = False
    return X


def _log_enclosure(X: np.ndarray, prec: int = 64) -> tuple[np.ndarray, Fraction]:
    """Returns (mid, rad): float64 logs of X with |log X_ij - mid_ij| <= rad (arb logs)."""
    mids = np.empty(X.shape)
    worst = Fraction(0)
    with precision(prec):
        flat = mids.reshape(-1)
        for k, x in enumerate(X.ravel().tolist()):
            lo, hi = endpoints(arb(x).log())
            f = float((lo + hi) / 2)
            flat[k] = f
            worst = max(worst, hi - Fraction(f), Fraction(f) - lo)
    return mids, worst


def _centre_float(H: np.ndarray, beta: Fraction, in_rad: Fraction) -> tuple[np.ndarray, float]:
    """Returns (mid, rad) with |beta (P_m H' P_n)_ij - mid_ij| <= rad for every H' with
    |H' - H| <= in_rad entrywise.

    Row and column sums use math.fsum (correctly rounded); the error analysis is in
    proofs_notes/intrinsic_interaction.md: every one of the at most nine roundings below is at
    most u times a quantity bounded by S = max|H| + max|r| + max|c| + |g| (plus one eta per
    possibly underflowing division or product).
    """
    m, n = H.shape
    try:
        r = np.array([math.fsum(row) for row in H.tolist()]) / n
        c = np.array([math.fsum(col) for col in H.T.tolist()]) / m
        g = math.fsum(r.tolist()) / m
    except OverflowError:  # fsum raises where a row or column sum leaves the float range
        raise InputError("logits too large: a row or column sum overflows float64",
                         field="logits") from None
    D = ((H - r[:, None]) - c[None, :]) + g
    bf = float(beta)
    mid = D * bf
    if not (np.isfinite(mid).all() and np.isfinite(D).all()):
        raise InputError("logits too large: the centred interaction overflows float64",
                         field="logits")
    S = (Fraction(float(np.abs(H).max())) + Fraction(float(np.abs(r).max()))
         + Fraction(float(np.abs(c).max())) + Fraction(abs(g)))
    S = S * (1 + 4 * U)  # the computed r, c, g are within (1 + 2u) of the exact means
    # exact means: r, c, g each carry <= 2 roundings (fsum, division), g also the error of r:
    # |r - r*| <= (2u + u^2) |r*| + eta, so the four-term sum moves by <= 4 (2u+u^2) S + 3 eta;
    # the three additions in D round by <= u |partial| <= u (1 + u) S each.
    err_D = (4 * (2 * U + U * U) + 3 * U * (1 + U)) * S * (1 + 4 * U) + 4 * ETA
    err_D *= 2  # a factor of safety on the constants: it costs one bit
    err_D += 4 * in_rad  # |P x P|_max <= 4 max |x|
    Dmax = Fraction(float(np.abs(D).max())) + err_D
    beta_err = abs(beta - Fraction(bf))
    mid_max = Fraction(float(np.abs(mid).max()))
    rad = beta * err_D + beta_err * Dmax + U * mid_max + ETA
    if rad > _FMAX:
        raise InputError("logits too large for a float64 enclosure", field="logits")
    return mid, float_up(rad)
