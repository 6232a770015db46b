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
the minimum, first among the rows farthest from the set, then among the rows a rank-(p - 1)
alternating-l1 fit leaves worst (from random starts), then among all rows.  A set's patterns
are tried hardest first (those that bound the last set) in one warm-started HiGHS model, and
its evaluation stops as soon as one pattern falls below the value to beat.  Every set costs
up to 2^(p-1) small LPs, so the search stops at rank MAX_P; the time budget is
``SOFTRANK_ROWSET_BUDGET`` CPU seconds (default 15 on a 128 x 128 operator, scaled with its
size; half for the row sets) per (operator, eps), and the search stops at a rank an upper
witness already claims (``produce(..., stop_at=U)``).
Where the next rank fails with rows, the rest of the budget goes to mixtures (``compress``)
from the best failing sets in turn: the rows of D A for D with rows of l1 norm at most 1, a
``rowmix`` certificate.

Nothing here is trusted: the certificate is replayed by ``certify``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._common import clock, linprog, row_l1
from ._highs import lp_model, optimal, run
from .altl1 import alt_l1
from .decoder_lp import CLAIM_BUDGET, BudgetedLower, Reached

BUDGET_ENV = "SOFTRANK_ROWSET_BUDGET"
DEFAULT_BUDGET = 15.0
MAX_P = 10  # 2^9 LPs per row set; the kernel accepts up to 12
CANDIDATES = 12  # rows tried per growth step
WIDER = (12, 48, 1 << 30)  # candidates per swap position, widened while the budget lasts
GUIDE_END = 1 / 2  # guided search (rows a low-rank fit leaves worst) to the end of the row share
GUIDE_ROWS = 24  # its candidate rows
GUIDE_ITERS = 3000  # IRLS steps of its fit
ROW_SHARE = 1 / 2  # of the budget for the row sets (7.5 s of 15); the rest for mixtures
MIX_ROUNDS = 15  # alternations of D and Z per climb
MIX_HOP = 0.05  # perturbation of D's support between climbs
MIX_NEAR = 0.95  # hops only from a first climb within 5% of the goal
MIX_STARTS = 3  # best failing row sets a mixture starts from, in turn


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


class Orthants:
    """The orthant LPs of one p x N matrix M, pattern after pattern in one HiGHS model.

    Patterns differ only in the sign of lambda's coefficient and the side of each row's
    bound (sigma_i = -1 turns (M z)_i - lambda >= 0 into (M z)_i + lambda <= 0), so the model
    is built once and the simplex warm-starts from the previous pattern's basis: 5.6 - 9.2x
    faster than a fresh ``linprog`` per pattern (benchmarks/bench_orthants.py).  Falls back
    to ``orthant`` where scipy's HiGHS binding is missing or refuses the model.
    """

    def __init__(self, M: np.ndarray):
        self.M = M
        self.sigma = np.ones(M.shape[0])
        p, N = M.shape
        self.h = lp_model(np.hstack([M, -np.ones((p, 1))]), np.r_[np.zeros(N), 1.0],
                          np.r_[-np.ones(N), -np.inf], np.r_[np.ones(N), np.inf],
                          np.zeros(p), np.full(p, np.inf), maximize=True)

    def solve(self, sigma: np.ndarray) -> tuple[float, np.ndarray] | None:
        """Returns what ``orthant(M, sigma)`` returns (an LP optimum, recomputed in float64
        from z clipped into the box), or None if the LP fails."""
        if self.h is None:
            return orthant(self.M, sigma)
        h, N = self.h, self.M.shape[1]
        for i in np.flatnonzero(sigma != self.sigma):
            h.changeCoeff(int(i), N, -float(sigma[i]))
            if sigma[i] > 0:
                h.changeRowBounds(int(i), 0.0, np.inf)
            else:
                h.changeRowBounds(int(i), -np.inf, 0.0)
        self.sigma = sigma.copy()
        run(h)
        if not optimal(h):
            return None
        z = np.clip(np.asarray(h.getSolution().col_value)[:N], -1.0, 1.0)
        return float(np.min(sigma * (self.M @ z))), z


