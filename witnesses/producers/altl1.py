"""Alternating l1 factorization: the strongest built-in upper producer.

For a fixed rank k it minimizes max_i sum_j |A - U V|_ij by alternating iteratively
reweighted least squares (IRLS) steps on U (row by row) and V (column by column), with
entry weights 1 / |E_ij| (the l1 majorizer) times Lawson-style row weights that push
towards the worst rows (the max over rows).  Each step is a few GEMMs and batched k x k
solves, so a 128 x 128 operator takes about a second with one BLAS thread.

The rank is searched by a *chain* from the truncated-SVD rank downwards (or from a lower rank
where a fit that the search at a smaller eps of the same operator ended with is within this
eps: ``produce(..., hints=H)``, claim ``chain_start``): each rank starts from
the fit found at the rank above with one SVD component of that fit removed (``_truncations``:
the component whose removal leaves the least max-row-l1 error, then the smallest one). Such a
start is already close to eps, so most ranks pass after a step or two; where they do not, other
components are tried as the one removed, a few steps each, the best starts continue, and last
the first truncation gets CHAIN_ITERS steps (``_chain_step``). It replaced a galloping
bisection of SVD starts: on six tuning heads of tsvd rank 23 - 97 the chain alone ended at the
bisection's rank on three and 1 - 4 ranks below it on three, after 0.4 - 12.7 work units (the
bisection had 10). After a rank that needed more than its two truncations the chain probes
halfway down to the highest rank a probe missed (``_probe``: the fit truncated that far, a
run that gives up when stalled), up to PROBE_MISSES misses: on heads with much slack the walk
down cost its whole budget 13 ranks above what the bisection had reached.  Where the chain
fails, a patient descent tries the next rank from longer runs of the same truncated starts,
from the SVD start and then from seeded restarts (random rows of A, random rotations of the
leading singular subspace): the max-row-l1 landscape has several basins, and on real heads a
restart sometimes reaches the target where the others stall a few per cent above it.
On operators of truncated-SVD rank SVD_STEPS_TSVD (40) or more, where the chain spends the
whole budget walking down one rank at a time, SVD_STEPS_BUDGET (20) more work units (per
128 x 128 operator) go to ``_svd_steps`` after the descent: patient runs from the truncated SVD
of the next rank down, while they pass.  They start from the rank the chain and the descent
ended at, so they never raise it.
Every run but the chain's 3-step screen that ends within POLISH_BAND (5%) above the target has
its rows above the target refitted by exact l1 regressions on its V (``polish_rows``, one LP
per row, worst first): IRLS leaves each row a little above its own optimum, by up to 1 - 2%
at large ranks, which is all some ranks miss by.
Last, where some run at the rank below the one reached ended within VSTEP_BAND (1%) above the
target, VSTEP_BUDGET (30) more work units (per 128 x 128 operator, times ``--budget-scale``;
``SOFTRANK_ALT_L1_VSTEP``, 0 turns them off) go to *near-miss steps* (``_exact_steps``): the
two truncations of the fit again, then the exact min-max LP over V for the best one's U
(``vstep.v_step``, only the rows near the largest error in the LP, an LP whose predicted cost
does not fit not started) alternated with the row refits.  IRLS stops a fraction of a per cent
above its V block's optimum, and at a near miss that fraction is the miss (claims
``vstep_start`` and ``vstep_rank``: the rank before and after the steps).

Below the rank k it returns, the least float64 error any run reached at rank k - 1 (the
chain's runs and the descent's) is claimed as ``upper_next_error`` with
``upper_next_ratio`` = that / eps and ``upper_next_rank`` = k - 1: how far above eps the best
rank-(k - 1) fit found stayed; ``upper_next_runs`` counts those runs and ``upper_next_agree``
the ones that ended within AGREE_BAND (3%) of the least.  Runs from unrelated starts (the
truncations, the SVD start, random rows, random rotations) that end at one value are a sign
that the value is the landscape's, not a start's.  Float64 search results, not a proof of
anything (a better fit may exist); omitted when no run reached rank k - 1 (k = 1, or no time
left).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from fractions import Fraction
from itertools import chain

import numpy as np

from . import BaseProducer, Witness
from ._common import (
    as_float64,
    budget_scale,
    charge_irls,
    clock,
    env_value,
    ipm_cost,
    irls_cost,
    least_rank,
    linprog,
    parse_budget,
    row_l1,
    search_claim,
    size_scale,
    target,
)
from .vstep import v_step

DESCENT_ENV = "SOFTRANK_ALT_L1_DESCENT"
DEFAULT_DESCENT = 30.0  # CPU seconds per call on a 128 x 128 operator (``size_scale``)
DEFAULT_CHAIN = 10.0  # likewise, for the chain below the truncated-SVD rank
# IRLS steps of the SVD start's runs, in turn: the floor anneals over the run's steps, and a
# short schedule gets below eps sooner where there is slack (rank 72 in 6 s on a 128 x 128
# head where 5,000 steps reached 75 in 30 s), a long one ends lower where there is none
# (5,000 steps reach eps at rank 4 on a head where 2,000 stop 0.3% above it)
DESCENT_ITERS = (2000, 5000)
RESTARTS = 12  # seeded restarts per rank of the descent at budget scale 1 (a count, not a time)
RESTART_ITERS = 600  # IRLS steps per restart
# IRLS steps of a chain run, and of the descent's runs from the truncated fit of the rank above
CHAIN_ITERS = 600
WARM_ITERS = (600, 2000)
SEED = 20261201
# the chain's screen of starts at each rank (``_chain_step``): steps per screened start, how
# many other components are tried as the one dropped, how many starts continue, for how long
SCREEN_ITERS = 3
SCREEN_DROPS = 16
SCREEN_TOP = 3
SCREEN_MORE = (20, 100)
# steps of a probe (``_probe``): a run from the chain's fit truncated far below its rank;
# after this many probes missed the chain goes on without them (each miss halves the gap
# the next probe would skip, and a near miss runs its steps in full)
PROBE_ITERS = 600
PROBE_MISSES = 2
# a run at rank k - 1 "agrees" when its error ends within this fraction of the least one
AGREE_BAND = 0.03
# a run that ends within this factor of t has its rows above t solved exactly (``polish_rows``)
POLISH_BAND = 1.05
# operators whose truncated-SVD rank is at least SVD_STEPS_TSVD get, after the chain and the
# descent, SVD_STEPS_BUDGET more (per 128 x 128 operator, times ``budget_scale()``) for
# ``_svd_steps``: on a held-out paragraph every head with a tsvd rank of 41 or more spent the
# whole budget in the chain, and single SVD starts of 2,000 steps went on 1 - 6 ranks below
# where it ended on 7 of them
SVD_STEPS_TSVD = 40
SVD_STEPS_BUDGET = 20.0
SVD_STEPS_ITERS = 2000
VSTEP_ENV = "SOFTRANK_ALT_L1_VSTEP"
VSTEP_BUDGET = 30.0  # CPU seconds per call on a 128 x 128 operator for ``_exact_steps``
VSTEP_BAND = 1.01  # a rank whose best fit stayed more than 1% above the target is not tried
VSTEP_ROUNDS = 3
FIT = "fit"  # the hints key of the (rank, U, V) a search at a smaller eps ended with


def _balance(U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.linalg.norm(V, axis=1)
    n = np.where(n > 0, n, 1.0)
    return U * n, V / n[:, None]


def _solve_batched(G: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = G.shape[-1]
    tr = np.trace(G, axis1=1, axis2=2) / max(k, 1)
    G = G + (1e-12 * tr + 1e-300)[:, None, None] * np.eye(k)
    try:
        return np.linalg.solve(G, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return np.stack([np.linalg.lstsq(g, v, rcond=None)[0] for g, v in zip(G, b, strict=True)])


#: Bytes of k x k products one pass of the weighted solves may hold: past it they run by
#: blocks of columns (one 1024 x 1024 head at rank 1000 formed 8 GiB arrays at once)
GRAM_BYTES = 1 << 28


def _weighted_solves(W: np.ndarray, X: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Returns Y (n x k) with G_j Y[j] = rhs[j], G_j = sum_i W[i, j] X[i] X[i]^T (W is
    rows x n, X rows x k, rhs n x k; the weighted least-squares step of IRLS for every column
    j).  Small problems form every G_j with one GEMM; larger ones a block of columns at a time,
    so no intermediate passes GRAM_BYTES."""
    rows, n = W.shape
    k = X.shape[1]
    if 8 * k * k * max(rows, n) <= GRAM_BYTES:
        XX = (X[:, :, None] * X[:, None, :]).reshape(rows, k * k)
        return _solve_batched((W.T @ XX).reshape(n, k, k), rhs)
    out = np.empty((n, k))
    step = max(1, GRAM_BYTES // (8 * k * max(rows, k)))
    for j0 in range(0, n, step):
        XW = W[:, j0:j0 + step].T[:, :, None] * X[None, :, :]  # b x rows x k
        out[j0:j0 + step] = _solve_batched(np.matmul(XW.transpose(0, 2, 1), X),
                                           rhs[j0:j0 + step])
    return out


def alt_l1(A: np.ndarray, k: int, t: float, U0: np.ndarray, V0: np.ndarray, *,
           iters: int = 300, deadline: float | None = None, patient: bool = False,
           polish: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """Returns (U, V, err): the best rank-k iterate found and its float64 max-row-l1 error.

    Stops as soon as err <= t, at ``deadline`` (``_common.clock()``, CPU seconds), after
    ``iters`` steps, and (unless ``patient``) when progress stalls or the error is far above
    t.  The majorizer floor falls 100x over ``iters`` steps (by step, not by time, so the
    schedule does not depend on the machine's speed).  With ``polish``, a best iterate that
    ends above t but within POLISH_BAND of it has its rows above t replaced by exact l1
    regressions on V (``polish_rows``).
    """
    m, N = A.shape
    k = U0.shape[1]
    U, V = _balance(U0.copy(), V0.copy())
    # |A - U V| of the current iterate: the next step's weights need it and the row errors
    # are its row sums, so it is formed once per step (the same numbers as row_l1)
    absE = np.abs(A - U @ V)
    r = absE.sum(axis=1)
    best = (float(r.max()), U, V)
    rho = np.ones(m)
    checkpoint = best[0]
    for it in range(iters):
        if best[0] <= t:
            break
        if it and it % 50 == 0 and not patient:
            # stalled (under 0.2% progress in 50 steps), or too far above the target for the
            # remaining steps (IRLS gains ~20% from step 100 on at best): give up
            if best[0] > 0.998 * checkpoint or best[0] > (1.3 if it < 200 else 1.12) * t:
                break
            checkpoint = best[0]
        # a step is started only when its predicted cost fits in what is left: one step at
        # rank 1000 of a 1024 x 1024 head costs over a minute, and checking only after it
        # let a budget of a second run several
        if deadline is not None and clock() + irls_cost(m, N, k) > deadline:
            break
        charge_irls(m, N, k)  # what a work-mode budget counts (clock() in work mode)
        err = float(r.max())
        # l1 majorizer floor: from the mean entry error down by 100x over the run
        floor = max(err / N * 10.0 ** (-2 * it / iters), 1e-13)
        Wt = rho[:, None] / np.maximum(absE, floor)
        V = _weighted_solves(Wt, U, (Wt * A).T @ U).T
        E = A - U @ V
        Wt = rho[:, None] / np.maximum(np.abs(E), floor)
        U = _weighted_solves(Wt.T, V.T, (Wt * A) @ V.T)
        U, V = _balance(U, V)
        absE = np.abs(A - U @ V)
        r = absE.sum(axis=1)
        e = float(r.max())
        if e < best[0]:
            best = (e, U, V)
        # Lawson step on the row weights: rows near the max error gain weight
        rho = rho * (r / max(e, 1e-300)) ** 2
        rho = np.maximum(rho / rho.max(), 1e-8)
    err, U, V = best
    if polish and t < err <= POLISH_BAND * t:
        U, err = polish_rows(A, U, V, t, deadline)
    return U, V, err


def polish_rows(A: np.ndarray, U: np.ndarray, V: np.ndarray, t: float,
                deadline: float | None = None) -> tuple[np.ndarray, float]:
    """Returns (U', err'): U with the rows whose error exceeds t replaced, worst first, by an
    exact minimiser of ||A_i - u V||_1 (one HiGHS LP each), and the float64 max-row-l1 error
    of U' V.  A row keeps its old coefficients unless the new ones give a smaller float64
    error; the pass stops at the first row whose optimum stays above t (the fit cannot then
    reach t on this V) and at ``deadline``.  Why: IRLS with a majorizer floor ends each row a
    little above its own l1 optimum on V; at rank 78 on a held-out head two rows 0.15% above
    eps were both below it after their LPs (0.984 eps), where 2,000 more IRLS steps from
    other starts stayed above."""
    r = row_l1(A, U, V)
    U = U.copy()
    k, N = V.shape
    # priced before it starts as an interior-point solve of its nonzeros (pessimistic for the
    # simplex on small ones): one regression at rank 1000 of a 1024 x 1024 head took 25 s
    lp = ipm_cost(2 * (k * N + N))
    for i in np.argsort(-r, kind="stable"):
        if not r[i] > t or (deadline is not None and clock() + lp > deadline):
            break
        u = l1_regression(V, A[i])
        if u is None:
            break
        e = float(np.abs(A[i] - u @ V).sum())
        if e < r[i]:
            U[i], r[i] = u, e
        if not r[i] <= t:
            break
    # the error of the factors as every caller computes it (a row's GEMV may round otherwise)
    return U, float(row_l1(A, U, V).max())


def l1_regression(V: np.ndarray, a: np.ndarray) -> np.ndarray | None:
    """Returns u minimising ||a - u V||_1 as HiGHS finds it (u free, one slack per entry of
    a), or None when HiGHS reports no optimum."""
    from scipy.sparse import csr_matrix, eye, hstack, vstack

    k, N = V.shape
    Vt = csr_matrix(V.T)
    M = vstack([hstack([Vt, -eye(N)]), hstack([-Vt, -eye(N)])], format="csc")
    res = linprog(np.concatenate([np.zeros(k), np.ones(N)]), A_ub=M,
                  b_ub=np.concatenate([a, -a]), bounds=[(None, None)] * k + [(0, None)] * N)
    if res.status != 0 or res.x is None:
        return None
    return np.asarray(res.x[:k], dtype=np.float64)


class AlternatingL1(BaseProducer):
    """Alternating l1 (IRLS) factorization, rank searched below the truncated-SVD rank."""

    name = "alt_l1"
    role = "upper"

    def __init__(self, iters: int = CHAIN_ITERS, budget: float | None = None,
                 descent_iters: int | tuple[int, ...] = DESCENT_ITERS,
                 descent_budget: float | None = None, restarts: int | None = None,
                 polish: bool = True):
        self.iters = iters
        self.polish = bool(polish)  # False: every run as it was before the row polish
        # seconds per call; past it, untried ranks count as failures.  The defaults (and the
        # environment's descent budget) are per 128 x 128 operator and scale with its size;
        # a budget given here is seconds per call as it stands.
        self._sized = budget is None, descent_budget is None
        self.budget = DEFAULT_CHAIN if budget is None else float(budget)
        self.descent_iters = (descent_iters,) if isinstance(descent_iters, int) \
            else tuple(descent_iters)
        self.restarts = _restarts_default() if restarts is None else int(restarts)
        self.descent_budget = _descent_default() if descent_budget is None \
            else float(descent_budget)

    def produce(self, A, eps, *, logits=None, hints: dict | None = None):
        A = as_float64(A)
        t = target(eps)
        m, N = A.shape
        kmax = min(m, N)
        size = size_scale(A.shape)
        # the chain's budget scales like every other (it was left out: at --budget-scale 0.001
        # a 256 x 256 head still spent 40 CPU s in the chain)
        budget = self.budget * size * budget_scale() if self._sized[0] else self.budget
        descent_budget = self.descent_budget * size if self._sized[1] else self.descent_budget
        Us, s, Vt = np.linalg.svd(A, full_matrices=False)
        errs: dict[int, float] = {}

        def tsvd_ok(k: int):
            U, V = Us[:, :k] * s[:k], Vt[:k]
            e = float(row_l1(A, U, V).max())
            errs[k] = e
            return e <= t, (U, V)

        k_svd, (U_s, V_s) = least_rank(tsvd_ok, kmax)
        if not errs.get(k_svd, np.inf) <= t:
            return None

        # one deadline for both phases: the chain spends what it needs, the descent the rest
        deadline = clock() + budget + descent_budget
        # the float64 error every alt_l1 run ended at, per rank (for the claims on the rank
        # below the one returned: how far from eps the fits there stayed, and how many agree)
        ends: dict[int, list[tuple[float, bool]]] = {}
        # the chain: each rank from the fit of the rank above, truncated (``_truncated``)
        k, (U, V) = _start(A, t, k_svd, (U_s, V_s), None if hints is None else hints.get(FIT))
        k_start = k
        done = None  # the rank whose chain runs ran to their end and failed: not run again
        missed, misses = 0, 0  # the highest rank a probe missed (later ones aim above it)
        # a step starts only when one IRLS step at its rank fits (``_components`` costs about
        # that much before any run): not started is not failed, so ``done`` stays unset
        while k > 1 and clock() + irls_cost(m, N, k - 1) <= deadline:
            hard: list[bool] = []
            step = _chain_step(A, t, U, V, k - 1, deadline, ends, self.iters, hard,
                               polish=self.polish)
            if step is None:
                done = k - 1 if clock() <= deadline else None
                break
            k, U, V = k - 1, step[0], step[1]
            # where a rank needed more than its truncations, probe halfway down at once
            kp = (k + missed) // 2
            if hard and misses < PROBE_MISSES and missed < kp < k - 1 and clock() < deadline:
                probe = _probe(A, t, U, V, kp, deadline, ends, polish=self.polish)
                if probe is None:
                    missed, misses = kp, misses + 1
                else:
                    k, U, V = kp, probe[0], probe[1]
        err = float(row_l1(A, U, V).max())
        if not err <= t:
            return None
        k_search = k
        # at the ranks below the chain's, spend the descent budget on more starts
        descent_end = deadline
        restarts_used = 0
        # ranks whose SVD-start run of SVD_STEPS_ITERS steps ran to its end here and failed:
        # the steps would repeat it (the same start and steps give the same error)
        svd_failed: set[int] = set()
        while descent_budget > 0 and k > 1 and clock() < descent_end:
            found = None
            starts = _starts(A, k - 1, Us, s, Vt, self.restarts)
            svd = next(starts)
            # the restarts stay lazy: each costs a least-squares fit, wasted once a run succeeds
            # the chain's patient run from the first truncation is not run again
            runs = chain(((False, n, w) for i, w in enumerate(_truncations(A, U, V, k - 1))
                          for n in WARM_ITERS
                          if not (k - 1 == done and n == self.iters and i == 0)),
                         ((False, n, svd) for n in self.descent_iters),
                         ((True, RESTART_ITERS, st) for st in starts))
            used = 0
            for restart, n, (U0, V0) in runs:
                if clock() > descent_end:
                    break
                used += restart
                U2, V2, e2 = alt_l1(A, k - 1, t, U0, V0, iters=n, deadline=descent_end,
                                    patient=True, polish=self.polish)
                _note(ends, k - 1, e2)
                if (U0 is svd[0] and n == SVD_STEPS_ITERS and not e2 <= t
                        and clock() <= descent_end):
                    svd_failed.add(k - 1)
                if e2 <= t:
                    found, restarts_used = (U2, V2, e2), restarts_used + used
                    break
            if found is None:
                break
            k, (U, V, err) = k - 1, found
        k_steps = None
        if k_svd >= SVD_STEPS_TSVD and SVD_STEPS_BUDGET > 0:
            k_steps, (U, V, err) = _svd_steps(
                A, t, Us, s, Vt, k, (U, V, err),
                clock() + SVD_STEPS_BUDGET * budget_scale() * (size if self._sized[1] else 1.0),
                ends, polish=self.polish, failed=svd_failed)
            k = k_steps
        k_exact, k_before = None, k
        vstep_budget = _vstep_default() * (size if self._sized[1] else 1.0)
        if vstep_budget > 0 and _near(ends, k - 1, t):
            k_exact, (U, V, err) = _exact_steps(A, t, k, (U, V, err), clock() + vstep_budget,
                                                ends, polish=self.polish)
            k = k_exact
        if hints is not None:
            hints[FIT] = (k, U, V)
        return Witness(rank=k, U=np.ascontiguousarray(U), V=np.ascontiguousarray(V),
                       claims={"upper_error": err, "upper_rank": int(k), "tsvd_rank": k_svd,
                               "chain_start": int(k_start), "chain_rank": int(k_search),
                               **({} if k_steps is None else {"svd_steps_rank": int(k_steps)}),
                               **({} if k_exact is None else {"vstep_start": int(k_before),
                                                              "vstep_rank": int(k_exact)}),
                               "restarts_used": restarts_used,
                               **next_rank_claims(ends, k, eps)})


def _start(A: np.ndarray, t: float, k_svd: int, svd_fit: tuple[np.ndarray, np.ndarray],
           seed: tuple[int, np.ndarray, np.ndarray] | None
           ) -> tuple[int, tuple[np.ndarray, np.ndarray]]:
    """Returns the chain's first (rank, fit): ``seed`` (k, U, V), the fit an alt_l1 search at
    a smaller eps ended with, when its rank is below ``k_svd`` and its float64 max-row-l1
    error is within t here; else (k_svd, ``svd_fit``).  On 128-token MiniLM heads the fit of
    the next smaller eps was up to 34 ranks below the truncated SVD's (L2.H9 at eps 0.35: 44
    against 78), ranks the chain then does not walk down; what it spends below is unchanged."""
    if seed is not None:
        k, U, V = seed
        if (0 < k < k_svd and U.shape == (A.shape[0], k) and V.shape == (k, A.shape[1])
                and float(row_l1(A, U, V).max()) <= t):
            return k, (U, V)
    return k_svd, svd_fit


def _note(ends: dict[int, list[tuple[float, bool]]], k: int, e: float,
          counted: bool = True) -> None:
    """Keeps e, the error a run at rank k ended at, when it is finite; ``counted`` False for
    the chain's short screening runs, which count towards the least error but not as runs."""
    if np.isfinite(e):
        ends.setdefault(k, []).append((float(e), counted))


def next_rank_claims(ends: dict[int, list[tuple[float, bool]]], k: int,
                     eps: Fraction | float) -> dict[str, float | int]:
    """Returns the claims on rank k - 1 below a witness of rank k, from ``ends`` (the errors
    the runs at each rank ended at, ``_note``): ``upper_next_rank`` (k - 1),
    ``upper_next_error`` (the least float64 max-row-l1 error a run reached there) and
    ``upper_next_ratio`` (that / eps; below 1 would have lowered the rank), both to
    SEARCH_DIGITS significant digits (``search_claim``), and where counted runs ended there,
    ``upper_next_runs`` (how many) and ``upper_next_agree`` (how many of them within
    AGREE_BAND of the least); {} when no run reached rank k - 1 or k = 1.  Float64 search
    results, not proofs."""
    found = ends.get(k - 1)
    if k <= 1 or not found:
        return {}
    e = min(x for x, _ in found)
    out: dict[str, float | int] = {"upper_next_rank": int(k - 1),
                                   "upper_next_error": search_claim(e),
                                   "upper_next_ratio": search_claim(e / float(eps))}
    runs = [x for x, counted in found if counted]
    if runs:
        out["upper_next_runs"] = len(runs)
        out["upper_next_agree"] = sum(x <= (1 + AGREE_BAND) * e for x in runs)
    return out


def _components(A: np.ndarray, U: np.ndarray, V: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (Ub, Vb, z): the fit U V of rank k + 1 as the sum of its k + 1 SVD components
    Ub[:, j] Vb[j] (largest first), and z[j], the max-row-l1 error of A minus the fit without
    component j."""
    Q, R = np.linalg.qr(U)
    Ur, sr, Vtr = np.linalg.svd(R @ V, full_matrices=False)
    k1 = U.shape[1]
    Ub = (Q @ Ur[:, :k1]) * sr[:k1]
    Vb = Vtr[:k1]
    E = A - Ub @ Vb
    charge_irls(*A.shape, k1 - 1)  # about one IRLS step's work: k + 1 rank-one updates of E
    z = np.array([np.abs(E + np.outer(Ub[:, j], Vb[j])).sum(axis=1).max() for j in range(k1)])
    return Ub, Vb, z


def _without(Ub: np.ndarray, Vb: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    keep = [i for i in range(Ub.shape[1]) if i != j]
    return Ub[:, keep], Vb[keep]


def _first_drops(z: np.ndarray) -> list[int]:
    """Returns the components ``_truncations`` drops, given ``_components``' z: the one whose
    removal leaves the least error, then the smallest one (the last) if it is another."""
    drop, last = int(np.argmin(z)), len(z) - 1
    return [drop] if drop == last else [drop, last]


def _truncations(A: np.ndarray, U: np.ndarray, V: np.ndarray, k: int
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Returns two rank-k starts (U0, V0) from the fit U V of rank k + 1, written as the sum of
    its k + 1 SVD components: without the component whose removal leaves the least
    max-row-l1 error, and without the smallest one (the truncated SVD).  The fit found at
    rank k + 1 already bends towards the max-row-l1 optimum, which the SVD of A does not;
    started here the next rank often needs a fraction of the SVD start's steps."""
    assert U.shape[1] == k + 1
    Ub, Vb, z = _components(A, U, V)
    return [_without(Ub, Vb, j) for j in _first_drops(z)]


def _svd_steps(A: np.ndarray, t: float, Us: np.ndarray, s: np.ndarray, Vt: np.ndarray, k: int,
               fit: tuple[np.ndarray, np.ndarray, float], deadline: float,
               ends: dict[int, list[tuple[float, bool]]], polish: bool = True,
               failed: Collection[int] = ()
               ) -> tuple[int, tuple[np.ndarray, np.ndarray, float]]:
    """Returns (r, (U, V, err)): the least rank r <= k reached by patient runs of
    SVD_STEPS_ITERS steps from the truncated SVD of rank k - 1, k - 2, ... (each run ending at
    err <= t; the first that does not ends the steps, as does ``deadline``), with its fit;
    (k, ``fit``) when the first run fails.  Every run's error goes to ``ends`` (a run at the
    rank below the one returned).  Why: at large tsvd ranks the chain spends the whole budget
    one rank at a time, and the descent's SVD start comes after its truncated starts; a jump
    from the SVD start often passes where the chain's last fit stalled.  A rank in ``failed``
    (its run from the same start, of as many steps, ran and failed before) ends the steps
    without a run."""
    while k > 1 and k - 1 not in failed and clock() < deadline:
        U, V, e = alt_l1(A, k - 1, t, Us[:, :k - 1] * s[:k - 1], Vt[:k - 1],
                         iters=SVD_STEPS_ITERS, deadline=deadline, patient=True, polish=polish)
        _note(ends, k - 1, e)
        if not e <= t:
            break
        k, fit = k - 1, (U, V, e)
    return k, fit


def _near(ends: dict[int, list[tuple[float, bool]]], k: int, t: float) -> bool:
    """Returns whether some run at rank k ended within VSTEP_BAND of the target t."""
    return k >= 1 and any(e <= VSTEP_BAND * t for e, _ in ends.get(k, ()))


def _exact_steps(A: np.ndarray, t: float, k: int, fit: tuple[np.ndarray, np.ndarray, float],
                 deadline: float, ends: dict[int, list[tuple[float, bool]]],
                 polish: bool = True) -> tuple[int, tuple[np.ndarray, np.ndarray, float]]:
    """Returns (r, (U, V, err)): the least rank r <= k reached from the rank-k ``fit`` by
    near-miss steps, with its fit (err <= t), or (k, ``fit``).  A step to rank k - 1 runs
    alternating l1 from the two truncations of the fit (WARM_ITERS steps each) and, when the
    best ends above t but within VSTEP_BAND of it, alternates the exact V-step LP
    (``vstep.v_step``) with the exact row refits (``polish_rows``), up to VSTEP_ROUNDS times
    while they lower the error.  Errors go to ``ends`` as screening runs (towards the least
    error, not counted as runs).  Why: IRLS stops a little above the optimum of its V block,
    and where the best fit misses by a fraction of a per cent that is what it misses by."""
    while k > 1 and clock() < deadline:
        best = None
        for U0, V0 in _truncations(A, fit[0], fit[1], k - 1):
            for n in WARM_ITERS:
                run = alt_l1(A, k - 1, t, U0, V0, iters=n, deadline=deadline, patient=True,
                             polish=polish)
                if best is None or run[2] < best[2]:
                    best = run
                if run[2] <= t or clock() > deadline:
                    break
            if best[2] <= t or clock() > deadline:
                break
        assert best is not None
        U2, V2, e = best
        for _ in range(VSTEP_ROUNDS):
            if not t < e <= VSTEP_BAND * t or clock() > deadline:
                break
            V2, _ = v_step(A, U2, V2, deadline)
            U2, e2 = polish_rows(A, U2, V2, t, deadline)
            # neither step raises the error (each keeps the old block unless the new one is
            # better), so (U2, V2) is never worse than before the round
            lower, e = e2 < e * (1 - 1e-6), e2
            if not lower:
                break
        _note(ends, k - 1, e, counted=False)
        if not e <= t:
            break
        k, fit = k - 1, (U2, V2, e)
    return k, fit


def _probe(A: np.ndarray, t: float, U: np.ndarray, V: np.ndarray, k: int, deadline: float,
           ends: dict[int, list[tuple[float, bool]]], polish: bool = True
           ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Returns (U, V, err) of a rank-k fit with err <= t from the fit U V (of a higher rank)
    truncated to its k largest SVD components, PROBE_ITERS steps that give up when stalled
    or far above t, or None; the run's error goes to ``ends`` as a screening run's (towards
    the least error at rank k, not counted as a run)."""
    Q, R = np.linalg.qr(U)
    Ur, sr, Vtr = np.linalg.svd(R @ V, full_matrices=False)
    U2, V2, e = alt_l1(A, k, t, (Q @ Ur[:, :k]) * sr[:k], Vtr[:k], iters=PROBE_ITERS,
                       deadline=deadline, polish=polish)
    _note(ends, k, e, counted=False)
    return (U2, V2, e) if e <= t else None


def _chain_step(A: np.ndarray, t: float, U: np.ndarray, V: np.ndarray, k: int,
                deadline: float, ends: dict[int, list[tuple[float, bool]]], iters: int,
                hard: list[bool] | None = None, polish: bool = True
                ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Returns (U, V, err) of a rank-k fit with err <= t started from the rank-(k + 1) fit
    U V, or None.  Most ranks of the chain pass after a step or two from a truncation, so
    those get SCREEN_ITERS steps first; where neither passes, up to SCREEN_DROPS other
    components (least error without them first) are tried as the one dropped, the best three
    of all the screened starts continue for 20 and then 100 steps, and last the first
    truncation gets ``iters`` patient steps (the chain's run before the screen existed).  Which
    component to drop matters more than the steps: on a tuning head at rank 76 the two usual
    truncations stayed 8% above eps after 2,600 steps while 6 of the 77 drops reached eps in
    20.  Every run's error goes to ``ends``, the screen's short runs as not counted (they say
    nothing of agreement)."""
    Ub, Vb, z = _components(A, U, V)
    first = _first_drops(z)
    order = [int(j) for j in np.argsort(z, kind="stable") if j not in first]
    pool = []
    for j in first + order[:SCREEN_DROPS]:
        U2, V2, e = alt_l1(A, k, t, *_without(Ub, Vb, j), iters=SCREEN_ITERS,
                           deadline=deadline, patient=True)
        _note(ends, k, e, counted=False)
        if e <= t:
            if hard is not None and j not in first:
                hard.append(True)
            return U2, V2, e
        if clock() > deadline:
            return None
        pool.append((e, U2, V2))
    if hard is not None:
        hard.append(True)
    pool.sort(key=lambda p: p[0])
    top = pool[:SCREEN_TOP]
    for n in SCREEN_MORE:
        for i, (_, U0, V0) in enumerate(top):
            U2, V2, e = alt_l1(A, k, t, U0, V0, iters=n, deadline=deadline, patient=True,
                               polish=polish)
            _note(ends, k, e, counted=False)
            if e <= t:
                return U2, V2, e
            if clock() > deadline:
                return None
            top[i] = (e, U2, V2)
    U2, V2, e = alt_l1(A, k, t, *_without(Ub, Vb, first[0]), iters=iters, deadline=deadline,
                       patient=True, polish=polish)
    _note(ends, k, e)
    return (U2, V2, e) if e <= t else None


def _starts(A: np.ndarray, k: int, Us: np.ndarray, s: np.ndarray, Vt: np.ndarray,
            restarts: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yields rank-k starts (U0, V0): the truncated SVD, then ``restarts`` seeded ones
    alternating k random rows of A and a random rotation of the leading k + 3 right singular
    vectors (U0 the least-squares fit to V0).  The seed depends on k only, so a run is
    reproducible."""
    yield Us[:, :k] * s[:k], Vt[:k]
    m = A.shape[0]
    rng = np.random.default_rng([SEED, k])
    q = min(k + 3, Vt.shape[0])
    for r in range(restarts):
        if r % 2 == 0 and k <= m:
            V0 = A[np.sort(rng.choice(m, k, replace=False))]
        else:
            Q = np.linalg.qr(rng.standard_normal((q, k)))[0]
            V0 = Q.T @ Vt[:q]
        U0 = np.linalg.lstsq(V0.T, A.T, rcond=None)[0].T
        yield U0, V0


def _restarts_default() -> int:
    """Returns the seeded restarts per rank of the descent: RESTARTS times ``budget_scale()``,
    rounded, at least 1.  A count, not a time, so it does not end with the budget; scaled
    with it because ``--budget-scale`` is meant to scale all of a search's work.  (Of about 800
    stored alt_l1 brackets of held-out MiniLM heads, most of them reruns of the same 72, one
    upper end came from a restart, its 11th; at ``--budget-scale 0.5`` the last six cost 4.4 of
    the 50.8 CPU seconds alt_l1 took per head.)"""
    return max(1, round(RESTARTS * budget_scale()))


def _vstep_default() -> float:
    """Seconds per call for the near-miss steps (``_exact_steps``): environment
    ``SOFTRANK_ALT_L1_VSTEP`` (0 turns them off), else VSTEP_BUDGET, times ``budget_scale()``."""
    b = parse_budget(env_value(VSTEP_ENV), zero_ok=True)
    return (VSTEP_BUDGET if b is None else b) * budget_scale()


def _descent_default() -> float:
    """Seconds per call for the patient descent below the bisection's rank: environment
    ``SOFTRANK_ALT_L1_DESCENT`` (0 turns the descent off), else DEFAULT_DESCENT, times
    ``budget_scale()``."""
    b = parse_budget(env_value(DESCENT_ENV), zero_ok=True)
    return (DEFAULT_DESCENT if b is None else b) * budget_scale()

