"""Lower certificate ``bernstein``: a subspace on which A is bounded below, with a left inverse.

Certificate (rank p): W (N x p) whose rows W[J, :] are exactly the p x p identity for p
distinct indices J, and P (N x m).  With R = P A W - W and t = eps + chi,

    value := ||R||_inf + ||P||_inf t < 1

proves that every B with ||A - B||_row1 <= t has rank >= p (proofs_notes/bernstein.md).  On a
given subspace col(W), the best value over P is at most the value of any decoder certificate
that holds with the same column space, and can be smaller by up to the factor ||W||_inf the
decoder pays for its basis.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np
from flint import fmpz_mat

from ..arrays import as_index_vector, as_matrix
from ..errors import InputError
from ..numerics import arbutil, dyadic, tiers, workbound
from ..numerics.ballmat import (
    U_F,
    Ball,
    abs_row_sums_lower,
    abs_row_sums_upper,
    ball_abs_row_sums,
    ball_matmul,
)
from ..numerics.blocks import row_blocks
from ..numerics.rounding import up
from ..numerics.tiers import safe_max_lower, safe_max_upper
from ..rationals import qstr
from ..result import Check, Enclosure

ARRAYS = ("W", "P", "J")
ARB_PRECISIONS = (128, 256)

Bounds = tiers.Bounds


def parse_arrays(arrays: Mapping[str, object], rank: int, m: int, N: int, *,
                 source: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (W, P, J) as float64 N x p, float64 N x m and int64 length p arrays.

    Raises InputError naming ``lower.rank`` (p > N, or W's column count differs from the
    rank), ``lower.W`` (not 2-D with N rows, NaN/Inf, or W[J, :] not exactly the identity),
    ``lower.P`` (shape other than N x m, NaN/Inf) or ``lower.J`` (not p distinct indices in
    [0, N)).
    """
    if rank > N:
        raise InputError(f"rank {rank} exceeds N = {N}: W cannot hold a {rank} x {rank} "
                         "identity in distinct rows", field="lower.rank", source=source)
    W = as_matrix(arrays["W"], "lower.W", source=source, shape=(N, None))
    if W.shape[1] != rank:
        raise InputError(f"rank is {rank} but lower.W has {W.shape[1]} columns",
                         field="lower.rank", source=source)
    P = as_matrix(arrays["P"], "lower.P", source=source, shape=(N, m))
    J = as_index_vector(arrays["J"], "lower.J", N, source=source)
    if len(J) != rank:
        raise InputError(f"has {len(J)} indices but rank is {rank}", field="lower.J",
                         source=source)
    # exact comparison of stored floats (-0.0 == 0.0 is the same number)
    if not np.array_equal(W[J, :], np.eye(rank)):
        raise InputError("the rows W[J, :] must be exactly the identity matrix",
                         field="lower.W", source=source)
    return W, P, J


def check_bernstein(A: np.ndarray, W: np.ndarray, P: np.ndarray, t: Fraction, *,
                    eps: Fraction, chi: Fraction, tier: str = "auto") -> Check:
    """Decides ||P A W - W||_inf + ||P||_inf t < 1 for exact stored A, W, P (validated by
    :func:`parse_arrays`; ``t`` = eps + chi).

    Returns a :class:`Check` of kind ``"bernstein"`` with ``threshold`` 1,
    ``detail["sense"]`` ``"<"`` (``margin`` = 1 - value; a margin of exactly 0 is not a proof)
    and ``detail["parts"]``: enclosures of ``delta`` = ||P A W - W||_inf and ``pn`` =
    ||P||_inf from the last tier run.  ``value`` is an interval containing the exact
    left-hand side.  ``status`` is ``"holds"`` when value < 1 is proved (then every B with
    ||A - B||_row1 <= t has rank >= p), ``"fails"`` when value >= 1 is proved, else
    ``"undecided"``.  ``tier="auto"`` runs float64 (a-priori rounding bounds), arb at 128 and
    256 bits, then exact dyadic integers, stopping at the first tier that decides; the exact
    tier always decides.
    """
    p = W.shape[1]
    def parts_of(tr: str, prec: int | None) -> Bounds | None:
        if tr == "float64":
            return _float_parts(A, W, P)
        if tr == "arb":
            return _arb_parts(A, W, P, prec)  # type: ignore[arg-type]
        return _exact_parts(A, W, P)

    def value_of(b: Bounds) -> Enclosure:
        (dl, dh), (pl, ph) = b["delta"], b["pn"]
        return Enclosure(dl + pl * t, dh + ph * t)

    r = tiers.escalate(tiers.plan(tier, ARB_PRECISIONS), parts_of, value_of)
    return Check(status=r.status, kind="bernstein", rank=p, eps=eps,  # type: ignore[arg-type]
                 threshold=Fraction(1), value=r.value, tier=r.run[-1],
                 claim=f"||P A W - W||_inf + ||P||_inf {qstr(t)} < 1", chi=chi,
                 precision=r.precision, tiers_run=tuple(r.run),
                 detail={"sense": "<", "parts": r.parts})


