"""The kernel's answers do not depend on the caller's environment: thresholds past Python's
int-to-str digit limit, and NumPy's floating-point error mode."""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np
import pytest

from softrank.certify import check_bracket, check_lower, check_upper
from softrank.certify.rationals import qstr
from softrank.witnesses import jsonexact

# each under the parser's 13,000-bit limit; their sum has more than 4,300 decimal digits
EPS = Fraction(1, 3**8000)
CHI = Fraction(1, 5**5500)


def _stochastic(m: int, n: int, seed: int) -> np.ndarray:
    A = np.random.default_rng(seed).random((m, n))
    return A / A.sum(axis=1, keepdims=True)


def _certificates(A: np.ndarray) -> dict[str, dict]:
    W = np.array([[1.0, 0], [0, 1.0], [0.5, 0.5], [0, 0], [0, 0]])
    return {
        "nonzero": dict(kind="nonzero", rank=1),
        "bernstein": dict(kind="bernstein", rank=2, W=W, P=W @ np.linalg.pinv(A @ W),
                          J=np.array([0, 1])),
        "decoder": dict(kind="decoder", rank=1, D=np.ones((1, 4)) / 4, W=np.ones((5, 1)),
                        X=np.ones((1, 1))),
        "submatrix": dict(kind="submatrix", rank=1, rows=np.array([0]), cols=np.array([0]),
                          X=np.ones((1, 1))),
        "rowset": dict(kind="rowset", rank=1, I=np.array([0]), Z=np.ones((1, 5))),
        "rowmix": dict(kind="rowmix", rank=1, D=np.ones((1, 4)) / 4, Z=np.ones((1, 5))),
        "polytope": dict(kind="polytope", rank=1, Y=np.ones((1, 1)), I=np.array([0]),
                         F=np.array([[0]]), Z=np.ones((1, 5)), G=np.array([0])),
    }


def _parse(s: str) -> Fraction:  # Fraction(s) has the same digit limit as str()
    n, _, d = s.partition("/")
    return Fraction(int(flint.fmpz(n)), int(flint.fmpz(d or "1")))


def test_qstr_spells_any_size_exactly():
    for q in (Fraction(0), Fraction(-3, 4), Fraction(10**20 + 1, 7)):
        assert qstr(q) == str(q)
    big = Fraction(-(3**9000), 7**9000)
    assert _parse(qstr(big)) == big
    assert qstr(3**9000) == str(flint.fmpz(3**9000))


@pytest.mark.parametrize("kind", list(_certificates(_stochastic(4, 5, 3))))
def test_a_threshold_past_the_digit_limit_still_gets_a_verdict(kind):
    A = _stochastic(4, 5, 3)
    res = check_lower(A, _certificates(A)[kind], EPS, chi=CHI)
    # t is below 1e-3800 and every certificate has a value far above it (or below 1)
    assert res.status == "holds"
    doc = res.to_json()
    assert _parse(doc["threshold"]) in (EPS + CHI, Fraction(1))  # t, or 1 for "< 1" kinds
    assert _parse(doc["chi"]) == CHI and qstr(EPS + CHI) in res.claim
    jsonexact.dumps(doc)


def test_frobenius_threshold_m_t_squared_past_the_digit_limit():
    A = _stochastic(4, 5, 3)
    res = check_lower(A, {"kind": "frobenius_tail", "rank": 1}, "1e-3900")
    assert res.status == "holds"  # ||A||_F^2 >= 4/5 > 4 * 10^-7800
    assert _parse(res.to_json()["threshold"]) == 4 * Fraction(1, 10**3900) ** 2
    jsonexact.dumps(res.to_json())


def test_upper_and_bracket_past_the_digit_limit():
    A = _stochastic(4, 5, 3)
    up = check_upper(A, np.eye(4), A, EPS, chi=CHI)
    assert up.status == "holds"  # U V = A exactly, error 0
    jsonexact.dumps(up.to_json())
    b = check_bracket(A, {"kind": "factors", "rank": 4, "U": np.eye(4), "V": A},
                      {"kind": "nonzero", "rank": 1}, EPS, chi=CHI)
    assert (b.lower, b.upper) == (1, 4)
    # EPS + CHI is about 1.07e-3817: the display scales it, never rounds it to "0"
    assert "at eps 1.071e-3817;" in repr(b) and "eps 1.071e-3817," in repr(up)
    jsonexact.dumps(b.to_json())


