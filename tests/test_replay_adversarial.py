"""The replayer against the kernel on the adversarial inputs of test_adversarial.py.

Exact kinds (upper, nonzero, decoder, submatrix) must give the kernel's auto verdict at exact
ties and near-ties, in wild binades; the Ky Fan Frobenius-tail check must prove a thin
margin on matrices with exactly known singular values and never prove a tie; the slack
bound must enclose the kernel's chi enclosure from above.
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from replay import replay as rp
from softrank.certify import check_lower, check_upper, operator_slack
from softrank.export import kyfan_certificate

from .helpers import softmax_rows
from .test_adversarial import (
    HYP,
    decoder_case,
    exact_decoder_parts,
    exact_upper_error,
    known_sv,
    matrices,
    near,
    upper_case,
    wild_floats,
)


def dy(X) -> tuple:
    return rp.dyadic(np.asarray(X, dtype=np.float64).tolist())


@HYP
@given(upper_case() | upper_case(elements=wild_floats),
       st.sampled_from([Fraction(0), Fraction(1, 2**60)]))
def test_upper_matches_kernel_at_ties(case, chi):
    A, U, V = case
    with np.errstate(all="ignore"):
        if U.shape[1] and not np.isfinite(np.abs(U) @ np.abs(V)).all():
            return  # the kernel's float range; the replayer has none, tested below
    err = exact_upper_error(A, U, V)
    for t in near(err) if err else [Fraction(1, 2**1100)]:
        status, value = rp.check_upper(dy(A), dy(U), dy(V), t)
        assert value == err
        assert status == check_upper(A, U, V, t + chi, chi=chi).status


def test_upper_far_outside_float_range():
    A = np.array([[1e300, -1e300, 5e-324]])
    U = np.array([[1e300, 2.0**-1074]])
    V = np.array([[1.0, -1.0, 0.0], [0.0, 0.0, 1.0]])
    status, value = rp.check_upper(dy(A), dy(U), dy(V), Fraction(1, 2**1100))
    assert value == 0 and status == "holds"


@HYP
@given(matrices(2, 3, wild_floats))
def test_nonzero_matches_kernel(A):
    norm = exact_upper_error(A, np.zeros((2, 0)), np.zeros((0, 3)))
    for t in near(norm) if norm else [Fraction(1, 2**1100)]:
        status, value = rp.check_nonzero(dy(A), t)
        assert value == norm
        assert status == check_lower(A, {"kind": "nonzero", "rank": 1}, t).status


@HYP
@given(decoder_case() | decoder_case(wild=True), st.sampled_from(["tie", "below", "far"]))
def test_decoder_matches_kernel_at_ties(case, where):
    A, D, W, X = case
    p = X.shape[0]
    delta, xd, w = exact_decoder_parts(A, D, W, X)
    eps = Fraction(1, 4)
    if delta < 1 and xd * w > 0:
        tstar = (1 - delta) / (xd * w)
        eps = {"tie": tstar, "below": tstar - tstar / 2**60, "far": tstar / 2}[where]
    status, value = rp.check_decoder(dy(A), dy(D), dy(W), dy(X), None, eps)
    assert value == delta + xd * w * eps
    cert = {"kind": "decoder", "rank": p, "D": D, "W": W, "X": X}
    assert status == check_lower(A, cert, eps).status


@HYP
@given(st.integers(2, 5), st.integers(0, 2**32 - 1), st.sampled_from(["inverse", "tie", "dup"]))
def test_submatrix_matches_kernel(n, seed, how):
    rng = np.random.default_rng(seed)
    A = np.round(rng.random((n, n + 1)) * 64) / 64
    p = int(rng.integers(1, n + 1))
    rows, cols = rng.choice(n, p, replace=False), rng.choice(n + 1, p, replace=False)
    if how == "dup" and p >= 2:
        A[rows[1]] = A[rows[0]]
    X = np.linalg.pinv(A[np.ix_(rows, cols)])
    eps = Fraction(1, 8)
    status, value = rp.check_decoder(dy(A), None, None, dy(X), (rows.tolist(), cols.tolist()),
                                     eps)
    if how == "tie" and value < 1:
        xd = rp.max_row_abs(dy(X))
        if xd:
            eps = eps + (1 - value) / xd  # value(eps) = 1 exactly
            status, value = rp.check_decoder(dy(A), None, None, dy(X),
                                             (rows.tolist(), cols.tolist()), eps)
            assert value == 1 and status == "fails"
    cert = {"kind": "submatrix", "rank": p, "rows": rows, "cols": cols, "X": X}
    assert status == check_lower(A, cert, eps).status


def _blobs(cert: dict) -> tuple[dict, dict]:
    """The certificate's arrays as bundle members and references."""
    blobs, out = {}, {"side": cert["side"]}
    if "z" in cert:
        out["z"] = str(cert["z"])
        for name in ("G", "C"):
            data = np.ascontiguousarray(cert[name], dtype="<f8").tobytes()
            ref = f"arrays/{hashlib.sha256(data).hexdigest()}.bin"
            blobs[ref] = data
            out[name] = {"file": ref, "dtype": "<f8", "shape": list(cert[name].shape)}
    return out, blobs


