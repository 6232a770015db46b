"""Built-in lower producers (what each certificate proves: proofs_notes/background.md, section 2).

* ``nonzero``: ||A||_row1 > eps gives rank 1.
* ``frobenius_tail``: the largest L with sum_{i >= L} sigma_i^2 > m eps^2.
* ``pinv_decoder``: D = U_p^T, W = V_p from the SVD, X = diag(1 / s_p); largest p that holds.
* ``submatrix``: rows and columns chosen greedily, X = inv(A[rows, cols]).
* ``keyset``: p queries and p disjoint key sets; D selects the queries, W holds 0/1 set
  indicators (||D||_inf = ||W||_inf = 1), X = inv(D A W); largest p by greedy + local search.

A decoder claim is made only when its float64 estimate of
delta + ||X D||_inf ||W||_inf eps, delta = ||I - X D A W||_inf, is at most 1 - 1e-6, so the
rigorous replay (which charges every rounding) confirms it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import BaseProducer, Certificate
from ._common import as_float64, budget_from_env, clock, eps_up, size_scale
from .keyset import keyset_search

DECODER_BUDGET = 1.0 - 1e-6
# the key-set searches of ``submatrix`` and ``keyset``: work units (or CPU seconds) per call on
# a 128 x 128 operator, times ``size_scale`` and ``--budget-scale``.  On 36 MiniLM heads of
# 128 tokens a call took at most 26 units (3.6 CPU s); the budget bounds the p^4 growth of the
# search on large operators of high rank
KEYSET_BUDGET_ENV = "SOFTRANK_KEYSET_BUDGET"
DEFAULT_KEYSET_BUDGET = 120.0


def _inf(X: np.ndarray) -> float:
    return float(np.abs(X).sum(axis=1).max()) if X.size else 0.0


def decoder_value(A: np.ndarray, D: np.ndarray, W: np.ndarray, X: np.ndarray,
                  eps: float) -> float:
    """Float64 estimate of delta + ||X D||_inf ||W||_inf eps (the claim is value < 1)."""
    p = X.shape[0]
    M = D @ A @ W
    delta = _inf(np.eye(p) - X @ M)
    return delta + _inf(X @ D) * _inf(W) * eps


class Nonzero(BaseProducer):
    """Rank 1 whenever some row of A has l1 norm above eps (B = 0 is too far)."""

    name = "nonzero"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        n = float(np.abs(A).sum(axis=1).max())
        if not n > eps_up(eps) * (1 + 1e-9):
            return None
        return Certificate(kind="nonzero", rank=1, claims={"lower_rank": 1, "row1_norm": n})


class FrobeniusTail(BaseProducer):
    """The largest L with sum_{i >= L} sigma_i(A)^2 > m eps^2 (float64 singular values)."""

    name = "frobenius_tail"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        m = A.shape[0]
        s = np.linalg.svd(A, compute_uv=False)
        tails = np.cumsum((s ** 2)[::-1])[::-1]  # tails[i] = sum_{l >= i} s_l^2 (0-based)
        need = m * eps_up(eps) ** 2 * (1 + 1e-6) + 1e-12 * float(s[0]) ** 2
        ok = np.flatnonzero(tails > need)
        if ok.size == 0:
            return None
        L = int(ok.max()) + 1  # 0-based index i holds means rank >= i + 1
        return Certificate(kind="frobenius_tail", rank=L,
                           claims={"lower_rank": L, "tail": float(tails[L - 1]),
                                   "threshold": m * float(eps) ** 2})


class PinvDecoder(BaseProducer):
    """Truncated-pseudoinverse decoder: D = U_p^T, W = V_p, X = diag(1/s_p)."""

    name = "pinv_decoder"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        e = eps_up(eps)
        Us, s, Vt = np.linalg.svd(A, full_matrices=False)
        best = None
        # ||U_p^T||_inf ||V_p||_inf / s_p grows with p in practice: scan from the top down
        lo, hi = 1, int(np.sum(s > s[0] * 1e-12))
        cand = None
        while lo <= hi:
            p = (lo + hi) // 2
            D, W = Us[:, :p].T.copy(), Vt[:p].T.copy()
            X = np.linalg.inv(D @ A @ W)
            v = decoder_value(A, D, W, X, e)
            if v <= DECODER_BUDGET:
                cand = (p, D, W, X, v)
                lo = p + 1
            else:
                hi = p - 1
        if cand is not None:
            p, D, W, X, v = cand
            best = Certificate(kind="decoder", rank=p, arrays={"D": D, "W": W, "X": X},
                               claims={"lower_rank": p, "decoder_value": v})
        return best


def _keysets(A: np.ndarray, eps: Fraction | float, *, singletons: bool, stopped: dict
             ) -> tuple[list[int], list[np.ndarray], np.ndarray, float] | None:
    """``keyset_search`` at eps rounded up, claiming only values within DECODER_BUDGET, within
    the key-set budget (``stopped["deadline"]`` set when it ended the search)."""
    budget = budget_from_env(KEYSET_BUDGET_ENV, DEFAULT_KEYSET_BUDGET) * size_scale(np.shape(A))
    return keyset_search(as_float64(A), eps_up(eps), singletons=singletons,
                         budget=DECODER_BUDGET, deadline=clock() + budget, stopped=stopped)


def _stop_claims(stopped: dict) -> dict[str, bool]:
    return {"keyset_budget_ended": True} if stopped.get("deadline") else {}


class SubmatrixSearch(BaseProducer):
    """Submatrix A[rows, cols] with eps ||inv||_inf < 1: the key-set search with singletons."""

    name = "submatrix"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        stopped: dict = {}
        res = _keysets(A, eps, singletons=True, stopped=stopped)
        if res is None:
            return None
        rows, sets, X, v = res
        cols = np.array([s[0] for s in sets], dtype=np.int64)
        return Certificate(kind="submatrix", rank=len(rows),
                           arrays={"rows": np.asarray(rows, dtype=np.int64), "cols": cols,
                                   "X": X},
                           claims={"lower_rank": len(rows), "decoder_value": v,
                                   **_stop_claims(stopped)})


class KeySetDecoder(BaseProducer):
    """Key-set decoder: D selects p queries, W holds the 0/1 indicators of p disjoint key sets."""

    name = "keyset"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        stopped: dict = {}
        res = _keysets(A, eps, singletons=False, stopped=stopped)
        if res is None:
            return None
        rows, sets, X, v = res
        m, N = np.shape(A)
        p = len(rows)
        D = np.zeros((p, m))
        D[np.arange(p), rows] = 1.0
        W = np.zeros((N, p))
        for t, S in enumerate(sets):
            W[S, t] = 1.0
        return Certificate(kind="decoder", rank=p, arrays={"D": D, "W": W, "X": X},
                           claims={"lower_rank": p, "decoder_value": v,
                                   **_stop_claims(stopped)})
