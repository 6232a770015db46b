"""decoder and submatrix certificates: differential tests against exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower
from tests.test_svd import softmax

TIERS = ("auto", "float64", "arb", "exact")


def frac_matrix(X: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(x)) for x in row] for row in np.atleast_2d(X)]


def matmul(P: list[list[Fraction]], Q: list[list[Fraction]]) -> list[list[Fraction]]:
    cols = list(zip(*Q, strict=True))
    return [[sum((a * b for a, b in zip(row, col, strict=True)), Fraction(0)) for col in cols]
            for row in P]


def inf_norm(P: list[list[Fraction]]) -> Fraction:
    return max(sum((abs(x) for x in row), Fraction(0)) for row in P)


def exact_parts(A, D, W, X) -> tuple[Fraction, Fraction, Fraction]:
    """(delta, ||X D||_inf, ||W||_inf) in exact rationals, independent of the kernel."""
    Aq, Dq, Wq, Xq = map(frac_matrix, (A, D, W, X))
    XM = matmul(Xq, matmul(matmul(Dq, Aq), Wq))
    p = len(Xq)
    R = [[Fraction(int(i == j)) - XM[i][j] for j in range(p)] for i in range(p)]
    return inf_norm(R), inf_norm(matmul(Xq, Dq)), inf_norm(Wq)


def selections(m: int, N: int, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    D = np.zeros((len(rows), m))
    D[np.arange(len(rows)), rows] = 1.0
    W = np.zeros((N, len(cols)))
    W[cols, np.arange(len(cols))] = 1.0
    return D, W


def random_decoder(rng: np.random.Generator, m: int, N: int, p: int):
    A = softmax(rng, m, N, scale=2.0)
    U, s, Vt = np.linalg.svd(A)
    D = U[:, :p].T + rng.standard_normal((p, m)) * 1e-3
    W = Vt[:p].T
    X = np.linalg.inv(D @ A @ W) * (1 + rng.standard_normal((p, p)) * 1e-6)
    return A, D, W, X


def assert_consistent(c, exact_value: Fraction) -> None:
    """The check's enclosure contains the exact value, and holds/fails agree with value < 1."""
    assert c.value is not None and c.value.lo <= exact_value <= c.value.hi
    if c.status == "holds":
        assert exact_value < 1
    elif c.status == "fails":
        assert exact_value >= 1


@pytest.mark.parametrize("seed", range(8))
def test_decoder_matches_exact_arithmetic(seed):
    rng = np.random.default_rng(seed)
    m, N, p = 6, 5, 1 + seed % 3
    A, D, W, X = random_decoder(rng, m, N, p)
    delta, xd, w = exact_parts(A, D, W, X)
    assert delta < 1
    eps_star = (1 - delta) / (xd * w)  # the exact boundary: value = 1
    cert = {"kind": "decoder", "rank": p, "D": D, "W": W, "X": X}
    for eps, truth in ((eps_star, "fails"), (eps_star * (1 - Fraction(1, 2**60)), "holds"),
                       (eps_star / 2, "holds"), (eps_star * 2, "fails")):
        value = delta + xd * w * eps
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_consistent(c, value)
            if tier in ("auto", "exact"):
                assert c.status == truth
            if tier == "exact":
                assert c.value.lo == c.value.hi == value
        assert check_lower(A, cert, eps, tier="float64").status in (truth, "undecided")


@pytest.mark.parametrize("seed", range(8))
def test_submatrix_matches_exact_arithmetic_and_decoder(seed):
    rng = np.random.default_rng(100 + seed)
    m, N = 7, 6
    p = 1 + seed % 4
    A = softmax(rng, m, N, scale=3.0)
    rows = rng.choice(m, size=p, replace=False)
    cols = rng.choice(N, size=p, replace=False)
    X = np.linalg.inv(A[np.ix_(rows, cols)])
    D, W = selections(m, N, rows, cols)
    delta, xd, w = exact_parts(A, D, W, X)
    assert w == 1
    if delta >= 1:
        pytest.skip("ill-conditioned draw")
    eps_star = (1 - delta) / xd
    sub = {"kind": "submatrix", "rank": p, "rows": rows, "cols": cols, "X": X}
    dec = {"kind": "decoder", "rank": p, "D": D, "W": W, "X": X}
    for eps, truth in ((eps_star, "fails"), (eps_star * (1 - Fraction(1, 2**60)), "holds")):
        value = delta + xd * eps
        for tier in TIERS:
            a, b = check_lower(A, sub, eps, tier=tier), check_lower(A, dec, eps, tier=tier)
            assert_consistent(a, value)
            assert_consistent(b, value)
            if tier in ("auto", "exact"):
                assert a.status == b.status == truth


