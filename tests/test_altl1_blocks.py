"""alt_l1's weighted least-squares step by blocks of columns, against the one-GEMM form."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.witnesses.producers import altl1


def _reference(W: np.ndarray, X: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    G = np.einsum("ij,ik,il->jkl", W, X, X)
    return np.linalg.solve(G, rhs[..., None])[..., 0]


@pytest.mark.parametrize("rows,n,k", [(40, 30, 5), (64, 50, 12), (7, 9, 3), (5, 33, 5)])
def test_blocks_solve_the_same_systems(monkeypatch, rows, n, k):
    rng = np.random.default_rng(rows * n + k)
    W = rng.random((rows, n)) + 0.1
    X = rng.standard_normal((rows, k))
    rhs = rng.standard_normal((n, k))
    whole = altl1._weighted_solves(W, X, rhs)
    # a cap that forces blocks of two columns
    monkeypatch.setattr(altl1, "GRAM_BYTES", 2 * 8 * k * max(rows, k))
    blocks = altl1._weighted_solves(W, X, rhs)
    ref = _reference(W, X, rhs)
    assert np.allclose(whole, ref, rtol=1e-8, atol=1e-10)
    assert np.allclose(blocks, ref, rtol=1e-8, atol=1e-10)


def test_no_intermediate_passes_the_cap(monkeypatch):
    # every array the blocked path forms stays under the cap (the one-GEMM form of this size
    # would hold rows * k * k and n * k * k numbers at once)
    rows, n, k = 60, 80, 20
    cap = 8 * k * max(rows, k) * 3
    monkeypatch.setattr(altl1, "GRAM_BYTES", cap)
    seen = []
    real = altl1._solve_batched

    def spy(G, b):
        seen.append(G.nbytes)
        return real(G, b)

    monkeypatch.setattr(altl1, "_solve_batched", spy)
    rng = np.random.default_rng(1)
    out = altl1._weighted_solves(rng.random((rows, n)) + 0.1, rng.standard_normal((rows, k)),
                                 rng.standard_normal((n, k)))
    assert out.shape == (n, k) and len(seen) == -(-n // 3) and max(seen) <= cap


def test_a_fit_is_the_same_with_and_without_blocks(monkeypatch):
    rng = np.random.default_rng(2)
    L = rng.standard_normal((24, 20)) * 2
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    Us, s, Vt = np.linalg.svd(A)
    U0, V0 = Us[:, :4] * s[:4], Vt[:4]
    e1 = altl1.alt_l1(A, 4, 0.0, U0, V0, iters=30, patient=True)[2]
    monkeypatch.setattr(altl1, "GRAM_BYTES", 8 * 4 * 24 * 2)
    e2 = altl1.alt_l1(A, 4, 0.0, U0, V0, iters=30, patient=True)[2]
    assert abs(e1 - e2) <= 1e-9 * e1
