"""Kernel checks for kappa, radii, Gamma and the profile against the exact oracle."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy

from softrank.certify.errors import InputError
from softrank.certify.intrinsic.kappa import (
    kappa_bracket,
    kappa_lower_psd,
    kappa_lower_rectangles,
    kappa_lower_variance,
    kappa_upper,
)
from softrank.certify.intrinsic.profile import profile
from softrank.certify.intrinsic.radius import native_size, radius_bracket
from softrank.certify.intrinsic.result import Bracket
from softrank.exact.gauge import gauge_example
from softrank.exact.grid import grid_family

TOL = 1 + Fraction(1, 10**9)


def _interval(expr: sympy.Expr) -> tuple[Fraction, Fraction]:
    """Rational bounds on a positive sympy constant (60 digits, widened by 1e-50 relative)."""
    v = Fraction(str(sympy.N(expr, 60)))
    w = abs(v) / 10**50
    return v - w, v + w


def _grid_witness(g):
    """Integer factors of T' = n^2 C / s for the grid family, with the exact witnesses."""
    pts = np.array(g.points, dtype=float)
    n = len(g.points)
    Xn = n * pts - pts.sum(axis=0)  # n P X0, integers
    a = n * np.array([float(x) for x in g.primal["center_X"]])
    i, k = g.dual["rows"]
    j, l = g.dual["cols"]
    return Xn, 2 * Xn, a, 2 * a, np.array([[i, k, j, l]])


def _check_grid(r: int, L: int) -> None:
    g = grid_family(r, L, "1/4")
    X, Y, a, c, rect = _grid_witness(g)
    kb = kappa_bracket(X, Y, a=a, c=c, rects=rect)
    # kappa(C) = s kappa(T') / n^2 with s = log(8 r / (1 - eps)): kappa(C) / s is rational
    per_s = sympy.simplify(g.kappa / g.s)
    assert per_s.is_Rational
    exact = Fraction(int(per_s.p), int(per_s.q)) * len(g.points) ** 2
    assert kb.contains(exact)
    assert kb.ratio <= TOL
    # and the float path agrees with the sympy value of kappa(C) itself
    k_lo, k_hi = _interval(g.kappa)
    s_lo, s_hi = _interval(g.s)
    n2 = len(g.points) ** 2
    assert s_lo * kb.lo / n2 <= k_hi and k_lo <= s_hi * kb.hi / n2


@pytest.mark.parametrize("r,L", [(2, 3), (2, 5), (2, 8), (2, 12), (3, 3)])
def test_grid_family_kappa(r: int, L: int) -> None:
    _check_grid(r, L)


@pytest.mark.slow
def test_grid_family_kappa_L20() -> None:
    _check_grid(2, 20)


@pytest.mark.parametrize("t", [0, 2, 5, 10])
def test_gauge_example_kappa_and_gamma(t: int) -> None:
    ge = gauge_example(1, t)
    Q = np.array(ge.Q.tolist(), dtype=float)
    K = np.array(ge.K.tolist(), dtype=float)
    # T = Q K^T (beta = 1; the points are centred): the gauge G = S_t^{-1} recovers Q0, K0
    G = np.array([[1.0, -t], [0.0, 1.0]])
    kb = kappa_bracket(Q, K, G=G, a=np.zeros(2), c=np.zeros(2), rects=[[0, 1, 0, 1]])
    kappa = Fraction(str(ge.kappa))
    assert kb.contains(kappa) and kb.ratio <= TOL
    # without the gauge the identity factorisation is worse for t > 0, never wrong
    ub = kappa_upper(Q, K, a=np.zeros(2), c=np.zeros(2))
    assert ub.hi >= kappa
    gam = native_size(Q, K, 1, centre_q=np.zeros(2), centre_k=np.zeros(2))
    assert gam.contains(Fraction(1 + t * t)) and gam.ratio <= TOL
    # default witnesses (midrange centre, far pair) also prove it here
    assert native_size(Q, K).contains(Fraction(1 + t * t))


