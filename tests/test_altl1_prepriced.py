"""alt_l1 prices a step before starting it: a budget smaller than one step runs none, so no
search overruns its budget by a step (one step at rank 1000 of a 1024 x 1024 head costs
over a minute) and no row refit starts that its LP's predicted cost does not fit."""

from __future__ import annotations

import numpy as np

from softrank.witnesses.producers import altl1
from softrank.witnesses.producers._common import (
    budget_settings,
    clock,
    ipm_cost,
    irls_cost,
    work_done,
)


def _head(m: int = 200, n: int = 200, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = 2.0 * rng.standard_normal((m, n))
    A = np.exp(S - S.max(axis=1, keepdims=True))
    return A / A.sum(axis=1, keepdims=True)


def _start(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return U[:, :k] * s[:k], Vt[:k]


def _run(A: np.ndarray, k: int, steps_allowed: float) -> tuple[float, tuple]:
    """Runs alt_l1 from the rank-k SVD start with a budget of ``steps_allowed`` times one
    step's cost; returns (work charged / one step's cost, the run's result)."""
    U0, V0 = _start(A, k)
    step = irls_cost(*A.shape, k)
    with budget_settings(mode="work"):
        before = work_done()
        out = altl1.alt_l1(A, k, 1e-9, U0, V0, iters=50,
                           deadline=clock() + steps_allowed * step, patient=True)
        return (work_done() - before) / step, out


def test_a_budget_below_one_step_runs_no_step():
    A = _head()
    spent, (U, V, e) = _run(A, 10, 0.9)
    assert spent < 1  # only budget reads were charged
    U0, V0 = altl1._balance(*_start(A, 10))
    assert np.array_equal(U @ V, U0 @ V0)
    assert e == float(np.abs(A - U @ V).sum(axis=1).max())


def test_a_budget_of_a_few_steps_runs_that_many_and_never_more():
    A = _head()
    for n in (1, 3, 7):
        spent, _ = _run(A, 10, n + 0.5)
        assert round(spent) == n, (n, spent)
        assert spent <= n + 0.5  # the budget, not a step past it


def test_row_refits_are_priced_before_their_lp():
    A = _head()
    k = 4
    U0, V0 = _start(A, k)
    t = 0.5 * float(np.abs(A - U0 @ V0).sum(axis=1).max())  # every refit is wanted
    lp = ipm_cost(2 * (k * A.shape[1] + A.shape[1]))
    with budget_settings(mode="work"):
        before = work_done()
        U, _ = altl1.polish_rows(A, U0, V0, t, deadline=clock() + 0.5 * lp)
        assert work_done() - before < 0.5 * lp  # no LP was started
        assert np.array_equal(U, U0)
        # with room for them the refits run (and lower the worst row)
        U2, e2 = altl1.polish_rows(A, U0, V0, t, deadline=clock() + 1e6)
    assert e2 < float(np.abs(A - U0 @ V0).sum(axis=1).max())


def test_the_chain_budget_follows_the_budget_scale():
    """--budget-scale left the chain's 10 units (times the size factor) alone: at 0.001 a
    256 x 256 head spent about 40 units in the chain (measured 41 CPU s)."""
    from fractions import Fraction

    A = _head(256, 256)
    with budget_settings(mode="work", scale=0.001):
        w0 = work_done()
        w = altl1.AlternatingL1().produce(A, Fraction(1, 4))
        spent = work_done() - w0
    assert w is not None and spent < 1.0
