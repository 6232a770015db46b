"""Tiered enclosures of the row l1 norms of A - U V, and the decision max_i <= t.

This is the engine behind upper witnesses (B = U V) and the ``nonzero`` certificate (B = 0).
Three tiers, each rigorous on its own:

* ``float64``: one BLAS product with the a-priori bound of proofs_notes/rounding.md,
  charged through the row sums |U| (|V| 1) so the bound costs O(mk + kN), not a second product.
* ``arb``: python-flint balls at 128, 256 and 512 bits on the rows still undecided.
* ``exact``: the stored floats as dyadic integers (fmpz_mat): every row sum exactly.

``decide_max_row_l1`` escalates row by row: only rows whose float enclosure straddles t go on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..arrays import require_all_finite
from ..rationals import float_down, float_up
from ..result import Enclosure
from . import arbutil, dyadic, workbound
from .blocks import row_blocks
from .rounding import (
    ETA,
    gamma_up,
    inv_one_minus_gamma_up,
    inv_one_plus_gamma_down,
)
from .tiers import safe_max_lower, safe_max_upper

ARB_PRECISIONS = (128, 256, 512)


def float_row_sums(A: np.ndarray, U: np.ndarray, V: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Returns (S, T): S_i = fl(sum_j |fl(A - fl(U V))_ij|) and T = fl(|U| fl(|V| 1))
    (``None`` when k = 0), the two float computations Lemma 4 of proofs_notes/rounding.md bounds.

    Returns ``None`` when an intermediate is not finite (NaN/Inf inputs or overflow); the
    caller then validates the inputs and, if they are finite, uses a slower tier.
    """
    with np.errstate(all="ignore"):  # overflow and NaN are detected from the results
        k = U.shape[1]
        S = np.empty(A.shape[0])
        # blocks of rows bound the temporary D; BLAS may order a block's dot products
        # differently from the whole product's (last bits), which Lemma 4 allows: it holds
        # for any order of every sum
        for b in row_blocks(*A.shape, floats=True):
            if k:
                D = U[b] @ V
                np.subtract(A[b], D, out=D)
            else:
                D = A[b].copy()
            np.abs(D, out=D)
            S[b] = D.sum(axis=1)
        T = np.abs(U) @ np.abs(V).sum(axis=1) if k else None
        # NaN propagates through max, so two reductions check every entry
        if not (np.isfinite(S.max()) and (T is None or np.isfinite(T.max()))):
            return None
        return S, T


def _np_up(x):
    return np.nextafter(x, np.inf)


def _np_down(x):
    return np.nextafter(x, -np.inf)


def _py_up(x: float) -> float:
    return math.nextafter(x, math.inf)


def _py_down(x: float) -> float:
    return math.nextafter(x, -math.inf)


def lemma4_bounds(S, T, k: int, N: int, up=_np_up, down=_np_down):
    """Returns (lo, hi) with lo <= sum_j |A - U V|_ij <= hi, from S_i, T_i of
    :func:`float_row_sums` (arrays with ``up``/``down`` = nextafter on arrays, or Python floats
    with the ``math`` versions: one formula for both).

    hi is nondecreasing in S and T (round-to-nearest and the outward steps are monotone), so
    hi(max S, max T) bounds every row: the cheap test used before any per-row work.
    """
    hi = up(S * inv_one_minus_gamma_up(N + 1))
    lo = down(S * inv_one_plus_gamma_down(N + 1))
    if k:
        k_eta, n_k_eta = _eta_terms(k, N)
        # sum_j |fl(UV) - UV|_ij <= gamma_k (T_i + k eta) / (1 - gamma_{N+k-1}) + N k eta
        true_T = up(up(T + k_eta) * inv_one_minus_gamma_up(N + k - 1))
        R = up(up(true_T * gamma_up(k)) + n_k_eta)
        hi = up(hi + R)
        lo = down(lo - R)
    return lo, hi


