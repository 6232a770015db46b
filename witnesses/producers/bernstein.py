"""Bernstein (subspace) lower certificates: a subspace W and a left inverse P (untrusted).

A certificate (W, P, J) claims rank >= p when the rows W[J] are exactly the p x p identity
and ||R||_inf + eps ||P||_inf < 1 for R = P A W - W (the Bernstein lower kind: if B had
rank < p, some w = W x != 0 in col(W) would lie in ker B, and P (A - B) w = w + R x with
||x||_inf <= ||w||_inf, as x = w[J], forces ||R||_inf + eps ||P||_inf >= 1).  For
a fixed subspace S = col(W) the best P splits into one basis-pursuit LP per row of P:

    row j:  minimise ||P_j||_1  subject to  P_j (A W) = W_j,

whose optimum f_j is sup_{w in S} |w_j| / ||A w||_inf (LP duality); the dual x_j attains it
with w = W x_j.  So max_j f_j = sup_{w in S} ||w||_inf / ||A w||_inf, and the search is a
search for a subspace on which A is far from shrinking in the max norm.

Search. The key-set path of ``keyset`` (0/1 indicators of p disjoint key sets) gives
subspaces at every rank it reaches; the largest rank whose Bernstein value is below the
claim budget is the first certificate. Above it, the key-set subspace of the next rank is
improved by sequential linear programming on the minimax problem min_W max_j f_j: the
gradient of f_j in W is (e_j - A^T P_j^T) x_j^T (envelope theorem on the row LP); one step
solves the LP min t s.t. f_j + <g_j, dW> <= t over the rows within 5% of the worst, in a box
trust region |dW| <= r, accepts the step when the true maximum drops (r grows) and halves r
otherwise. The rank goes up while a rank is reached. Then the same descent starts from two
other subspaces of the next rank, the row space of a rank-p l1 fit of A and the leading
right singular vectors (each descends a little, the better one continues), and climbs while
it reaches a rank. Where these stop helping, the best subspace found grows by one direction
at a time: the candidate column (a column of the key-set subspace of the next rank, or the
indicator of a key with the most attention mass that the subspace does not cover) with the
smallest max_j f_j starts the same descent; on MiniLM heads this reaches ranks that the
key-set starts miss. Last, the best subspace that failed at the next rank is the start of
basin hopping (``hop``): the descent's trust region collapses at kinks of max_j f_j, not
only at minima, and small random perturbations followed by new descents move on from there.
The time budget is ``SOFTRANK_BERNSTEIN_BUDGET`` CPU seconds (default 10 on a 128 x 128
operator, scaled with its size) for each of three phases (key-set descent, other starts,
growth), PATH_BUDGETS times that for the key-set path, and HOP_BUDGETS times that for the hops
(up to HOP_GRACE times while the hops are within HOP_NEAR of the goal); all of these times
``rank_budgets(ceiling)`` (ceiling / RANK_STEP, between 1 and RANK_BUDGETS), since the phases
climb one rank at a time and a search that may end at rank 60 has many more ranks to climb
than one that ends at 6 (the polytope lifts keep the unscaled budget); descents also stop
after a fixed number of steps, or once the pace of their last steps would need more than
``PATIENCE`` further steps to reach the claim budget (such descents were not going to reach it,
and the phase moves on instead of spending its budget), so a generous budget gives the same
certificate on every run (a tight one on a busy machine may not: a phase cut short reaches a
lower rank). Every phase stops at ``ceiling``, a rank an upper witness already claims
(``produce(..., stop_at=U)``): no lower end passes a valid upper end.

Across eps (``produce(..., hints=H)``, the pipeline searching an operator from its largest eps
down): the subspaces the search at the larger eps ended with, the one it certified and the best
that missed each rank, are tried first at the smaller one, where F = max_j f_j is the same
(the row LPs do not depend on eps) and the goal 1 / eps is larger: the largest that certifies
is the start (``start`` "seed"), the others join the failing subspaces the hops start from.

Where the search ends, the best subspace that missed the next rank (within LIFT_NEAR of the
goal) is lifted to a ``polytope`` certificate (``polytope.lift``): the facets of conv(+-A W)
keep their labels and each may choose its own witness outside the subspace; facets whose
labels no witness serves together are repaired by subdividing an edge with a new labelled point
(``subdivide.repair``), and such a certificate's ``start`` is "lift+subdivided".  When the
lift of that subspace fails, perturbed copies of it are lifted (``polytope.lift_near``, one more
phase budget): "lift+perturbed" or "lift+perturbed+subdivided".  Past rank
``polytope.FULL_RANK`` the lift's points are a subset of the hull vertices
(``polytope.sparse_points``: the full hulls of MiniLM heads have too many facets there) and it
gets ``polytope.SPARSE_BUDGETS`` phase budgets.  When the next rank is the
ceiling, the lift is tried before the hops (``search(..., before_hops=)``): a lift that reaches
it closes the bracket, which is all the hops could do; when it fails the hops run as before and
their best subspace is lifted only if it is another one.

The certificate's claims say how near the search came to the next rank p + 1 (when it stopped
below the ceiling and tried a subspace there): ``lower_next_rank`` = p + 1 and
``lower_next_value``, eps times the least sup_(w in S) ||w||_inf / ||A w||_inf of the rank-(p + 1)
subspaces S it tried (the Bernstein value of their optimal P; below 1 would have raised the
rank).  A float64 search result, not a proof (a better subspace may exist).

Nothing here is trusted: the certificate is replayed by ``certify``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg import qr

from . import polytope
from ._common import (
    IRLS_UNIT,
    as_float64,
    budget_scale,
    charge,
    clock,
    linprog,
    search_claim,
    target,
    time_limit,
)
from ._highs import lp_model, optimal, run
from .altl1 import alt_l1
from .decoder_lp import CLAIM_BUDGET, BudgetedLower, Reached, keyset_path

BUDGET_ENV = "SOFTRANK_BERNSTEIN_BUDGET"
DEFAULT_BUDGET = 10.0  # seconds per (operator, eps), for each of the four phases
STEPS = 150  # descent steps per rank (a budget-independent stop)
ACTIVE = 0.05  # rows within this fraction of the worst enter a descent step
SINGLETONS = 10  # uncovered keys tried as the new direction of a grown subspace
FIT_ITERS = 300  # IRLS steps of the rank-p l1 fit whose row space starts a descent
PATIENCE = 60  # a descent stops once its last WINDOW steps' pace needs more steps than this
WINDOW = 10
# the key-set path's budget, in per-phase budgets: the cheapest climb at large ranks (a MiniLM
# head at eps 0.35: a path cut at 5 work units certified rank 28, at 20 units rank 45, in 9 CPU
# seconds), and a path ends by itself a few ranks past the last key set that holds, so a small
# head never uses the extra budgets
PATH_BUDGETS = 4
HOP_SCALES = (0.01, 0.02)  # relative sizes of the perturbations that start a hop's descent
HOP_PATIENCE = 40  # hopping stops once its last WINDOW hops' pace needs more hops than this
HOP_BUDGETS = 3  # the hop phase's time budget, in per-phase budgets
# past that budget, hopping goes on (up to HOP_GRACE budgets in all) while its value is within
# HOP_NEAR of the goal: on held-out MiniLM heads the hops that reached a rank after 30 s were
# within 3% of it at 30 s
HOP_GRACE = 9
HOP_NEAR = 1.03
HOP_SEED = 20261201
SEEDS = "seeds"  # the hints key of the subspaces a search at a larger eps ended with
# the phases climb one rank at a time, so a search that may end at a large rank gets budgets in
# proportion: ceiling / RANK_STEP phase budgets, at least 1 and at most RANK_BUDGETS (on the
# tuning paragraph, Bernstein alone, four phase budgets instead of one: L1.H4 48 -> 55, L2.H8
# 49 -> 54, L4.H6 28 -> 30, L1.H1 22 -> 23; on its gap-1 heads of rank <= 10 four budgets had
# raised none, and these keep one)
RANK_STEP = 10
RANK_BUDGETS = 4.0



def _inf(X: np.ndarray) -> float:
    return float(np.abs(X).sum(axis=1).max()) if X.size else 0.0


def normalise(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (W', J): the same column space with W'[J] exactly the identity.

    J (sorted, int64) comes from a column-pivoted QR of W^T; raises LinAlgError when W is
    numerically rank deficient.
    """
    p = W.shape[1]
    _, _, piv = qr(W.T, pivoting=True, mode="economic")
    J = np.sort(piv[:p]).astype(np.int64)
    Wn = np.linalg.solve(W[J].T, W.T).T  # W (W_J)^{-1}
    if not np.all(np.isfinite(Wn)):
        raise np.linalg.LinAlgError("W is rank deficient")
    Wn[J] = np.eye(p)
    return Wn, J