def _subnormal_nonzero():
    A = np.array([[2.08e-322, 3.66e-322, 1e-321, 9.54e-322],
                  [4.94e-322, 4.7e-322, 6.87e-322, 8.84e-322]])
    return A, {"kind": "nonzero", "rank": 1}, sum(Fraction(x) for x in A[1])


def _wide_frobenius():
    return (np.array([[1e308, 5e-324], [3e-320, 1.0]]),
            {"kind": "frobenius_tail", "rank": 1}, Fraction(1, 10))


@pytest.mark.parametrize("case", [_subnormal_nonzero, _wide_frobenius])
def test_a_caller_raising_on_float_errors_gets_the_same_verdict(case):
    A, cert, eps = case()
    quiet = check_lower(A, cert, eps)
    with np.errstate(all="raise"):
        loud = check_lower(A, cert, eps)
        up = check_upper(A, np.eye(2), A, eps)
    assert loud.status == quiet.status and loud.value == quiet.value
    assert up.status == "holds"


@pytest.mark.parametrize("tier", ["arb", "exact"])
def test_row_blocks_change_no_value(monkeypatch, tier):
    """The arb and exact tiers run a few rows at a time (memory); with blocks of one row or of
    a few entries the proved enclosures are those of one block."""
    from softrank.certify.numerics import blocks

    rng = np.random.default_rng(5)
    A = _stochastic(9, 7, 5)
    U, V = rng.standard_normal((9, 2)) * 2.0 ** rng.integers(-60, 60, (9, 2)), \
        rng.standard_normal((2, 7))
    Z = rng.uniform(-1, 1, (8, 7)) * 2.0 ** rng.integers(-40, 0, (8, 7))
    cert = {"kind": "rowset", "rank": 4, "I": np.array([0, 3, 5, 8]), "Z": Z}
    whole = (check_upper(A, U, V, "1/4", tier=tier), check_lower(A, cert, "1/4", tier=tier))
    for entries in (1, 10, 20):
        monkeypatch.setattr(blocks, "BLOCK_ENTRIES", entries)
        parts = (check_upper(A, U, V, "1/4", tier=tier),
                 check_lower(A, cert, "1/4", tier=tier))
        for w, p in zip(whole, parts, strict=True):
            assert (w.status, w.value) == (p.status, p.value)


def test_rowmix_row_blocks_change_no_value(monkeypatch):
    from softrank.certify.numerics import blocks

    rng = np.random.default_rng(6)
    A = _stochastic(11, 6, 6)
    D = rng.uniform(0, 1, (3, 11)) * 2.0 ** rng.integers(-30, 0, (3, 11))
    Z = rng.uniform(-1, 1, (4, 6))
    cert = {"kind": "rowmix", "rank": 3, "D": D, "Z": Z}
    whole = [check_lower(A, cert, "1/4", tier=t) for t in ("arb", "exact")]
    for entries in (1, 6, 13):
        monkeypatch.setattr(blocks, "BLOCK_ENTRIES", entries)
        parts = [check_lower(A, cert, "1/4", tier=t) for t in ("arb", "exact")]
        assert [(c.status, c.value) for c in parts] == [(c.status, c.value) for c in whole]


def test_bernstein_and_decoder_row_blocks_change_no_value(monkeypatch):
    from softrank.certify.numerics import blocks

    A = _stochastic(4, 5, 3)
    certs = [_certificates(A)["bernstein"], _certificates(A)["decoder"]]
    whole = [check_lower(A, c, "1/3", tier=t) for c in certs for t in ("arb", "exact")]
    for entries in (1, 5, 7):
        monkeypatch.setattr(blocks, "BLOCK_ENTRIES", entries)
        parts = [check_lower(A, c, "1/3", tier=t) for c in certs for t in ("arb", "exact")]
        assert [(c.status, c.value) for c in parts] == [(c.status, c.value) for c in whole]
    assert all(c.status != "undecided" for c in whole)  # decided: values to compare