def float_row_bounds(A: np.ndarray, U: np.ndarray, V: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """Returns float64 arrays (lo, hi) with lo_i <= sum_j |A - U V|_ij <= hi_i for every row,
    or ``None`` when the float computation is not finite."""
    sums = float_row_sums(A, U, V)
    if sums is None:
        return None
    lo, hi = lemma4_bounds(*sums, U.shape[1], A.shape[1])
    return np.maximum(lo, 0.0), hi


@lru_cache(maxsize=1024)
def _eta_terms(k: int, N: int) -> tuple[float, float]:
    return float_up(k * ETA), float_up(N * k * ETA)


def arb_row_enclosures(A: np.ndarray, U: np.ndarray, V: np.ndarray, prec: int
                       ) -> list[tuple[Fraction, Fraction] | None]:
    """Returns exact (lo, hi) containing sum_j |A - U V|_ij per row, from arb balls at ``prec``.

    An entry is ``None`` when the ball is not finite.
    """
    return [e for b in row_blocks(*A.shape) for e in _arb_rows(A[b], U[b], V, prec)]


def _arb_rows(A: np.ndarray, U: np.ndarray, V: np.ndarray, prec: int
              ) -> list[tuple[Fraction, Fraction] | None]:
    with arbutil.precision(prec):
        D = arbutil.matrix(A)
        if U.shape[1]:
            D = D - arbutil.matrix(U) * arbutil.matrix(V)
        out: list[tuple[Fraction, Fraction] | None] = []
        for s in arbutil.row_abs_sums(D):
            try:
                lo, hi = arbutil.endpoints(s)
                out.append((max(lo, Fraction(0)), hi))
            except ValueError:
                out.append(None)
        return out


def exact_row_l1(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> list[Fraction]:
    """Returns the exact values sum_j |A - U V|_ij for every row (finite float inputs)."""
    return [v for b in row_blocks(*A.shape) for v in _exact_rows(A[b], U[b], V)]


def _exact_rows(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> list[Fraction]:
    MA, ea = dyadic.to_int_matrix(A)
    if U.shape[1]:
        MU, eu = dyadic.to_int_matrix(U)
        MV, ev = dyadic.to_int_matrix(V)
        ep = eu + ev
        e0 = min(ea, ep)
        D = dyadic.scaled(MA, ea - e0) - dyadic.scaled(MU * MV, ep - e0)
    else:
        D, e0 = MA, ea
    N = A.shape[1]
    ent = D.entries()
    scale = dyadic.pow2(e0)
    return [Fraction(int(sum(abs(v) for v in ent[i * N:(i + 1) * N]))) * scale
            for i in range(A.shape[0])]


@dataclass
class RowDecision:
    """Outcome of deciding max_i sum_j |A - U V|_ij <= t."""

    status: str
    value: Enclosure | None
    tier: str
    tiers_run: tuple[str, ...]
    precision: int | None
    rows_escalated: dict[str, int] = field(default_factory=dict)


def decide_max_row_l1(A: np.ndarray, U: np.ndarray, V: np.ndarray, t: Fraction, *,
                      tier: str = "auto", source: str | None = None) -> RowDecision:
    """Decides whether max_i sum_j |A - U V|_ij <= t.

    Returns status ``"holds"`` (proved <= t), ``"fails"`` (proved > t) or ``"undecided"``
    (only possible when a tier is forced), with an exact enclosure of the maximum.  Raises
    InputError if an array holds NaN or Inf, also when the meter stops the first tier (a
    malformed record is an input error under every work limit).  Raises
    ``workbound.WorkLimit`` before a tier whose price would pass the current meter.
    ``tier="auto"`` starts with float64 and escalates the rows whose enclosures straddle t to
    arb and then to exact; ``"float64"``, ``"arb"``, ``"exact"`` run that tier alone on every
    row.

    Only the rows a later tier takes up are held as exact rationals: the rows the float64
    tier decided stay two float maxima, so the work after that tier is priced by the tiers
    that run on the pending rows (converting every row of a 2,000,000-row record to
    Fractions cost 8 s where the float tier was priced at 0.1 s).
    """
    m = A.shape[0]
    # bounds of the rows still in play (exact rationals), and the float maxima of the rows
    # the float64 tier settled (None: no float tier ran, or it overflowed)
    lo: dict[int, Fraction] = {}
    hi: dict[int, Fraction] = {}
    settled: tuple[float, float] | None = None
    flo = fhi = None
    pending = list(range(m))
    tiers_run: list[str] = []
    escalated: dict[str, int] = {}
    prec_used: int | None = None
    t_down, t_up = _float_bounds(t)

    if tier in ("auto", "float64"):
        tiers_run.append("float64")
        try:
            workbound.charge(workbound.float_product(m, U.shape[1], A.shape[1]),
                             "the float64 tier")
        except workbound.WorkLimit:
            # the float tier finds NaN and Inf itself (at no extra pass when there are
            # none); a record the meter stops before it must still be an input error
            require_all_finite(source, A=A, U=U, V=V)
            raise
        sums = float_row_sums(A, U, V)
        if sums is None:
            require_all_finite(source, A=A, U=U, V=V)
        else:
            S, T = sums
            k, N = U.shape[1], A.shape[1]
            # cheap test first: one bound for all rows, one lower bound at the largest S
            i0 = int(S.argmax())
            lo0, _ = lemma4_bounds(float(S[i0]), None if T is None else float(T[i0]), k, N,
                                   _py_up, _py_down)
            _, hi_all = lemma4_bounds(float(S[i0]), None if T is None else float(T.max()),
                                      k, N, _py_up, _py_down)
            if not math.isfinite(hi_all):
                sums = None  # a bound overflowed (row sums near the float maximum): next tiers
        if sums is not None:
            whole = Enclosure(Fraction(max(lo0, 0.0)), Fraction(hi_all))
            if hi_all <= t_down:
                return _finish("holds", whole, tiers_run, None, escalated)
            if lo0 > t_up:
                return _finish("fails", whole, tiers_run, None, escalated)
            flo, fhi = lemma4_bounds(S, T, k, N)
            flo = np.maximum(flo, 0.0)
            if (flo > t_up).any():
                return _finish("fails", _float_max(flo, fhi), tiers_run, None, escalated)
            # ~(fhi <= t_down): a row whose bound is NaN is never counted as proved
            open_rows = ~(fhi <= t_down)
            pending = np.flatnonzero(open_rows).tolist()
            if not pending:
                return _finish("holds", _float_max(flo, fhi), tiers_run, None, escalated)
            if tier == "float64":
                return _finish("undecided", _float_max(flo, fhi), tiers_run, None, escalated)
            # every row's lower bound, and the upper bounds of the rows proved <= t
            settled = (max(safe_max_lower(flo), 0.0),
                       safe_max_upper(np.where(open_rows, 0.0, fhi)))
        elif tier == "float64":
            return _finish("undecided", None, tiers_run, None, escalated)
    else:
        require_all_finite(source, A=A, U=U, V=V)

    pending_all = list(pending)  # every row not settled by the float tier

    def float_start(rows: list[int]) -> None:
        # the float64 bounds of rows a tier takes up, converted once that tier is priced
        if flo is not None and fhi is not None:
            for i in rows:
                if i not in hi:
                    lo[i], hi[i] = Fraction(float(flo[i])), Fraction(float(fhi[i]))

    def enclosure() -> Enclosure | None:
        return _max_enclosure(settled, lo, hi, pending_all)

    if tier in ("auto", "arb"):
        for prec in ARB_PRECISIONS:
            if not pending:
                break
            tiers_run.append("arb")
            escalated[f"arb{prec}"] = len(pending)
            prec_used = prec
            workbound.charge(workbound.arb_product(len(pending), U.shape[1], A.shape[1], prec),
                             f"the arb tier at {prec} bits on {len(pending)} rows")
            float_start(pending)
            encl = arb_row_enclosures(A[pending], U[pending], V, prec)
            for i, e in zip(pending, encl, strict=True):
                if e is not None:
                    lo[i], hi[i] = _tighten(lo.get(i), hi.get(i), e)
            if any(i in lo and lo[i] > t for i in pending):
                return _finish("fails", enclosure(), tiers_run, prec, escalated)
            pending = [i for i in pending if i not in hi or hi[i] > t]
        if not pending:
            return _finish("holds", enclosure(), tiers_run, prec_used, escalated)
        if tier == "arb":
            return _finish("undecided", enclosure(), tiers_run, prec_used, escalated)

    tiers_run.append("exact")
    escalated["exact"] = len(pending)
    _charge_exact(A[pending], U[pending], V)
    exact = exact_row_l1(A[pending], U[pending], V)
    for i, v in zip(pending, exact, strict=True):
        lo[i] = hi[i] = v
    status = "fails" if any(lo[i] > t for i in pending) else "holds"
    return _finish(status, enclosure(), tiers_run, prec_used, escalated)


def _charge_exact(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> None:
    """Prices :func:`exact_row_l1` on these rows from their sizes and bit sizes."""
    r, N = A.shape
    k = U.shape[1]
    bu, bv, ba = workbound.bits(U), workbound.bits(V), workbound.bits(A)
    price = (workbound.exact_product(r, k, N, bu, bv)
             + workbound.exact_product(r, 1, N, ba, 1)  # A's rows converted and aligned
             # aligning A with U V to one exponent adds at most the gap of two exponents
             + workbound.exact_rows(r * N, max(ba, workbound.product_bits(bu, bv, k)) + 2200))
    workbound.charge(price, f"the exact tier on {r} rows ({r} x {k} x {N}, "
                            f"{max(ba, bu, bv)}-bit entries)")


@lru_cache(maxsize=256)
def _float_bounds(t: Fraction) -> tuple[float, float]:
    return float_down(t), float_up(t)


def _tighten(lo, hi, new):
    nlo, nhi = new
    return (nlo if lo is None else max(lo, nlo)), (nhi if hi is None else min(hi, nhi))


def _float_max(flo: np.ndarray, fhi: np.ndarray) -> Enclosure:
    # finite here (the caller checked the bound of the largest row); the safe reductions make
    # a NaN fail loudly in Fraction() rather than stand for a bound
    return Enclosure(Fraction(safe_max_lower(flo)), Fraction(safe_max_upper(fhi)))


def _max_enclosure(settled: tuple[float, float] | None, lo: dict[int, Fraction],
                   hi: dict[int, Fraction], rows: list[int]) -> Enclosure | None:
    """Encloses max_i of the row values from the float maxima of the rows the float tier
    settled (``settled``: the largest lower bound of every row, the largest upper bound of
    the settled rows) and the exact bounds of ``rows``, the others; ``None`` while one of
    those has no upper bound yet (possible only when the float tier overflowed or did not
    run and a tier was forced)."""
    if any(i not in hi for i in rows):
        return None
    lows = [lo[i] for i in rows if i in lo]
    highs = [hi[i] for i in rows]
    if settled is not None:
        lows.append(Fraction(settled[0]))
        highs.append(Fraction(settled[1]))
    if not highs:  # no row at all: the maximum over an empty set of non-negative values
        return Enclosure(Fraction(0), Fraction(0))
    return Enclosure(max(lows, default=Fraction(0)), max(highs))


def _finish(status, value, tiers_run, prec, escalated) -> RowDecision:
    return RowDecision(status=status, value=value, tier=tiers_run[-1],
                       tiers_run=tuple(tiers_run), precision=prec, rows_escalated=escalated)
