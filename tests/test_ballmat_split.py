"""split_residual_frob_upper (exact Xh Yh, cross products accumulated by dgemm with beta = 1)
against exact dyadic integer arithmetic, including adversarial inputs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.numerics import dyadic
from softrank.certify.numerics.ballmat import Workspace, split_residual_frob_upper


def exact_residual_sq(X: np.ndarray, Y: np.ndarray, Z: np.ndarray | None) -> Fraction:
    """||X Y - Z||_F^2 exactly (Z = None: identity)."""
    MX, ex = dyadic.to_int_matrix(X)
    MY, ey = dyadic.to_int_matrix(Y)
    C = MX * MY
    scale = dyadic.pow2(ex + ey)
    total = Fraction(0)
    for i in range(X.shape[0]):
        for j in range(Y.shape[1]):
            z = (1 if i == j else 0) if Z is None else Fraction(float(Z[i, j]))
            d = Fraction(int(C[i, j])) * scale - z
            total += d * d
    return total


def check(X, Y, Z, factor=None):
    with np.errstate(under="ignore"):
        b = split_residual_frob_upper(X, Y, Z, Workspace())
    ex = exact_residual_sq(X, Y, Z)
    assert np.isfinite(b) and Fraction(b) ** 2 >= ex
    if factor is not None:
        assert b <= factor * float(ex) ** 0.5 + 1e-150
    return b


@pytest.mark.parametrize("shape", [(29, 17, 23), (16, 16, 16), (5, 40, 3)])
def test_svd_like_product_is_sharp(shape):
    """P V^T - B with B = the rounded product: the bound is the true residual (charges tiny)."""
    m, k, n = shape
    rng = np.random.default_rng(m * k)
    P = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-20, 3, size=k)  # scaled columns
    Vt, _ = np.linalg.qr(rng.standard_normal((max(k, n), max(k, n))))
    Vt = np.ascontiguousarray(Vt[:k, :n])
    B = P @ Vt + rng.standard_normal((m, n)) * 1e-13
    check(P, Vt, B, factor=1.01)
    Q, _ = np.linalg.qr(rng.standard_normal((k, k)))
    check(Q.T, Q, None, factor=1.01)  # Gram defect through the general routine


@pytest.mark.parametrize("seed", range(6))
def test_adversarial_binades_and_subnormals(seed):
    rng = np.random.default_rng(100 + seed)
    m, k, n = [(7, 9, 5), (12, 3, 12), (9, 9, 9)][seed % 3]
    lo = [-1074, -1070, -700, -50, -20, -3][seed]
    X = rng.standard_normal((m, k)) * 2.0 ** rng.integers(lo, 1, size=(m, k))
    Y = rng.standard_normal((k, n)) * 2.0 ** rng.integers(lo, 1, size=(k, n))
    with np.errstate(under="ignore"):
        Z = X @ Y
    check(X, Y, Z)
    check(X, Y, np.zeros((m, n)))
    if m == n:
        check(X, Y, None)


def test_non_contiguous_inputs():
    rng = np.random.default_rng(9)
    Q, _ = np.linalg.qr(rng.standard_normal((21, 21)))
    Xf = np.asfortranarray(Q)
    check(Xf.T, Xf, None, factor=1.01)  # C view and Fortran array
    check(Q[::2, :], Q[:, ::2], (Q @ Q)[::2, ::2], factor=1.01)  # strided views