def test_float_row_blocks_keep_the_float_tiers_proved(monkeypatch):
    """The float64 tiers of the upper check and of the operator slack run a few rows at a time
    (their temporaries held six m x N arrays); with blocks of one row or of a few entries they
    prove the same verdicts and enclosures that contain the one-block ones' values."""
    from softrank.certify import charged_slack
    from softrank.certify.numerics import blocks

    rng = np.random.default_rng(8)
    L = rng.standard_normal((9, 7)) * 3
    L[2, 4] = -np.inf
    E = np.exp(L - L.max(axis=1, keepdims=True))
    A = (E / E.sum(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    block = rng.uniform(0, 1, (9, 7))
    U, V = rng.standard_normal((9, 2)), rng.standard_normal((2, 7))
    eps = Fraction(float(np.abs(A - U @ V).sum(axis=1).max())) * Fraction(1001, 1000)

    def run():
        up = check_upper(A, U, V, eps, tier="float64")
        sl = [charged_slack({"A": A, "logits": L}), charged_slack({"A": A, "block": block})]
        return up, sl

    up0, sl0 = run()
    assert up0.status == "holds" and all(s.detail.get("tier") == "float64" for s in sl0)
    for entries in (1, 7, 20):
        monkeypatch.setattr(blocks, "FLOAT_BLOCK_ENTRIES", entries)
        assert len(blocks.row_blocks(9, 7, floats=True)) == -(-9 // max(1, entries // 7))
        up, sl = run()
        assert up.status == "holds"
        for s, s0 in zip(sl, sl0, strict=True):
            assert s.detail.get("tier") == "float64"
            assert s.chi_lo <= s0.chi and s0.chi_lo <= s.chi  # both contain chi_true


def test_svd_residuals_in_row_blocks_are_the_one_block_values(monkeypatch):
    """The arb and exact residuals of the validated SVD (and the exact Frobenius norm) run a
    row block of U and B at a time: the exact residuals are the same numbers, the arb ones
    still enclose them, and the float Frobenius enclosure (fsum fed a block at a time) is the
    same interval."""
    from softrank.certify.numerics import blocks, svd

    rng = np.random.default_rng(11)
    A = _stochastic(13, 6, 4) * 2.0 ** rng.integers(-30, 30, (13, 6))
    fac = svd.approximate_factors(A)
    exact0, arb0 = svd._exact_residuals(fac), svd._arb_residuals(fac, 128)
    frob0, fexact0 = svd.frobenius_sq_enclosure(A), svd.frobenius_sq_exact(A)
    sv0 = svd.enclose(A, "exact")
    for entries in (1, 6, 20):
        monkeypatch.setattr(blocks, "BLOCK_ENTRIES", entries)
        assert len(blocks.row_blocks(13, 6)) > 1
        assert svd._exact_residuals(fac) == exact0
        assert all(a >= x for a, x in zip(svd._arb_residuals(fac, 128), exact0, strict=True))
        assert svd.frobenius_sq_enclosure(A) == frob0
        assert svd.frobenius_sq_exact(A) == fexact0
        sv = svd.enclose(A, "exact")
        assert (sv.lo, sv.hi) == (sv0.lo, sv0.hi)
    assert all(a >= x for a, x in zip(arb0, exact0, strict=True))
    assert frob0.lo <= fexact0 <= frob0.hi


def test_bernstein_tiers_in_row_blocks_match_exact_rationals(monkeypatch):
    """||P A W - W||_inf and ||P||_inf of the exact tier, computed a row block of A and of P
    at a time, are the values of a direct Fraction computation; the arb tier's balls contain
    them."""
    from softrank.certify.lower import bernstein
    from softrank.certify.numerics import blocks

    rng = np.random.default_rng(12)
    A = _stochastic(9, 7, 8) * 2.0 ** rng.integers(-20, 5, (9, 7))
    W = rng.standard_normal((7, 3)) * 2.0 ** rng.integers(-10, 10, (7, 3))
    P = np.linalg.pinv(A @ W) * 2.0 ** rng.integers(-3, 3, (3, 9))
    P = np.vstack([P, np.zeros((4, 9))])  # N x m; rows of zeros: blocks with no nonzero
    Fa, Fw, Fp = ([[Fraction(float(x)) for x in r] for r in M] for M in (A, W, P))
    AW = [[sum(Fa[i][k] * Fw[k][j] for k in range(7)) for j in range(3)] for i in range(9)]
    R = [[sum(Fp[i][k] * AW[k][j] for k in range(9)) - Fw[i][j] for j in range(3)]
         for i in range(7)]
    delta = max(sum(abs(x) for x in r) for r in R)
    pn = max(sum(abs(x) for x in r) for r in Fp)
    for entries in (1, 4, 9, 1 << 20):
        monkeypatch.setattr(blocks, "BLOCK_ENTRIES", entries)
        ex = bernstein._exact_parts(A, W, P)
        assert ex == {"delta": (delta, delta), "pn": (pn, pn)}
        ab = bernstein._arb_parts(A, W, P, 128)
        assert ab["delta"][0] <= delta <= ab["delta"][1] and ab["pn"][0] <= pn <= ab["pn"][1]