class _RowLP:
    """min ||y||_1 subject to y G = c, for one G (m x p) and many right-hand sides c."""

    def __init__(self, G: np.ndarray, deadline: float | None = None):
        self.G = G
        self.deadline = deadline
        m, p = G.shape
        self.m, self.p = m, p
        # one model per G: only the right-hand side changes, so the basis carries over
        self.h = lp_model(np.hstack([G.T, -G.T]), np.ones(2 * m), np.zeros(2 * m),
                          np.full(2 * m, np.inf), np.zeros(p), np.zeros(p))

    def solve(self, c: np.ndarray) -> tuple[float, np.ndarray, np.ndarray] | None:
        """Returns (f, y, x): the optimum, a minimiser y and a dual x with c.x = f."""
        m = self.m
        left = None
        if self.deadline is not None:
            left = self.deadline - clock()
            if left <= 0:
                return None
        if self.h is not None:
            h = self.h
            for key, val in time_limit(left).items():  # none in work mode
                h.setOptionValue(key, val)
            for i in range(self.p):
                h.changeRowBounds(i, float(c[i]), float(c[i]))
            run(h)
            if not optimal(h):
                return None
            s = h.getSolution()
            v = np.asarray(s.col_value)
            x = np.asarray(s.row_dual, dtype=np.float64)
        else:  # pragma: no cover
            r = linprog(np.ones(2 * m), A_eq=np.hstack([self.G.T, -self.G.T]), b_eq=c,
                        bounds=(0, None), method="highs",
                        options=time_limit(left))
            if r.status != 0:
                return None
            v, x = r.x, np.asarray(r.eqlin.marginals, dtype=np.float64)
        y = v[:m] - v[m:]
        f = float(np.abs(y).sum())
        if float(c @ x) < 0:  # the binding's sign convention for duals
            x = -x
        return f, y, x