def test_native_size_scales_with_beta() -> None:
    ge = gauge_example(1, 2)
    Q = np.array(ge.Q.tolist(), dtype=float)
    K = np.array(ge.K.tolist(), dtype=float)
    gam = native_size(Q, K, "3/7", centre_q=np.zeros(2), centre_k=np.zeros(2))
    assert gam.contains(Fraction(3, 7) * 5)


def _rank_one(seed: int, m: int = 7, n: int = 6):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, 1))
    y = rng.standard_normal((n, 1)) * 3
    osc = lambda v: Fraction(float(v.max())) - Fraction(float(v.min()))  # noqa: E731
    return x, y, osc(x) * osc(y) / 4


def _rank_one_witness(x, y):
    i, k = int(np.argmax(x)), int(np.argmin(x))
    j, l = int(np.argmax(y)), int(np.argmin(y))
    a = np.array([(x.max() + x.min()) / 2])
    c = np.array([(y.max() + y.min()) / 2])
    return a, c, np.array([[i, k, j, l]])


@pytest.mark.parametrize("seed", range(4))
def test_rank_one_closes(seed: int) -> None:
    x, y, kappa = _rank_one(seed)
    a, c, rect = _rank_one_witness(x, y)
    kb = kappa_bracket(x, y, G=[[0.37]], a=a * 0.37, c=c / 0.37, rects=rect)
    assert kb.contains(kappa)
    assert kb.ratio <= TOL


def _rect_psd(m: int, n: int, rect) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    i, k, j, l = rect
    M = np.zeros((m, n))
    M[i, j] = M[k, l] = 1.0
    M[i, l] = M[k, j] = -1.0
    D1 = np.zeros(m)
    D2 = np.zeros(n)
    D1[[i, k]] = 2.0
    D2[[j, l]] = 2.0
    return M, D1, D2


def test_psd_dual_rectangle_case() -> None:
    x, y, kappa = _rank_one(7)
    _, _, rect = _rank_one_witness(x, y)
    M, D1, D2 = _rect_psd(7, 6, rect[0])
    lb = kappa_lower_psd(x, y, M, D1, D2)
    assert lb.lo <= kappa and lb.lo >= kappa * (1 - Fraction(1, 10**6))
    # a tighter-than-valid certificate (D halved) is not PSD: no bound, never a false one
    bad = kappa_lower_psd(x, y, M, D1 / 2, D2 / 2)
    assert bad.lo <= kappa


