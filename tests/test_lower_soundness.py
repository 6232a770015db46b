"""Soundness: with an exactly verified rank-k witness at eps, no lower claim above k may hold."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg as sl

from softrank.certify import check_bracket, check_lower, check_upper, exact_error
from tests.helpers import bernstein_certificate, lp_left_inverse
from tests.test_svd import softmax


def lower_claims(A: np.ndarray, k: int, rng: np.random.Generator) -> list[dict]:
    """Lower certificates of rank > k built every way we can think of, many of them strong."""
    m, N = A.shape
    p_max = min(m, N)
    U, s, Vt = np.linalg.svd(A)
    out: list[dict] = [{"kind": "frobenius_tail", "rank": L} for L in range(k + 1, p_max + 1)]
    if k == 0:
        out.append({"kind": "nonzero", "rank": 1})
    for p in range(k + 1, min(k + 4, p_max) + 1):
        D, W = U[:, :p].T, Vt[:p].T
        Xtp = np.diag(1 / s[:p])  # truncated pseudoinverse
        for scale in (1.0, 0.5, 2.0, 1 + 2.0**-40):
            out.append({"kind": "decoder", "rank": p, "D": D, "W": W, "X": Xtp * scale})
        M = D @ A @ W
        out.append({"kind": "decoder", "rank": p, "D": D, "W": W, "X": np.linalg.inv(M)})
        # a decoder from the rank-k error's complement (optimistic: D, W rescaled)
        out.append({"kind": "decoder", "rank": p, "D": D * 3, "W": W / 3,
                    "X": np.linalg.inv((D * 3) @ A @ (W / 3))})
        # random decoders with their exact-ish inverse
        Dr, Wr = rng.standard_normal((p, m)), rng.standard_normal((N, p))
        out.append({"kind": "decoder", "rank": p, "D": Dr, "W": Wr,
                    "X": np.linalg.inv(Dr @ A @ Wr)})
        # submatrices chosen by pivoted QR and by largest entries
        _, _, piv_r = sl.qr(A.T, pivoting=True)
        rows = piv_r[:p]
        _, _, piv_c = sl.qr(A[rows], pivoting=True)
        cols = piv_c[:p]
        out.append({"kind": "submatrix", "rank": p, "rows": rows, "cols": cols,
                    "X": np.linalg.inv(A[np.ix_(rows, cols)])})
        # bernstein on the top right singular subspace: pinv and LP-optimal left inverses
        bern = bernstein_certificate(A, W)
        Pp = bern["P"]
        for P in (Pp, Pp * (1 + 2.0**-40), lp_left_inverse(A, bern["W"])):
            out.append({**bern, "P": P})
        rows2 = np.argsort(-A.max(axis=1))[:p]
        cols2 = np.array([int(np.argmax(A[r])) for r in rows2])
        if len(set(cols2.tolist())) == p:
            out.append({"kind": "submatrix", "rank": p, "rows": rows2, "cols": cols2,
                        "X": np.linalg.inv(A[np.ix_(rows2, cols2)])})
    return out


CASES = [(seed, shape, k) for seed, shape in enumerate([(10, 10), (12, 8), (8, 12), (16, 16)])
         for k in (0, 1, 2, 3)]


@pytest.mark.parametrize("seed,shape,k", CASES)
def test_no_lower_claim_exceeds_a_verified_upper_witness(seed, shape, k):
    rng = np.random.default_rng(seed)
    A = softmax(rng, *shape, scale=4.0)
    U, s, Vt = np.linalg.svd(A)
    Uk, Vk = U[:, :k] * s[:k], Vt[:k]
    eps = exact_error(A, Uk, Vk)  # the witness is exactly within eps
    assert eps > 0
    assert check_upper(A, Uk, Vk, eps, rank=k, tier="exact").status == "holds"
    held_below = 0
    for cert in lower_claims(A, k, rng):
        for tier in ("auto", "float64"):
            c = check_lower(A, cert, eps, tier=tier)
            assert c.status != "holds", (cert["kind"], cert["rank"], tier, c.value)
        # the same certificates do prove something at a smaller tolerance (they are not vacuous)
        held_below += check_lower(A, cert, eps / 64).status == "holds"
    assert held_below > 0
    b = check_bracket(A, eps, {"kind": "factors", "rank": k, "U": Uk, "V": Vk},
                      {"kind": "frobenius_tail", "rank": k + 1})
    assert b.upper == k and b.lower <= k and b.lower_result != "proved"


def test_float32_witness_at_its_exact_error():
    """A witness stored in float32 and checked exactly; lower claims at its error rejected."""
    rng = np.random.default_rng(42)
    A = softmax(rng, 20, 20, scale=5.0).astype(np.float32).astype(np.float64)
    U, s, Vt = np.linalg.svd(A)
    k = 4
    Uk = (U[:, :k] * s[:k]).astype(np.float32)
    Vk = Vt[:k].astype(np.float32)
    eps = exact_error(A, Uk, Vk)
    for chi in (Fraction(0), eps / 10):
        assert check_upper(A, Uk, Vk, eps + chi, rank=k, chi=chi).status == "holds"
        for cert in lower_claims(A, k, rng):
            # the lower check at eps + chi sees B within eps + chi, of rank k
            assert check_lower(A, cert, eps, chi=chi).status != "holds"
