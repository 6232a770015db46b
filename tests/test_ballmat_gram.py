"""Symmetric Gram-defect bound (certify.numerics.ballmat.gram_residual_frob_upper, dsyrk/dsyr2k) and
the Frobenius norm from an upper triangle, against exact dyadic integer arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import fmpz_mat

from softrank.certify.numerics import dyadic
from softrank.certify.numerics.ballmat import (
    Workspace,
    gram_residual_frob_upper,
    split_residual_frob_upper,
    sym_frob_upper,
)


def exact_gram_defect_sq(M: np.ndarray) -> Fraction:
    """||M^T M - I||_F^2 exactly (fmpz_mat on the dyadic integer form of M)."""
    Z, e = dyadic.to_int_matrix(M)
    G = Z.transpose() * Z  # M^T M = G 2^(2e)
    p = M.shape[1]
    total = Fraction(0)
    scale = dyadic.pow2(2 * e)
    for i in range(p):
        for j in range(p):
            x = Fraction(int(G[i, j])) * scale - (1 if i == j else 0)
            total += x * x
    return total


def assert_contains(bound: float, M: np.ndarray, factor: float | None = None) -> None:
    exact = exact_gram_defect_sq(M)
    assert np.isfinite(bound)
    assert Fraction(bound) ** 2 >= exact  # bound >= ||M^T M - I||_F >= ||M^T M - I||_2
    if factor is not None:
        assert bound <= factor * float(exact) ** 0.5 + 1e-150  # underflow charges: sqrt(n eta)


def orthonormal(rows: int, p: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((rows, p)))
    return Q


@pytest.mark.parametrize("shape", [(24, 24), (37, 37), (50, 23), (61, 5), (7, 1), (1, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_contains_exact_and_is_sharp_for_orthonormal(shape, order):
    Q = np.asarray(orthonormal(*shape, seed=sum(shape)), order=order)
    b = gram_residual_frob_upper(Q)
    assert_contains(b, Q, factor=1.01)  # the charges are ~1e-20: the bound is the true defect
    assert b == gram_residual_frob_upper(Q.copy(order="F" if order == "C" else "C"))


def test_transposed_view_of_factor():
    """svd.py passes Vt.T (a Fortran view of LAPACK's output)."""
    Q = orthonormal(33, 33, seed=3)
    Vt = np.ascontiguousarray(Q.T)
    assert_contains(gram_residual_frob_upper(Vt.T), Q, factor=1.01)


@pytest.mark.parametrize("seed", range(6))
def test_adversarial_binades_and_subnormals(seed):
    """Entries spanning many binades (down to subnormals): still an upper bound."""
    rng = np.random.default_rng(seed)
    rows, p = [(9, 9), (13, 6), (17, 11)][seed % 3]
    lo = [-1074, -1060, -600, -40, -30, -5][seed]
    M = rng.standard_normal((rows, p)) * 2.0 ** rng.integers(lo, 1, size=(rows, p))
    with np.errstate(under="ignore"):
        assert_contains(gram_residual_frob_upper(M), M)


@pytest.mark.parametrize("scale", [2.0**-30, 2.0**-1000, 2.0**-1074, 2.0**20, 2.0**500])
def test_scaled_orthonormal(scale):
    """Far from orthonormal (or no exact split fits): rigorous, and close for moderate scales."""
    M = orthonormal(19, 19, seed=11) * scale
    with np.errstate(under="ignore", over="ignore"):
        b = gram_residual_frob_upper(M)
    if np.isfinite(b):
        assert_contains(b, M, factor=1.01 if 2.0**-40 < scale < 2.0**40 else None)
    else:
        assert scale > 1  # only overflow may give inf


def test_near_orthonormal_beats_split_and_agrees():
    """Both bounds contain the exact defect and agree to the size of their charges."""
    Q = orthonormal(64, 64, seed=5)
    exact = float(exact_gram_defect_sq(Q)) ** 0.5
    g = gram_residual_frob_upper(Q)
    s = split_residual_frob_upper(Q.T, Q, None)
    assert exact <= g and exact <= s
    assert abs(g - s) <= 1e-3 * exact


def test_zero_and_empty():
    assert np.sqrt(3) <= gram_residual_frob_upper(np.zeros((5, 3))) <= np.sqrt(3) * (1 + 2**-50)
    assert gram_residual_frob_upper(np.zeros((4, 0))) == 0.0


def test_stale_workspace_contents_are_ignored():
    """dsyrk/dsyr2k run with beta = 0: stale (even NaN) upper triangles must not leak."""
    Q = orthonormal(30, 30, seed=7)
    ws = Workspace()
    clean = gram_residual_frob_upper(Q, ws)
    buf = ws.get("gc0", (30, 30), zeroed=True).T  # the Fortran view handed to BLAS
    buf[np.triu_indices(30)] = np.nan
    assert gram_residual_frob_upper(Q, ws) == clean


@pytest.mark.parametrize("seed", range(4))
def test_sym_frob_upper_contains_exact(seed):
    rng = np.random.default_rng(seed)
    p = [1, 5, 16, 31][seed]
    S = rng.standard_normal((p, p)) * 2.0 ** rng.integers(-60, 60, size=(p, p))
    S = S + S.T
    T = np.triu(S)
    exact = sum(Fraction(float(x)) ** 2 for x in S.ravel())
    b = sym_frob_upper(T)
    assert Fraction(b) ** 2 >= exact
    assert b <= float(exact) ** 0.5 * (1 + 1e-12)
    # nonzero entries below the diagonal only enlarge the bound (never unsound)
    assert sym_frob_upper(S) >= b


def test_exact_defect_helper_is_exact():
    """Sanity of the reference: a dyadic matrix with a known defect."""
    M = np.array([[1.0, 2.0**-30], [0.0, 1.0]])
    # M^T M - I = [[0, 2^-30], [2^-30, 2^-60]]
    assert exact_gram_defect_sq(M) == 2 * Fraction(1, 2**60) + Fraction(1, 2**120)
    Z, e = dyadic.to_int_matrix(M)
    assert isinstance(Z, fmpz_mat)


def test_dsyrk_of_split_factor_is_exact():
    """Lemma X in practice: dsyrk on the 26-bit part reproduces Mh^T Mh exactly (upper)."""
    from scipy.linalg import blas

    from softrank.certify.numerics.ballmat import split

    M = orthonormal(70, 45, seed=12)
    Mh, _ = split(M, 0, 26)
    C = blas.dsyrk(1.0, np.asfortranarray(Mh), trans=1)
    Z, e = dyadic.to_int_matrix(Mh)
    G = Z.transpose() * Z
    for i in range(45):
        for j in range(i, 45):
            assert Fraction(float(C[i, j])) == Fraction(int(G[i, j])) * dyadic.pow2(2 * e)


def test_zero_factors_bound_the_frobenius_norm_of_the_identity():
    # X Y = 0 and M = 0 leave -I: its Frobenius norm is sqrt(n), which the contracts promise
    # (1.0 bounded only the 2-norm, the one svd.py uses)
    from softrank.certify.numerics.ballmat import split_residual_frob_upper

    for n in (1, 3, 7):
        assert gram_residual_frob_upper(np.zeros((9, n))) >= np.sqrt(n)
        assert split_residual_frob_upper(np.zeros((n, 2)), np.zeros((2, n)), None) >= np.sqrt(n)