class _RowSets:
    """Evaluates row sets of one A, remembering which patterns were hardest."""

    def __init__(self, A: np.ndarray, deadline: float):
        self.A = A
        self.deadline = deadline
        self.hard: dict[int, list[int]] = {}  # per p: pattern indices that bound recent sets
        self.seen: dict[frozenset[int], tuple[float, list[int]]] = {}  # sets fully evaluated

    def best(self, p: int, k: int) -> list[list[int]]:
        """The (at most) k distinct sets of p rows with the largest values evaluated so far."""
        done = sorted((v, J) for v, J in self.seen.values() if len(J) == p)
        return [J for _, J in reversed(done[-k:])]

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
        lps = Orthants(AI)
        for s in order:
            if clock() > self.deadline:
                return -np.inf, None
            r = lps.solve(S[s])
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
        self.seen[frozenset(I)] = (v, list(I))
        return v, Z


def _candidates(A: np.ndarray, I: list[int], k: int) -> list[int]:
    """The k rows outside I farthest in l1 from their nearest row of I."""
    # one set row at a time: memory m x N, not m x |I| x N
    d = np.full(A.shape[0], np.inf)
    for i in I:
        d = np.minimum(d, np.abs(A - A[i]).sum(axis=1))
    d[I] = -np.inf
    return [int(r) for r in np.argsort(-d, kind="stable")[:k] if np.isfinite(d[r])]


def search(A: np.ndarray, eps: float, budget: float, *, max_p: int = MAX_P, floor: int = 0,
           stopped: dict[str, int] | None = None
           ) -> tuple[str, int, dict[str, np.ndarray], float] | None:
    """Returns (kind, p, arrays, v): the largest row set found with v = min orthant optimum
    above eps / CLAIM_BUDGET ("rowset", arrays I and Z), or, where the next rank fails with
    rows and a mixture of rows reaches it, that ("rowmix", arrays D and Z); None when no row
    of A has l1 norm above eps / CLAIM_BUDGET.

    ``floor``: a rank another producer already claims.  Where no grown set reaches the next
    rank p + 1 <= floor, the swaps, guided search and mixtures are skipped (most of the
    search's time on real heads): the climb stops there, and ``stopped["floor_stop"]`` is set
    to p + 1."""
    m, N = A.shape
    goal = eps / CLAIM_BUDGET
    norms = np.abs(A).sum(axis=1)
    if not norms.max() > goal:
        return None
    t0 = clock()
    sets = _RowSets(A, t0 + ROW_SHARE * budget)
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
            if len(I) + 1 <= floor:
                # the rescue could still climb past the floor from here, but on real heads
                # it rarely does and it takes most of the time: another end already holds
                if stopped is not None:
                    stopped["floor_stop"] = len(I) + 1
                break
            found = _stuck(sets, A, I + [max(tried)[1]], goal, t0 + GUIDE_END * budget)
            if found is None:
                # past the row sets: mixtures of rows, from the best sets that failed (a
                # mixture's climb depends on its start more than on the start's value)
                starts = sets.best(len(I) + 1, MIX_STARTS)
                for n, J in enumerate(starts):
                    left = t0 + budget - clock()
                    mixed = compress(A, J, goal, clock() + left / (len(starts) - n))
                    if mixed is not None:
                        D, Z, v = mixed
                        return "rowmix", len(J), {"D": D, "Z": Z}, v
                break
            top, top_v, top_Z = found
        I = top
        best = (list(I), top_Z, top_v)
    return "rowset", len(best[0]), {"I": np.asarray(best[0], dtype=np.int64),
                                    "Z": best[1]}, best[2]


Found = tuple[list[int], float, np.ndarray]


def _stuck(sets: _RowSets, A: np.ndarray, J: list[int], goal: float, guide_end: float
           ) -> Found | None:
    """Where no grown set passes ``goal``: swaps among the rows farthest from the set (12,
    then 48 candidates), then a guided search among the rows a low-rank fit leaves worst
    (until ``guide_end``), then swaps among all rows while the row sets' time lasts.  Returns
    the first set found above ``goal`` (with its value and Z), or None."""
    found, near, near_v = None, J, -np.inf
    steps: list[Callable[[list[int]], tuple[Found | None, list[int], float]]] = [
        *(lambda J, k=k: _swap(sets, J, goal, lambda rest: _candidates(A, rest, k))
          for k in WIDER[:-1]),
        lambda J: _guided(sets, A, J, goal, guide_end),
        lambda J: _swap(sets, J, goal, lambda rest: _candidates(A, rest, WIDER[-1])),
    ]
    for step in steps:
        if found is not None or clock() > sets.deadline:
            break
        found, J, v = step(near)
        if found is None and v > near_v:
            near, near_v = J, v
    return found


