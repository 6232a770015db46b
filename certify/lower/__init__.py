"""Lower certificates: proofs that every B with ||A - B||_row1 <= eps + chi has rank >= L.

Kinds (statements and proofs in proofs_notes/lower_nonzero.md, lower_frobenius.md,
lower_decoder.md, bernstein.md, rowset.md, polytope.md):

* ``nonzero`` (L = 1): ||A||_row1 > eps + chi, so B = 0 is not close enough.
* ``frobenius_tail`` (L): sum_{i >= L} sigma_i(A)^2 > m (eps + chi)^2 (Eckart-Young with
  ||E_i||_2 <= ||E_i||_1).
* ``decoder`` (p; D p x m, W N x p, X p x p): ||I - X D A W||_inf + ||X D||_inf ||W||_inf
  (eps + chi) < 1 makes X D B W invertible for every such B.
* ``submatrix`` (p; rows, cols, X): the decoder argument with D, W row/column selections.
* ``bernstein`` (p; W N x p with W[J, :] = I, P N x m, J): ||P A W - W||_inf + ||P||_inf
  (eps + chi) < 1 (``certify/lower/bernstein.py``).
* ``rowset`` (p <= 12; I p rows, Z 2^(p-1) x N in [-1, 1]): every sign pattern sigma has a
  z_s with sigma_i (A[I] z_s)_i > eps + chi (``certify/lower/rowset.py``).
* ``rowmix`` (p <= 12; D p x m with rows of l1 norm <= 1, Z): the same on the rows of D A.
* ``polytope`` (p <= 12; points Y labelled by rows I, facets F, witnesses Z, G): the facets of
  conv(+-Y) are listed exactly, and on every facet one witness z has sigma (A z)_i > eps + chi
  for each of its labels (``certify/lower/polytope.py``, Borsuk-Ulam).

"fails" means the certificate's own inequality is proved false, not that r_eps < L.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np
from flint import arb_mat, fmpz_mat

from ..arrays import as_index_vector, as_matrix
from ..errors import InputError
from ..numerics import arbutil, dyadic, tiers, workbound
from ..numerics.ballmat import (
    Ball,
    abs_row_sums_lower,
    abs_row_sums_upper,
    ball_abs_row_sums,
    ball_matmul,
    identity_minus,
)
from ..numerics.rowl1 import decide_max_row_l1
from ..numerics.svd import enclose, frobenius_sq_enclosure
from ..numerics.tiers import safe_max_lower, safe_max_upper
from ..rationals import parse_eps, to_rational
from ..result import Check, Enclosure
from ..upper import check_tier
from . import bernstein, polytope, rowset

KINDS: dict[str, tuple[str, ...]] = {
    "nonzero": (),
    "frobenius_tail": (),
    "decoder": ("D", "W", "X"),
    "submatrix": ("rows", "cols", "X"),
    "bernstein": bernstein.ARRAYS,
    "rowset": rowset.ARRAYS,
    "rowmix": rowset.MIX_ARRAYS,
    "polytope": polytope.ARRAYS,
}
DECODER_ARB_PRECISIONS = (128, 256)
SVD_AUTO_TIERS = ("float64", "arb")


def check_lower(A: object, certificate: Mapping, eps: object, *, tier: str = "auto",
                chi: object = 0, source: str | None = None,
                max_work: int | None = None) -> Check:
    """Decides a lower certificate's inequality at threshold eps + chi for the exact stored A.

    Returns a :class:`Check` with ``status`` ``"holds"`` (proved: every B with
    ||A - B||_row1 <= eps + chi has rank >= ``rank``, so r_eps(A_record) >= rank when
    ||A_record - A||_row1 <= chi), ``"fails"`` (the certificate's inequality is proved
    false) or ``"undecided"``.  ``value`` encloses the compared quantity:

    * nonzero: ||A||_row1, claim value > eps + chi;
    * frobenius_tail: sum_{i >= L} sigma_i(A)^2, claim value > m (eps + chi)^2;
    * decoder / submatrix: ||I - X M||_inf + ||X D||_inf ||W||_inf (eps + chi), claim
      value < 1 (``detail["sense"]`` is ``"<"``, so ``margin`` = 1 - value; a margin of
      exactly 0 is not a proof);
    * bernstein: ||P A W - W||_inf + ||P||_inf (eps + chi), claim value < 1 (as decoder);
    * rowset: min_(s,i) sigma_i(s) (A[I] z_s)_i, claim value > eps + chi;
    * rowmix: the same on the rows of D A (every row of D of l1 norm at most 1);
    * polytope: min over facets F and their labels of sigma (A z_F)_i, claim value > eps + chi
      (``fails`` with ``value`` None when the facets are not those of conv(+-Y)).

    ``tier="auto"`` escalates float64 -> arb -> exact (frobenius_tail: float64 -> arb; the
    ``"exact"`` tier, when forced, uses exact dyadic residuals of the same float SVD).
    Raises InputError (field ``lower.<name>``) for a certificate that is not a mapping, an
    unknown kind, missing or extra arrays, wrong shapes, NaN/Inf, a rank that disagrees with
    the arrays, rank < 1 or rank > min(m, N), bad index vectors, or (bernstein) rows W[J, :]
    that are not exactly the identity.

    ``max_work`` (work units, ``certify.numerics.workbound``; default: the enclosing record's meter,
    else ``DEFAULT_MAX_WORK``, about 60 s) bounds the work: a phase whose estimate would
    pass it is not run, and the result is ``"undecided"`` (``value`` None) with
    ``detail["reason"]`` starting ``"work limit"``.
    """
    limit = workbound.check_max_work(max_work)
    eps_q = parse_eps(eps)
    chi_q = to_rational(chi, field="chi")
    if chi_q < 0:
        raise InputError("slack chi must be >= 0", field="chi", source=source)
    tier = check_tier(tier)
    kind, rank, arrays = parse_certificate(certificate, source=source)
    try:
        with workbound.metered(limit):
            return _check_kind(A, kind, rank, arrays, eps_q, chi_q, tier, source)
    except workbound.WorkLimit as err:
        t = eps_q + chi_q
        sense, threshold = ">", t
        if kind in ("decoder", "submatrix", "bernstein"):
            sense, threshold = "<", Fraction(1)
        elif kind == "frobenius_tail":
            threshold = np.shape(A)[0] * t * t
        return Check(status="undecided", kind=kind, rank=rank, eps=eps_q, threshold=threshold,
                     value=None, tier="float64", claim=f"{kind} certificate of rank {rank}",
                     chi=chi_q, tiers_run=(), detail={"sense": sense, "reason": str(err)})


def _check_kind(A: object, kind: str, rank: int, arrays: dict[str, object], eps_q: Fraction,
                chi_q: Fraction, tier: str, source: str | None) -> Check:
    """The body of :func:`check_lower` for a parsed certificate (inside its meter)."""
    A = as_matrix(A, "A", source=source)
    m, N = A.shape
    if m == 0 or N == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    if rank > min(m, N):
        # every B of this shape has rank <= min(m, N): such a claim is malformed, not false
        raise InputError(f"rank {rank} exceeds min(m, N) = {min(m, N)} of the {m} x {N} "
                         "matrix", field="lower.rank", source=source)
    t = eps_q + chi_q
    if kind == "nonzero":
        if rank != 1:
            raise InputError(f"a nonzero certificate proves rank 1, got rank {rank}",
                             field="lower.rank", source=source)
        return _check_nonzero(A, t, eps_q, chi_q, tier, source)
    if kind == "frobenius_tail":
        return _check_frobenius(A, rank, t, eps_q, chi_q, tier)
    if kind == "decoder":
        D = as_matrix(arrays["D"], "lower.D", source=source, shape=(rank, m))
        W = as_matrix(arrays["W"], "lower.W", source=source, shape=(N, rank))
        X = as_matrix(arrays["X"], "lower.X", source=source, shape=(rank, rank))
        return _check_decoder(A, D, W, X, None, rank, t, eps_q, chi_q, tier)
    if kind == "bernstein":
        W, P, _ = bernstein.parse_arrays(arrays, rank, m, N, source=source)
        return bernstein.check_bernstein(A, W, P, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "rowset":
        I, Z = rowset.parse_arrays(arrays, rank, m, N, source=source)
        return rowset.check_rowset(A, I, Z, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "polytope":
        Y, I, F, Z, G = polytope.parse_arrays(arrays, rank, m, N, source=source)
        return polytope.check_polytope(A, Y, I, F, Z, G, t, eps=eps_q, chi=chi_q, tier=tier)
    if kind == "rowmix":
        D, Z = rowset.parse_mix_arrays(arrays, rank, m, N, source=source)
        return rowset.check_rowmix(A, D, Z, t, eps=eps_q, chi=chi_q, tier=tier)
    rows = as_index_vector(arrays["rows"], "lower.rows", m, source=source)
    cols = as_index_vector(arrays["cols"], "lower.cols", N, source=source)
    if len(rows) != rank:
        raise InputError(f"has {len(rows)} indices but rank is {rank}", field="lower.rows",
                         source=source)
    if len(cols) != rank:
        raise InputError(f"has {len(cols)} indices but rank is {rank}", field="lower.cols",
                         source=source)
    X = as_matrix(arrays["X"], "lower.X", source=source, shape=(rank, rank))
    return _check_decoder(A, None, None, X, (rows, cols), rank, t, eps_q, chi_q, tier)


def parse_certificate(certificate: object, *, source: str | None = None
                      ) -> tuple[str, int, dict[str, object]]:
    """Returns (kind, rank, arrays) after checking the mapping's keys and the rank's type."""
    if not isinstance(certificate, Mapping):
        raise InputError(f"a lower certificate must be a mapping, got "
                         f"{type(certificate).__name__}", field="lower", source=source)
    kind = certificate.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}",
                         field="lower.kind", source=source)
    if "rank" not in certificate:
        raise InputError("missing", field="lower.rank", source=source)
    rank = certificate["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 1:
        raise InputError(f"rank must be an integer >= 1, got {rank!r}", field="lower.rank",
                         source=source)
    want = KINDS[kind]
    for name in want:
        if name not in certificate:
            raise InputError(f"missing (a {kind} certificate needs {', '.join(want)})",
                             field=f"lower.{name}", source=source)
    for name in certificate:
        if name not in ("kind", "rank") and name not in want:
            raise InputError(f"unexpected field for a {kind} certificate",
                             field=f"lower.{name}", source=source)
    return kind, int(rank), {name: certificate[name] for name in want}


# --- nonzero ---------------------------------------------------------------------------

def _check_nonzero(A: np.ndarray, t: Fraction, eps: Fraction, chi: Fraction, tier: str,
                   source: str | None) -> Check:
    m, N = A.shape
    d = decide_max_row_l1(A, np.zeros((m, 0)), np.zeros((0, N)), t, tier=tier, source=source)
    status = {"fails": "holds", "holds": "fails"}.get(d.status, "undecided")
    return Check(status=status, kind="nonzero", rank=1, eps=eps, threshold=t,  # type: ignore[arg-type]
                 value=d.value, tier=d.tier, claim=f"||A||_row1 > {t}", chi=chi,
                 precision=d.precision, tiers_run=d.tiers_run,
                 detail={"sense": ">", "rows_escalated": d.rows_escalated})


# --- frobenius tail --------------------------------------------------------------------

def tail_enclosure(lo: tuple[Fraction, ...], hi: tuple[Fraction, ...], L: int,
                   frob_sq: Enclosure | None) -> Enclosure:
    """Returns an interval containing sum_{i >= L} sigma_i^2 (1-indexed) given enclosures
    sigma_i in [lo_i, hi_i] (descending, lo_i >= 0) and ||A||_F^2 in ``frob_sq``.

    Two bounds each side: the tail of the enclosures, and (when ``frob_sq`` is given)
    ||A||_F^2 minus the head.
    """
    low = sum((x * x for x in lo[L - 1:]), Fraction(0))
    high = sum((x * x for x in hi[L - 1:]), Fraction(0))
    if frob_sq is not None:
        head_lo = sum((x * x for x in lo[:L - 1]), Fraction(0))
        head_hi = sum((x * x for x in hi[:L - 1]), Fraction(0))
        low = max(low, frob_sq.lo - head_hi)
        high = min(high, frob_sq.hi - head_lo)
    low = max(low, Fraction(0))
    if high < low:  # both sides are rigorous: an empty intersection is a kernel bug
        raise AssertionError(f"kernel bug: empty tail enclosure [{low}, {high}]")
    return Enclosure(low, high)


def _check_frobenius(A: np.ndarray, L: int, t: Fraction, eps: Fraction, chi: Fraction,
                     tier: str) -> Check:
    m, N = A.shape
    p = min(m, N)
    T = m * t * t
    claim = f"sum_(i>={L}) sigma_i(A)^2 > m (eps+chi)^2 = {T}"
    base = dict(kind="frobenius_tail", rank=L, eps=eps, threshold=T, claim=claim, chi=chi)
    if L > p:
        # the tail is empty: 0 > T is false for T > 0
        return Check(status="fails", value=Enclosure(Fraction(0), Fraction(0)), tier="exact",
                     tiers_run=("exact",), detail={"sense": ">", "reason": "rank > min(m, N)"},
                     **base)  # type: ignore[arg-type]
    tiers = SVD_AUTO_TIERS if tier == "auto" else (tier,)
    # the float SVD (LAPACK, O(m N p)) and its float64 residuals; arb and exact price
    # themselves in svd.enclose once the factors' bits are known
    workbound.charge(30 * m * N * p + 20 * m * N, "the float64 SVD")
    frob: Enclosure | None = None  # ||A||_F^2, computed only when the direct bound is thin
    cache: dict = {}  # one float SVD shared by the tiers
    run: list[str] = []
    value = None
    status = "undecided"
    detail: dict = {"sense": ">"}
    for tr in tiers:
        run.append(tr)
        sv = enclose(A, tr, cache)
        lo, hi = sv.lo, sv.hi
        v = tail_enclosure(lo, hi, L, frob)
        if frob is None and v.lo <= T < v.hi:
            frob = frobenius_sq_enclosure(A)
            v = tail_enclosure(lo, hi, L, frob)
        value = v if value is None else Enclosure(max(v.lo, value.lo), min(v.hi, value.hi))
        detail["residuals"] = dict(sv.residuals)
        if value.lo > T:
            status = "holds"
            break
        if value.hi <= T:
            status = "fails"
            break
    return Check(status=status, value=value, tier=run[-1], tiers_run=tuple(run),  # type: ignore[arg-type]
                 precision=128 if run[-1] == "arb" else None, detail=detail, **base)


# --- decoder and submatrix -------------------------------------------------------------

def _check_decoder(A: np.ndarray, D: np.ndarray | None, W: np.ndarray | None, X: np.ndarray,
                   sel: tuple[np.ndarray, np.ndarray] | None, p: int, t: Fraction,
                   eps: Fraction, chi: Fraction, tier: str) -> Check:
    kind = "submatrix" if sel is not None else "decoder"
    claim = f"||I - X M||_inf + ||X D||_inf ||W||_inf {t} < 1"

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


def _arb_max_row_abs(M: arb_mat) -> tuple[Fraction, Fraction] | None:
    lo = hi = None
    for s in arbutil.row_abs_sums(M):
        try:
            a, b = arbutil.endpoints(s)
        except ValueError:
            return None
        a = max(a, Fraction(0))
        lo = a if lo is None else max(lo, a)
        hi = b if hi is None else max(hi, b)
    return (lo, hi) if lo is not None else (Fraction(0), Fraction(0))


def _arb_parts(A, D, W, X, sel, prec: int) -> Bounds | None:
    p = X.shape[0]
    m, N = A.shape
    workbound.charge((workbound.arb_product(p, m, N, prec) + workbound.arb_product(p, N, p, prec)
                      + workbound.arb_product(p, p, m, prec) if sel is None else 0)
                     + workbound.arb_product(p, p, p, prec) + 3000 * p * (p + m),
                     f"the arb tier at {prec} bits")
    with arbutil.precision(prec):
        Xa = arbutil.matrix(X)
        if sel is None:
            Da = arbutil.matrix(D)
            M = Da * arbutil.matrix(A) * arbutil.matrix(W)
            xd = _arb_max_row_abs(Xa * Da)
            w = _arb_max_row_abs(arbutil.matrix(W))
        else:
            rows, cols = sel
            M = arbutil.matrix(A[np.ix_(rows, cols)])
            xd = _arb_max_row_abs(Xa)
            w = (Fraction(1), Fraction(1))
        delta = _arb_max_row_abs(arbutil.identity(p) - Xa * M)
    if delta is None or xd is None or w is None:
        return None
    return {"delta": delta, "xd": xd, "w": w}


def _exact_max_row_abs(M: fmpz_mat, e: int) -> Fraction:
    cols = M.ncols()
    ent = [abs(int(v)) for v in M.entries()]
    best = max((sum(ent[i * cols:(i + 1) * cols]) for i in range(M.nrows())), default=0)
    return Fraction(best) * dyadic.pow2(e)


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
        xd = _exact_max_row_abs(MX * MD, ex + ed)
        w = _exact_max_row_abs(MW, ew)
    else:
        rows, cols = sel
        MM, em = dyadic.to_int_matrix(A[np.ix_(rows, cols)])
        xd = _exact_max_row_abs(MX, ex)
        w = Fraction(1)
    XM, exm = MX * MM, ex + em
    e0 = min(exm, 0)
    R = dyadic.scaled(dyadic.identity(p), -e0) - dyadic.scaled(XM, exm - e0)
    delta = _exact_max_row_abs(R, e0)
    return {"delta": (delta, delta), "xd": (xd, xd), "w": (w, w)}
