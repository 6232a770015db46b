"""The float64 tier of the operator slack: its exp against 60-digit references, the charged chi
on MiniLM operators (logits and renormalised blocks) against 60-digit interval references,
near-boundary claims that plain float64 gets wrong, fallbacks to arb, and runner verdicts
identical to charging the arb chi."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from mpmath import iv

from softrank import certify
from softrank.certify.numerics import expbound
from softrank.certify.slack import charged_slack, operator_slack

ROOT = Path(__file__).resolve().parent.parent
MINILM = ROOT / "examples" / "minilm"


def _frac(t: tuple) -> Fraction:
    sign, man, exp, _ = t
    v = Fraction(man) * Fraction(2) ** exp
    return -v if sign else v


def iv_chi(A: np.ndarray, *, logits: np.ndarray | None = None, block: np.ndarray | None = None,
           beta: Fraction = Fraction(1), dps: int = 60) -> tuple[Fraction, Fraction]:
    """A 60-digit mpmath interval enclosure [lo, hi] of ||A_record - A||_row1 (no row shift)."""
    old = iv.dps
    iv.dps = dps
    try:
        b = iv.mpf(beta.numerator) / iv.mpf(beta.denominator)
        X = logits if logits is not None else block
        rows = []
        for xrow, arow in zip(np.asarray(X, np.float64).tolist(),
                              np.asarray(A, np.float64).tolist(), strict=True):
            if logits is not None:
                es = [None if x == float("-inf") else iv.exp(b * iv.mpf(x)) for x in xrow]
            else:
                es = [iv.mpf(x) for x in xrow]
            S = sum((e for e in es if e is not None), iv.mpf(0))
            tot = iv.mpf(0)
            for e, a in zip(es, arow, strict=True):
                tot += abs(iv.mpf(a)) if e is None else abs(e / S - iv.mpf(a))
            lo, hi = tot._mpi_
            rows.append((_frac(lo), _frac(hi)))
        return max(r[0] for r in rows), max(r[1] for r in rows)
    finally:
        iv.dps = old


def softmax64(L: np.ndarray) -> np.ndarray:
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def minilm_logits(n: int) -> list[np.ndarray]:
    ops = [json.loads(line) for line in (MINILM / "operators.jsonl").read_text().splitlines()]
    out = []
    for o in ops[:: max(1, len(ops) // n)][:n]:
        with np.load(MINILM / o["file"]) as z:
            out.append(np.array(z["logits"]))
    return out


# ------------------------------------------------------------------ the exp kernel


def test_exp_bound_holds_against_60_digit_values():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        -rng.exponential(2.0, 400), -rng.uniform(0, 700, 400),
        -np.abs(rng.standard_normal(100)) * 1e-8,
        [0.0, -0.0, -5e-324, -1e-300, -2.2e-308, -0.34657359027997264, -0.3465735902799727,
         -0.6931471805599453, -1.0397207708399179, -699.9999999, -700.0, -700.0000001,
         -745.2, -1e300, -np.inf],
    ])
    e, small = expbound.exp_nonpos(x)
    mpmath.mp.dps = 60
    for xi, ei, si in zip(x.tolist(), e.tolist(), small.tolist(), strict=True):
        ex = mpmath.exp(mpmath.mpf(xi)) if xi != float("-inf") else mpmath.mpf(0)
        if si:
            assert ei == 0.0 and xi < expbound.X_MIN
            assert ex <= mpmath.mpf(2) ** -1000
            continue
        a = expbound.ALPHA0 + expbound.ALPHA1 * abs(Fraction(xi))
        assert abs(ex / mpmath.mpf(ei) - 1) <= mpmath.mpf(a.numerator) / a.denominator
        # the argument may be off by T1 |x| + T0: both ends of that interval are covered too
        t = expbound.T1 * abs(Fraction(xi)) + expbound.T0
        for y in (Fraction(xi) - t, Fraction(xi) + t):
            ey = mpmath.exp(mpmath.mpf(y.numerator) / y.denominator)
            assert abs(ey / mpmath.mpf(ei) - 1) <= mpmath.mpf(a.numerator) / a.denominator
    assert e[x == 0].tolist() == [1.0, 1.0]


def test_exp_bound_is_small_and_refuses_positive_or_nan():
    assert expbound.ALPHA0 < Fraction(1, 10**13) and expbound.ALPHA1 < Fraction(1, 10**15)
    with pytest.raises(expbound.FloatTierError):
        expbound.exp_nonpos(np.array([0.5]))
    with pytest.raises(expbound.FloatTierError):
        expbound.exp_nonpos(np.array([np.nan]))


# ------------------------------------------------------------------ MiniLM operators


def _assert_within_2x(s, lo: Fraction, hi: Fraction) -> None:
    assert s.chi_lo <= lo <= hi <= s.chi  # never below the true chi
    assert s.chi <= 2 * lo  # and within 2x of it


@pytest.mark.parametrize("beta", [Fraction(1), Fraction(1, 8)])
def test_minilm_logits_float32_stored(beta):
    """float32 probabilities of MiniLM heads (a float32 forward pass): the float64 tier."""
    for L in minilm_logits(2):
        A = softmax64(float(beta) * L).astype(np.float32)
        rec = {"A": A, "logits": L} | ({} if beta == 1 else {"beta": str(beta)})
        s = charged_slack(rec)
        assert s.detail["tier"] == "float64"
        lo, hi = iv_chi(A, logits=L, beta=beta)
        _assert_within_2x(s, lo, hi)


def test_minilm_causal_logits_with_masks():
    L = minilm_logits(1)[0].copy()
    L[np.triu_indices_from(L, 1)] = -np.inf
    A = softmax64(L).astype(np.float32)
    s = charged_slack({"A": A, "logits": L})
    assert s.detail["tier"] == "float64" and s.detail["masked_entries"] > 0
    _assert_within_2x(s, *iv_chi(A, logits=L))


def test_minilm_renormalised_blocks():
    """Common-prefix blocks of float32 MiniLM probabilities, renormalised in float32."""
    for L in minilm_logits(2):
        P = softmax64(L).astype(np.float32)[:, :40]
        A = (P / P.sum(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)
        s = charged_slack({"A": A, "block": P})
        assert s.detail["tier"] == "float64"
        _assert_within_2x(s, *iv_chi(A, block=P))


def test_minilm_float64_stored_is_charged_the_negligible_float_bound():
    """chi of float64-stored softmax is ~1e-16, below what float64 can resolve: the float
    tier's bound (still above the true chi, and at most 2^-36) is charged, not arb's."""
    from softrank.certify.slack import NEGLIGIBLE

    for path in sorted((MINILM / "arrays").glob("minilm.*T64.npz"))[:3]:
        with np.load(path) as z:
            A, L = np.array(z["A"]), np.array(z["logits"])
        s = charged_slack({"A": A, "logits": L})
        assert s.detail.get("tier") == "float64" and s.precision == 53
        lo, hi = iv_chi(A, logits=L)
        assert s.chi_lo <= lo <= hi <= s.chi <= NEGLIGIBLE
        assert s.chi > 2 * hi  # not within 2x: kept only because it is negligible
        ref = operator_slack({"A": A, "logits": L})
        assert ref.chi <= 2 * lo  # arb stays within 2x, for callers that need it


# ------------------------------------------------------------------ near the boundary


def test_plain_float64_says_chi_is_zero_and_a_false_claim_holds():
    """A_hat = numpy's own float64 softmax: recomputing it in plain float64 gives chi = 0, so
    the claim ||A_rec - A_hat||_row1 <= eps (witness U V = A_hat) 'holds' at any eps > 0.  It
    is false for eps below the true chi; the charged chi refutes it."""
    L = minilm_logits(1)[0]
    A = softmax64(L)
    assert float(np.abs(softmax64(L) - A).sum(axis=1).max()) == 0.0  # plain float64
    lo, hi = iv_chi(A, logits=L)
    assert lo > 0
    eps = lo / 2  # the claim is false for the operator of record
    s = charged_slack({"A": A, "logits": L})
    U, V = A, np.eye(A.shape[1])
    assert certify.check_upper(A, U, V, eps, rank=A.shape[1], chi=0).holds  # uncharged
    assert certify.check_upper(A, U, V, eps, rank=A.shape[1], chi=s.chi).status == "fails"


def test_float32_claim_between_plain_and_true_chi():
    """float32-stored A: plain float64 chi (no rounding charge) underestimates the true chi for
    some rows; an eps between the two makes the plain verdict wrong, the charged one right."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        L = rng.standard_normal((6, 6)) * 3
        A = softmax64(L).astype(np.float32)
        plain = Fraction(float(np.abs(softmax64(L) - A).sum(axis=1).max()))
        lo, hi = iv_chi(A, logits=L, dps=40)
        if plain < lo:
            break
    else:
        pytest.fail("no instance where plain float64 underestimates chi")
    eps = (plain + lo) / 2  # plain <= eps < chi_true: the claim chi_true <= eps is false
    U, V = A.astype(np.float64), np.eye(6)
    assert certify.check_upper(A, U, V, eps, rank=6, chi=plain).holds  # plain float64: wrong
    s = charged_slack({"A": A, "logits": L})
    assert s.detail["tier"] == "float64" and s.chi >= hi
    assert certify.check_upper(A, U, V, eps, rank=6, chi=s.chi).status == "fails"


