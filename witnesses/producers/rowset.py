"""Row-set lower certificates: p rows of A and one sign vector per orthant (untrusted).

A certificate (I, Z) claims rank >= p when, for every sign pattern sigma (sigma_0 = +1; row s
of Z for the pattern whose sigma_i is -1 exactly when bit i - 1 of s is set), the vector
z_s in [-1, 1]^N has sigma_i (A[I] z_s)_i > eps for every i: then no rank < p matrix is
within eps of A (proofs_notes/rowset.md).  For fixed rows the best z_s solves

    max lambda  subject to  sigma_i (A[I] z)_i >= lambda  (i < p),  -1 <= z <= 1,

and the smallest optimum over the 2^(p-1) patterns is min_y ||A[I]^T y||_1 / ||y||_1, which
decides r_eps(A[I]) >= p exactly.  So the search is a search for rows: the set grows by the
candidate row that keeps that minimum largest (candidates: the rows farthest in l1 from the
set, since ||a_i - a_r||_1 / 2 bounds the minimum of any set holding rows i and r); where no
candidate keeps it above eps, rows are swapped one at a time for candidates while that raises
the minimum.  A set's patterns are tried hardest first (those that bound the last set), and
its evaluation stops as soon as one pattern falls below the value to beat.  Every set costs
up to 2^(p-1) small LPs, so the search stops at rank MAX_P; the time budget is
``SOFTRANK_ROWSET_BUDGET`` seconds (default 10) per (operator, eps).

Nothing here is trusted: the certificate is replayed by ``certify``.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import linprog

from .decoder_lp import CLAIM_BUDGET, BudgetedLower

BUDGET_ENV = "SOFTRANK_ROWSET_BUDGET"
DEFAULT_BUDGET = 10.0
MAX_P = 10  # 2^9 LPs per row set; the kernel accepts up to 12
CANDIDATES = 12  # rows tried per growth step
WIDER = (12, 48, 1 << 30)  # candidates per swap position, widened while the budget lasts


def patterns(p: int) -> np.ndarray:
    """The 2^(p-1) x p sign patterns in the certificate's order (sigma_0 = +1)."""
    s = np.arange(1 << (p - 1), dtype=np.int64)[:, None]
    bits = (s >> np.arange(p - 1, dtype=np.int64)[None, :]) & 1
    return np.hstack([np.ones((len(s), 1)), 1.0 - 2.0 * bits])


def orthant(AI: np.ndarray, sigma: np.ndarray) -> tuple[float, np.ndarray] | None:
    """Returns (lambda, z): the largest min_i sigma_i (A[I] z)_i over z in [-1, 1]^N, with z
    clipped into the box and lambda recomputed from it in float64; None if the LP fails."""
    p, N = AI.shape
    A_ub = np.hstack([-(sigma[:, None] * AI), np.ones((p, 1))])
    r = linprog(np.r_[np.zeros(N), -1.0], A_ub=A_ub, b_ub=np.zeros(p),
                bounds=[(-1.0, 1.0)] * N + [(None, None)], method="highs")
    if r.status != 0 or r.x is None:
        return None
    z = np.clip(r.x[:N], -1.0, 1.0)
    return float(np.min(sigma * (AI @ z))), z


class _RowSets:
    """Evaluates row sets of one A, remembering which patterns were hardest."""

    def __init__(self, A: np.ndarray, deadline: float):
        self.A = A
        self.deadline = deadline
        self.hard: dict[int, list[int]] = {}  # per p: pattern indices that bound recent sets

    def value(self, I: list[int], beat: float = -np.inf
              ) -> tuple[float, np.ndarray | None]:
        """Returns (v, Z): v the smallest orthant optimum of rows I and Z the maximisers in
        pattern order; v < ``beat`` (and Z None) as soon as one pattern falls below it or the
        deadline passes (then v = -inf)."""
        p = len(I)
        AI = self.A[I]
        S = patterns(p)
        hard = self.hard.setdefault(p, [])
        order = hard + [s for s in range(len(S)) if s not in set(hard)]
        Z = np.zeros((len(S), self.A.shape[1]))
        v = np.inf
        for s in order:
            if time.monotonic() > self.deadline:
                return -np.inf, None
            r = orthant(AI, S[s])
            if r is None:
                return -np.inf, None
            lam, Z[s] = r
            v = min(v, lam)
            if lam < beat:
                if s in hard:
                    hard.remove(s)
                hard.insert(0, s)
                del hard[8:]
                return v, None
        return v, Z


