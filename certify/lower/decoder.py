"""Lower certificates ``decoder`` (p; D p x m, W N x p, X p x p) and ``submatrix`` (p; rows,
cols, X): ||I - X D A W||_inf + ||X D||_inf ||W||_inf (eps + chi) < 1 makes X D B W invertible
for every B within eps + chi, so rank B >= p.  Statement and proof:
proofs_notes/lower_decoder.md."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..numerics import arbutil, dyadic, tiers, workbound
from ..numerics.ballmat import (
    Ball,
    abs_row_sums_lower,
    abs_row_sums_upper,
    ball_abs_row_sums,
    ball_matmul,
    identity_minus,
)
from ..numerics.tiers import safe_max_lower, safe_max_upper
from ..rationals import qstr
from ..result import Check, Enclosure

DECODER_ARB_PRECISIONS = (128, 256)


def check_decoder(A: np.ndarray, D: np.ndarray | None, W: np.ndarray | None, X: np.ndarray,
                   sel: tuple[np.ndarray, np.ndarray] | None, p: int, t: Fraction,
                  eps: Fraction, chi: Fraction, tier: str) -> Check:
    """Returns the check of ||I - X M||_inf + ||X D||_inf ||W||_inf t < 1 with M = D A W (or,
    for ``sel`` = (rows, cols), the submatrix M = A[rows][:, cols] with D, W selections):
    ``holds`` when the enclosure of the left side (float64 with a-priori bounds, arb balls,
    then exact dyadics) is below 1, ``fails`` when it is proved >= 1.
    proofs_notes/lower_decoder.md."""
    kind = "submatrix" if sel is not None else "decoder"
    claim = f"||I - X M||_inf + ||X D||_inf ||W||_inf {qstr(t)} < 1"

    def parts_of(tr: str, prec: int | None) -> Bounds | None:
        if tr == "float64":
            return _float_parts(A, D, W, X, sel)
        if tr == "arb":
            return _arb_parts(A, D, W, X, sel, prec)  # type: ignore[arg-type]
        return _exact_parts(A, D, W, X, sel)

    r = tiers.escalate(tiers.plan(tier, DECODER_ARB_PRECISIONS), parts_of,
                       lambda b: _combine(b, t))
    return Check(status=r.status, kind=kind, rank=p, eps=eps,  # type: ignore[arg-type]
                 threshold=Fraction(1), value=r.value, tier=r.run[-1], claim=claim, chi=chi,
                 precision=r.precision, tiers_run=tuple(r.run),
                 detail={"sense": "<", "parts": r.parts})


Bounds = tiers.Bounds


def _combine(b: Bounds, t: Fraction) -> Enclosure:
    """delta + xd w t, exactly, from enclosures of delta, ||XD||_inf and ||W||_inf."""
    (dl, dh), (xl, xh), (wl, wh) = b["delta"], b["xd"], b["w"]
    return Enclosure(dl + xl * wl * t, dh + xh * wh * t)


def _fr(x: float) -> Fraction:
    return Fraction(float(x))


def _float_parts(A, D, W, X, sel) -> Bounds | None:
    """Float64 mid-radius enclosures (round-to-nearest plus outward steps; ballmat)."""
    p, (m, N) = X.shape[0], A.shape
    workbound.charge((workbound.float_product(p, m, N) + workbound.float_product(p, N, p)
                      + workbound.float_product(p, p, m) if sel is None else 0)
                     + workbound.float_product(p, p, p), "the float64 tier")
    with np.errstate(all="ignore"):
        Xb = Ball.exact(X)
        if sel is None:
            M = ball_matmul(ball_matmul(Ball.exact(D), Ball.exact(A)), Ball.exact(W))
            XD = ball_matmul(Xb, Ball.exact(D))
            xd_lo, xd_hi = ball_abs_row_sums(XD)
            w = (safe_max_lower(abs_row_sums_lower(W)), safe_max_upper(abs_row_sums_upper(W)))
        else:
            rows, cols = sel
            M = Ball.exact(A[np.ix_(rows, cols)])
            # X D places the columns of X at the selected rows: the same row sums as X
            xd_lo, xd_hi = abs_row_sums_lower(X), abs_row_sums_upper(X)
            w = (1.0, 1.0)  # every row of a column selection has one 1 or none, some have one
        R = identity_minus(ball_matmul(Xb, M))
        d_lo, d_hi = ball_abs_row_sums(R)
        # NaN row bounds give -inf / +inf here (never a number), and the tier abstains
        vals = (safe_max_lower(d_lo), safe_max_upper(d_hi), safe_max_lower(xd_lo),
                safe_max_upper(xd_hi), *w)
    if not np.all(np.isfinite(vals)):
        return None
    return {"delta": (_fr(vals[0]), _fr(vals[1])), "xd": (_fr(vals[2]), _fr(vals[3])),
            "w": (_fr(vals[4]), _fr(vals[5]))}


# per arb entry of a row-sum loop in Python (exact endpoints): a review measured about 4 times
# the earlier 3000 on the N rows of W, which that price left out
ARB_ROW_UNITS = 12_000


def _arb_parts(A, D, W, X, sel, prec: int) -> Bounds | None:
    p = X.shape[0]
    m, N = A.shape
    workbound.charge((workbound.arb_product(p, m, N, prec) + workbound.arb_product(p, N, p, prec)
                      + workbound.arb_product(p, p, m, prec) if sel is None else 0)
                     + workbound.arb_product(p, p, p, prec) + ARB_ROW_UNITS * p * (p + m + N),
                     f"the arb tier at {prec} bits")
    with arbutil.precision(prec):
        Xa = arbutil.matrix(X)
        if sel is None:
            Da = arbutil.matrix(D)
            M = arbutil.left_product(D, A) * arbutil.matrix(W)  # A a row block at a time
            xd = arbutil.max_row_abs_sum(Xa * Da)
            w = arbutil.max_row_abs_sum(arbutil.matrix(W))
        else:
            rows, cols = sel
            M = arbutil.matrix(A[np.ix_(rows, cols)])
            xd = arbutil.max_row_abs_sum(Xa)
            w = (Fraction(1), Fraction(1))
        delta = arbutil.max_row_abs_sum(arbutil.identity(p) - Xa * M)
    if delta is None or xd is None or w is None:
        return None
    return {"delta": delta, "xd": xd, "w": w}


def _exact_parts(A, D, W, X, sel) -> Bounds:
    p = X.shape[0]
    if sel is None:  # D A W, X D and X (D A W), exactly
        bm = workbound.product_bits(workbound.product_bits(
            workbound.bits(D), workbound.bits(A), A.shape[0]), workbound.bits(W), A.shape[1])
        price = (workbound.exact_chain(D, A, W) + workbound.exact_chain(X, D)
                 + workbound.exact_product(p, p, p, workbound.bits(X), bm)
                 + workbound.exact_rows(p * p, workbound.product_bits(workbound.bits(X), bm, p)
                                        + 2200))
    else:
        price = workbound.exact_chain(X, A[np.ix_(*sel)])
    workbound.charge(price, "the exact tier")
    MX, ex = dyadic.to_int_matrix(X)
    if sel is None:
        MD, ed = dyadic.to_int_matrix(D)
        MA, ea = dyadic.to_int_matrix(A)
        MW, ew = dyadic.to_int_matrix(W)
        MM, em = MD * MA * MW, ed + ea + ew
        xd = dyadic.max_row_abs_sum(MX * MD, ex + ed)
        w = dyadic.max_row_abs_sum(MW, ew)
    else:
        rows, cols = sel
        MM, em = dyadic.to_int_matrix(A[np.ix_(rows, cols)])
        xd = dyadic.max_row_abs_sum(MX, ex)
        w = Fraction(1)
    XM, exm = MX * MM, ex + em
    e0 = min(exm, 0)
    R = dyadic.scaled(dyadic.identity(p), -e0) - dyadic.scaled(XM, exm - e0)
    delta = dyadic.max_row_abs_sum(R, e0)
    return {"delta": (delta, delta), "xd": (xd, xd), "w": (w, w)}
