"""``alt_l1``'s exact row polish: l1 regressions by LP on the rows a run leaves above t.

Untrusted producer code (nothing here is a proof), but the polish must never make a fit worse,
never touch a row it does not need to, and its LP must be the l1 optimum: checked against the
dual LP (max <a, z> over V z = 0, |z| <= 1) solved separately.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from softrank.witnesses.producers import altl1
from softrank.witnesses.producers._common import budget_settings, fresh_count, row_l1, work_done


def _case(seed: int, m: int = 12, N: int = 9, k: int = 3):
    """A row-stochastic A, a rank-k V and U from least squares (an l2 fit, so most rows sit
    above their l1 optimum on V)."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((m, N)) * 2.0
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    V = rng.standard_normal((k, N))
    U = np.linalg.lstsq(V.T, A.T, rcond=None)[0].T
    return A, U, V


def _dual_optimum(V: np.ndarray, a: np.ndarray) -> float:
    """max a . z subject to V z = 0, -1 <= z <= 1: the l1 distance of a from the row space
    of V by LP duality."""
    r = linprog(-a, A_eq=V, b_eq=np.zeros(V.shape[0]), bounds=[(-1, 1)] * V.shape[1],
                method="highs")
    assert r.status == 0
    return -float(r.fun)


@pytest.mark.parametrize("seed", range(6))
def test_l1_regression_attains_the_dual_optimum(seed):
    A, _, V = _case(seed)
    for a in A[:4]:
        u = altl1.l1_regression(V, a)
        assert u is not None
        primal = float(np.abs(a - u @ V).sum())
        assert primal == pytest.approx(_dual_optimum(V, a), abs=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_polish_reaches_t_when_every_row_optimum_is_below_it(seed):
    A, U, V = _case(seed)
    r = row_l1(A, U, V)
    opt = np.array([_dual_optimum(V, a) for a in A])
    assert r.max() > opt.max() + 1e-6  # the l2 fit is not l1-optimal on its worst row
    t = (r.max() + opt.max()) / 2
    U2, err = altl1.polish_rows(A, U, V, t)
    assert err <= t
    assert err == float(row_l1(A, U2, V).max())
    fixed = r <= t
    # rows already within t are not touched, bit for bit; no row got worse
    assert np.array_equal(U2[fixed], U[fixed])
    assert (row_l1(A, U2, V) <= r).all()


def test_polish_stops_at_the_first_row_that_cannot_reach_t():
    A, U, V = _case(3)
    r = row_l1(A, U, V)
    worst = int(np.argmax(r))
    opt = _dual_optimum(V, A[worst])
    t = opt * 0.9  # the worst row cannot reach t on this V
    U2, err = altl1.polish_rows(A, U, V, t)
    assert err > t
    others = np.arange(A.shape[0]) != worst
    assert np.array_equal(U2[others], U[others])  # the pass ended after that row
    assert float(np.abs(A[worst] - U2[worst] @ V).sum()) == pytest.approx(opt, abs=1e-8)


def test_alt_l1_polishes_only_when_asked_and_within_the_band():
    A, U, V = _case(5)
    r = row_l1(A, U, V)
    opt = max(_dual_optimum(V, a) for a in A)
    err0 = float(r.max())
    # t above every row's optimum, with err0 inside the band above t
    t = max((opt + err0) / 2, err0 / altl1.POLISH_BAND * (1 + 1e-9))
    assert opt < t < err0 <= altl1.POLISH_BAND * t
    _, _, e_plain = altl1.alt_l1(A, V.shape[0], t, U, V, iters=0)
    assert e_plain > t
    with budget_settings(mode="work"), fresh_count():
        w0 = work_done()
        U2, V2, e_pol = altl1.alt_l1(A, V.shape[0], t, U, V, iters=0, polish=True)
        assert work_done() > w0  # the LPs are charged to the budget
    assert e_pol <= t
    assert e_pol == float(row_l1(A, U2, V2).max())
    # far above the band: no LP is run, the fit is returned as it was
    _, _, e_far = altl1.alt_l1(A, V.shape[0], err0 / (2 * altl1.POLISH_BAND), U, V, iters=0,
                               polish=True)
    assert e_far == pytest.approx(err0, rel=1e-12)
