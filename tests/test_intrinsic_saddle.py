"""The producer's saddle search for kappa (``eg_saddle``): the kernel proves its brackets, and
they are tighter than the previous route (BFGS on the gauge, enclosing-ball weights as dual)
on small synthetic cases with many rows tied on the balls (points on spheres)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from softrank.certify.intrinsic.kappa import kappa_bracket, kappa_lower_variance, kappa_upper
from softrank.witnesses.producers import intrinsic as P
from softrank.witnesses.producers.intrinsic_meb import min_ball


def _sphere_case(seed: int, r: int = 6, m: int = 30, n: int = 30
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Balanced SVD factors of X0 Y0^T with the rows of X0, Y0 on unit spheres: every row is
    on its ball in the native gauge, which the SVD gauge hides."""
    rng = np.random.default_rng(seed)
    X0 = rng.standard_normal((m, r))
    Y0 = rng.standard_normal((n, r))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    Y0 /= np.linalg.norm(Y0, axis=1, keepdims=True)
    return P.truncate(X0 @ Y0.T, r)


def _old_route(X: np.ndarray, Y: np.ndarray, iters: int):
    """The previous producer's witnesses at a fixed iteration count: BFGS on
    log rad(XG) + log rad(YG^-T) from G = I, ball centres, and the balls' support weights
    as the variance dual."""
    state: dict = {}
    minimize(P._gauge_objective, np.eye(X.shape[1]).ravel(), args=(X, Y, state), jac=True,
             method="BFGS", options={"maxiter": iters, "gtol": 1e-12})
    bx, by = state["bx"], state["by"]
    hi = kappa_upper(X, Y, state["best_G"], bx.centre, by.centre).hi
    lo = kappa_lower_variance(X, Y, bx.weights, by.weights).lo
    return lo, hi


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_saddle_brackets_proved_and_tighter(seed: int) -> None:
    X, Y = _sphere_case(seed)
    sp = P.eg_saddle(X, Y, deadline=math.inf, max_iters=3000)
    assert sp is not None
    G = sp["G"]
    bx, by = min_ball(X @ G), min_ball(Y @ np.linalg.inv(G).T)
    kb = kappa_bracket(X, Y, G=G, a=bx.centre, c=by.centre, lam=sp["l"], mu=sp["u"])
    assert kb.lo > 0 and kb.hi is not None
    # the kernel proves what the producer claimed, to float accuracy
    assert float(kb.lo) >= sp["lower"] * (1 - 1e-9)
    assert float(kb.hi) <= sp["upper"] * (1 + 1e-9)
    assert kb.ratio <= 1 + 1e-4
    old_lo, old_hi = _old_route(X, Y, 100)
    assert old_lo <= kb.hi and kb.lo <= old_hi  # both are proved brackets of one kappa
    assert kb.hi <= old_hi
    assert kb.lo >= old_lo * 1.05
    # at the saddle gauge many rows are tied on each ball: the ball solver's vertex weights
    # are not the dual optimum, so the weights must come from the dual search
    ball_lo = kappa_lower_variance(X, Y, bx.weights, by.weights).lo
    assert kb.lo >= ball_lo * 1.05


def test_kappa_witness_full_rank_record_proved() -> None:
    """rank_witness at r = rank C: the stored arrays give a kernel bracket within 1e-4
    (generous budget; the search stops when its float bounds meet)."""
    X0, Y0 = _sphere_case(3, r=5, m=24, n=20)
    C = X0 @ Y0.T
    C = C - C.mean(axis=1, keepdims=True)
    C = C - C.mean(axis=0, keepdims=True)
    rw = P.rank_witness(C, 5, budget=60.0)
    w = rw.arrays
    kb = kappa_bracket(w["X"], w["Y"], **{k: w[k] for k in
                                           ("G", "a", "c", "rects", "M", "D1", "D2", "lam", "mu")
                                           if k in w})
    assert kb.ratio <= 1 + 1e-4
    assert float(kb.lo) <= rw.claims["kappa_lower"] * (1 + 1e-9)


def test_singular_covariance_falls_back_and_stays_sound() -> None:
    """X of deficient column rank: no nonsingular covariance, the older search runs, and the
    kernel's bracket is still a bracket (lo <= hi) with a positive lower end."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((12, 3))
    X[:, 2] = 0.0
    Y = rng.standard_normal((10, 3))
    assert P.eg_saddle(X, Y, deadline=math.inf, max_iters=10) is None
    kw = P.kappa_witness(X, Y, budget=0.5)
    assert kw["gauge_method"] == "bfgs+fw"
    kb = kappa_bracket(X, Y, G=kw["G"], a=kw["a"], c=kw["c"], rects=kw["rects"],
                       lam=kw["lam"], mu=kw["mu"])
    assert 0 < kb.lo <= kb.hi