def _candidates(A: np.ndarray, I: list[int], k: int) -> list[int]:
    """The k rows outside I farthest in l1 from their nearest row of I."""
    # one set row at a time: memory m x N, not m x |I| x N
    d = np.full(A.shape[0], np.inf)
    for i in I:
        d = np.minimum(d, np.abs(A - A[i]).sum(axis=1))
    d[I] = -np.inf
    return [int(r) for r in np.argsort(-d, kind="stable")[:k] if np.isfinite(d[r])]


def search(A: np.ndarray, eps: float, budget: float, *, max_p: int = MAX_P
           ) -> tuple[list[int], np.ndarray, float] | None:
    """Returns (I, Z, v) for the largest row set found with v = min orthant optimum above
    eps / CLAIM_BUDGET, or None (no row of A has l1 norm above that)."""
    m, N = A.shape
    goal = eps / CLAIM_BUDGET
    norms = np.abs(A).sum(axis=1)
    if not norms.max() > goal:
        return None
    sets = _RowSets(A, time.monotonic() + budget)
    i0 = int(np.argmax(norms))
    best = ([i0], np.sign(A[i0])[None, :], float(norms[i0]))
    I = [i0]
    while len(I) < min(max_p, m):
        tried: list[tuple[float, int]] = []  # (value, or an upper bound of it once below)
        top, top_v, top_Z = None, -np.inf, None
        for r in _candidates(A, I, CANDIDATES):
            v, Z = sets.value(I + [r], beat=max(top_v, goal))
            tried.append((v, r))
            if Z is not None and v > top_v:
                top, top_v, top_Z = I + [r], v, Z
        if top is None:  # none above the goal: swap rows of the most promising grown set
            if not tried or not np.isfinite(max(tried)[0]):
                break
            found = None
            for k in WIDER:  # more candidate rows per position while time is left
                found = _swap(sets, A, I + [max(tried)[1]], goal, k)
                if found is not None or time.monotonic() > sets.deadline:
                    break
            if found is None:
                break
            top, top_v, top_Z = found
        I = top
        best = (list(I), top_Z, top_v)
    return best


def _swap(sets: _RowSets, A: np.ndarray, J: list[int], goal: float, k: int
          ) -> tuple[list[int], float, np.ndarray] | None:
    """Swaps rows of J one at a time for one of ``k`` candidates while that raises its value;
    returns the first set whose value exceeds ``goal`` (with its Z) or None."""
    cur, _ = sets.value(J)
    improved = True
    while improved and np.isfinite(cur):
        improved = False
        for pos in range(len(J)):
            rest = J[:pos] + J[pos + 1:]
            for r in _candidates(A, rest, k):
                K = rest[:pos] + [r] + rest[pos:]
                v, Z = sets.value(K, beat=cur)  # complete only when not below cur
                if Z is not None and v > goal:
                    return K, v, Z
                if Z is not None and v > cur:
                    J, cur, improved = K, v, True
                    break
    return None


class RowSet(BudgetedLower):
    """Row-set certificate (I, Z): p rows whose images of the unit cube reach every orthant."""

    name = "rowset"
    budget_env = BUDGET_ENV
    default_budget = DEFAULT_BUDGET

    def _search(self, A, eps, budget):
        found = search(A, eps, budget)  # looked up at call time: tests may replace it
        return None if found is None else (*found, eps)

    def _parts(self, found):
        I, Z, v, eps = found
        # the claim budget is on eps / value (< 1 when the certificate holds)
        return ("rowset", len(I), {"I": np.asarray(I, dtype=np.int64),
                                   "Z": np.ascontiguousarray(Z, dtype=np.float64)},
                eps / v, "grow")
