"""Brackets for enclosing-ball radii rad(P) = inf_a max_i ||P_i - a||_2 and the native size
Gamma = beta rad(Q) rad(K) (proofs_notes/intrinsic_radius.md).

Upper: any centre a gives rad <= max_i ||P_i - a||.  Lower: any weights l >= 0 (not all 0)
give rad^2 >= sum_i l_i ||P_i - pbar||^2 / sum l, pbar the l-weighted mean (the weighted
variance; two points with equal weight give half their distance, and the dual weights of the
minimum enclosing ball give its radius exactly).  Both are evaluated in exact integers.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..arrays import as_matrix
from ..errors import InputError
from ..numerics.dyadic import to_int_matrix
from ..numerics.fpenv import quiet_floats
from ..rationals import to_rational
from .exact import max_sq_dist, sqrt_down, sqrt_up
from .inputs import vector
from .result import Bracket


@quiet_floats
def radius_sq_bracket(P: object, *, centre: object = None, weights: object = None,
                      field: str = "Q") -> Bracket:
    """Returns a bracket that contains rad(P)^2 for the rows of ``P`` (exact rationals).

    Missing centre: the midpoint of the coordinate ranges; missing weights: equal weights on
    a far pair (the row farthest from row 0 and the row farthest from that one).
    """
    Pf = as_matrix(P, field)
    if Pf.shape[0] < 1 or Pf.shape[1] < 1:
        raise InputError(f"must be non-empty, got shape {Pf.shape}", field=field)
    m, d = Pf.shape
    # halves first: max + min would overflow for coordinates near the float maximum
    cv = Pf.max(axis=0) / 2 + Pf.min(axis=0) / 2 if centre is None else vector(
        centre, f"centre_{field.lower()}", d)
    if not np.isfinite(cv).all():
        raise InputError("coordinates too large for a float centre", field=field)
    Pi, e = to_int_matrix(Pf)
    hi = max_sq_dist(Pi, e, 1, cv)
    if weights is None:
        i = int(np.argmax(((Pf - Pf[0]) ** 2).sum(axis=1)))
        k = int(np.argmax(((Pf - Pf[i]) ** 2).sum(axis=1)))
        w = np.zeros(m)
        w[i] += 1.0
        w[k] += 1.0
        how = f"pair ({i}, {k})"
    else:
        w = vector(weights, f"weights_{field.lower()}", m)
        how = "weights"
    if (w < 0).any() or not (w > 0).any():
        raise InputError("weights must be >= 0 and not all zero",
                         field=f"weights_{field.lower()}")
    lo = _weighted_variance(Pi, e, w)
    return Bracket("rad_sq", lo, hi, "exact",
                   {"upper": "centre", "lower": how})


def _weighted_variance(Pi, e: int, w: np.ndarray) -> Fraction:
    """Returns sum_i l_i ||P_i - pbar||^2 / sum l exactly (l = w, P = Pi 2^e)."""
    Wi, ew = to_int_matrix(w.reshape(1, -1))
    wl = [int(x) for x in Wi.entries()]
    rows, cols = Pi.nrows(), Pi.ncols()
    ent = [int(x) for x in Pi.entries()]
    W = sum(wl)
    # sum l ||p||^2 / W - ||sum l p||^2 / W^2 with integer p: scale by W^2
    s2 = 0
    s1 = [0] * cols
    for i in range(rows):
        li = wl[i]
        if li == 0:
            continue
        row = ent[i * cols:(i + 1) * cols]
        s2 += li * sum(x * x for x in row)
        for k in range(cols):
            s1[k] += li * row[k]
    num = W * s2 - sum(x * x for x in s1)
    return Fraction(num, W * W) * Fraction(2) ** (2 * e)


@quiet_floats
def radius_bracket(P: object, *, centre: object = None, weights: object = None,
                   field: str = "Q") -> Bracket:
    """Returns a bracket that contains rad(P) (see :func:`radius_sq_bracket`)."""
    sq = radius_sq_bracket(P, centre=centre, weights=weights, field=field)
    assert sq.hi is not None
    return Bracket("rad", sqrt_down(sq.lo), sqrt_up(sq.hi), "exact", sq.detail)


@quiet_floats
def native_size(Q: object, K: object, beta: object = 1, *, centre_q: object = None,
                centre_k: object = None, weights_q: object = None,
                weights_k: object = None) -> Bracket:
    """Returns a bracket that contains Gamma = beta rad(Q) rad(K) (rows of Q and K)."""
    b = to_rational(beta, field="beta")
    if b <= 0:
        raise InputError(f"must be > 0, got {b}", field="beta")
    Qf = as_matrix(Q, "Q")
    Kf = as_matrix(K, "K", shape=(None, Qf.shape[1]))
    rq = radius_sq_bracket(Qf, centre=centre_q, weights=weights_q, field="Q")
    rk = radius_sq_bracket(Kf, centre=centre_k, weights=weights_k, field="K")
    assert rq.hi is not None and rk.hi is not None
    lo = b * sqrt_down(rq.lo * rk.lo)
    hi = b * sqrt_up(rq.hi * rk.hi)
    return Bracket("Gamma", lo, hi, "exact", {"rad_Q_sq": rq.to_json(),
                                              "rad_K_sq": rk.to_json()})
