"""Ky Fan dual certificates for Frobenius-tail lower ends (proofs_notes/replay.md).

For k = L - 1 and S the smaller Gram matrix of A (A^T A or A A^T), a certificate is a dyadic
z and float64 matrices G (k x n), C (n x n) with E = z I + G^T G - S - C^T C diagonally
dominant.  Then S - z I <= G^T G =: Z, Z >= 0, and the Ky Fan dual gives
sum_{i<L} sigma_i^2 <= k z + tr Z, so tail_L >= ||A||_F^2 - k z - ||G||_F^2.

The search is float64 (an eigendecomposition) plus an exact self-check of the same
inequalities with flint integers, so that a certificate that would not replay is not written.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from flint import fmpz_mat

from softrank.certify.numerics import dyadic, workbound


def gram_side(shape: tuple[int, int]) -> str:
    """``"AtA"`` when N <= m (S = A^T A is N x N), else ``"AAt"``."""
    m, N = shape
    return "AtA" if N <= m else "AAt"


def kyfan_certificate(A: np.ndarray, L: int, threshold: Fraction, *, tries: int = 24
                      ) -> dict[str, object] | None:
    """Returns {"side", "z", "G", "C"} proving sum_{i >= L} sigma_i(A)^2 > ``threshold``, or
    None when no certificate was found (the margin is too thin for the float64 search).
    Charges its phases to the current work meter (``workbound.charge``: WorkLimit before a
    phase over the limit).

    ``z`` is an exact dyadic Fraction; for L = 1 only ``side`` is returned (the tail is
    ||A||_F^2, computed exactly by the replayer).
    """
    A = np.asarray(A, dtype=np.float64)
    side = gram_side(A.shape)
    M = A if side == "AtA" else A.T  # S = M^T M
    n = M.shape[1]
    k = L - 1
    if k == 0:
        return {"side": side} if _frob(A) > threshold else None
    if k >= n:
        return None
    m = M.shape[0]
    bm = workbound.bits(M)
    # the Gram product, its eigendecomposition (about 10 n^3) and the exact S = M^T M
    workbound.charge(workbound.float_product(n, m, n) + 10 * n**3
                     + workbound.exact_product(n, m, n, bm, bm), "the Ky Fan search")
    lam, Q = np.linalg.eigh(M.T @ M)
    lam, Q = lam[::-1], Q[:, ::-1]
    lam_k = float(lam[k])
    g2 = np.concatenate([np.maximum(lam[:k] - lam_k, 0.0), np.zeros(n - k)])
    G = (np.sqrt(g2[:k])[:, None] * Q[:, :k].T).copy()
    S = _ints(M.T, M)
    frob = _frob(A)
    delta = max(float(lam[0]), 1e-300) * n * 2.0**-50
    for _ in range(tries):
        z = Fraction(float(lam_k + delta))
        c2 = np.maximum(float(z) + g2 - lam - delta / 2, 0.0)
        C = (np.sqrt(c2)[:, None] * Q.T).copy()
        bg, bc = workbound.bits(G), workbound.bits(C)
        workbound.charge(workbound.fraction_ops(2 * k * n, 2 * bg)
                         + workbound.exact_product(n, k, n, bg, bg)
                         + workbound.exact_product(n, n, n, bc, bc) + 1000 * n * n,
                         "a Ky Fan try")
        bound = frob - k * z - Fraction(sum(Fraction(x) ** 2 for x in G.ravel().tolist()))
        if bound <= threshold:
            return None  # a larger delta only lowers the bound
        if _dominant(z, G, C, S):
            return {"side": side, "z": z, "G": G, "C": C}
        delta *= 2
    return None


def _frob(A: np.ndarray) -> Fraction:
    # per entry a conversion and a Python square and sum of a 2b-bit integer
    workbound.charge(2000 * A.size * workbound.words(2 * workbound.bits(A)),
                     "the exact Frobenius norm")
    X, e = dyadic.to_int_matrix(A)
    return Fraction(sum(int(v) ** 2 for v in X.entries())) * dyadic.pow2(2 * e)


def _ints(X: np.ndarray, Y: np.ndarray) -> tuple[fmpz_mat, int]:
    """X Y exactly, as an integer matrix times 2^e."""
    MX, ex = dyadic.to_int_matrix(X)
    MY, ey = dyadic.to_int_matrix(Y)
    return MX * MY, ex + ey


def _dominant(z: Fraction, G: np.ndarray, C: np.ndarray, S: tuple[fmpz_mat, int]) -> bool:
    """Whether z I + G^T G - S - C^T C is diagonally dominant with a nonnegative diagonal."""
    n = C.shape[1]
    parts = [_ints(G.T, G), S, _ints(C.T, C)]
    ez = -(z.denominator.bit_length() - 1)
    e0 = min(ez, *(e for _, e in parts))
    sign = (1, -1, -1)
    E = fmpz_mat(n, n, [0] * (n * n))
    for s, (Mx, e) in zip(sign, parts, strict=True):
        E += Mx * (s * 2 ** (e - e0))
    ent = [int(v) for v in E.entries()]
    zi = z.numerator * 2 ** (ez - e0)
    for i in range(n):
        row = ent[i * n:(i + 1) * n]
        d = row[i] + zi
        if d < sum(abs(v) for v in row) - abs(row[i]):
            return False
    return True