# ------------------------------------------------------------------ fallbacks and errors


def test_inputs_outside_the_float_tier_use_arb():
    rng = np.random.default_rng(5)
    L = rng.standard_normal((5, 5))
    A = softmax64(L).astype(np.float32)
    for rec in ({"A": A.astype(np.float64) * 2.0**1001, "logits": L},  # beyond its range
                {"A": A, "logits": L, "beta": Fraction(1, 2**1200)}):
        s = charged_slack(rec)
        ref = operator_slack(rec)
        assert s.detail.get("tier") is None and (s.chi, s.chi_lo) == (ref.chi, ref.chi_lo)


def test_overflowing_arguments_are_small_and_still_enclosed():
    """L - M overflows float64 (entries near +-MAX): the float tier classes those entries as
    exp <= 2^-1000 and its enclosure still contains the arb one."""
    big = np.finfo(np.float64).max
    L = np.array([[big, -big, 0.0, big * 0.5], [1.0, 2.0, -big, 3.0], [0.0, 0.0, 0.0, -1.0]])
    A = np.array([[1.0, 0.0, 0.0, 0.0], [0.09, 0.24, 0.0, 0.67], [0.3, 0.3, 0.3, 0.1]],
                 dtype=np.float32)
    for beta in (Fraction(1), Fraction(3, 7)):
        rec = {"A": A, "logits": L, "beta": beta}
        s, ref = charged_slack(rec), operator_slack(rec)
        assert s.detail["tier"] == "float64"
        assert s.chi_lo <= ref.chi_lo <= ref.chi <= s.chi <= 2 * ref.chi_lo
    # exactly renormalised dyadic block: chi_true = 0, which no float bound is within 2x of;
    # the float bound is negligible and charged, arb's is exactly 0
    P = np.array([[1.0, 1.0, 2.0], [4.0, 0.0, 4.0]])
    rec = {"A": P / P.sum(axis=1, keepdims=True), "block": P}
    s = charged_slack(rec)
    assert s.detail.get("tier") == "float64" and 0 <= s.chi_lo and 0 < s.chi < 2**-36
    assert operator_slack(rec).chi == 0
    # far from negligible and not within 2x (a huge wrong A): arb decides
    rec = {"A": np.array([[1.0, 0.0], [0.0, 1.0]]), "block": np.array([[1.0, 1.0], [1.0, 1.0]])}
    s, ref = charged_slack(rec), operator_slack(rec)
    assert s.chi >= 1 and s.chi <= 2 * ref.chi_lo


def test_same_input_errors_as_operator_slack():
    A = np.full((2, 2), 0.5)
    for rec, field in (({"A": A, "logits": np.array([[np.nan, 0], [0, 0]])}, "logits"),
                       ({"A": A, "block": -A}, "block"), ({"A": A, "lgits": A}, "lgits")):
        with pytest.raises(certify.InputError) as e1:
            charged_slack(rec)
        with pytest.raises(certify.InputError) as e2:
            operator_slack(rec)
        assert e1.value.field == e2.value.field == field


def test_large_operator_float_tier_matches_arb():
    rng = np.random.default_rng(9)
    L = (rng.standard_normal((64, 256)) * 4).astype(np.float32)
    A = softmax64(L.astype(np.float64)).astype(np.float32)
    s, ref = charged_slack({"A": A, "logits": L}), operator_slack({"A": A, "logits": L})
    assert s.detail["tier"] == "float64"
    assert s.chi_lo <= ref.chi_lo <= ref.chi <= s.chi <= 2 * ref.chi_lo
    assert s.chi - s.chi_lo < Fraction(1, 10**11)