def _frob(A, L, t, cert, blobs):
    Ad = dy(A)
    side = "AtA" if A.shape[1] <= A.shape[0] else "AAt"
    return rp.check_frobenius(Ad, rp.gram(Ad, side), L, t, cert, blobs, A.shape[0])


def test_kyfan_proves_thin_margin_and_never_a_tie():
    # singular values 4, 3, 2, 1: tail_4 = 1 = m t^2 at t = 1/2 (m = 4)
    A = known_sv(4, 4, [4.0, 3.0, 2.0, 1.0], seed=3)
    L, tie = 4, Fraction(1, 2)
    below = tie - Fraction(1, 2**30)
    c = kyfan_certificate(A, L, 4 * below * below)
    assert c is not None and kyfan_certificate(A, L, 4 * tie * tie) is None
    cert, blobs = _blobs(c)
    status, bound = _frob(A, L, below, cert, blobs)
    assert status == "holds" and 4 * below**2 < bound <= 1
    assert check_lower(A, {"kind": "frobenius_tail", "rank": L}, below).status == "holds"
    # the same certificate cannot prove the tie, and the kernel does not either
    assert _frob(A, L, tie, cert, blobs)[0] == "undecided"
    assert check_lower(A, {"kind": "frobenius_tail", "rank": L}, tie).status != "holds"
    # forged certificates: a smaller z, or G shrunk, break the PSD certificate
    for forged in ({**c, "z": c["z"] / 2}, {**c, "G": c["G"] * 0.5}):
        fc, fb = _blobs(forged)
        assert _frob(A, L, below, fc, fb)[0] == "undecided"


def test_kyfan_rectangular_both_sides_and_rank_one():
    rng = np.random.default_rng(5)
    for shape in ((7, 4), (4, 9)):
        A = softmax_rows(rng.normal(size=shape) * 3)
        s = np.linalg.svd(A, compute_uv=False)
        for L in (1, 2, 3):
            tail = Fraction(float(np.sum(s[L - 1:] ** 2)))
            t2 = tail * Fraction(999, 1000) / shape[0]
            t = Fraction(math.isqrt(int(t2 * 2**120)), 2**60)  # t^2 <= t2
            c = kyfan_certificate(A, L, shape[0] * t * t)
            assert c is not None
            cert, blobs = _blobs(c)
            assert _frob(A, L, t, cert, blobs)[0] == "holds"


def test_exp_bounds_enclose_mpmath():
    mpmath.mp.prec = 400
    for v in (Fraction(0), Fraction(1, 3), Fraction(7, 2), Fraction(10**-20), Fraction(60),
              Fraction(89), Fraction(90), Fraction(10**6), Fraction(float(np.pi))):
        lo, hi = rp.exp_neg(v)
        x = mpmath.exp(-mpmath.mpf(v.numerator) / v.denominator) * mpmath.mpf(2) ** rp.P
        assert lo <= x <= hi
        if v < 60:
            assert hi - lo <= 2**40  # relative width < 2^-150 for these arguments


def test_slack_bound_encloses_the_kernel_chi():
    rng = np.random.default_rng(11)
    for beta, mask in ((Fraction(1), False), (Fraction(1, 3), True), (Fraction(5, 2), False)):
        L = rng.normal(size=(5, 7)) * 4
        if mask:
            L[1, :4] = -np.inf
        A = softmax_rows(np.where(np.isinf(L), -np.inf, L * float(beta)))
        A32 = A.astype(np.float32).astype(np.float64)
        for stored in (A, A32):
            k = operator_slack({"A": stored, "logits": L, "beta": beta})
            hi = rp.slack_bound(stored.tolist(), L.tolist(), None, beta)
            assert k.chi_lo <= hi <= k.chi
    P = np.array([[1.0, 2.0, 0.0], [0.5, 0.25, 0.25]])
    A = np.array([[0.25, 0.75, 0.0], [0.5, 0.25, 0.25]])
    k = operator_slack({"A": A, "block": P})
    # row 0: |1/3 - 1/4| + |2/3 - 3/4| = 1/6; row 1 is already normalised
    assert rp.slack_bound(A.tolist(), None, P.tolist(), Fraction(1)) == Fraction(1, 6)
    assert k.chi_lo <= Fraction(1, 6) <= k.chi
