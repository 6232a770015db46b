"""Operator slack chi: containment and tightness against exact and interval references,
verdicts that follow the operator of record, and bad input."""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest
from mpmath import iv

from softrank import certify
from softrank.certify import InputError
from softrank.certify.slack import Slack, operator_slack

TIGHT_REL = Fraction(1, 2**40)
TIGHT_ABS = Fraction(1, 2**90)


# ---------------------------------------------------------------- references


def exact_chi(R: list[list[Fraction]], A: np.ndarray) -> Fraction:
    """max_i sum_j |R_ij - A_ij| in exact rationals (A's floats at their exact value)."""
    A64 = np.asarray(A, dtype=np.float64)
    return max(sum((abs(r - Fraction(float(a))) for r, a in zip(row, arow, strict=True)),
                   Fraction(0))
               for row, arow in zip(R, A64.tolist(), strict=True))


def _frac(t: tuple) -> Fraction:
    sign, man, exp, _ = t
    v = Fraction(man) * Fraction(2) ** exp
    return -v if sign else v


def _bounds(x) -> tuple[Fraction, Fraction]:
    lo, hi = x._mpi_
    return _frac(lo), _frac(hi)


def iv_softmax_chi(A: np.ndarray, L: np.ndarray, beta: Fraction, *, dps: int = 50
                   ) -> tuple[Fraction, Fraction]:
    """Independent rigorous enclosure of ||softmax(beta L) - A||_row1 with mpmath.iv.

    No row-max shift here (a different evaluation order from the kernel's)."""
    old = iv.dps
    iv.dps = dps
    try:
        b = iv.mpf(beta.numerator) / iv.mpf(beta.denominator)
        A64 = np.asarray(A, dtype=np.float64)
        rows = []
        for Lrow, arow in zip(L.tolist(), A64.tolist(), strict=True):
            es = [None if x == float("-inf") else iv.exp(b * iv.mpf(x)) for x in Lrow]
            S = sum((e for e in es if e is not None), iv.mpf(0))
            total = iv.mpf(0)
            for e, a in zip(es, arow, strict=True):
                total += abs(iv.mpf(a)) if e is None else abs(e / S - iv.mpf(a))
            rows.append(_bounds(total))
        return max(r[0] for r in rows), max(r[1] for r in rows)
    finally:
        iv.dps = old


