"""``alt_l1``'s near-miss steps: the exact V-step LP (``vstep.v_step``) and ``_exact_steps``.

Untrusted producer code (nothing here is a proof): the V-step must reach the optimum of the
min-max LP over V for its U (checked against that LP over every row, written separately),
never return a worse V, never start an LP its budget cannot pay for, and charge what it
predicts; the steps must end at the least rank they can reach and every witness they lead to
must be proved by the kernel.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from softrank.certify.upper import check_upper
from softrank.witnesses.producers import altl1, vstep
from softrank.witnesses.producers._common import (
    budget_settings,
    clock,
    fresh_count,
    ipm_cost,
    row_l1,
    work_done,
)

from .helpers import disjoint_mixture as _mixture
from .helpers import random_attention


def _case(seed: int, m: int = 18, N: int = 12, k: int = 3):
    """A row-stochastic A and a rank-k fit from a few IRLS steps (near, not at, its optimum)."""
    A = random_attention(np.random.default_rng(seed), m, N)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    U, V, _ = altl1.alt_l1(A, k, 0.0, Us[:, :k] * s[:k], Vt[:k], iters=5, patient=True)
    return A, U, V


def _full_optimum(A: np.ndarray, U: np.ndarray) -> float:
    """min over V of max_i ||A_i - U_i V||_1, every row in the LP: the level s and, per entry,
    the pair of slacks p - q = A_ij - U_i V_j (a formulation unlike ``vstep._solve``'s)."""
    m, N = A.shape
    k = U.shape[1]
    nv = k * N
    # variables: V (row-major k x N), p (m N), q (m N), s
    rows_eq = np.zeros((m * N, nv + 2 * m * N + 1))
    for i in range(m):
        for j in range(N):
            e = i * N + j
            rows_eq[e, [l * N + j for l in range(k)]] = U[i]
            rows_eq[e, nv + e] = 1.0
            rows_eq[e, nv + m * N + e] = -1.0
    rows_ub = np.zeros((m, nv + 2 * m * N + 1))
    for i in range(m):
        rows_ub[i, nv + i * N: nv + (i + 1) * N] = 1.0
        rows_ub[i, nv + m * N + i * N: nv + m * N + (i + 1) * N] = 1.0
        rows_ub[i, -1] = -1.0
    c = np.zeros(nv + 2 * m * N + 1)
    c[-1] = 1.0
    r = linprog(c, A_ub=rows_ub, b_ub=np.zeros(m), A_eq=rows_eq, b_eq=A.ravel(),
                bounds=[(None, None)] * nv + [(0, None)] * (2 * m * N + 1), method="highs")
    assert r.status == 0
    return float(r.fun)


def _lp_sizes(monkeypatch) -> list[int]:
    """Records the number of rows of every V-step LP solved."""
    sizes: list[int] = []
    real = vstep._solve

    def spy(A_, U_, rows, left):
        sizes.append(len(rows))
        return real(A_, U_, rows, left)

    monkeypatch.setattr(vstep, "_solve", spy)
    return sizes


@pytest.mark.parametrize("seed", range(5))
def test_the_v_step_reaches_the_optimum_over_every_row(monkeypatch, seed: int) -> None:
    A, U, V = _case(seed)
    before = float(row_l1(A, U, V).max())
    opt = _full_optimum(A, U)
    assert opt < before - 1e-6  # five IRLS steps leave room: the test can fail
    # every row may have to join (one a round at least): enough rounds to finish
    monkeypatch.setattr(vstep, "GENERATION_ROUNDS", A.shape[0] + 1)
    U0 = U.copy()
    V2, e2 = vstep.v_step(A, U, V, clock() + 1e6)
    assert e2 == float(row_l1(A, U, V2).max())
    assert e2 == pytest.approx(opt, abs=1e-7)
    assert np.array_equal(U, U0)  # U is the caller's: only V moves


def test_the_first_lp_takes_only_the_rows_near_the_largest_error(monkeypatch) -> None:
    A, U, V = _case(1, m=30)
    r = row_l1(A, U, V)
    sizes = _lp_sizes(monkeypatch)
    vstep.v_step(A, U, V, clock() + 1e6)
    assert sizes[0] == int((r >= (1 - vstep.ROW_BAND) * r.max()).sum()) < A.shape[0]
    assert sizes == sorted(sizes)  # rows join, never leave


@pytest.mark.parametrize("seed", range(3))
def test_the_v_step_never_returns_a_worse_v(monkeypatch, seed: int) -> None:
    A, U, V = _case(seed)
    # a fit already at the V-step's optimum for its U: nothing to gain, V kept bit for bit
    monkeypatch.setattr(vstep, "GENERATION_ROUNDS", A.shape[0] + 1)
    V1, e1 = vstep.v_step(A, U, V, clock() + 1e6)
    V2, e2 = vstep.v_step(A, U, V1, clock() + 1e6)
    assert e2 <= e1
    assert e2 == float(row_l1(A, U, V2).max())
    if e2 == e1:
        assert V2 is V1


def test_no_lp_starts_that_the_budget_cannot_pay_for(monkeypatch) -> None:
    A, U, V = _case(2)

    def refuse(*args, **kwargs):
        raise AssertionError("an LP was started past its budget")

    monkeypatch.setattr(vstep, "_solve", refuse)
    rows = int((row_l1(A, U, V) >= (1 - vstep.ROW_BAND) * row_l1(A, U, V).max()).sum())
    cost = vstep.lp_cost(rows, U.shape[1], A.shape[1])
    with budget_settings(mode="work"):
        V2, e2 = vstep.v_step(A, U, V, clock() + 0.5 * cost)
    assert V2 is V and e2 == float(row_l1(A, U, V).max())


def test_work_mode_charges_each_lp_its_predicted_cost(monkeypatch) -> None:
    A, U, V = _case(3)
    sizes = _lp_sizes(monkeypatch)
    with budget_settings(mode="work"), fresh_count():
        vstep.v_step(A, U, V, clock() + 1e6)
        spent = work_done()
    assert sizes
    predicted = sum(vstep.lp_cost(n, U.shape[1], A.shape[1]) for n in sizes)
    assert predicted <= spent <= predicted + 1.0  # + the row errors and the clock reads


def test_lp_nonzeros_counts_the_model(monkeypatch) -> None:
    import scipy.optimize

    A, U, V = _case(4)
    seen: list[int] = []
    real = scipy.optimize.linprog

    def spy(c, A_ub=None, **kwargs):
        seen.append(int(A_ub.nnz))
        return real(c, A_ub=A_ub, **kwargs)

    monkeypatch.setattr(scipy.optimize, "linprog", spy)
    assert np.all(U != 0)
    rows = np.arange(7)
    assert vstep._solve(A, U, rows, 1e6) is not None
    assert seen == [vstep.lp_nonzeros(7, U.shape[1], A.shape[1])]
    assert vstep.lp_cost(7, 3, 12) == ipm_cost(seen[0])
    assert vstep.lp_cost(8, 3, 12) > vstep.lp_cost(7, 3, 12)


@pytest.mark.parametrize("seed", range(3))
def test_the_steps_end_at_the_least_rank_they_reach(monkeypatch, seed: int) -> None:
    A = _mixture(seed)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    start = (Us[:, :8] * s[:8], Vt[:8], float(row_l1(A, Us[:, :8] * s[:8], Vt[:8]).max()))
    # a band wide enough that the V-step runs at the rank that cannot pass
    monkeypatch.setattr(altl1, "VSTEP_BAND", 10.0)
    calls: list[int] = []
    real = altl1.v_step

    def spy(A_, U_, V_, deadline):
        calls.append(U_.shape[1])
        return real(A_, U_, V_, deadline)

    monkeypatch.setattr(altl1, "v_step", spy)
    ends: dict = {}
    with budget_settings(mode="work"):
        r, (U, V, e) = altl1._exact_steps(A, 0.25, 8, start, clock() + 1e6, ends)
    assert r == 5
    assert e == float(row_l1(A, U, V).max()) <= 0.25
    assert 4 in calls  # the step that fails went through the LP and still failed
    assert min(x for x, _ in ends[4]) > 0.25
    assert check_upper(A, U, V, "1/4", rank=r).status == "holds"


def test_steps_past_their_deadline_return_the_fit_they_were_given() -> None:
    A = _mixture(0)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    start = (Us[:, :8] * s[:8], Vt[:8], 0.0)
    ends: dict = {}
    with budget_settings(mode="work"):
        r, fit = altl1._exact_steps(A, 0.25, 8, start, clock() - 1.0, ends)
    assert r == 8 and fit is start and not ends


def test_near_reads_the_band() -> None:
    ends = {3: [(1.02, True), (1.009, False)], 4: [(0.5, True)]}
    assert altl1._near(ends, 3, 1.0)
    assert not altl1._near({3: [(1.02, True)]}, 3, 1.0)
    assert not altl1._near(ends, 2, 1.0)  # no run there
    assert not altl1._near(ends, 0, 1.0)


def _small() -> altl1.AlternatingL1:
    return altl1.AlternatingL1(budget=0.3, descent_budget=0.3, restarts=1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_produce_with_and_without_the_steps(monkeypatch, seed: int) -> None:
    A = random_attention(np.random.default_rng(seed), 24, 24)
    monkeypatch.setenv(altl1.VSTEP_ENV, "0")
    with budget_settings(mode="work"):
        off = _small().produce(A, Fraction(1, 4))
    assert "vstep_rank" not in off.claims and "vstep_start" not in off.claims
    monkeypatch.delenv(altl1.VSTEP_ENV)
    monkeypatch.setattr(altl1, "VSTEP_BAND", 10.0)  # the steps run on every head here
    with budget_settings(mode="work"):
        on = _small().produce(A, Fraction(1, 4))
    # the steps start where the rest of the search ended, so they never raise the rank
    assert on.claims["chain_rank"] == off.claims["chain_rank"]
    assert on.rank == on.claims["vstep_rank"] <= on.claims["vstep_start"] == off.rank
    assert check_upper(A, on.U, on.V, "1/4", rank=on.rank).status == "holds"
    assert on.claims["upper_next_rank"] == on.rank - 1