def _float_parts(A: np.ndarray, W: np.ndarray, P: np.ndarray) -> Bounds | None:
    """Float64 mid-radius enclosures (ballmat): (A W) first, so no N x N intermediate."""
    (m, N), p = A.shape, W.shape[1]
    workbound.charge(workbound.float_product(m, N, p) + workbound.float_product(N, m, p),
                     "the float64 tier")
    with np.errstate(all="ignore"):
        PAW = ball_matmul(Ball.exact(P), ball_matmul(Ball.exact(A), Ball.exact(W)))
        mid = PAW.mid - W
        # one RN subtraction per entry: |fl(x) - x| <= u |fl(x)|, no underflow in a subtraction
        R = Ball(mid, up(PAW.rad + up(np.abs(mid) * U_F)))
        d_lo, d_hi = ball_abs_row_sums(R)
        # NaN row bounds give -inf / +inf here (never a number), and the tier abstains
        vals = (safe_max_lower(d_lo), safe_max_upper(d_hi), safe_max_lower(abs_row_sums_lower(P)),
                safe_max_upper(abs_row_sums_upper(P)))
    if not np.all(np.isfinite(vals)):
        return None
    f = [Fraction(float(x)) for x in vals]
    return {"delta": (f[0], f[1]), "pn": (f[2], f[3])}


# per arb entry of the row-sum loops over P and R in Python (exact endpoints): a review
# measured 2.7 times the earlier 3000
ARB_ROW_UNITS = 9_000


def _arb_parts(A: np.ndarray, W: np.ndarray, P: np.ndarray, prec: int) -> Bounds | None:
    (m, N), p = A.shape, W.shape[1]
    workbound.charge(workbound.arb_product(m, N, p, prec) + workbound.arb_product(N, m, p, prec)
                     + ARB_ROW_UNITS * N * (m + p), f"the arb tier at {prec} bits")
    d_hi = d_lo = pn_lo = pn_hi = Fraction(0)
    with arbutil.precision(prec):
        AW = arbutil.right_product(A, arbutil.matrix(W))
        # rows of P A W - W and of P are independent: P (N x m, as large as A) is held as
        # balls a row block at a time
        for b in row_blocks(*P.shape):
            Pb = arbutil.matrix(P[b])
            delta = arbutil.max_row_abs_sum(Pb * AW - arbutil.matrix(W[b]))
            pn = arbutil.max_row_abs_sum(Pb)
            if delta is None or pn is None:
                return None
            d_lo, d_hi = max(d_lo, delta[0]), max(d_hi, delta[1])
            pn_lo, pn_hi = max(pn_lo, pn[0]), max(pn_hi, pn[1])
    return {"delta": (d_lo, d_hi), "pn": (pn_lo, pn_hi)}


def _exact_parts(A: np.ndarray, W: np.ndarray, P: np.ndarray) -> Bounds:
    (m, N), p = A.shape, W.shape[1]
    bw, bp = workbound.bits(W), workbound.bits(P)
    baw = workbound.product_bits(workbound.bits(A), bw, N)
    workbound.charge(workbound.exact_product(m, N, p, workbound.bits(A), bw)
                     + workbound.exact_product(N, m, p, bp, baw)
                     + workbound.exact_rows(N * p, workbound.product_bits(bp, baw, m) + 2200)
                     + workbound.exact_rows(N * m, bp), "the exact tier")
    MW, ew = dyadic.to_int_matrix(W)
    # A and P (each m N entries) are converted a row block at a time, each block with its own
    # power of two; only A W (m x p) is held whole, at the least exponent of its blocks
    parts = []
    for b in row_blocks(m, N):
        MA, ea = dyadic.to_int_matrix(A[b])
        parts.append((MA * MW, ea + ew, bool(np.any(A[b]))))
    eaw = min((e for _, e, nz in parts if nz), default=0)  # a zero block has any exponent
    MAW = fmpz_mat(m, p, [x for M, e, nz in parts
                          for x in (dyadic.scaled(M, e - eaw) if nz else M).entries()])
    delta = pn = Fraction(0)
    for b in row_blocks(N, m):
        MP, ep = dyadic.to_int_matrix(P[b])
        Wb, ewb = dyadic.to_int_matrix(W[b])
        er = ep + eaw
        e0 = min(er, ewb)
        R = dyadic.scaled(MP * MAW, er - e0) - dyadic.scaled(Wb, ewb - e0)
        delta = max(delta, dyadic.max_row_abs_sum(R, e0))
        pn = max(pn, dyadic.max_row_abs_sum(MP, ep))
    return {"delta": (delta, delta), "pn": (pn, pn)}