def softmax64(L: np.ndarray, beta: float = 1.0) -> np.ndarray:
    X = beta * L
    E = np.exp(X - X.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def assert_encloses(s: Slack, lo: Fraction, hi: Fraction) -> None:
    """s.chi >= the reference's upper end, s.chi_lo <= its lower end, and s is tight."""
    assert s.chi_lo <= lo <= hi <= s.chi
    assert s.chi - s.chi_lo <= s.chi * TIGHT_REL + TIGHT_ABS
    if lo > Fraction(1, 10**14):
        assert s.chi <= 2 * lo


# ---------------------------------------------------------------- A alone


def test_stored_A_is_record_chi_zero():
    A = softmax64(np.random.default_rng(0).standard_normal((4, 5)))
    s = operator_slack({"A": A})
    assert (s.chi, s.chi_lo, s.kind) == (0, 0, "A")
    s = operator_slack({"A": A, "logits": None, "block": None, "beta": None})
    assert s.kind == "A" and s.chi == 0


# ---------------------------------------------------------------- blocks


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dyadic_block_exact_reference(dtype):
    rng = np.random.default_rng(1)
    P = rng.integers(0, 9, size=(7, 11)).astype(np.float64) / 8.0
    P[P.sum(axis=1) == 0, 0] = 1.0
    P[3, :] = 0.0
    P[3, 4] = 3.0  # a one-hot row: exact record [0..1..0]
    P[5, :3] = [1e-300, 2.0**-1074, 0.0]  # subnormal / tiny keys stay exact
    R = [[Fraction(float(p)) / sum(Fraction(float(q)) for q in row) for p in row]
         for row in P.tolist()]
    A = (P / P.sum(axis=1, keepdims=True)).astype(dtype)
    truth = exact_chi(R, A)
    s = operator_slack({"A": A, "block": P})
    assert s.kind == "block"
    assert truth > 0
    assert_encloses(s, truth, truth)
    if dtype == np.float32:
        assert truth > Fraction(1, 10**14)  # the factor-2 clause is exercised


def test_block_integer_and_float32_dtypes_agree():
    P = np.array([[1, 2, 0, 5], [3, 3, 3, 1]], dtype=np.int64)
    A = (P / P.sum(axis=1, keepdims=True)).astype(np.float32)
    a = operator_slack({"A": A, "block": P})
    b = operator_slack({"A": A, "block": P.astype(np.float32)})
    truth = exact_chi([[Fraction(int(p), int(r.sum())) for p in r] for r in P], A)
    assert_encloses(a, truth, truth)
    assert (a.chi, a.chi_lo) == (b.chi, b.chi_lo)


# ---------------------------------------------------------------- logits: exact uniforms


@pytest.mark.parametrize("beta", [1, "5/7", 0.1, "3"])
def test_uniform_supports_exact_reference(beta):
    # rows of equal logits over a support (other keys -inf): uniform 1/k whatever beta is
    N = 9
    supports = [[0, 1, 2], [4], list(range(9)), [1, 3, 5, 7, 8], [0, 8], [2, 3, 4, 5, 6, 7, 8]]
    values = [0.0, -3.7, 12.5, 1e5, -1e-3, 7.0]
    L = np.full((len(supports), N), -np.inf)
    for i, (sup, v) in enumerate(zip(supports, values, strict=True)):
        L[i, sup] = v
    R = [[Fraction(1, len(sup)) if j in sup else Fraction(0) for j in range(N)]
         for sup in supports]
    A64 = softmax64(L)
    for A in (A64, A64.astype(np.float32)):
        truth = exact_chi(R, A)
        s = operator_slack({"A": A, "logits": L, "beta": beta})
        assert s.kind == "logits"
        assert s.detail["masked_entries"] == int(np.isneginf(L).sum())
        assert_encloses(s, truth, truth)


def test_mass_on_masked_keys_is_charged():
    L = np.array([[0.0, 0.0, -np.inf, -np.inf]])
    A = np.array([[0.375, 0.375, 0.25, 0.0]])  # all dyadic: exact record is [1/2, 1/2, 0, 0]
    s = operator_slack({"A": A, "logits": L})
    assert s.chi == s.chi_lo == Fraction(1, 2)
    A2 = np.array([[0.5, 0.5, 0.0, 0.0]])
    assert operator_slack({"A": A2, "logits": L}).chi == 0  # exact: no rounding anywhere


# ---------------------------------------------------------------- logits: interval reference


def _random_logits(seed: int, m: int = 5, N: int = 8, scale: float = 4.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((m, N)) * scale
    L[rng.random((m, N)) < 0.2] = -np.inf
    L[:, 0] = rng.standard_normal(m)  # no row is all -inf
    return L


@pytest.mark.parametrize("beta", ["1", "1/3", "0.125", "2.5", 0.1])
@pytest.mark.parametrize("stored", ["float64", "float32", "perturbed"])
def test_logits_against_mpmath_interval_reference(beta, stored):
    L = _random_logits(zlib.crc32(f"{beta}|{stored}".encode()))
    bq = certify.to_rational(beta)
    A = softmax64(L, float(bq))
    if stored == "float32":
        A = A.astype(np.float32)
    elif stored == "perturbed":
        A = A + np.random.default_rng(3).uniform(-1e-9, 1e-9, A.shape)
    lo, hi = iv_softmax_chi(A, L, bq)
    s = operator_slack({"A": A, "logits": L, "beta": beta})
    assert_encloses(s, lo, hi)
    if stored != "float64":
        assert lo > Fraction(1, 10**14)


def test_beta_is_taken_exactly():
    # "1/3" and the float nearest 1/3 define different operators of record; the test first
    # checks with the reference that the difference is visible, then that chi follows "1/3".
    L = _random_logits(11, scale=30.0)
    A = softmax64(L, 1 / 3)
    exact = iv_softmax_chi(A, L, Fraction(1, 3))
    rounded = iv_softmax_chi(A, L, Fraction(1 / 3))
    assert exact[1] < rounded[0] or rounded[1] < exact[0]
    assert_encloses(operator_slack({"A": A, "logits": L, "beta": "1/3"}), *exact)
    assert_encloses(operator_slack({"A": A, "logits": L, "beta": 1 / 3}), *rounded)
    same = [operator_slack({"A": A, "logits": L, "beta": b}) for b in
            ("1/3", Fraction(1, 3))]
    assert same[0].chi == same[1].chi


def test_extreme_logits_stay_finite_and_fast():
    L = np.array([[0.0, -1e300, -1e308, 1e-300],
                  [1e308, -1e308, 0.0, 5.0],
                  [700.0, 699.0, -np.inf, 698.0]])
    A = np.vstack([[0.5, 0.0, 0.0, 0.5], [1.0, 0.0, 0.0, 0.0], softmax64(L[2:])])
    s = operator_slack({"A": A, "logits": L, "beta": "7/3"})
    # rows 0 and 1 differ from their records by ~1e-300 and ~exp(-1e308): far below row 2,
    # which carries ordinary float64 rounding (of softmax(L), not of softmax(7/3 L))
    lo, hi = iv_softmax_chi(A[2:], L[2:], Fraction(7, 3))
    assert lo > Fraction(1, 10**3)
    assert_encloses(s, lo, hi)
    tiny = operator_slack({"A": A[:2], "logits": L[:2], "beta": "7/3"})
    assert tiny.chi_lo == 0 and tiny.chi < Fraction(1, 10**299)


def test_huge_stored_entries_do_not_overflow():
    A = np.full((2, 3), 1e308)
    for rec in ({"A": A, "logits": np.zeros((2, 3))}, {"A": A, "block": np.ones((2, 3))}):
        s = operator_slack(rec)
        truth = 3 * Fraction(1e308) - 1  # each row: 3 (1e308 - 1/3)
        assert_encloses(s, truth, truth)


def test_fallback_when_balls_are_not_finite(monkeypatch):
    import softrank.certify.slack as slack

    monkeypatch.setattr(slack, "_safe_endpoints", lambda x: None)
    A = np.array([[0.25, 0.5, -0.5], [0.0, 1.0, 0.0]])
    s = slack.operator_slack({"A": A, "logits": np.zeros((2, 3))})
    assert s.chi == Fraction(9, 4) and s.chi_lo == 0 and "fallback" in s.detail


def test_256_operator_is_tight():
    rng = np.random.default_rng(5)
    L = rng.standard_normal((256, 256)) * 3
    A = softmax64(L)
    s = operator_slack({"A": A, "logits": L})
    assert s.precision == 128
    assert 0 < s.chi_lo <= s.chi < Fraction(1, 10**12)
    assert s.chi - s.chi_lo <= s.chi * TIGHT_REL
    b = operator_slack({"A": A, "block": np.exp(L - L.max(axis=1, keepdims=True))})
    assert 0 < b.chi_lo <= b.chi < Fraction(1, 10**12)


# ---------------------------------------------------------------- verdicts follow the record


def _float32_case(seed: int = 7):
    L = _random_logits(seed, m=6, N=10)
    A64 = softmax64(L)
    return L, A64, A64.astype(np.float32)


def test_upper_claim_is_charged_chi():
    L, A64, A32 = _float32_case()
    s = operator_slack({"A": A32, "logits": L})
    assert s.chi_lo > Fraction(1, 10**9)
    rng = np.random.default_rng(0)
    U = rng.standard_normal((6, 2))
    V = rng.standard_normal((2, 10)) * 1e-3
    e = certify.exact_error(A32, U, V)
    eps = e + s.chi_lo / 2  # e lies in (eps - chi, eps]
    assert certify.check_upper(A32, U, V, eps).status == "holds"
    charged = certify.check_upper(A32, U, V, eps, chi=s.chi)
    assert charged.status in ("fails", "undecided")
    assert charged.chi == s.chi and charged.threshold == eps - s.chi


def test_upper_verdict_follows_operator_of_record():
    # W reflects A32 through A64 ~ A_record: ||A32 - W|| ~ chi but ||A_record - W|| ~ 2 chi.
    L, A64, A32 = _float32_case(9)
    W = 2.0 * A32.astype(np.float64) - A64
    U, V = np.eye(W.shape[0]), W
    eps = certify.exact_error(A32, U, V)
    rec_lo, _ = iv_softmax_chi(W, L, Fraction(1))  # encloses ||A_record - W||_row1
    assert rec_lo > eps  # so "r_eps(A_record) <= m via W" would be a false claim
    assert certify.check_upper(A32, U, V, eps).status == "holds"  # true only for A_hat
    s = operator_slack({"A": A32, "logits": L})
    assert certify.check_upper(A32, U, V, eps, chi=s.chi).status != "holds"


def test_lower_claim_is_charged_chi():
    check_lower = getattr(certify, "check_lower", None)
    if check_lower is None:
        lower = pytest.importorskip("softrank.certify.lower")
        check_lower = getattr(lower, "check_lower", None)
    if check_lower is None:
        pytest.skip("certify.check_lower not written yet")
    L, A64, _ = _float32_case(13)
    # stored float32 entries just below the record's: every row sums to < 1
    A32 = np.nextafter(A64.astype(np.float32), np.float32(0))
    n = max(sum((Fraction(float(v)) for v in row), Fraction(0))
            for row in np.abs(A32.astype(np.float64)).tolist())
    s = operator_slack({"A": A32, "logits": L})
    assert n < 1 and s.chi_lo > 0
    eps = n - s.chi_lo / 2
    assert eps < n <= eps + s.chi  # ||A_hat||_row1 lies in (eps, eps + chi]
    cert = {"kind": "nonzero", "rank": 1}
    assert check_lower(A32, cert, eps).status == "holds"
    charged = check_lower(A32, cert, eps, chi=s.chi)
    assert charged.status in ("fails", "undecided")
    assert charged.chi == s.chi


# ---------------------------------------------------------------- bad input


def _ok():
    L = np.array([[0.0, 1.0, -np.inf], [2.0, 2.0, 2.0]])
    return softmax64(L), L


def _bad_cases():
    A, L = _ok()
    P = np.exp(np.where(np.isfinite(L), L, -np.inf))
    nanL = L.copy()
    nanL[0, 1] = np.nan
    posinf = L.copy()
    posinf[1, 0] = np.inf
    dead = L.copy()
    dead[1, :] = -np.inf
    negP = P.copy()
    negP[0, 2] = -1e-300
    zeroP = P.copy()
    zeroP[1, :] = 0.0
    nanP = P.copy()
    nanP[0, 0] = np.nan
    infP = P.copy()
    infP[0, 0] = np.inf
    nanA = A.copy()
    nanA[1, 1] = np.nan
    return [
        ({"A": A, "logits": nanL}, "logits"),
        ({"A": A, "logits": posinf}, "logits"),
        ({"A": A, "logits": dead}, "logits"),
        ({"A": A, "logits": L[:, :2]}, "logits"),
        ({"A": A, "logits": L.ravel()}, "logits"),
        ({"A": A, "logits": np.array([["a", "b", "c"]] * 2)}, "logits"),
        ({"A": A, "block": negP}, "block"),
        ({"A": A, "block": zeroP}, "block"),
        ({"A": A, "block": nanP}, "block"),
        ({"A": A, "block": infP}, "block"),
        ({"A": A, "block": P.T[:, :2]}, "block"),
        ({"A": A, "logits": L, "block": P}, ("logits", "block")),
        ({"A": A, "logits": L, "beta": 0}, "beta"),
        ({"A": A, "logits": L, "beta": "-1/2"}, "beta"),
        ({"A": A, "logits": L, "beta": "sqrt(2)"}, "beta"),
        ({"A": A, "logits": L, "beta": float("nan")}, "beta"),
        ({"A": A, "logits": L, "beta": True}, "beta"),
        ({"A": A, "block": P, "beta": 2}, "beta"),
        ({"A": A, "beta": 2}, "beta"),
        ({"A": nanA, "logits": L}, "A"),
        ({"logits": L}, "A"),
        ({"A": A, "logit": L}, "logit"),
    ]


@pytest.mark.parametrize("record,field", _bad_cases())
def test_bad_input_names_the_field(record, field):
    with pytest.raises(InputError) as err:
        operator_slack(record)
    fields = field if isinstance(field, tuple) else (field,)
    assert err.value.field in fields
    assert err.value.field in str(err.value)


def test_beta_forms_are_exact_rationals():
    A, L = _ok()
    ref = operator_slack({"A": A, "logits": L, "beta": Fraction(1, 2)})
    for b in ("1/2", "0.5", 0.5, np.float32(0.5)):
        s = operator_slack({"A": A, "logits": L, "beta": b})
        assert (s.chi, s.chi_lo) == (ref.chi, ref.chi_lo)
        assert s.detail["beta"] == "1/2"


def test_record_must_be_a_mapping():
    with pytest.raises(InputError):
        operator_slack([1, 2, 3])  # type: ignore[arg-type]