def feasible_rows(G: np.ndarray, W: np.ndarray, prev: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Returns (b, Y): Y (N x m) with Y G = W up to rounding and b_j = ||Y_j||_1, so b_j is
    (up to rounding) an upper bound on f_j = min ||y||_1 s.t. y G = W_j; None when G is
    numerically rank deficient or the correction leaves a residual above rounding level.

    Y is ``prev`` (any N x m, e.g. the minimisers of a nearby subspace) plus the correction
    that solves the residual on p rows of G chosen by a column-pivoted QR of G^T: a step of
    the descent moves W a little, so the bound stays within a few percent of f_j."""
    m, p = G.shape
    charge(IRLS_UNIT * m * W.shape[0] * 2 * p)  # two N x m x p products
    try:
        _, _, piv = qr(G.T, pivoting=True, mode="economic")
        S = piv[:p]
        R = W - prev @ G
        Z = np.linalg.solve(G[S].T, R.T).T  # Z G[S] = R
    except (np.linalg.LinAlgError, ValueError):
        return None
    Y = prev.copy()
    Y[:, S] += Z
    scale = max(1.0, float(np.abs(W).max()) if W.size else 1.0)
    if not np.all(np.isfinite(Y)) or float(np.abs(Y @ G - W).max(initial=0.0)) > 1e-9 * scale:
        return None
    return np.abs(Y).sum(axis=1), Y


def row_values(A: np.ndarray, W: np.ndarray, *, stop_above: float = np.inf,
               deadline: float | None = None, first: np.ndarray | None = None,
               prev: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns (f, P, X): f_j = min ||P_j||_1 s.t. P_j A W = W_j for every row j, the
    minimisers P (N x m) and the duals X (N x p).  None when some row LP fails or passes
    ``deadline`` (clock()), or (early exit) once some f_j exceeds ``stop_above``.

    ``first`` (N values, e.g. the f of the subspace a trial step starts from) orders the row
    LPs, largest first: a step that raises the maximum usually raises it on a row that was
    near it, so the early exit comes after a few LPs instead of a scan in row order.

    ``prev`` (N x m, the minimisers of a nearby subspace) skips rows: ``feasible_rows``
    bounds every f_j from above, the LPs run in the order of these bounds (not ``first``'s),
    largest first, and stop once the next bound is below (1 - ACTIVE) times the largest f_j
    solved.  Every skipped row then has P_j feasible with f_j = ||P_j||_1 >= its optimum,
    X_j = 0, and lies outside the descent's active rows, whose f, P and X are LP optima as
    without ``prev``; max_j f_j is the same.  On four 128 x 128 MiniLM heads (ranks 7 - 59)
    an accepted step then solved 21 - 79% of the row LPs, and all trial steps 9 - 38%."""
    N, p = W.shape
    m = A.shape[0]
    G = A @ W
    solver = _RowLP(G, deadline)
    f = np.zeros(N)
    P = np.zeros((N, m))
    X = np.zeros((N, p))
    U, inv = np.unique(W, axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    order = np.arange(U.shape[0])
    bound = None
    fr = None if prev is None else feasible_rows(G, W, prev)
    if fr is not None:
        b, Y = fr
        bound = np.full(U.shape[0], np.inf)
        np.minimum.at(bound, inv, b)
        order = np.argsort(-bound, kind="stable")
    elif first is not None:
        rank = np.full(U.shape[0], -np.inf)
        np.maximum.at(rank, inv, np.nan_to_num(first, nan=np.inf))
        order = np.argsort(-rank, kind="stable")
    top = 0.0
    for k, u in enumerate(order):
        if bound is not None and bound[u] < (1 - ACTIVE) * top:
            for v in order[k:]:  # the rest are below it too
                if not np.any(U[v]):
                    continue
                idx = np.flatnonzero(inv == v)
                j = idx[np.argmin(b[idx])]
                f[idx], P[idx] = b[j], Y[j]
            break
        if not np.any(U[u]):
            continue  # a zero row of W: P_j = 0
        r = solver.solve(U[u])
        if r is None:
            return None
        idx = inv == u
        f[idx], P[idx], X[idx] = r
        top = max(top, r[0])
        if r[0] > stop_above:
            return None
    return f, P, X


def polish(A: np.ndarray, W: np.ndarray, P: np.ndarray) -> np.ndarray:
    """P with each row re-solved on its support (a basis of the row LP), so that
    P A W - W is at rounding level instead of the LP's feasibility tolerance."""
    G = A @ W
    out = P.copy()
    for j in range(P.shape[0]):
        y = P[j]
        if not np.any(y):
            continue
        S = np.flatnonzero(np.abs(y) > 1e-12 * np.abs(y).max())
        try:
            ys, *_ = np.linalg.lstsq(G[S].T, W[j], rcond=None)
        except np.linalg.LinAlgError:
            continue
        cand = np.zeros_like(y)
        cand[S] = ys
        if (np.abs(cand @ G - W[j]).sum() <= np.abs(y @ G - W[j]).sum()
                and np.abs(cand).sum() <= np.abs(y).sum() * (1 + 1e-9)):
            out[j] = cand
    return out


def value(A: np.ndarray, W: np.ndarray, P: np.ndarray, eps: float) -> float:
    """Float64 estimate of ||P A W - W||_inf + eps ||P||_inf (the claim is value < 1)."""
    return _inf(P @ (A @ W) - W) + eps * _inf(P)


def certify_subspace(A: np.ndarray, W: np.ndarray, eps: float, deadline: float | None = None
                     ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns (value, W', P, J) for the subspace col(W): W' normalised (W'[J] = I), P the
    optimal row-LP solution polished; None when W is rank deficient or an LP fails or
    passes ``deadline``."""
    try:
        Wn, J = normalise(W)
    except (np.linalg.LinAlgError, ValueError):
        return None
    r = row_values(A, Wn, deadline=deadline)
    if r is None:
        return None
    P = polish(A, Wn, r[1])
    return value(A, Wn, P, eps), Wn, P, J


class _StepLP:
    """The trust-region LP of one descent state: min t subject to f_j + <g_j, dW> <= t over
    the active rows j (within ACTIVE of the worst), |dW| <= radius entrywise.

    A rejected step halves the radius and solves the same LP again, about half of all step
    LPs on MiniLM heads; one HiGHS model per state, with only the column bounds changed
    between radii, restarts the dual simplex from the last optimal basis (still dual
    feasible: the objective did not change).  Measured on the 505 step LPs of one 128 x 128
    head: 8.8 s instead of 21 s through ``linprog``, the same optima to 1e-11."""

    def __init__(self, A: np.ndarray, W: np.ndarray, f: np.ndarray, P: np.ndarray,
                 X: np.ndarray):
        # built on the first solve: a descent may stop before stepping from its last state
        self._state: tuple[np.ndarray, ...] | None = (A, W, f, P, X)
        self.h: object | None = None

    def _build(self) -> None:
        assert self._state is not None
        A, W, f, P, X = self._state
        self._state = None
        F = float(f.max())
        # rows with equal W_j still have different gradients (the e_j term): keep them all
        act = np.flatnonzero(f >= F * (1 - ACTIVE))
        N, p = W.shape
        E = -(P[act] @ A)  # e_j = e_j - A^T P_j, one row per active j
        E[np.arange(len(act)), act] += 1.0
        G = (E[:, :, None] * X[act][:, None, :]).reshape(len(act), N * p)
        self.n, self.shape = N * p, (N, p)
        self.A_ub = np.hstack([G, -np.ones((len(act), 1))])
        self.b_ub = -f[act]

    def solve(self, radius: float, deadline: float) -> np.ndarray | None:
        """Returns the minimising dW (N x p) at ``radius``, or None when the LP fails or
        ``deadline`` (``_common.clock()``) has passed."""
        left = deadline - clock()
        if left <= 0:
            return None
        fresh = self._state is not None
        if fresh:
            self._build()
        n = self.n
        lo, hi = np.r_[np.full(n, -radius), -np.inf], np.r_[np.full(n, radius), np.inf]
        if fresh:
            self.h = lp_model(self.A_ub, np.r_[np.zeros(n), 1.0], lo, hi,
                              np.full(len(self.b_ub), -np.inf), self.b_ub)
        elif self.h is not None:
            self.h.changeColsBounds(n, np.arange(n, dtype=np.int32), lo[:n], hi[:n])
        if self.h is None:
            return self._linprog(radius, left)
        for key, val in time_limit(left).items():  # none in work mode
            self.h.setOptionValue(key, val)
        run(self.h)
        if not optimal(self.h):
            return None
        x = np.asarray(self.h.getSolution().col_value, dtype=np.float64)
        if x.shape != (n + 1,) or not np.all(np.isfinite(x)):
            return None
        return x[:n].reshape(self.shape)

    def _linprog(self, radius: float, left: float) -> np.ndarray | None:
        n = self.n
        try:
            r = linprog(np.r_[np.zeros(n), 1.0], A_ub=self.A_ub, b_ub=self.b_ub,
                        bounds=[(-radius, radius)] * n + [(None, None)], method="highs",
                        options=time_limit(left))
        except (ValueError, np.linalg.LinAlgError):
            return None
        if r.status != 0 or r.x is None or not np.all(np.isfinite(r.x)):
            return None
        return r.x[:n].reshape(self.shape)


def descend(A: np.ndarray, W0: np.ndarray, goal: float, deadline: float, *,
            steps: int = STEPS, radius: float = 0.2) -> tuple[float, np.ndarray]:
    """Returns (F, W): the best subspace found from col(W0) by the trust-region descent on
    F(W) = max_j f_j (W normalised); stops once F <= goal, after ``steps`` steps, when the
    region shrinks below 1e-4, when the recent pace cannot reach ``goal`` (``hopeless``), or
    at ``deadline`` (``_common.clock()``, CPU seconds)."""
    try:
        W, _ = normalise(W0)
    except (np.linalg.LinAlgError, ValueError):
        return np.inf, W0
    r = row_values(A, W, deadline=deadline)
    if r is None:
        return np.inf, W
    f, P, X = r
    F = float(f.max())
    seen = [F]  # F after every step, accepted or not
    lp = _StepLP(A, W, f, P, X)
    for _ in range(steps):
        if F <= goal or radius < 1e-4 or clock() > deadline or hopeless(seen, goal):
            break
        dW = lp.solve(radius, deadline)
        if dW is None:
            break
        try:
            Wn, _ = normalise(W + dW)
        except (np.linalg.LinAlgError, ValueError):
            radius /= 2
            continue
        rn = row_values(A, Wn, stop_above=F, deadline=deadline, first=f, prev=P)
        if rn is not None and float(rn[0].max()) < F:
            W, (f, P, X) = Wn, rn
            F = float(f.max())
            lp = _StepLP(A, W, f, P, X)
            radius = min(1.5 * radius, 1.0)
        else:
            radius /= 2
        seen.append(F)
    return F, W


def hopeless(seen: list[float], goal: float, *, window: int = WINDOW,
             patience: int = PATIENCE) -> bool:
    """True when a descent whose best value after each step is ``seen`` would need more than
    ``patience`` further steps at the pace of its last ``window`` steps to reach ``goal``.

    Descents slow down as they go, so a linear extrapolation of the recent pace overestimates
    what is left to gain: a descent this rule stops had no realistic chance.  Measured on the
    frontier ranks of 18 MiniLM heads (83 descents): every descent that reached its goal stayed
    under 36 steps of projected distance, and the rule stops 36 of the 66 that did not, a fifth
    of all steps earlier."""
    if len(seen) <= window:
        return False
    F, before = seen[-1], seen[-1 - window]
    if F <= goal:
        return False
    pace = (before - F) / window
    return pace <= 0 or (F - goal) / pace > patience


Found = tuple[int, np.ndarray, np.ndarray, np.ndarray, float, str]


def search(A: np.ndarray, eps: float, budget: float, *, extra: int = 2,
           steps: int = STEPS, near_out: dict | None = None,
           ceiling: int | None = None,
           seeds: list[tuple[float, np.ndarray]] | None = None,
           before_hops: Callable[[int, dict[int, tuple[float, np.ndarray]]], bool] | None = None,
           floor: int = 0) -> Found | None:
    """Returns (p, W, P, J, value, start) of the largest rank reached with value at most
    1 - 1e-6, or None.  ``budget`` seconds for each of the key-set descent, the other starts
    and the growth, PATH_BUDGETS times that for the key-set path, HOP_BUDGETS times that for
    the hops (HOP_GRACE times while within HOP_NEAR of the goal); ``start`` names the phase
    that reached the rank ("keyset", "descent", "descent_l1fit", "descent_svd", "augment" or
    "hop").  When ``near_out`` is a dict it receives {rank: (F, W)}, the best failing subspace
    per rank. No rank above ``ceiling`` (default min(m, N)) is tried, and no rank at or below
    ``floor`` (a rank another producer already reached: a certificate there would not be kept),
    so with a floor the search returns None unless it reaches a rank above it."""
    A = as_float64(A)
    m, N = A.shape
    top = min(m, N) if ceiling is None else min(m, N, ceiling)
    path = keyset_path(A, eps, singletons=False, extra=extra,
                       deadline=clock() + PATH_BUDGETS * budget)
    deadline = clock() + budget
    found: Found | None = None
    for p in sorted((p for p in path if floor < p <= top), reverse=True):
        c = certify_subspace(A, path[p][1], eps, deadline)
        if c is not None and c[0] <= CLAIM_BUDGET:
            found = (p, c[1], c[2], c[3], c[0], "keyset")
            break
        if clock() > deadline:
            break
    # the descent aims a little below the claim budget: polishing P moves the value slightly
    goal = CLAIM_BUDGET * (1 - 1e-4) / eps
    near: dict[int, tuple[float, np.ndarray]] = {}  # best failing subspace per rank
    found = _seeded(A, seeds or [], eps, budget, top, found, near, floor)

    p = least_worth(found, floor)
    while p <= top and p in path and clock() < deadline:
        F, W = descend(A, path[p][1], goal, deadline, steps=steps)
        c = _claimable(A, W, F, eps, budget)
        if c is None:
            _keep(near, p, F, W)
            break
        found = (p, c[1], c[2], c[3], c[0], "descent")
        p += 1
    # the same descent from two other starts, on a budget of its own (sharing the key-set
    # phase's budget lost ranks on heads that climb far from the key-set starts)
    deadline = clock() + budget
    p = least_worth(found, floor)
    Vt = np.linalg.svd(A, full_matrices=False)[2]
    while p <= top and clock() < deadline:
        reached = _race(A, _descent_starts(A, p, Vt, eps), goal, deadline, steps, eps, budget,
                        near=near, p=p)
        if reached is None:
            break
        found = (p, *reached)
        p += 1
    # past the key-set path's reach: grow the best subspace found by one direction at a time
    deadline = clock() + budget
    while found is not None and found[0] < top and clock() < deadline:
        W0 = augmented_start(A, found[1], found[3], path.get(found[0] + 1, (None, None))[1],
                             deadline, prev=found[2])
        if W0 is None:
            break
        F, W = descend(A, W0, goal, deadline, steps=steps)
        c = _claimable(A, W, F, eps, budget)
        if c is None:
            _keep(near, found[0] + 1, F, W)
            break
        found = (found[0] + 1, c[1], c[2], c[3], c[0], "augment")
    # a caller that can close the bracket another way (a lift at the ceiling) may end here
    p = least_worth(found, floor)
    if before_hops is not None and p in near and before_hops(p, near):
        if near_out is not None:
            near_out.update(near)
        return found
    # the descents stall at kinks of max_j f_j, not only at minima: hop from the best
    # subspace that failed at the next rank (and climb on when a hop reaches it)
    deadline = clock() + HOP_BUDGETS * budget
    grace = deadline + max(HOP_GRACE - HOP_BUDGETS, 0) * budget
    while clock() < deadline:
        p = least_worth(found, floor)
        if p > top:
            break
        if p not in near and found is not None and found[0] + 1 == p:
            # the phase that reached found[0] ran out of time before it tried rank p
            _grow_next(A, found, path, near, goal, deadline, steps)
        if p not in near:
            break
        F, W = hop(A, *near.pop(p), goal, deadline, seed=HOP_SEED + p, steps=steps,
                   grace=grace)
        c = _claimable(A, W, F, eps, budget)
        if c is None:
            _keep(near, p, F, W)
            break
        found = (p, c[1], c[2], c[3], c[0], "hop")
        if p < top:
            _grow_next(A, found, path, near, goal, deadline, steps)
    if near_out is not None:
        near_out.update(near)
    return found


def _grow_next(A: np.ndarray, found: Found, path: dict, near: dict[int, tuple[float, np.ndarray]],
               goal: float, deadline: float, steps: int) -> None:
    """Keeps in ``near`` the descended augmented start one rank above ``found`` (the start
    of the hops there), when a candidate column gives one."""
    q = found[0] + 1
    W0 = augmented_start(A, found[1], found[3], path.get(q, (None, None))[1], deadline,
                         prev=found[2])
    if W0 is not None:
        _keep(near, q, *descend(A, W0, goal, deadline, steps=steps))


def rank_budgets(ceiling: int) -> float:
    """Returns the factor on the phase budget of a search whose ranks go up to ``ceiling``:
    ceiling / RANK_STEP, at least 1 and at most RANK_BUDGETS."""
    return min(RANK_BUDGETS, max(1.0, ceiling / RANK_STEP))


def least_worth(found: Found | None, floor: int) -> int:
    """Returns the least rank worth trying: one above both what ``found`` reached and
    ``floor`` (a rank another producer claims)."""
    return max(found[0] if found is not None else 0, floor) + 1


def _seeded(A: np.ndarray, seeds: list[tuple[float, np.ndarray]], eps: float, budget: float,
            top: int, found: Found | None, near: dict[int, tuple[float, np.ndarray]],
            floor: int = 0) -> Found | None:
    """Returns the certificate (start "seed") of the largest-rank seed subspace above both
    ``found``'s rank and ``floor``, and at most ``top``, whose polished certificate is within
    the claim budget at this eps, else ``found``; each seed tried and missed goes to ``near``
    with its value recomputed here.  F = max_j f_j does not depend on eps (the row LPs do
    not), so what a search at a larger eps ended with, reaching its goal or missing it, is a
    start here."""
    base = max(found[0] if found is not None else 0, floor)
    for _, W in sorted(seeds, key=lambda s: -s[1].shape[1]):
        q = W.shape[1]
        if q <= base or q > top:
            continue
        c = certify_subspace(A, W, eps, clock() + 0.5 * budget + 1.0)
        if c is None:
            continue
        if c[0] <= CLAIM_BUDGET:
            return (q, c[1], c[2], c[3], c[0], "seed")
        _keep(near, q, c[0] / eps, c[1])
    return found


def _keep(near: dict[int, tuple[float, np.ndarray]], p: int, F: float, W: np.ndarray) -> None:
    """Records (F, W) as the best failing subspace of rank p when it beats the one kept."""
    if np.isfinite(F) and (p not in near or F < near[p][0]):
        near[p] = (F, W)


def hop(A: np.ndarray, F0: float, W0: np.ndarray, goal: float, deadline: float, *, seed: int,
        steps: int = STEPS, grace: float | None = None) -> tuple[float, np.ndarray]:
    """Returns (F, W): the best subspace found by basin hopping from col(W0), whose value is
    F0 (a descent's result, so the hops start at once): each hop adds
    Gaussian noise of relative size HOP_SCALES (seeded by ``seed``) to the best subspace so
    far and runs ``descend`` from there.  Stops once F <= goal, at ``deadline``, or when the
    pace of the last WINDOW hops would need more than HOP_PATIENCE further hops (``hopeless``).
    Past ``deadline`` it goes on until ``grace`` while F <= HOP_NEAR * goal.

    On a MiniLM head (text 3 L5.H0, rank 5) the descent stalled at 1.046 eps and 52 hops
    brought it to 0.9998 eps: the trust region of ``descend`` collapses where several rows'
    values have kinks, and a perturbation of 1 - 2 % moves it off them."""
    rng = np.random.default_rng(seed)
    F, W = F0, W0
    seen = [F]
    while F > goal and np.isfinite(F):
        near = grace is not None and F <= HOP_NEAR * goal
        end = max(grace, deadline) if near else deadline
        if clock() >= end or hopeless(seen, goal, patience=HOP_PATIENCE):
            break
        try:
            Wn, _ = normalise(W)
        except (np.linalg.LinAlgError, ValueError):
            break
        scale = float(rng.choice(HOP_SCALES)) * float(np.abs(Wn).max())
        F2, W2 = descend(A, Wn + scale * rng.standard_normal(Wn.shape), goal, end,
                         steps=steps)
        if F2 < F:
            F, W = F2, W2
        seen.append(F)
    return F, W


def _race(A: np.ndarray, starts: list[tuple[str, Callable[[float], np.ndarray]]], goal: float,
          deadline: float, steps: int, eps: float, budget: float, *,
          near: dict[int, tuple[float, np.ndarray]] | None = None, p: int = 0
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, str] | None:
    """Returns (W, P, J, value, tag): the certificate of the best subspace the starts descend
    to, when its float64 value is at most the claim budget; None otherwise.

    Successive halving: every start descends with a third of the steps on an equal share of
    half the time left (stopping at the first that reaches ``goal``); the one with the
    smallest value then continues with all the steps and the rest of the time, so the time
    goes to the start that looks best instead of being split evenly."""
    tried: list[tuple[float, np.ndarray, str]] = []
    t0 = clock()
    for tag, make in starts:
        now = clock()
        if now > deadline:
            break
        share = 0.5 * (deadline - t0) / len(starts)
        # a start is made within the phase's deadline (an alternating-l1 fit of 300 steps at
        # rank 60 of a 256 x 256 operator took 13 CPU s against a phase of 0.16 at
        # --budget-scale 0.001), and descends within its share
        F, W = descend(A, make(deadline), goal, min(deadline, now + share),
                       steps=max(1, steps // 3))
        tried.append((F, W, tag))
        if F <= goal:
            break
    if not tried:
        return None
    F, W, tag = min(tried, key=lambda x: x[0])
    if F > goal:
        F, W = descend(A, W, goal, deadline, steps=steps)
    c = _claimable(A, W, F, eps, budget)
    if c is None and near is not None:
        _keep(near, p, F, W)
    return None if c is None else (c[1], c[2], c[3], c[0], tag)


def _claimable(A: np.ndarray, W: np.ndarray, F: float, eps: float, budget: float
               ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns ``certify_subspace``'s (value, W', P, J) for a descended subspace with value
    F, when F eps and the polished certificate's value are both within the claim budget;
    None otherwise."""
    if not F * eps <= CLAIM_BUDGET:
        return None
    # the certificate of a subspace found in time may take a little longer to write; the
    # extra unit follows --budget-scale like every budget (unscaled, it was 25 times a
    # phase's budget at --budget-scale 0.001)
    c = certify_subspace(A, W, eps, clock() + 0.5 * budget + budget_scale())
    return c if c is not None and c[0] <= CLAIM_BUDGET else None


def _descent_starts(A: np.ndarray, p: int, Vt: np.ndarray, eps: float
                    ) -> list[tuple[str, Callable[[float], np.ndarray]]]:
    """Returns the tagged makers (called with a deadline) of two N x p starts of the descent
    at rank p besides the key-set subspace: the row space of an alternating-l1 rank-p fit of
    A (computed only when asked for; its steps stop at the deadline, each priced before it
    starts) and the leading p right singular vectors (none when p exceeds their number).
    On MiniLM heads each reaches a rank on some head where the key-set start does not."""
    if p > Vt.shape[0]:
        return []
    V = Vt[:p]
    return [("descent_l1fit", lambda until: alt_l1(A, p, target(eps), A @ V.T, V,
                                                   iters=FIT_ITERS, patient=True,
                                                   deadline=until)[1].T),
            ("descent_svd", lambda until: V.T)]


def augmented_start(A: np.ndarray, W: np.ndarray, J: np.ndarray, W_next: np.ndarray | None,
                    deadline: float, *, singletons: int = SINGLETONS,
                    prev: np.ndarray | None = None) -> np.ndarray | None:
    """Returns [W, w] (N x (p+1)) for the candidate column w whose subspace has the smallest
    max_j f_j: the columns of the key-set subspace ``W_next`` of rank p+1 (when there is one)
    and the indicators of the ``singletons`` keys of largest uncovered mass: column mass
    times 1 - max_k |W_jk| (1 for a key W leaves out, 0 on the identity rows J; a descended
    W may leave no key out, and then partly covered keys are next).
    None when no candidate gives a full-rank subspace in time.  ``prev`` (W's certified P, or
    any row minimisers for col(W)) is corrected to be feasible for each candidate, and its
    bounds order and skip the candidate's row LPs (``row_values``)."""
    cands = [] if W_next is None else [W_next[:, k] for k in range(W_next.shape[1])]
    cover = np.abs(W).max(axis=1) if W.size else np.zeros(A.shape[1])
    mass = A.sum(axis=0) * np.clip(1.0 - cover, 0.0, 1.0)
    mass[np.asarray(J, dtype=np.int64)] = 0.0
    for j in np.argsort(-mass, kind="stable")[:singletons]:
        if mass[j] > 0:
            e = np.zeros(A.shape[1])
            e[j] = 1.0
            cands.append(e)
    best, best_W = np.inf, None
    for w in cands:
        Wc = np.column_stack([W, w])
        try:
            Wn, _ = normalise(Wc)
        except (np.linalg.LinAlgError, ValueError):
            continue
        r = row_values(A, Wn, stop_above=best, deadline=deadline, prev=prev)
        if r is not None and float(r[0].max()) < best:
            best, best_W = float(r[0].max()), Wc
        if clock() > deadline:
            break
    return best_W


def next_rank_claims(near: dict[int, tuple[float, np.ndarray]], p: int, ceiling: int,
                     eps: float) -> dict[str, float | int]:
    """Returns the claims on rank p, the first rank the search did not reach:
    ``lower_next_rank`` (p) and ``lower_next_value`` (eps times the least max_j f_j of a
    subspace of rank p it tried, ``near[p][0]``: the Bernstein value of that subspace's
    optimal P, whose claim must be below 1; to SEARCH_DIGITS significant digits,
    ``search_claim``); {} when p is above ``ceiling`` (the search
    stopped at a rank an upper witness claims: the bracket is closed, there is no next rank)
    or no subspace of rank p was tried.  A float64 search result, not a proof."""
    if p > ceiling or p not in near or not np.isfinite(near[p][0]):
        return {}
    return {"lower_next_rank": int(p),
            "lower_next_value": search_claim(float(near[p][0] * eps))}


def _seeds_of(found: Found | None, near: dict[int, tuple[float, np.ndarray]], eps: float
              ) -> list[tuple[float, np.ndarray]]:
    """Returns the subspaces a search ends with, as (F, W): the one it certified (F its value
    over eps) and the best failing one of every rank it kept; the seeds of the search at a
    smaller eps (which recomputes every value it uses: ``_seeded``)."""
    out = [] if found is None else [(found[4] / eps, found[1])]
    return out + [(F, W) for F, W in near.values()]


class Bernstein(BudgetedLower):
    """Bernstein certificate (W, P, J): key-set subspaces, improved by minimax LP descent."""

    name = "bernstein"
    budget_env = BUDGET_ENV
    default_budget = DEFAULT_BUDGET

    def _search(self, A, eps, budget, ceiling, hints=None, floor=0):
        near: dict[int, tuple[float, np.ndarray]] = {}
        seeds = list(hints.get(SEEDS, [])) if hints is not None else []
        lifts: dict[int, tuple[np.ndarray, tuple | None]] = {}  # rank -> (W, its lift)

        def lift(p: int, W: np.ndarray) -> tuple | None:
            # each subspace is lifted once: the one lifted before the hops is often the
            # one they end with
            if p not in lifts or lifts[p][0] is not W:
                report: dict = {}
                now = clock()
                b = budget * (polytope.SPARSE_BUDGETS if p > polytope.FULL_RANK else 1)
                got = polytope.lift_near(A, W, eps, now + b, now + 2 * b, report=report)
                start = "lift" + ("+perturbed" if report.get("perturbed") else "") + (
                    "+subdivided" if report.get("subdivisions") else "")
                lifts[p] = (W, None if got is None else ("polytope", p, got[0], got[1], start))
            return lifts[p][1]

        def closes(p: int, near: dict[int, tuple[float, np.ndarray]]) -> bool:
            # at the ceiling a lift that reaches it closes the bracket, all the hops could do
            return p == ceiling and near[p][0] * eps <= polytope.LIFT_NEAR \
                and lift(p, near[p][1]) is not None

        # looked up at call time (tests)
        found = search(A, eps, budget * rank_budgets(ceiling), near_out=near, ceiling=ceiling,
                       seeds=seeds, before_hops=closes, floor=floor)
        if hints is not None:
            hints[SEEDS] = _seeds_of(found, near, eps)
        # the best subspace that missed the next rank: its polytope lift may reach it
        p = least_worth(found, floor)
        if p <= ceiling and p in near and near[p][0] * eps <= polytope.LIFT_NEAR:
            lifted = lift(p, near[p][1])
            if lifted is not None:
                # nothing was searched at rank p + 1: no claim about the next rank
                return lifted
        return Reached(found, next_rank_claims(near, p, ceiling, eps))

    def _parts(self, found):
        if found[0] == "polytope":  # already (kind, rank, arrays, value, start)
            return found
        p, W, P, J, v, start = found
        return ("bernstein", p, {"W": np.ascontiguousarray(W, dtype=np.float64),
                                 "P": np.ascontiguousarray(P, dtype=np.float64),
                                 "J": np.ascontiguousarray(J, dtype=np.int64)}, v, start)