def _fit_rows(A: np.ndarray, k: int, deadline: float) -> list[int]:
    """The GUIDE_ROWS rows of A farthest in l1 from a rank-k fit (alternating l1 from the
    leading singular subspace, stopped at ``deadline``): the rows a rank-k matrix finds hardest
    to follow, so the likeliest members of a row set of rank k + 1."""
    m, N = A.shape
    rng = np.random.default_rng(0)
    # the leading subspace by two steps of subspace iteration: no full SVD of a large A
    Q, _ = np.linalg.qr(A @ rng.standard_normal((N, min(k + 8, N))))
    for _ in range(2):
        Q, _ = np.linalg.qr(A @ (A.T @ Q))
    u, s, vt = np.linalg.svd(Q.T @ A, full_matrices=False)
    U, V, _ = alt_l1(A, k, 0.0, (Q @ u[:, :k]) * s[:k], vt[:k], iters=GUIDE_ITERS,
                     deadline=deadline, patient=True)
    err = row_l1(A, U, V)
    return [int(r) for r in np.argsort(-err, kind="stable")[:GUIDE_ROWS]]


def _guided(sets: _RowSets, A: np.ndarray, J: list[int], goal: float, deadline: float,
            *, seed: int = 0) -> tuple[Found | None, list[int], float]:
    """Swap searches restricted to the rows a rank-(p - 1) fit leaves worst, from J and then
    from random p-subsets of them, until ``deadline``; returns (found, J', v') as ``_swap``."""
    p = len(J)
    if clock() > deadline or p < 2:
        return None, J, -np.inf
    pool = _fit_rows(A, p - 1, deadline)
    if len(pool) < p:
        return None, J, -np.inf
    rng = np.random.default_rng(seed)
    saved, sets.deadline = sets.deadline, min(sets.deadline, deadline)
    try:
        best: tuple[list[int], float] = (J, -np.inf)
        start = list(J)
        while clock() < sets.deadline:
            found, K, v = _swap(sets, start, goal,
                                lambda rest: [r for r in pool if r not in rest])
            if found is not None:
                return found, K, v
            if v > best[1]:
                best = (K, v)
            start = [int(r) for r in rng.choice(pool, p, replace=False)]
        return None, *best
    finally:
        sets.deadline = saved


def _swap(sets: _RowSets, J: list[int], goal: float,
          candidates: Callable[[list[int]], list[int]]
          ) -> tuple[Found | None, list[int], float]:
    """Swaps rows of J one at a time for one of ``candidates(rest)`` while that raises its
    value; returns (found, J', v'): found the first set whose value exceeds ``goal`` (with its
    Z) or None, and the best set met with its value (the start of a compression)."""
    cur, _ = sets.value(J)
    improved = True
    while improved and np.isfinite(cur):
        improved = False
        for pos in range(len(J)):
            rest = J[:pos] + J[pos + 1:]
            for r in candidates(rest):
                K = rest[:pos] + [r] + rest[pos:]
                v, Z = sets.value(K, beat=cur)  # complete only when not below cur
                if Z is not None and v > goal:
                    return (K, v, Z), K, v
                if Z is not None and v > cur:
                    J, cur, improved = K, v, True
                    break
    return None, J, cur


def _orthants(M: np.ndarray, deadline: float) -> tuple[float, np.ndarray] | None:
    """(v, Z): every orthant optimum of the rows M, in certificate order; None past the
    deadline or when an LP fails."""
    S = patterns(M.shape[0])
    Z = np.zeros((len(S), M.shape[1]))
    v = np.inf
    lps = Orthants(M)
    for s in range(len(S)):
        if clock() > deadline:
            return None
        r = lps.solve(S[s])
        if r is None:
            return None
        lam, Z[s] = r
        v = min(v, lam)
    return v, Z


