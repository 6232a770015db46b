"""Complete rank-one search: exact LP, constraint generation, randomized differential tests."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction as F

import numpy as np
import pytest
from scipy.optimize import linprog

from softrank.exact.lp import check_farkas, check_point, decide
from softrank.exact.rankone import (
    RankOneRefutation,
    RankOneWitness,
    rank_one_search,
    row_constraints,
    verify_refutation,
)


def test_exact_lp_agrees_with_highs_and_self_checks():
    rng = random.Random(1)
    seen = set()
    for _ in range(150):
        n, K = rng.randint(1, 4), rng.randint(1, 9)
        G = [[F(rng.randint(-3, 3)) for _ in range(n)] for _ in range(K)]
        h = [F(rng.randint(-3, 3)) for _ in range(K)]
        ans = decide(G, h, n)
        seen.add(ans.status)
        if ans.status == "feasible":
            assert check_point(G, h, ans.vector)
        else:
            assert check_farkas(G, h, ans.vector, n)
        res = linprog(np.zeros(n), A_ub=np.array(G, float), b_ub=np.array(h, float),
                      bounds=[(None, None)] * n, method="highs")
        assert (res.status == 0) == (ans.status == "feasible")
    assert seen == {"feasible", "infeasible"}


def test_lp_boundary_point_is_exact():
    # y <= 1/3 and -y <= -1/3: the only point is 1/3 (a float LP would round it)
    ans = decide([[F(1)], [F(-1)]], [F(1, 3), F(-1, 3)], 1)
    assert ans.status == "feasible" and ans.vector == (F(1, 3),)
    ans = decide([[F(1)], [F(-1)]], [F(1, 3), F(-1, 3) - F(1, 10**30)], 1)
    assert ans.status == "infeasible"


def _row_error(a, x, y):
    return sum(abs(aj - x * yj) for aj, yj in zip(a, y, strict=True))


def test_row_constraints_match_pivot_condition():
    """For y with sigma y_p >= 1: constraints hold iff f_i(A_ip / y_p, y) <= eps."""
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 4)
        a = [F(rng.randint(-4, 4), rng.randint(1, 4)) for _ in range(n)]
        eps = F(rng.randint(1, 9), 10)
        p = rng.randrange(n)
        y = [F(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(n)]
        if y[p] == 0:
            y[p] = F(1)
        sigma = 1 if y[p] > 0 else -1
        y = [v / abs(y[p]) for v in y]  # now sigma * y_p = 1 >= 1
        cons = row_constraints([a], eps, 0, p, sigma)
        holds = all(sum(g * v for g, v in zip(c, y, strict=True)) <= b for c, b in cons)
        assert holds == (_row_error(a, a[p] / y[p], y) <= eps)
        # the wrong sign makes the pivot constraint fail
        assert not all(sum(g * v for g, v in zip(c, y, strict=True)) <= b
                       for c, b in row_constraints([a], eps, 0, p, -sigma))


def _grid_best_unrestricted(A):
    """min over a rational grid of y of max_i min_x f_i(x, y) (x by breakpoint enumeration)."""
    n = len(A[0])
    vals = [F(k, 4) for k in range(-8, 9)] if n <= 3 else [F(k, 2) for k in range(-4, 5)]
    best = None
    for y in itertools.product(vals, repeat=n):
        if not any(y):
            continue
        worst = F(0)
        for a in A:
            xs = [aj / yj for aj, yj in zip(a, y, strict=True) if yj] or [F(0)]
            worst = max(worst, min(_row_error(a, x, y) for x in xs))
        best = worst if best is None else min(best, worst)
    zero = max(sum(abs(x) for x in a) for a in A)
    return min(best, zero)


def _grid_best_stochastic(A, den=12):
    n = len(A[0])
    best = None
    for c in itertools.product(range(den + 1), repeat=n - 1):
        if sum(c) > den:
            continue
        p = [F(k, den) for k in c] + [1 - F(sum(c), den)]
        worst = max(sum(abs(aj - pj) for aj, pj in zip(a, p, strict=True)) for a in A)
        best = worst if best is None else min(best, worst)
    return best


def _random_cells(rng, count):
    for _ in range(count):
        k = rng.randint(2, 4) if rng.random() < 0.8 else rng.randint(1, 3)
        m, n = (2, k) if rng.random() < 0.5 else (k, 2)
        yield [[F(rng.randint(0, 8), rng.randint(1, 8)) for _ in range(n)] for _ in range(m)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_differential_unrestricted(seed):
    rng = random.Random(seed)
    for A in _random_cells(rng, 12):
        grid = _grid_best_unrestricted(A)
        for eps in {min(grid, F(99, 100)), max(grid - F(1, 97), F(1, 100)),
                    F(rng.randint(1, 19), 20)}:
            if not 0 < eps < 1:
                continue
            res = rank_one_search(A, eps)
            if isinstance(res, RankOneWitness):
                assert res.rank <= 1 and res.error <= eps
                B = [[x * yj for yj in res.factors[1]] for x in res.factors[0]]
                assert B == res.B
                assert max(sum(abs(u - v) for u, v in zip(a, b, strict=True))
                           for a, b in zip(A, B, strict=True)) <= eps
            else:
                assert isinstance(res, RankOneRefutation) and verify_refutation(A, eps, res)
                assert grid > eps  # the grid (a subset) cannot beat an exact refutation
            if grid <= eps:  # the grid proves feasibility: the oracle must agree
                assert isinstance(res, RankOneWitness)


@pytest.mark.parametrize("seed", [0, 1])
def test_differential_stochastic(seed):
    rng = random.Random(100 + seed)
    for A in _random_cells(rng, 12):
        A = [[x / sum(r) for x in r] if sum(r) else [F(1, len(r))] * len(r) for r in A]
        grid = _grid_best_stochastic(A)
        for eps in {min(grid, F(99, 100)), max(grid - F(1, 97), F(1, 100))}:
            res = rank_one_search(A, eps, stochastic=True)
            if isinstance(res, RankOneWitness):
                assert res.error <= eps and all(r == res.B[0] for r in res.B)
                assert all(x >= 0 for x in res.B[0]) and sum(res.B[0]) == 1
            else:
                assert verify_refutation(A, eps, res) and grid > eps
            if grid <= eps:
                assert isinstance(res, RankOneWitness)


def test_unrestricted_4x4_near_threshold():
    """A 4 x 4 cell decided on both sides of its exact rank-one threshold."""
    A = [[F(i * j % 5 + 1, 5) for j in range(4)] for i in range(4)]
    lo, hi = F(0), F(1)
    for _ in range(5):
        mid = (lo + hi) / 2
        if isinstance(rank_one_search(A, mid), RankOneWitness):
            hi = mid
        else:
            lo = mid
    assert lo < hi
    ref = rank_one_search(A, lo)
    assert isinstance(ref, RankOneRefutation) and verify_refutation(A, lo, ref)
    w = rank_one_search(A, hi)
    assert isinstance(w, RankOneWitness) and w.error <= hi
