"""Grid family: exact A, rank C, kappa(C) (primal = dual) and r_eps = L^r, recomputed."""

from __future__ import annotations

from fractions import Fraction as F
from itertools import combinations

import mpmath
import numpy as np
import pytest
import sympy

from softrank.certify.errors import InputError
from softrank.exact import grid_family
from softrank.exact.interaction import rectangle_lower_bound, visible_interaction

TABLE = {3: ("12.2411", 9), 5: ("48.9643", 25), 8: ("149.9533", 64), 12: ("370.2928", 144),
         20: ("1104.7578", 400)}


@pytest.mark.parametrize("L", sorted(TABLE))
def test_published_table(L):
    g = grid_family(2, L, "1/4")
    kappa_digits, r_eps = TABLE[L]
    assert f"{float(g.kappa.evalf(30)):.4f}" == kappa_digits
    assert g.r_eps == r_eps == g.n
    assert g.rank_C == 2
    assert g.row1_A_minus_I < 1 - g.eps
    assert sympy.expand(g.primal["value"] - g.dual["value"]) == 0


def test_small_grid_recomputed_independently():
    g = grid_family(2, 3, "1/4")
    A = g.matrix()
    n = len(A)
    assert all(x > 0 for r in A for x in r) and all(sum(r) == 1 for r in A)
    # definition: A_ab proportional to exp(2 s a.b - s ||b||^2) = q^(||b||^2 - 2 a.b)
    q = F(3, 4) / 16
    for i, a in enumerate(g.points):
        w = [q ** (sum(y * y for y in b) - 2 * sum(x * y for x, y in zip(a, b, strict=True)))
             for b in g.points]
        assert [x / sum(w) for x in w] == A[i]
    dev = max(sum(abs(A[i][j] - (i == j)) for j in range(n)) for i in range(n))
    assert dev == g.row1_A_minus_I < F(3, 4)
    # C from log A at 50 digits: numerical rank and the best rectangle match the exact values
    mpmath.mp.dps = 50
    logA = [[mpmath.log(mpmath.mpf(x.numerator) / x.denominator) for x in r] for r in A]
    rm = [sum(r) / n for r in logA]
    cm = [sum(logA[i][j] for i in range(n)) / n for j in range(n)]
    gm = sum(rm) / n
    C = [[logA[i][j] - rm[i] - cm[j] + gm for j in range(n)] for i in range(n)]
    sv = np.linalg.svd(np.array([[float(x) for x in r] for r in C]), compute_uv=False)
    assert int((sv > 1e-9 * sv[0]).sum()) == g.rank_C
    best = max(abs(C[i][j] - C[i][l] - C[k][j] + C[k][l]) / 4
               for i, k in combinations(range(n), 2) for j, l in combinations(range(n), 2))
    assert abs(best - mpmath.mpf(str(g.kappa.evalf(60)))) < mpmath.mpf(10) ** -40


@pytest.mark.parametrize("r,L,eps", [(1, 4, "1/2"), (3, 2, "1/4"), (1, 2, "0.9")])
def test_other_shapes(r, L, eps):
    g = grid_family(r, L, eps)
    s = sympy.log(8 * r / (1 - sympy.Rational(str(F(eps)))))
    assert g.rank_C == r and g.r_eps == L ** r
    assert sympy.simplify(g.kappa - s * r * (L - 1) ** 2 / 2) == 0


def test_visible_interaction_matches_for_small_matrix():
    g = grid_family(1, 2, "1/2")
    C = visible_interaction(g.matrix())
    best, _ = rectangle_lower_bound(C)
    assert sympy.simplify(best - g.kappa) == 0


@pytest.mark.parametrize("kw,field", [
    ({"r": 0, "L": 3, "eps": "1/4"}, "r"), ({"r": 2, "L": 1, "eps": "1/4"}, "L"),
    ({"r": 2, "L": 3, "eps": "1"}, "eps"), ({"r": 2, "L": 3, "eps": "x"}, "eps"),
    ({"r": 2, "L": 100, "eps": "1/4"}, "L"), ({"r": 1.5, "L": 3, "eps": "1/4"}, "r"),
])
def test_bad_grid_input(kw, field):
    with pytest.raises(InputError, match=field):
        grid_family(**kw)


@pytest.mark.parametrize("bad", [[[1, 0], [1, 1]], [["1/2", "-1/2"], [1, 1]]])
def test_interaction_needs_positive_entries(bad):
    with pytest.raises(InputError, match=r"matrix\[\d\]\[\d\].*> 0"):
        visible_interaction(bad)


def test_scaled_radius_equals_the_fraction_radius():
    # the grid's integer path must give the same proof (bounds, centre and the first
    # farthest pair) as the Fraction definition, ties and repeated points included
    import random

    from softrank.exact.meb import enclosing_radius, enclosing_radius_scaled

    rng = random.Random(11)
    for case in range(300):
        n, r, d = rng.randint(1, 25), rng.randint(1, 5), rng.randint(1, 60)
        rows = [[rng.randint(-6, 6) for _ in range(r)] for _ in range(n)]
        if case % 3 == 0:
            rows = (rows[:3] * 4)[:n]
        slow = enclosing_radius([[F(x, d) for x in row] for row in rows])
        assert enclosing_radius_scaled(rows, d) == slow


def test_interaction_step_is_priced(monkeypatch):
    # r = 10, L = 2 has tiny weights, so its row sums alone priced it at 0.1 % of the limit
    # while rank C and the radius took 20 s; the n^3 step now counts
    from softrank.exact import grid

    q = (1 - F(1, 4)) / 80
    work = grid.grid_cost(10, 2, q)[1]
    assert work >= grid.INTERACTION_UNITS * 1024 ** 3
    monkeypatch.setattr(grid, "MAX_ROW_WORK", work - 1)
    with pytest.raises(InputError) as err:
        grid.grid_family(10, 2, "1/4")
    assert err.value.field == "L"