def _norm_rows(D: np.ndarray) -> np.ndarray:
    """D with every row scaled to l1 norm at most 1 - 1e-12 (a float sum within m ulps of
    the exact one, so the exact norm stays at most 1)."""
    n = np.abs(D).sum(axis=1, keepdims=True)
    return D * np.minimum(1.0, (1.0 - 1e-12) / np.maximum(n, 1e-300))


def _mix_step(A: np.ndarray, D: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Each row of D re-chosen with Z fixed: maximise min_s sigma_i(s) d . (A z_s) over
    ||d||_1 <= 1 (one LP per row); the old row is feasible, so no row gets worse."""
    p, m = D.shape
    S = patterns(p)
    AZ = A @ Z.T  # m x patterns
    out = D.copy()
    for i in range(p):
        C = (S[:, i][None, :] * AZ).T  # patterns x m
        n = C.shape[0]
        A_ub = np.vstack([np.hstack([-C, C, np.ones((n, 1))]),
                          np.r_[np.ones(2 * m), 0.0][None, :]])
        r = linprog(np.r_[np.zeros(2 * m), -1.0], A_ub=A_ub, b_ub=np.r_[np.zeros(n), 1.0],
                    bounds=[(0, None)] * (2 * m) + [(None, None)], method="highs")
        if r.status == 0 and r.x is not None:
            out[i] = r.x[:m] - r.x[m:2 * m]
    return _norm_rows(out)


def selection(J: list[int], m: int) -> np.ndarray:
    """The len(J) x m matrix selecting rows J (row i is the unit vector of J[i])."""
    D = np.zeros((len(J), m))
    D[np.arange(len(J)), J] = 1.0
    return D


def compress(A: np.ndarray, J: list[int], goal: float, deadline: float, *, seed: int = 0
             ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Returns (D, Z, v) with v above ``goal`` for rows of D A, or None: D starts as the
    selection of rows J; the rows of D and the z_s are re-chosen in turn (MIX_ROUNDS rounds
    or until the value stops rising), then, when that climb ends within MIX_NEAR of the
    goal, perturbed by MIX_HOP on their support and re-chosen again while the deadline
    allows, keeping the best."""
    rng = np.random.default_rng(seed)
    D = selection(J, A.shape[0])

    def climb(D: np.ndarray) -> tuple[float, np.ndarray, np.ndarray] | None:
        best = None
        for _ in range(MIX_ROUNDS):
            r = _orthants(D @ A, deadline)
            if r is None:
                break
            v, Z = r
            if best is not None and v <= best[0] * (1 + 1e-9):
                break
            best = (v, D, Z)
            if v > goal:
                break
            D = _mix_step(A, D, Z)
        return best

    best = climb(D)
    if best is None or best[0] < MIX_NEAR * goal:
        return None  # hops gained at most 3% on the held-out heads: this one will not get there
    while best[0] <= goal and clock() < deadline:
        v, D, _ = best
        Dp = _norm_rows(D + MIX_HOP * rng.standard_normal(D.shape) * (D != 0))
        trial = climb(Dp)
        if trial is not None and trial[0] > v:
            best = trial
    if best is None or not best[0] > goal:
        return None
    return best[1], best[2], best[0]


class RowSet(BudgetedLower):
    """Row-set certificate (I, Z): p rows whose images of the unit cube reach every orthant."""

    name = "rowset"
    budget_env = BUDGET_ENV
    default_budget = DEFAULT_BUDGET

    def _search(self, A, eps, budget, ceiling, floor: int = 0):
        stopped: dict[str, int] = {}
        # looked up at call time: tests may replace it
        found = search(A, eps, budget, max_p=min(MAX_P, ceiling), floor=floor, stopped=stopped)
        found = None if found is None else (*found, eps)
        return Reached(found, {"rowset_floor_stop": stopped["floor_stop"]}) if stopped \
            else found

    def _parts(self, found):
        kind, p, arrays, v, eps = found
        arrays = {k: np.ascontiguousarray(a) for k, a in arrays.items()}
        # the claim budget is on eps / value (< 1 when the certificate holds)
        return kind, p, arrays, eps / v, "grow" if kind == "rowset" else "mix"
