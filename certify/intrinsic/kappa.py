"""Brackets for kappa(T) = inf over T = X' Y'^T of rad(X') rad(Y'), T = X Y^T stored factors.

* Upper (proofs_notes/intrinsic_kappa_upper.md): a gauge G (invertible r x r) gives the exact
  factorisation T = (X G)(Y G^{-T})^T; with centres a, c,
  kappa <= max_i ||(X G)_i - a|| * max_j ||(Y G^{-T})_j - c||, evaluated exactly (G^{-1} is an
  exact rational matrix) and rounded up once.
* Lower, rectangles (proofs_notes/intrinsic_kappa_lower.md): |T_ij - T_il - T_kj + T_kl| / 4.
* Lower, PSD dual (same note): M with zero row and column sums and diagonal D1, D2 >= 0 with
  [[D1, -M], [-M^T, D2]] PSD give kappa >= |<M, T>| / sqrt(tr D1 tr D2).  The PSD property is
  verified by a float Cholesky factor and an a-priori bound on its residual, charged as a
  diagonal shift of D1 and D2.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from flint import arb, arb_mat, fmpq, fmpq_mat, fmpz_mat

from ..arrays import as_matrix
from ..errors import InputError
from ..numerics.arbutil import endpoints, precision
from ..numerics.dyadic import to_int_matrix
from ..numerics.fpenv import quiet_floats
from ..numerics.rounding import ETA, U, dot_error_upper, nonneg_sum_upper, up
from ..rationals import float_up
from .exact import max_sq_dist, sqrt_down, sqrt_up
from .inputs import factors, vector
from .result import Bracket, combine

_U = float(U)


# ----------------------------------------------------------------------------- upper
@quiet_floats
def kappa_upper(X: object, Y: object, G: object = None, a: object = None,
                c: object = None) -> Bracket:
    """Returns a bracket [0, hi] with kappa(X Y^T) <= hi, from the gauge ``G`` and centres
    ``a`` (for the rows of X G) and ``c`` (for the rows of Y G^{-T}).

    Missing G is the identity; missing centres are the midpoints of the coordinate ranges.
    A singular G raises InputError("G").
    """
    Xa, Ya = factors(X, Y)
    r = Xa.shape[1]
    Gf = np.eye(r) if G is None else as_matrix(G, "G", shape=(r, r))
    Gi, eg = to_int_matrix(Gf)
    det = int(Gi.det())
    if det == 0:
        raise InputError("the gauge is singular (det G = 0 exactly); it must be invertible",
                         field="G")
    inv = Gi.inv()  # exact fmpq_mat: G^{-1} = inv 2^-eg
    adj = fmpz_mat(r, r, [int((x * det).numer()) for x in inv.entries()])  # det * Gi^{-1}
    Xi, ex = to_int_matrix(Xa)
    Yi, ey = to_int_matrix(Ya)
    XG = Xi * Gi  # X G = XG 2^(ex + eg)
    # Y G^{-T} = Y Gi^{-T} 2^-eg = Yi adj^T 2^(ey - eg) / det
    YG = Yi * adj.transpose()
    sign = 1 if det > 0 else -1
    if sign < 0:
        YG = -YG
    XGf = np.asarray((Xa @ Gf), dtype=np.float64)
    try:
        YGf = np.linalg.solve(Gf, Ya.T).T if c is None else None
    except np.linalg.LinAlgError:
        raise InputError("the gauge is singular in float64; pass the centre c",
                         field="G") from None
    av = _midrange(XGf) if a is None else vector(a, "a", r)
    cv = _midrange(YGf) if c is None else vector(c, "c", r)
    sx = max_sq_dist(XG, ex + eg, 1, av)
    sy = max_sq_dist(YG, ey - eg, abs(det), cv)
    hi = sqrt_up(sx * sy)
    return Bracket("kappa", Fraction(0), hi, "exact",
                   {"upper": "gauge factorisation", "rad_X_sq": sx, "rad_Y_sq": sy,
                    "gauge": "identity" if G is None else "given",
                    "centres": "given" if a is not None and c is not None else "midrange"})


def _midrange(P: np.ndarray) -> np.ndarray:
    if not np.isfinite(P).all():
        raise InputError("the gauge is too ill-conditioned for a float centre; pass centres",
                         field="G")
    # halves first: max + min overflows for coordinates near the float maximum (any finite
    # centre is sound; rounding of the halves only moves it)
    return P.max(axis=0) / 2 + P.min(axis=0) / 2


# ----------------------------------------------------------------------------- rectangles
@quiet_floats
def kappa_lower_rectangles(X: object, Y: object, rects: object) -> Bracket:
    """Returns a bracket [lo, None] with lo = max over ``rects`` (rows (i, k, j, l)) of
    |T_ij - T_il - T_kj + T_kl| / 4 <= kappa(X Y^T), evaluated exactly."""
    Xa, Ya = factors(X, Y)
    R = _rects(rects, Xa.shape[0], Ya.shape[0])
    best, arg = Fraction(0), None
    for i, k, j, l in R.tolist():
        dx = [Fraction(float(u)) - Fraction(float(v)) for u, v in zip(Xa[i], Xa[k], strict=True)]
        dy = [Fraction(float(u)) - Fraction(float(v)) for u, v in zip(Ya[j], Ya[l], strict=True)]
        val = abs(sum((p * q for p, q in zip(dx, dy, strict=True)), Fraction(0))) / 4
        if val > best:
            best, arg = val, (i, k, j, l)
    return Bracket("kappa", best, None, "exact", {"lower": "rectangle", "rect": arg})


def _rects(rects: object, m: int, n: int) -> np.ndarray:
    if isinstance(rects, np.ma.MaskedArray):  # asarray would use the data under the mask
        raise InputError("must not be a masked array", field="rects")
    try:
        R = np.asarray(rects)
    except (TypeError, ValueError) as err:
        raise InputError(f"not an integer array: {err}", field="rects") from None
    if R.ndim == 1 and R.size == 4:
        R = R.reshape(1, 4)
    if R.ndim != 2 or R.shape[1] != 4 or R.shape[0] < 1 or R.dtype.kind not in "iu":
        raise InputError(f"must be an integer array of shape (s, 4), got {R.dtype} {R.shape}",
                         field="rects")
    R = R.astype(np.int64)
    if R.min() < 0 or R[:, :2].max() >= m or R[:, 2:].max() >= n:
        raise InputError(f"rows must lie in [0, {m}) and columns in [0, {n})", field="rects")
    return R


# ----------------------------------------------------------------------------- PSD dual
@quiet_floats
def kappa_lower_psd(X: object, Y: object, M: object, D1: object, D2: object) -> Bracket:
    """Returns a bracket [lo, None] with lo <= kappa(X Y^T), from the dual certificate
    (M, D1, D2) (see the module docstring).  Raises InputError when M does not have exactly
    zero row and column sums or D1, D2 have negative entries; returns lo = 0 when the PSD
    property cannot be verified in float64."""
    Xa, Ya = factors(X, Y)
    m, n = Xa.shape[0], Ya.shape[0]
    Mf = as_matrix(M, "M", shape=(m, n))
    d1 = vector(D1, "D1", m)
    d2 = vector(D2, "D2", n)
    for name, d in (("D1", d1), ("D2", d2)):
        if (d < 0).any():
            raise InputError(f"must be >= 0, entry {int(np.argmax(d < 0))} is negative",
                             field=name)
    _zero_sums(Mf)
    shift = _psd_shift(Mf, d1, d2)
    if shift is None:
        return Bracket("kappa", Fraction(0), None, "float64",
                       {"lower": "psd dual", "verified": False})
    s1, s2, delta = shift
    tr1 = sum((Fraction(float(x)) for x in d1), Fraction(0)) + s1 + m * delta
    tr2 = sum((Fraction(float(x)) for x in d2), Fraction(0)) + s2 + n * delta
    ip_lo = _abs_inner_lower(Mf, Xa, Ya)
    if ip_lo <= 0 or tr1 <= 0 or tr2 <= 0:
        return Bracket("kappa", Fraction(0), None, "float64",
                       {"lower": "psd dual", "verified": True, "inner": str(ip_lo)})
    den = sqrt_up(tr1 * tr2)
    lo = ip_lo / den
    # keep the bound short: round down to a 128-bit dyadic
    lo = sqrt_down(lo * lo) if lo.denominator.bit_length() > 256 else lo
    return Bracket("kappa", lo, None, "float64",
                   {"lower": "psd dual", "verified": True, "shift": delta,
                    "trD1": tr1, "trD2": tr2})


def _zero_sums(M: np.ndarray) -> None:
    """Raises InputError unless every row and column of M sums to exactly zero.

    math.fsum returns the correctly rounded exact sum, and an exact sum of floats that is
    not zero is a nonzero multiple of 2^-1074, which does not round to zero.
    """
    try:
        for i, row in enumerate(M.tolist()):
            if math.fsum(row) != 0.0:
                raise InputError(f"row {i} of M does not sum to exactly zero", field="M")
        for j, col in enumerate(M.T.tolist()):
            if math.fsum(col) != 0.0:
                raise InputError(f"column {j} of M does not sum to exactly zero", field="M")
    except OverflowError:
        raise InputError("sums of M overflow", field="M") from None


def _psd_shift(M: np.ndarray, d1: np.ndarray, d2: np.ndarray
               ) -> tuple[Fraction, Fraction, Fraction] | None:
    """Returns (s1, s2, delta) such that [[D1 + S1 + delta I, -M], [-M^T, D2 + S2 + delta I]]
    is PSD with S1, S2 >= 0 diagonal of traces s1, s2; None if no float Cholesky succeeded."""
    m, n = M.shape
    k = m + n
    S = np.zeros((k, k))
    S[:m, m:] = -M
    S[m:, :m] = -M.T
    d = np.concatenate([d1, d2])
    dmax = float(d.max()) if d.size else 0.0
    if dmax == 0.0:
        return None
    for sigma in (0.0, 2.0**-40 * dmax, 2.0**-30 * dmax, 2.0**-20 * dmax):
        diag = d + sigma  # rounded: the exact diagonal used is this float vector
        if not np.isfinite(diag).all():  # d near the float maximum: no shifted diagonal
            continue
        np.fill_diagonal(S, diag)
        try:
            L = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            continue
        if not np.isfinite(L).all():
            continue
        G = L @ L.T
        B = dot_error_upper(np.abs(L) @ np.abs(L).T, k)
        H = S - G
        bound = up(up(np.abs(H) * (1 + 2 * _U)) + B)  # |S - L L^T| entrywise
        rows = nonneg_sum_upper(bound.sum(axis=1), k)
        delta = float(np.max(rows))
        if not math.isfinite(delta):
            continue
        extra = [Fraction(float(x)) - Fraction(float(y)) for x, y in zip(diag, d, strict=True)]
        # lambda_min(S) >= -||S - L L^T||_2 >= -max row sum: S + delta I is PSD
        return sum(extra[:m], Fraction(0)), sum(extra[m:], Fraction(0)), Fraction(delta)
    return None


def _abs_inner_lower(M: np.ndarray, X: np.ndarray, Y: np.ndarray) -> Fraction:
    """Returns a rational <= |<M, X Y^T>| (a-priori float bound, exact fallback)."""
    n, r = Y.shape
    # overflow (inf, or inf - inf = NaN) is detected from v and err below: exact fallback
    with np.errstate(over="ignore", invalid="ignore"):
        MY = M @ Y
        e1 = dot_error_upper(np.abs(M) @ np.abs(Y), n)  # |fl(MY) - MY|
        v = float(np.sum(X * MY))
        # |sum X (MY)_fl - fl(sum)| <= gamma_{mr+1} sum |X| |MY_fl| ; plus sum |X| e1
        absum = float(np.sum(np.abs(X) * np.abs(MY)))
        k = X.size + 1
        second = up(nonneg_sum_upper(float(np.sum(np.abs(X) * e1)), k) * (1 + 4 * _U))
        err = up(up(dot_error_upper(absum, k) + second) + float_up(k * ETA))
    if math.isfinite(v) and math.isfinite(err) and abs(v) > 1e6 * err:
        return Fraction(abs(v)) - Fraction(float(err))
    return abs(_exact_inner(M, X, Y))


def _exact_inner(M: np.ndarray, X: np.ndarray, Y: np.ndarray) -> Fraction:
    Mi, em = to_int_matrix(M)
    Xi, ex = to_int_matrix(X)
    Yi, ey = to_int_matrix(Y)
    P = Xi.transpose() * Mi * Yi  # r x r
    tr = sum(int(P[i, i]) for i in range(P.nrows()))
    return Fraction(tr) * Fraction(2) ** (em + ex + ey)


# ----------------------------------------------------------------------------- variance dual
@quiet_floats
def kappa_lower_variance(X: object, Y: object, lam: object, mu: object) -> Bracket:
    """Returns a bracket [lo, None] with lo <= kappa(X Y^T), from weights ``lam`` on the rows
    of X and ``mu`` on the rows of Y (nonnegative, not all zero; normalised exactly).

    With l = lam / sum lam, u = mu / sum mu and B = diag(l)^{1/2} (I - 1 l^T) T (I - u 1^T)
    diag(u)^{1/2}, every factorisation T = X' Y'^T has rad(X')^2 >= Var_l(X'),
    rad(Y')^2 >= Var_u(Y') and ||B||_* <= sqrt(Var_l(X') Var_u(Y')), so kappa >= ||B||_*
    (proofs_notes/intrinsic_kappa_lower.md).  ||B||_* >= tr(W^T B) / ||W||_2 for the W = U V^T
    of a float SVD, evaluated in arb.  The minimum-enclosing-ball dual weights of an optimal
    gauge make the bound tight.
    """
    Xa, Ya = factors(X, Y)
    lv = vector(lam, "lam", Xa.shape[0])
    mv = vector(mu, "mu", Ya.shape[0])
    for name, w in (("lam", lv), ("mu", mv)):
        if (w < 0).any() or not (w > 0).any():
            raise InputError("weights must be >= 0 and not all zero", field=name)
    rows = [int(i) for i in np.nonzero(lv)[0]]
    cols = [int(j) for j in np.nonzero(mv)[0]]
    Tt = _centred_product(Xa[rows], lv[rows], Ya[cols], mv[cols])  # exact fmpq_mat
    s1, s2 = len(rows), len(cols)
    with precision(128):
        ls = [_ball(q).sqrt() for q in _normalised(lv[rows])]
        us = [_ball(q).sqrt() for q in _normalised(mv[cols])]
        B = arb_mat(Tt)
        for i in range(s1):
            for j in range(s2):
                B[i, j] = ls[i] * B[i, j] * us[j]
        Bf = np.array([[float(B[i, j].mid()) for j in range(s2)] for i in range(s1)])
        if not np.isfinite(Bf).all():
            return Bracket("kappa", Fraction(0), None, "arb", {"lower": "variance dual"})
        U, _, Vt = np.linalg.svd(Bf, full_matrices=False)
        W = arb_mat((U @ Vt).tolist())
        P = W.transpose() * B  # s2 x s2, trace = tr(W^T B)
        tr = sum((P[k, k] for k in range(s2)), arb(0))
        # the smaller Gram matrix of W = U V^T is close to the identity: its max row sum
        # bounds ||W||_2^2 sharply (the larger one is a projection, whose row sums are not)
        gram = W * W.transpose() if s1 <= s2 else W.transpose() * W
        norm2 = max_abs_row_sum_upper(gram)  # >= ||W||_2^2, or None
        lo = Fraction(0)
        if norm2 is not None and norm2 > 0:
            # a positive lower end of tr / sqrt(norm2) proves tr > 0, and then
            # tr / sqrt(norm2) <= tr / ||W||_2; otherwise lo stays 0 (clamped below anyway)
            try:
                lo = endpoints(tr / _ball(norm2).sqrt())[0]
            except ValueError:
                lo = Fraction(0)
    return Bracket("kappa", max(lo, Fraction(0)), None, "arb",
                   {"lower": "variance dual", "support": [len(rows), len(cols)]})


def _ball(q: Fraction) -> arb:
    return arb(fmpq(q.numerator, q.denominator))


def max_abs_row_sum_upper(M: arb_mat) -> Fraction | None:
    """Returns a rational >= max_a sum_b |M_ab| for every matrix in the ball matrix ``M``:
    the largest upper endpoint of the row sums, or None when a row sum is not finite or
    there is no row (nothing bounds a maximum over no rows).

    Python's ``max`` over arb balls would compare with arb's ``>``, which is False for
    overlapping balls: it could keep a ball whose upper end lies below another row's value.
    """
    best: Fraction | None = None
    for a in range(M.nrows()):
        s = sum((abs(M[a, b]) for b in range(M.ncols())), arb(0))
        try:
            hi = endpoints(s)[1]
        except ValueError:
            return None
        best = hi if best is None else max(best, hi)
    return best


def _normalised(w: np.ndarray) -> list[Fraction]:
    q = [Fraction(float(x)) for x in w]
    s = sum(q, Fraction(0))
    return [x / s for x in q]


def _centred_product(Xs: np.ndarray, lw: np.ndarray, Ys: np.ndarray,
                     uw: np.ndarray) -> fmpq_mat:
    """Returns (I - 1 l^T) Xs Ys^T (I - u 1^T) exactly (l, u = weights normalised)."""
    def centred(P: np.ndarray, w: np.ndarray) -> fmpq_mat:
        Pi, e = to_int_matrix(P)
        Wi, ew = to_int_matrix(w.reshape(1, -1))
        tot = sum(int(x) for x in Wi.entries())
        mean = Wi * Pi  # 1 x r: (sum_i w_i P_i) 2^-(e + ew) ... scaled below
        k = P.shape[0]
        ones = fmpz_mat(k, 1, [1] * k)
        # P - 1 (w^T P / sum w) = (tot Pi - 1 (Wi Pi)) 2^e / tot  (the 2^ew cancels)
        num = Pi * tot - ones * mean
        return fmpq_mat(num) * fmpq(2) ** e / tot if e >= 0 else \
            fmpq_mat(num) * fmpq(1, 2 ** -e) / tot
    return centred(Xs, lw) * centred(Ys, uw).transpose()


# ----------------------------------------------------------------------------- combined
@quiet_floats
def kappa_bracket(X: object, Y: object, *, G: object = None, a: object = None,
                  c: object = None, rects: object = None, M: object = None,
                  D1: object = None, D2: object = None, lam: object = None,
                  mu: object = None) -> Bracket:
    """Returns a bracket that contains kappa(X Y^T): the gauge upper bound and the best of
    the rectangle, variance-dual (lam, mu) and PSD (M, D1, D2) lower bounds (all optional)."""
    up_b = kappa_upper(X, Y, G, a, c)
    lows = []
    if lam is not None or mu is not None:
        if lam is None or mu is None:
            raise InputError("the variance dual needs lam and mu together",
                             field="mu" if mu is None else "lam")
        lows.append(kappa_lower_variance(X, Y, lam, mu))
    if rects is not None:
        lows.append(kappa_lower_rectangles(X, Y, rects))
    if M is not None or D1 is not None or D2 is not None:
        if M is None or D1 is None or D2 is None:
            missing = next(k for k, v in (("M", M), ("D1", D1), ("D2", D2)) if v is None)
            raise InputError("the PSD dual needs M, D1 and D2 together", field=missing)
        lows.append(kappa_lower_psd(X, Y, M, D1, D2))
    low = max(lows, key=lambda b: b.lo) if lows else None
    if low is not None and low.lo > up_b.hi:  # pragma: no cover - would be a kernel bug
        raise AssertionError("kappa lower bound above the upper bound")
    return combine("kappa", low, up_b)
