"""Rigorous singular values (certify/numerics/svd.py, certify/numerics/ballmat.py) against
exact references."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from softrank.certify import InputError, singular_values
from softrank.certify.numerics.ballmat import (
    Ball,
    apriori_residual_frob_upper,
    ball_matmul,
    split,
    split_residual_frob_upper,
)
from softrank.certify.numerics.svd import frobenius_sq_enclosure, frobenius_sq_exact

# ---------------------------------------------------------------- exact test matrices


def q(x: Fraction | int) -> fmpq:
    x = Fraction(x)
    return fmpq(x.numerator, x.denominator)


def householder(n: int, support: list[int], signs: list[int]) -> fmpq_mat:
    """H = I - 2 v v^T / (v^T v) for v with entries +-1 on ``support`` (|support| = 4 or 16):
    v^T v is a power of two, so H is dyadic and exactly representable."""
    v = [0] * n
    for i, s in zip(support, signs, strict=True):
        v[i] = s
    vv = sum(x * x for x in v)
    return fmpq_mat(n, n, [q(Fraction(int(i == j)) - Fraction(2 * v[i] * v[j], vv))
                           for i in range(n) for j in range(n)])


def random_orthogonal_dyadic(n: int, k: int, rng: np.random.Generator) -> fmpq_mat:
    Q = fmpq_mat(n, n, [int(i == j) for i in range(n) for j in range(n)])
    for _ in range(k):
        supp = rng.choice(n, size=4, replace=False).tolist()
        Q = Q * householder(n, supp, rng.choice([-1, 1], size=4).tolist())
    return Q


def to_float_exact(M: fmpq_mat) -> np.ndarray:
    """Returns M as float64, asserting every entry converts exactly."""
    rows, cols = M.nrows(), M.ncols()
    out = np.empty((rows, cols))
    for i in range(rows):
        for j in range(cols):
            x = Fraction(int(M[i, j].p), int(M[i, j].q))
            out[i, j] = float(x)
            assert Fraction(out[i, j]) == x
    return out


def known_svd_matrix(m: int, n: int, d: list[Fraction], seed: int, k: int = 6,
                     right: bool = True) -> np.ndarray:
    """A = Q1 [diag(d); 0] Q2^T exactly in float64 with Q1, Q2 products of dyadic reflections
    (Q2 = I unless ``right``), so the singular values are exactly |d| (len(d) = min(m, n))."""
    rng = np.random.default_rng(seed)
    p = min(m, n)
    assert len(d) == p
    Sig = fmpq_mat(m, n, [q(d[i]) if (i == j and i < p) else 0
                          for i in range(m) for j in range(n)])
    A = random_orthogonal_dyadic(m, k, rng) * Sig
    if right:
        A = A * random_orthogonal_dyadic(n, k, rng).transpose()
    return to_float_exact(A)


def softmax(rng: np.random.Generator, m: int, n: int, scale: float = 3.0) -> np.ndarray:
    L = rng.standard_normal((m, n)) * scale
    A = np.exp(L - L.max(axis=1, keepdims=True))
    return A / A.sum(axis=1, keepdims=True)


def mp_singular_values(A: np.ndarray, dps: int = 40) -> list:
    with mpmath.workdps(dps):
        s = mpmath.svd_r(mpmath.matrix(A.tolist()), compute_uv=False)
        return sorted((s[i] for i in range(len(s))), reverse=True)


def assert_encloses(sv, exact_values, slack=0.0) -> None:
    assert len(sv.lo) == len(exact_values)
    for lo, hi, x in zip(sv.lo, sv.hi, exact_values, strict=True):
        assert lo <= hi
        assert float(lo) - slack <= x <= float(hi) + slack if slack else lo <= x <= hi


# ---------------------------------------------------------------- enclosures


D16 = [Fraction(x) for x in (4, 3, 2, 1.5, 1, 0.75, 0.5, 0.5, 0.5, 0.5, 0.25, 0.125,
                              2.0**-10, 2.0**-20, 0, 0)]


@pytest.mark.parametrize("tier", ["float64", "arb", "exact", "auto"])
@pytest.mark.parametrize("shape", [(16, 16), (24, 16), (16, 24)])
def test_exact_singular_values_are_enclosed(tier, shape):
    A = known_svd_matrix(*shape, D16, seed=shape[0] + shape[1])
    sv = singular_values(A, tier=tier)
    assert sv.shape == shape and len(sv) == 16
    assert_encloses(sv, [abs(x) for x in D16])
    # sigma = 2^-20 is far above the width: it keeps a positive lower bound
    assert sv.lo[13] > 0
    assert sv.max_width < 1e-13


def test_softmax_against_mpmath_all_tiers():
    rng = np.random.default_rng(1)
    A = softmax(rng, 20, 14)
    ref = mp_singular_values(A)
    enclosures = [singular_values(A, tier=t) for t in ("float64", "arb", "exact")]
    for sv in enclosures:
        for lo, hi, x in zip(sv.lo, sv.hi, ref, strict=True):
            assert mpmath.mpf(lo.numerator) / lo.denominator <= x
            assert x <= mpmath.mpf(hi.numerator) / hi.denominator
    # tiers agree: their enclosures intersect for every i
    for a in enclosures:
        for b in enclosures:
            assert all(max(x, y) <= min(u, v)
                       for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi, strict=True))


def test_width_target_256_softmax():
    rng = np.random.default_rng(2)
    A = softmax(rng, 256, 256)
    sv = singular_values(A, tier="float64")
    s1 = float(sv.hi[0])
    width = sv.hi_f - sv.lo_f
    assert width.max() <= 1e-11 * s1
    # every singular value larger than the width keeps a positive lower bound
    assert np.all(sv.lo_f[sv.approx > 2 * width.max()] > 0)
    assert sv.lo_f[-1] > 0  # softmax matrices here are far from singular


def test_wide_and_tall_agree_with_transpose():
    rng = np.random.default_rng(3)
    A = softmax(rng, 9, 30)
    a, b = singular_values(A), singular_values(A.T)
    assert len(a) == len(b) == 9
    assert all(max(x, y) <= min(u, v) for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi, strict=True))


def test_rank_deficient_and_zero():
    rng = np.random.default_rng(4)
    X = rng.integers(-3, 4, size=(12, 3)).astype(float)
    Y = rng.integers(-3, 4, size=(3, 10)).astype(float)
    A = X @ Y  # small integers: exact, rank <= 3
    sv = singular_values(A)
    assert all(lo == 0 for lo in sv.lo[3:])  # zero singular values: no positive lower bound
    assert all(hi < 1e-12 * float(sv.hi[0]) for hi in sv.hi[3:])
    z = singular_values(np.zeros((4, 5)))
    assert z.lo == z.hi == (Fraction(0),) * 4


def test_vectors_and_single_entries():
    sv = singular_values(np.array([[3.0, 4.0]]))
    assert sv.lo[0] <= 5 <= sv.hi[0]
    sv = singular_values(np.array([[3.0], [-4.0]]), tier="exact")
    assert sv.lo[0] <= 5 <= sv.hi[0]


def test_badly_scaled_matrix_is_enclosed():
    # columns spanning 60 orders of magnitude: the splits must still be exact or fall back
    d = [Fraction(2) ** e for e in (40, 10, 0, -30, -90, -150)]
    A = known_svd_matrix(6, 6, d, seed=7, k=3, right=False)
    for tier in ("float64", "arb", "exact"):
        assert_encloses(singular_values(A, tier=tier), d)


@pytest.mark.parametrize("bad", [
    np.array([[1.0, np.nan]]), np.array([[np.inf, 1.0]]), np.zeros((0, 3)), np.ones(3),
    np.array([["a"]]), np.array([[1 + 1j]]),
])
def test_bad_input(bad):
    with pytest.raises(InputError):
        singular_values(bad)


def test_bad_tier():
    with pytest.raises(InputError, match="tier"):
        singular_values(np.eye(2), tier="fast")


# ---------------------------------------------------------------- float building blocks


def _exact_matrix(X: np.ndarray) -> fmpq_mat:
    return fmpq_mat(X.shape[0], X.shape[1], [q(Fraction(float(x))) for x in X.ravel()])


def _exact_spectral_norm_float(M: fmpq_mat) -> float:
    F = np.array([[float(Fraction(int(M[i, j].p), int(M[i, j].q))) for j in range(M.ncols())]
                  for i in range(M.nrows())])
    return float(np.linalg.norm(F, 2))


@pytest.mark.parametrize("seed", range(4))
def test_split_residual_bounds_exact_residual(seed):
    rng = np.random.default_rng(seed)
    n = 24
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    scale = [1.0, 2.0**-40, 2.0**30, 1e-200][seed]
    P = Q * scale
    for X, Y, Z in ((Q.T, Q, None), (P, Q.T, P @ Q.T), (Q, Q, rng.standard_normal((n, n)))):
        ex = _exact_matrix(X) * _exact_matrix(Y)
        if Z is None:
            ex = ex - fmpq_mat(n, n, [int(i == j) for i in range(n) for j in range(n)])
        else:
            ex = ex - _exact_matrix(Z)
        true = _exact_spectral_norm_float(ex)
        for bound in (split_residual_frob_upper(X, Y, Z), apriori_residual_frob_upper(X, Y, Z)):
            assert bound >= true * (1 + 1e-9)


def test_split_makes_gram_exact():
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.standard_normal((64, 64)))
    Xh, Xl = split(Q, 0, 26)
    assert np.array_equal(Xh + Xl, Q)
    assert np.all(np.abs(Xl) <= 2.0**-27)
    assert np.all(Xh * 2.0**26 == np.round(Xh * 2.0**26))
    G = Xh.T @ Xh
    ex = _exact_matrix(Xh).transpose() * _exact_matrix(Xh)
    assert all(Fraction(float(G[i, j])) == Fraction(int(ex[i, j].p), int(ex[i, j].q))
               for i in range(64) for j in range(64))


def test_ball_matmul_contains_exact_product():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((5, 7)) * 10.0 ** rng.integers(-5, 5, size=(5, 7))
    B = rng.standard_normal((7, 4))
    C = ball_matmul(ball_matmul(Ball.exact(A), Ball.exact(B)), Ball.exact(B.T))
    ex = _exact_matrix(A) * _exact_matrix(B) * _exact_matrix(B.T)
    for i in range(5):
        for j in range(7):
            x = Fraction(int(ex[i, j].p), int(ex[i, j].q))
            assert abs(x - Fraction(float(C.mid[i, j]))) <= Fraction(float(C.rad[i, j]))


def test_frobenius_sq_enclosure_matches_exact():
    rng = np.random.default_rng(8)
    for scale in (1.0, 1e-150, 1e150, 1e-310):
        A = rng.standard_normal((13, 9)) * scale
        x = frobenius_sq_exact(A)
        e = frobenius_sq_enclosure(A)
        assert e.lo <= x <= e.hi
        if x:
            assert e.width <= x * Fraction(1, 2**50)


@pytest.mark.parametrize("e", [-1060, -1000, -300, 300, 1000, 1021])
def test_extreme_scales_keep_relative_accuracy(e):
    """Powers of two scale singular values exactly: tiny or huge matrices lose nothing."""
    d = [Fraction(x) for x in (4, 3, 2, 1.5, 1, 0.75, 0.5, 0.25)]
    A = known_svd_matrix(8, 8, d, seed=1) * 2.0**e
    exact = [x * Fraction(2) ** e for x in d]
    for tier in ("float64", "arb", "exact"):
        sv = singular_values(A, tier=tier)
        for lo, hi, x in zip(sv.lo, sv.hi, exact, strict=True):
            assert lo <= x <= hi and hi - lo <= x * Fraction(1, 10**12)
        assert np.all(sv.lo_f <= np.array([float(x) for x in exact]))
        assert np.all(np.array([float(x) for x in exact]) <= sv.hi_f)


def test_mixed_huge_and_tiny_entries_stay_rigorous():
    A = known_svd_matrix(8, 8, [Fraction(x) for x in (4, 3, 2, 1.5, 1, 0.75, 0.5, 0.25)], seed=2)
    A[0, 0], A[1, 1] = 1e300, 1e-300
    sv = singular_values(A)
    assert sv.lo[0] <= Fraction(1e300) * (1 + Fraction(1, 10**10))
    assert sv.hi[0] >= Fraction(1e300)


@pytest.mark.parametrize("seed", range(10))
def test_ball_chain_encloses_exact_residual_row_sums(seed):
    """I - X (D A W) and its row sums of |.|, entries spanning subnormal to huge binades."""
    from softrank.certify.numerics.ballmat import ball_abs_row_sums, identity_minus

    rng = np.random.default_rng(seed)

    def wild(r, c):
        return rng.standard_normal((r, c)) * 2.0 ** rng.integers(-1070, 300, size=(r, c)) \
            if seed % 2 else rng.standard_normal((r, c)) * 2.0 ** rng.integers(-60, 60, (r, c))

    D, A, W, X = wild(2, 4), wild(4, 3), wild(3, 2), wild(2, 2)
    with np.errstate(all="ignore"):
        M = ball_matmul(ball_matmul(Ball.exact(D), Ball.exact(A)), Ball.exact(W))
        R = identity_minus(ball_matmul(Ball.exact(X), M))
        lo, hi = ball_abs_row_sums(R)
    ex = fmpq_mat(2, 2, [1, 0, 0, 1]) - _exact_matrix(X) * (
        _exact_matrix(D) * _exact_matrix(A) * _exact_matrix(W))
    for i in range(2):
        row = sum(abs(Fraction(int(ex[i, j].p), int(ex[i, j].q))) for j in range(2))
        if np.isfinite(hi[i]):
            assert Fraction(float(lo[i])) <= row <= Fraction(float(hi[i]))


@pytest.mark.parametrize("shape", [(40, 27), (27, 40), (33, 33)])
def test_float_residuals_contain_exact_residuals(shape):
    """e, f, g of the float64 tier (dsyrk/dsyr2k Gram defects, split product) bound the exact
    Frobenius norms of U S V^T - B, V^T V - I, U^T U - I and are within a small factor."""
    from flint import fmpz_mat

    from softrank.certify.numerics import dyadic
    from softrank.certify.numerics.svd import (
        _align,
        _exact_frob_sq,
        _float_residuals,
        approximate_factors,
    )

    A = softmax(np.random.default_rng(sum(shape)), *shape)
    fac = approximate_factors(A)
    e, f, g = _float_residuals(fac)
    p = len(fac.s)
    eye = fmpz_mat(p, p, [int(i == j) for i in range(p) for j in range(p)])
    MU, eu = dyadic.to_int_matrix(fac.U)
    MV, ev = dyadic.to_int_matrix(fac.Vt)
    Ms, es = dyadic.to_int_matrix(fac.s.reshape(1, -1))
    S = fmpz_mat(p, p, [Ms[0, i] if i == j else 0 for i in range(p) for j in range(p)])
    cases = ((f, (MV * MV.transpose(), 2 * ev), (eye, 0), 1.01),
             (g, (MU.transpose() * MU, 2 * eu), (eye, 0), 1.01),
             # e also charges P = fl(U S) != U S (about u ||P||_F): a looser factor
             (e, (MU * S * MV, eu + es + ev), dyadic.to_int_matrix(fac.B), 2.0))
    for bound, x, y, factor in cases:
        X, Y, e0 = _align(x, y)
        sq = _exact_frob_sq(X - Y, e0)
        assert Fraction(bound) ** 2 >= sq
        assert bound <= factor * float(sq) ** 0.5
