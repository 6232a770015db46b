"""Lower certificate ``frobenius_tail`` (L): sum_{i >= L} sigma_i(A)^2 > m (eps + chi)^2
(Eckart-Young with ||E_i||_2 <= ||E_i||_1).  Statement and proof:
proofs_notes/lower_frobenius.md; the singular-value enclosures: proofs_notes/svd.md."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..numerics import workbound
from ..numerics.svd import enclose, frobenius_sq_enclosure
from ..rationals import qstr
from ..result import Check, Enclosure

SVD_AUTO_TIERS = ("float64", "arb")


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


def check_frobenius(A: np.ndarray, L: int, t: Fraction, eps: Fraction, chi: Fraction,
                    tier: str) -> Check:
    """Returns the check of sum_{i >= L} sigma_i(A)^2 > m t^2 (t = eps + chi): ``holds`` when
    the enclosure of the tail (validated singular values, certify/numerics/svd.py) is above,
    ``fails`` when below or equal, ``undecided`` when it straddles.  An empty tail (L >
    min(m, N)) fails.  proofs_notes/lower_frobenius.md."""
    m, N = A.shape
    p = min(m, N)
    T = m * t * t
    claim = f"sum_(i>={L}) sigma_i(A)^2 > m (eps+chi)^2 = {qstr(T)}"
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