@pytest.mark.parametrize("seed", range(8))
def test_tampered_kappa_witnesses_never_false(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    x, y, kappa = _rank_one(seed)
    a, c, rect = _rank_one_witness(x, y)
    a2 = a + rng.standard_normal(1) * 10.0 ** rng.integers(-17, 0)
    c2 = c + rng.standard_normal(1) * 10.0 ** rng.integers(-17, 0)
    g = float(np.exp(rng.standard_normal()))
    ub = kappa_upper(x, y, [[g]], a2 * g, c2 / g)
    assert ub.hi >= kappa
    rects = rng.integers(0, 6, size=(5, 4))
    assert kappa_lower_rectangles(x, y, rects).lo <= kappa
    M, D1, D2 = _rect_psd(7, 6, rect[0])
    scale = 1 - 10.0 ** rng.integers(-16, -1)
    assert kappa_lower_psd(x, y, M, D1 * scale, D2).lo <= kappa
    M2 = M * (1 + 2.0**-20)  # still zero sums, relatively stronger than D allows
    assert kappa_lower_psd(x, y, M2, D1, D2).lo <= kappa


def test_profile_monotone_bracket() -> None:
    kap = Bracket("kappa", Fraction(2), Fraction(3), "exact")
    tau = Bracket("tau", Fraction(1, 100), Fraction(2, 100), "exact")
    p = profile(kap, tau, "1/4", 4)
    assert p.status == "applicable"
    f = lambda k, t: (1 + k / (Fraction(1, 4) - t) ** 2) ** 2  # noqa: E731
    assert p.profile.lo <= f(Fraction(2), Fraction(1, 100))
    assert p.profile.hi >= f(Fraction(3), Fraction(2, 100))
    assert p.profile.ratio < 1.2 * f(Fraction(3), Fraction(2, 100)) / f(2, Fraction(1, 100))
    lp = p.log_profile
    with mpmath.workdps(50):
        lo_f = f(Fraction(2), Fraction(1, 100))
        hi_f = f(Fraction(3), Fraction(2, 100))
        mp = lambda q: mpmath.mpf(q.numerator) / q.denominator  # noqa: E731
        assert mp(lp.lo) <= mpmath.log(mp(lo_f))
        assert mpmath.log(mp(hi_f)) <= mp(lp.hi)
    assert lp.hi - lp.lo < 1
    assert profile(kap, Bracket("tau", Fraction(1, 4), Fraction(1, 3), "exact"),
                   "1/4", 4).status == "not applicable"
    assert profile(kap, Bracket("tau", Fraction(1, 5), Fraction(1, 3), "exact"),
                   "1/4", 4).status == "undecided"


@pytest.mark.parametrize("kw,field", [
    ({"G": np.zeros((2, 2))}, "G"),
    ({"G": [[1.0, 2.0], [2.0, 4.0]]}, "G"),
    ({"G": np.full((2, 2), np.nan)}, "G"),
    ({"a": [np.nan, 0.0]}, "a"),
    ({"c": [0.0]}, "c"),
    ({"rects": [[0, 1, 0, 9]]}, "rects"),
    ({"rects": [[0, 1, 0]]}, "rects"),
    ({"M": np.ones((5, 4)), "D1": np.ones(5), "D2": np.ones(4)}, "M"),
    ({"M": np.zeros((5, 4)), "D1": -np.ones(5), "D2": np.ones(4)}, "D1"),
    ({"M": np.zeros((5, 4)), "D1": np.ones(5)}, "D2"),
])
def test_bad_kappa_witness(kw, field) -> None:
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((4, 2))
    with pytest.raises(InputError) as e:
        kappa_bracket(X, Y, **kw)
    assert e.value.field == field


def test_bad_radius_input() -> None:
    with pytest.raises(InputError) as e:
        radius_bracket(np.array([[np.nan, 1.0]]))
    assert e.value.field == "Q"
    with pytest.raises(InputError) as e:
        native_size(np.ones((3, 2)), np.ones((3, 3)))
    assert e.value.field == "K"
    with pytest.raises(InputError) as e:
        radius_bracket(np.ones((3, 2)), weights=[0.0, 0.0, 0.0])
    assert e.value.field == "weights_q"


@pytest.mark.parametrize("seed", range(5))
def test_tampered_gauge_on_grid_never_below_kappa(seed: int) -> None:
    g = grid_family(2, 5, "1/4")
    X, Y, a, c, _ = _grid_witness(g)
    exact = Fraction(int(sympy.simplify(g.kappa / g.s))) * len(g.points) ** 2
    rng = np.random.default_rng(seed)
    G = np.eye(2) + rng.standard_normal((2, 2)) * 10.0 ** rng.integers(-12, 0)
    a2 = a @ G + rng.standard_normal(2) * 10.0 ** rng.integers(-12, 0)
    c2 = c @ np.linalg.inv(G) + rng.standard_normal(2) * 10.0 ** rng.integers(-12, 0)
    ub = kappa_upper(X, Y, G, a2, c2)
    assert ub.hi >= exact
    # the exact witness itself is tight
    assert kappa_upper(X, Y, None, a, c).hi <= exact * TOL


@pytest.mark.parametrize("seed", range(6))
def test_every_lower_below_every_upper(seed: int) -> None:
    # any proved lower bound (rectangles, variance dual with arbitrary weights, PSD dual from
    # arbitrary weights) must lie below any proved upper bound (arbitrary gauges and centres)
    rng = np.random.default_rng(300 + seed)
    r = 2 + seed % 2
    X, Y = rng.standard_normal((7, r)), rng.standard_normal((6, r)) * 2
    lows = [kappa_lower_rectangles(X, Y, rng.integers(0, 6, size=(10, 4))).lo]
    for _ in range(3):
        lam = rng.random(7) * (rng.random(7) < 0.7) + 1e-3
        mu = rng.random(6) * (rng.random(6) < 0.7) + 1e-3
        lows.append(kappa_lower_variance(X, Y, lam, mu).lo)
        # PSD dual from the same weights: M = diag(l) X~ Y~^T diag(u) centred is a valid
        # direction; D1 = l, D2 = u scaled up to make it PSD (the kernel checks, not us)
        l, u = lam / lam.sum(), mu / mu.sum()
        Xt, Yt = X - l @ X, Y - u @ Y
        M = (l[:, None] * (Xt @ Yt.T)) * u[None, :]
        M = np.round(M * 2.0**30) / 2.0**30
        M[:, -1] = -M[:, :-1].sum(axis=1)
        M[-1, :-1] = -M[:-1, :-1].sum(axis=0)
        M[-1, -1] = -M[-1, :-1].sum()
        s = np.abs(M).sum() * 2
        lows.append(kappa_lower_psd(X, Y, M, l * s + 1e-12, u * s + 1e-12).lo)
    ups = []
    for _ in range(3):
        G = rng.standard_normal((r, r)) + 2 * np.eye(r)
        ups.append(kappa_upper(X, Y, G).hi)
        ups.append(kappa_upper(X, Y, G, rng.standard_normal(r), rng.standard_normal(r)).hi)
    assert max(lows) <= min(ups)
    assert max(lows) > 0


# --- reductions over balls and near the float maximum --------------------------------------

def test_max_row_sum_bound_takes_the_largest_upper_end_of_overlapping_balls() -> None:
    """Regression: ||W||_2^2 was bounded by Python's max over arb balls, which compares with
    arb's ">" (False for overlapping balls) and so kept the first row's ball even where a
    later row's value lies above that ball's upper end; the variance dual then divided by
    too small a norm (a lower bound of kappa that could exceed kappa)."""
    from flint import arb, arb_mat

    from softrank.certify.intrinsic.kappa import max_abs_row_sum_upper
    from softrank.certify.numerics.arbutil import endpoints, precision

    with precision(128):
        first = arb(1, 2.0**-100)  # [1 - 2^-100, 1 + 2^-100]
        second = arb(1 + 2.0**-100, 2.0**-99)  # up to 1 + 3 * 2^-100
        M = arb_mat(2, 2)
        M[0, 0], M[1, 0] = first, second
        assert max([first, second]) is first  # the old reduction's pick
        assert endpoints(first)[1] < endpoints(second)[1]
        bound = max_abs_row_sum_upper(M)
    assert bound is not None and bound >= endpoints(second)[1]
    assert max_abs_row_sum_upper(arb_mat(0, 3)) is None  # no rows: no bound


def test_midrange_centres_near_the_float_maximum() -> None:
    """Regression: the default centre (max + min) / 2 overflowed for coordinates near the
    float maximum (an InputError for a valid radius input; a non-finite centre for kappa's
    gauge).  Now the halves are added: the radius bracket contains the exact radius."""
    from softrank.certify.intrinsic.kappa import kappa_upper
    from softrank.certify.intrinsic.radius import radius_sq_bracket

    P = np.array([[1.0e308], [1.7e308]])
    br = radius_sq_bracket(P)
    exact = ((Fraction(1.7e308) - Fraction(1.0e308)) / 2) ** 2
    assert br.lo <= exact <= br.hi and br.hi <= exact * (1 + Fraction(1, 10**12))
    X = np.array([[1.0e308, 1.0], [1.7e308, 2.0]])
    Y = np.array([[1.0, 0.0], [0.0, 1.0]])
    kb = kappa_upper(X, Y)
    # rad(X) rad(Y) with the exact midrange centres, as an upper bound of kappa
    rx2 = (Fraction(0.35e308) * (1 + Fraction(1, 10**12))) ** 2 + Fraction(1, 4)
    assert kb.hi is not None and kb.hi ** 2 <= rx2 * Fraction(1, 2) * (1 + Fraction(1, 10**9))