def naive_float_value(A, D, W, X, eps: float) -> float:
    R = np.eye(X.shape[0]) - X @ (D @ A @ W)
    return (np.abs(R).sum(axis=1).max()
            + np.abs(X @ D).sum(axis=1).max() * np.abs(W).sum(axis=1).max() * eps)


def test_naive_float_lands_on_wrong_side_but_kernel_does_not():
    """At the exact boundary (value = 1) plain float64 often says < 1: a false "holds"."""
    wrong = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        A, D, W, X = random_decoder(rng, 5, 5, 3)
        delta, xd, w = exact_parts(A, D, W, X)
        eps_star = (1 - delta) / (xd * w)
        if naive_float_value(A, D, W, X, float(eps_star)) < 1 and \
                delta + xd * w * Fraction(float(eps_star)) >= 1:
            wrong += 1
            cert = {"kind": "decoder", "rank": 3, "D": D, "W": W, "X": X}
            eps = Fraction(float(eps_star))
            for tier in TIERS:
                assert check_lower(A, cert, eps, tier=tier).status != "holds"
            assert check_lower(A, cert, eps).status == "fails"
    assert wrong >= 3  # the test exercises the trap it is about


def test_decoder_rejects_singular_and_large_eps():
    rng = np.random.default_rng(7)
    A = softmax(rng, 6, 6)
    U, s, Vt = np.linalg.svd(A)
    # decoder of rank 2 against a rank-1 matrix: M is singular, no X can certify
    B = np.outer(A[0], np.ones(6)).T.copy()
    cert = {"kind": "decoder", "rank": 2, "D": U[:, :2].T, "W": Vt[:2].T,
            "X": np.diag(1 / s[:2])}
    assert check_lower(B, cert, "1e-9").status == "fails"
    assert check_lower(A, cert, "0.9").status == "fails"
    assert check_lower(A, cert, "1e-6").status == "holds"


def test_operator_slack_is_charged():
    rng = np.random.default_rng(8)
    A, D, W, X = random_decoder(rng, 6, 6, 2)
    delta, xd, w = exact_parts(A, D, W, X)
    eps_star = (1 - delta) / (xd * w)
    cert = {"kind": "decoder", "rank": 2, "D": D, "W": W, "X": X}
    eps = eps_star * Fraction(3, 4)
    assert check_lower(A, cert, eps).status == "holds"
    c = check_lower(A, cert, eps, chi=eps_star / 4)
    assert c.status == "fails" and c.threshold == 1 and c.detail["sense"] == "<"
    assert c.value.lo == c.value.hi == 1


@pytest.mark.parametrize("seed", range(6))
def test_float_tier_encloses_exact_value_with_wild_scales(seed):
    """Entries spanning hundreds of binades (and cancellation): float64 enclosures still hold."""
    rng = np.random.default_rng(500 + seed)
    m, N, p = 5, 4, 2
    A = rng.standard_normal((m, N)) * 2.0 ** rng.integers(-300, 300, size=(m, N))
    D = rng.standard_normal((p, m)) * 2.0 ** rng.integers(-200, 200, size=(p, m))
    W = rng.standard_normal((N, p)) * 2.0 ** rng.integers(-200, 200, size=(N, p))
    with np.errstate(all="ignore"):
        M = D @ A @ W
        X = np.linalg.pinv(M) if np.all(np.isfinite(M)) else np.eye(p)
    if not np.all(np.isfinite(X)):
        X = np.eye(p)
    delta, xd, w = exact_parts(A, D, W, X)
    cert = {"kind": "decoder", "rank": p, "D": D, "W": W, "X": X}
    for eps in (Fraction(1, 10**6), Fraction(1, 3), Fraction(5)):
        value = delta + xd * w * eps
        for tier in ("float64", "arb"):
            c = check_lower(A, cert, eps, tier=tier)
            if c.value is not None:
                assert_consistent(c, value)
        assert check_lower(A, cert, eps).status == ("holds" if value < 1 else "fails")
