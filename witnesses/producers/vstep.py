"""The exact V-step of a near-miss fit (untrusted search; the kernel checks what it returns).

For fixed U the least max-row-l1 error over V,

    min_V max_i sum_j |A_ij - U_i V_j|,

is one LP (variables V, one slack per entry of the rows taken, and the level s).  IRLS with
Lawson row weights approaches that optimum from above and stops a little short of it: on
held-out MiniLM heads (eps 1/4, 128 tokens) the best rank-(U - 1) fits of alternating l1 ended
0.3 - 0.7 % above eps, and one such V-step took them to 0.06 - 0.5 % above, one of them
(rank 19) to 0.998 eps, which lowered its upper end by one rank.

Only the rows near the largest error enter the LP at first (the others are far below it); a
row the solution pushes above the LP's level joins and the LP is solved again (row
generation, at most GENERATION_ROUNDS solves).  The LP's size is bounded before it is built:
its predicted cost (``lp_cost``, ``_common.ipm_cost``: calibrated on HiGHS's interior point
method with crossover, one thread) must fit in what is left of the caller's budget, and it is
charged that prediction in work mode (the LP's own iteration count says little about an
interior point solve's work).
"""

from __future__ import annotations

import numpy as np

from ._common import budget_mode, charge, clock, ipm_cost, row_l1, time_limit

ROW_BAND = 0.01  # rows within 1% of the largest error enter the first LP
GENERATION_ROUNDS = 4


def lp_nonzeros(rows: int, k: int, N: int) -> int:
    """Returns the nonzeros of the V-step LP over ``rows`` rows at rank k on N columns (when
    no entry of U is 0)."""
    return rows * N * (2 * k + 3) + rows


def lp_cost(rows: int, k: int, N: int) -> float:
    """Returns the predicted cost (work units, about CPU seconds) of that LP."""
    return ipm_cost(lp_nonzeros(rows, k, N))


def _solve(A: np.ndarray, U: np.ndarray, rows: np.ndarray, left: float
           ) -> tuple[np.ndarray, float] | None:
    """Returns (V, s): a minimiser V of max over ``rows`` of ||A_i - U_i V||_1 as HiGHS
    finds it and its level s, or None when HiGHS reports no optimum."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, eye, hstack, vstack

    N = A.shape[1]
    k = U.shape[1]
    r = len(rows)
    n = r * N
    i, j = np.divmod(np.arange(n), N)
    # entry (i, j) of U_R V reads V[:, j], stored as variables j k .. j k + k - 1
    UV = csr_matrix((U[rows][i].ravel(),
                     (np.repeat(np.arange(n), k), (j[:, None] * k + np.arange(k)).ravel())),
                    shape=(n, k * N))
    E = eye(n, format="csr")
    zero = csr_matrix((n, 1))
    sums = csr_matrix((np.ones(n), (i, np.arange(n))), shape=(r, n))
    M = vstack([hstack([UV, -E, zero]), hstack([-UV, -E, zero]),
                hstack([csr_matrix((r, k * N)), sums, csr_matrix(-np.ones((r, 1)))])],
               format="csc")
    a = A[rows].ravel()
    c = np.zeros(k * N + n + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=M, b_ub=np.concatenate([a, -a, np.zeros(r)]),
                  bounds=[(None, None)] * (k * N) + [(0, None)] * (n + 1),
                  method="highs-ipm", options=time_limit(left))
    if res.status != 0 or res.x is None:
        return None
    return np.ascontiguousarray(res.x[:k * N].reshape(N, k).T), float(res.fun)


def v_step(A: np.ndarray, U: np.ndarray, V: np.ndarray, deadline: float
           ) -> tuple[np.ndarray, float]:
    """Returns (V', err'): V' = V or a V' whose float64 max-row-l1 error err' with U is below
    that of V, from the V-step LP over the rows near the largest error (row generation); err'
    is the error of the returned V'.  An LP whose predicted cost does not fit before
    ``deadline`` is not started, so the call stops within about its budget."""
    m, N = A.shape
    k = U.shape[1]
    r = row_l1(A, U, V)
    best = (float(r.max()), V)
    taken = np.zeros(m, dtype=bool)
    taken[r >= (1 - ROW_BAND) * best[0]] = True
    for _ in range(GENERATION_ROUNDS):
        rows = np.flatnonzero(taken)
        cost = lp_cost(len(rows), k, N)
        left = deadline - clock()
        if not cost <= left:
            break
        found = _solve(A, U, rows, left)
        if budget_mode() == "work":
            charge(cost)
        if found is None:
            break
        V2, level = found
        r2 = row_l1(A, U, V2)
        e2 = float(r2.max())
        if e2 < best[0]:
            best = (e2, V2)
        # rows outside the LP that the new V lifts above its level join it
        out = (r2 > level * (1 + 1e-12)) & ~taken
        if not out.any():
            break
        taken |= out | (r2 >= (1 - ROW_BAND) * e2)
    return best[1], best[0]
