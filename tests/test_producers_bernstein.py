"""bernstein (subspace certificates W, P, J): every certificate it emits is rechecked here in
exact rational arithmetic (W[J] = I, ||P A W - W||_inf + eps ||P||_inf < 1); it is
deterministic, reads its budget from the environment, and emits the agreed arrays."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import bernstein as bn
from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers._common import budget_settings, clock
from softrank.witnesses.producers.lower import KeySetDecoder

EPS = Fraction(1, 4)


def attention(n: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = beta * rng.standard_normal((n, d)) @ rng.standard_normal((d, n)) / np.sqrt(d)
    return softmax64(S)


def exact_value(A: np.ndarray, W: np.ndarray, P: np.ndarray, J: np.ndarray,
                eps: Fraction) -> Fraction | None:
    """||P A W - W||_inf + eps ||P||_inf in exact rationals; None when W[J] is not I."""
    p = W.shape[1]
    Q = [[Fraction(float(v)) for v in row] for row in W]
    if len(set(J.tolist())) != p or any(Q[int(J[i])][k] != (1 if i == k else 0)
                                        for i in range(p) for k in range(p)):
        return None
    Af = [[Fraction(float(v)) for v in row] for row in A]
    Pf = [[Fraction(float(v)) for v in row] for row in P]
    m, N = A.shape
    AW = [[sum(Af[i][j] * Q[j][k] for j in range(N) if Q[j][k]) for k in range(p)]
          for i in range(m)]
    worst_R = max(sum(abs(sum(Pf[j][i] * AW[i][k] for i in range(m) if Pf[j][i]) - Q[j][k])
                      for k in range(p)) for j in range(N))
    norm_P = max(sum(abs(v) for v in row) for row in Pf)
    return worst_R + eps * norm_P


def produce(A, budget=20.0):
    return bn.Bernstein(budget=budget).produce(A, EPS)


@pytest.mark.parametrize("seed", [0, 3])
def test_certificate_holds_exactly_and_not_below_keyset(seed):
    A = attention(16, 6, 3.0, seed)
    c = produce(A)
    assert c is not None and c.kind == "bernstein"
    W, P, J = c.arrays["W"], c.arrays["P"], c.arrays["J"]
    v = exact_value(A, W, P, J, EPS)
    assert v is not None and v < 1
    assert abs(float(v) - c.claims["bernstein_value"]) < 1e-9
    k = KeySetDecoder().produce(A, EPS)
    assert c.rank >= (0 if k is None else k.rank)


def test_the_recheck_rejects_tampered_certificates():
    A = attention(16, 6, 3.0, 0)
    c = produce(A)
    W, P, J = c.arrays["W"], c.arrays["P"], c.arrays["J"]
    assert exact_value(A, W, 4.0 * P, J, EPS) >= 1  # eps ||4P|| and the residual blow up
    W2 = W.copy()
    W2[J[0], 0] = np.nextafter(1.0, 2.0)  # W[J] one ulp away from I
    assert exact_value(A, W2, P, J, EPS) is None


def test_emits_exactly_the_agreed_arrays():
    A = attention(12, 4, 3.0, 1)[:, :10]  # m = 12 queries, N = 10 keys
    c = produce(A)
    assert c is not None
    p = c.rank
    mp = c.to_mapping()
    if mp["kind"] == "polytope":  # the search missed rank p and its subspace's lift reached it
        assert set(mp) == {"kind", "rank", "Y", "I", "F", "Z", "G"} and mp["rank"] == p
        k, f = len(mp["I"]), len(mp["F"])
        assert mp["Y"].shape == (k, p) and mp["Y"].dtype == np.float64
        # integer arrays of any width (the format's "int"; the lift stores the narrowest)
        assert mp["I"].dtype.kind == "i" and mp["I"].min() >= 0 and mp["I"].max() < 12
        assert mp["F"].shape == (f, p) and mp["F"].dtype.kind == "i" and mp["F"].max() < 2 * k
        assert mp["Z"].shape[1] == 10 and np.abs(mp["Z"]).max() <= 1.0
        assert mp["G"].shape == (f,) and mp["G"].dtype.kind == "i"
        assert mp["G"].max() < len(mp["Z"])
        assert mp["Z"].dtype in (np.float32, np.float64)
        assert check_lower(A, mp, EPS, tier="exact").status == "holds"
        # the search's own end, one rank lower, in the bernstein layout
        found = bn.search(A, float(EPS), 20.0)
        assert found is not None and found[0] == p - 1
        kind, p, arrays, _, _ = bn.Bernstein()._parts(found)
        mp = {"kind": kind, "rank": p, **arrays}
    assert set(mp) == {"kind", "rank", "W", "P", "J"}
    assert mp["kind"] == "bernstein" and mp["rank"] == p
    assert mp["W"].shape == (10, p) and mp["W"].dtype == np.float64
    assert mp["P"].shape == (10, 12) and mp["P"].dtype == np.float64
    assert mp["J"].shape == (p,) and mp["J"].dtype == np.int64
    assert len(set(mp["J"].tolist())) == p and mp["J"].min() >= 0 and mp["J"].max() < 10
    assert np.array_equal(mp["W"][mp["J"]], np.eye(p))


def test_deterministic():
    A = attention(16, 6, 3.0, 5)
    a, b = produce(A), produce(A)
    assert a.rank == b.rank
    for k in ("W", "P", "J"):
        assert np.array_equal(a.arrays[k], b.arrays[k])


def test_descent_never_worse_than_its_start_and_row_values_are_the_lp_optimum():
    A = attention(16, 6, 3.0, 3)
    rng = np.random.default_rng(0)
    W0 = rng.standard_normal((16, 5))
    W, _ = bn.normalise(W0)
    f, P, X = bn.row_values(A, W)
    # primal feasibility and strong duality (f_j = W_j . x_j, ||A W x_j||_inf <= 1)
    assert np.allclose(P @ A @ W, W, atol=1e-7)
    assert np.allclose(np.abs(P).sum(axis=1), f)
    assert np.allclose((W * X).sum(axis=1), f, rtol=1e-7)
    assert np.abs(A @ W @ X.T).max() <= 1 + 1e-7
    F, W1 = bn.descend(A, W0, 0.0, clock() + 30, steps=8)
    assert F <= f.max() * (1 + 1e-9)
    assert bn.row_values(A, bn.normalise(W1)[0])[0].max() == pytest.approx(F, rel=1e-6)


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv(bn.BUDGET_ENV, "2.5")
    assert bn.Bernstein().budget == 2.5
    for bad in ("nan", "-1", "x", "inf"):
        monkeypatch.setenv(bn.BUDGET_ENV, bad)
        assert bn.Bernstein().budget == bn.DEFAULT_BUDGET
    monkeypatch.setenv(bn.BUDGET_ENV, "0.05")
    A = attention(48, 12, 3.0, 2)
    t0 = time.perf_counter()
    c = get_producer("bernstein").produce(A, EPS)
    # two phases of 0.05 s each, plus the LPs under way when a deadline passes
    assert time.perf_counter() - t0 < 5.0
    if c is not None:
        assert exact_value(A, c.arrays["W"], c.arrays["P"], c.arrays["J"], EPS) < 1
    assert get_producer("bernstein").role == "lower"


def test_augmented_start_keeps_the_subspace_and_adds_an_uncovered_key():
    A = attention(16, 6, 3.0, 1)
    W = np.zeros((16, 2))
    W[[0, 1], 0] = 1.0
    W[[2, 3], 1] = 1.0
    J = np.array([0, 2])
    W0 = bn.augmented_start(A, W, J, None, clock() + 30)
    assert W0 is not None and W0.shape == (16, 3)
    assert np.array_equal(W0[:, :2], W)
    new = W0[:, 2]
    (j,) = np.flatnonzero(new)
    assert new[j] == 1.0 and j not in J
    assert j >= 4  # W is 0/1 with rows 0..3 covered: a key it leaves out comes first
    # it is the best of its candidates: the SINGLETONS heaviest keys outside rows 0..3
    mass = A.sum(axis=0)
    mass[:4] = -np.inf
    best = bn.row_values(A, bn.normalise(W0)[0])[0].max()
    for k in np.argsort(-mass)[:bn.SINGLETONS]:
        e = np.zeros((16, 1))
        e[k] = 1.0
        r = bn.row_values(A, bn.normalise(np.hstack([W, e]))[0])
        assert r is None or r[0].max() >= best * (1 - 1e-9)


def test_augmented_start_from_the_certified_minimisers_picks_the_same_column(monkeypatch):
    # the minimisers of W, corrected, are feasible for every candidate [W, w]: the bounds only
    # order and skip row LPs, so the column chosen is the one the full solves choose
    A = attention(24, 8, 3.0, 1)
    W, J = bn.normalise(np.linalg.svd(A)[2][:4].T)
    P = bn.row_values(A, W)[1]
    W_next = np.linalg.svd(A)[2][:5].T
    solved = []
    real = bn._RowLP.solve
    monkeypatch.setattr(bn._RowLP, "solve", lambda self, c: solved.append(1) or real(self, c))
    full = bn.augmented_start(A, W, J, W_next, clock() + 30)
    n_full = len(solved)
    solved.clear()
    skip = bn.augmented_start(A, W, J, W_next, clock() + 30, prev=P)
    assert full is not None and skip is not None and np.array_equal(full, skip)
    assert len(solved) < n_full


@pytest.mark.parametrize("seed", [2, 4])
def test_growth_phase_never_lowers_the_rank(seed, monkeypatch):
    A = attention(24, 8, 4.0, seed)
    full = bn.search(A, float(EPS), 20.0)
    monkeypatch.setattr(bn, "augmented_start", lambda *a, **k: None)
    base = bn.search(A, float(EPS), 20.0)
    assert full is not None and base is not None and full[0] >= base[0]
    v = exact_value(A, full[1], full[2], full[3], EPS)
    assert v is not None and v < 1


def test_descent_starts_are_the_l1fit_and_svd_subspaces():
    A = attention(16, 6, 3.0, 1)
    Vt = np.linalg.svd(A)[2]
    starts = bn._descent_starts(A, 3, Vt, 0.25)
    assert [t for t, _ in starts] == ["descent_l1fit", "descent_svd"]
    W0 = [make(clock() + 30) for _, make in starts]
    assert all(W.shape == (16, 3) for W in W0)
    assert np.allclose(W0[1], Vt[:3].T)
    assert np.linalg.matrix_rank(W0[0]) == 3
    assert bn._descent_starts(A, 17, Vt, 0.25) == []


@pytest.mark.parametrize("seed", [0, 5])
def test_descent_climbs_without_the_keyset_path(seed, monkeypatch):
    # the rank loop no longer needs a key-set subspace at every rank: with the path empty,
    # the l1-fit and singular-vector starts alone must still give a certificate that holds
    A = attention(16, 6, 3.0, seed)
    monkeypatch.setattr(bn, "keyset_path", lambda *a, **k: {})
    monkeypatch.setattr(bn, "augmented_start", lambda *a, **k: None)
    found = bn.search(A, float(EPS), 20.0)
    assert found is not None and found[0] >= 1
    assert found[5] in ("descent_l1fit", "descent_svd")
    v = exact_value(A, found[1], found[2], found[3], EPS)
    assert v is not None and v < 1 and abs(float(v) - found[4]) < 1e-9


def test_race_continues_the_best_start():
    A = attention(16, 6, 3.0, 3)
    rng = np.random.default_rng(1)
    calls = []
    real = bn.descend

    def spy(A_, W0, goal, deadline, *, steps=bn.STEPS, radius=0.2):
        calls.append((W0.copy(), steps))
        return real(A_, W0, goal, deadline, steps=steps, radius=radius)

    W0s = [rng.standard_normal((16, 6)) for _ in range(3)]
    starts = [(f"s{i}", (lambda until, W=W: W)) for i, W in enumerate(W0s)]
    orig = bn.descend
    try:
        bn.descend = spy
        out = bn._race(A, starts, 0.0, clock() + 30, 9, 0.25, 10.0)
    finally:
        bn.descend = orig
    # goal 0 is never reached, so every start descends and the best continues
    assert [s for _, s in calls] == [3, 3, 3, 9]  # a third of the steps each, then the best
    assert not any(np.array_equal(calls[3][0], c[0]) for c in calls[:3])  # continued, not restarted
    if out is not None:  # its value is still under the claim budget: the certificate holds
        W, P, J, v, _ = out
        assert exact_value(A, W, P, J, EPS) < 1


@pytest.mark.parametrize("seen, goal, stop", [
    ([2.0, 1.9, 1.8], 1.0, False),  # too short to judge
    ([2.0 - 0.05 * i for i in range(12)], 1.0, False),  # 0.05 a step: 9 steps to go
    ([2.0 - 0.001 * i for i in range(12)], 1.0, True),  # 0.001 a step: ~990 steps to go
    ([1.5] * 12, 1.0, True),  # no progress in the window
    ([1.5] * 11 + [0.99], 1.0, False),  # reached the goal
])
def test_hopeless_projects_the_recent_pace(seen, goal, stop):
    assert bn.hopeless(seen, goal) is stop


def test_descent_towards_an_unreachable_goal_stops_before_its_step_limit(monkeypatch):
    A = attention(16, 6, 3.0, 3)
    W0 = np.random.default_rng(0).standard_normal((16, 5))
    calls = []
    real = bn.row_values

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(bn, "row_values", counted)
    # goal 0 is unreachable (f_j >= |W_j|_inf / ||A||_inf > 0): the pace test must stop it
    F, _ = bn.descend(A, W0, 0.0, clock() + 60, steps=400)
    with_rule = len(calls)
    assert 0 < F < np.inf
    calls.clear()
    monkeypatch.setattr(bn, "hopeless", lambda *a, **k: False)
    F2, _ = bn.descend(A, W0, 0.0, clock() + 60, steps=400)
    # without the pace test only the trust region's collapse stops it, much later
    assert with_rule < len(calls)
    assert F2 <= F * (1 + 1e-9)


def _frontier(A):
    """The rank after the one search reaches without hops, and a descended subspace there."""
    found = bn.search(A, float(EPS), 20.0)
    p = (found[0] if found else 0) + 1
    Vt = np.linalg.svd(A)[2]
    F, W = bn.descend(A, Vt[:p].T, 0.0, clock() + 30, steps=20)
    return p, F, W


def test_hop_never_worse_than_its_start_and_deterministic():
    A = attention(20, 6, 3.0, 4)
    p, F0, W0 = _frontier(A)
    goal = 0.5 * F0  # out of reach: the pace rule or the deadline stops the hops
    a = bn.hop(A, F0, W0, goal, clock() + 60, seed=7)
    b = bn.hop(A, F0, W0, goal, clock() + 60, seed=7)
    assert a[0] <= F0 and a[1].shape == (20, p)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])  # seeded, stopped by the pace rule
    assert bn.row_values(A, bn.normalise(a[1])[0])[0].max() == pytest.approx(a[0], rel=1e-6)
    t0 = time.monotonic()
    c = bn.hop(A, F0, W0, 0.0, clock() + 0.2, seed=7)
    assert time.monotonic() - t0 < 5.0 and c[0] <= F0


@pytest.mark.parametrize("seed, climbs", [(1, True), (7, True), (2, None)])
def test_hops_climb_where_descents_stall(seed, climbs, monkeypatch):
    # descents cut to two steps stall early; hops (with full descents) never lose a rank
    # against no hops, climb past the stall on heads 1 and 7, and every certificate holds
    # (on head 2 whether they climb depends on the path the search takes: no claim)
    A = attention(24, 8, 4.0, seed)
    real_descend, real_hop = bn.descend, bn.hop

    def short(A_, W0, goal, deadline, *, steps=bn.STEPS, radius=0.2):
        return real_descend(A_, W0, goal, deadline, steps=min(steps, 2), radius=radius)

    def hop_full(*a, **k):
        monkeypatch.setattr(bn, "descend", real_descend)
        try:
            return real_hop(*a, **k)
        finally:
            monkeypatch.setattr(bn, "descend", short)

    monkeypatch.setattr(bn, "descend", short)
    monkeypatch.setattr(bn, "hop", hop_full)
    # budgets in work units: with CPU seconds the hops of head 1 ran out before the climb
    # with the clock run 20 times fast (a slow machine)
    with budget_settings("work", 1.0, {}):
        monkeypatch.setattr(bn, "HOP_BUDGETS", 0)
        without = bn.search(A, float(EPS), 5.0)
        monkeypatch.setattr(bn, "HOP_BUDGETS", 3)
        with_hops = bn.search(A, float(EPS), 5.0)
    assert with_hops is not None
    assert with_hops[0] >= (without[0] if without else 0)
    v = exact_value(A, with_hops[1], with_hops[2], with_hops[3], EPS)
    assert v is not None and v < 1
    if climbs is not None:
        assert (with_hops[0] > without[0]) is climbs
    if climbs:
        assert with_hops[5] == "hop"


@pytest.mark.parametrize("near", [True, False])
def test_hops_go_on_past_the_deadline_only_near_the_goal(near, monkeypatch):
    # a fake descent that gains 0.1% a call: past the deadline, hopping continues (until the
    # grace deadline) only while the value is within HOP_NEAR of the goal
    A = attention(12, 4, 2.0, 3)
    W0 = np.linalg.svd(A)[2][:3].T
    goal = 1.0
    state = {"F": bn.HOP_NEAR * goal * (0.995 if near else 1.2)}
    F0 = state["F"]
    calls = []

    def creep(A_, W, goal, deadline, *, steps=bn.STEPS, radius=0.2):
        calls.append(deadline)
        state["F"] *= 0.999
        return state["F"], W

    monkeypatch.setattr(bn, "descend", creep)
    monkeypatch.setattr(bn, "hopeless", lambda seen, goal, **k: False)
    now = clock()  # the producers' deadlines are CPU seconds
    F, _ = bn.hop(A, F0, W0, goal, now - 1.0, seed=1, grace=now + 0.3)
    if near:
        assert calls and all(d == pytest.approx(now + 0.3) for d in calls)
        assert F < bn.HOP_NEAR * goal
    else:
        assert not calls
    assert clock() - now < 5.0


@pytest.mark.parametrize("seed", [1, 2])
def test_step_lp_equals_linprog_at_every_radius_of_a_halving_sequence(seed):
    """The warm-restarted step model (one per descent state, only the box changed between
    radii) against a fresh ``scipy.optimize.linprog`` of the same LP at each radius: the same
    optimum, and a minimiser inside the box that attains it."""
    from scipy.optimize import linprog

    A = attention(16, 6, 3.0, seed)
    W, _ = bn.normalise(np.random.default_rng(seed).standard_normal((16, 4)))
    f, P, X = bn.row_values(A, W)
    lp = bn._StepLP(A, W, f, P, X)
    n = 16 * 4
    for radius in (0.2, 0.1, 0.05, 0.025, 0.3):
        dW = lp.solve(radius, clock() + 30)
        assert lp.A_ub.shape[0] >= 1 and lp.A_ub.shape == (lp.A_ub.shape[0], n + 1)
        ref = linprog(np.r_[np.zeros(n), 1.0], A_ub=lp.A_ub, b_ub=lp.b_ub,
                      bounds=[(-radius, radius)] * n + [(None, None)], method="highs")
        assert ref.status == 0 and dW is not None
        assert np.abs(dW).max() <= radius * (1 + 1e-9)
        # the linearised max of the active rows at dW is the LP optimum
        got = float((lp.A_ub[:, :n] @ dW.ravel() - lp.b_ub).max())
        assert got == pytest.approx(ref.fun, abs=1e-9)
    # the gradient rows are (e_j - A^T P_j) x_j^T of the active rows, as the note says
    j = int(np.argmax(f))
    e = -(A.T @ P[j])
    e[j] += 1.0
    rows = {tuple(np.round(r, 12)) for r in lp.A_ub[:, :n]}
    assert tuple(np.round(np.outer(e, X[j]).ravel(), 12)) in rows


def test_step_lp_past_its_deadline_returns_nothing():
    A = attention(12, 5, 3.0, 0)
    W, _ = bn.normalise(np.random.default_rng(0).standard_normal((12, 3)))
    lp = bn._StepLP(A, W, *bn.row_values(A, W))
    assert lp.solve(0.1, clock() - 1.0) is None


def test_row_values_in_a_given_order_are_the_same_and_exit_early_on_the_worst_row(monkeypatch):
    A = attention(24, 10, 3.0, 5)
    W, _ = bn.normalise(np.random.default_rng(2).standard_normal((24, 6)))
    f, P, X = bn.row_values(A, W)
    g, Q, Y = bn.row_values(A, W, first=-f)  # the worst rows last: every LP still solved
    assert np.allclose(f, g, rtol=1e-9, atol=1e-12)
    assert np.allclose(np.abs(Q).sum(axis=1), g)
    solved = []
    real = bn._RowLP.solve
    monkeypatch.setattr(bn._RowLP, "solve", lambda self, c: solved.append(1) or real(self, c))
    assert bn.row_values(A, W, stop_above=0.999 * f.max(), first=f) is None
    assert len(solved) == 1  # the row that attains the maximum came first
    solved.clear()
    assert bn.row_values(A, W, stop_above=0.999 * f.max(), first=-f) is None
    assert len(solved) == len(np.unique(W, axis=0))  # in the reverse order it came last


@pytest.mark.parametrize("seed", [0, 2])
def test_a_floor_skips_every_rank_at_or_below_it(seed, monkeypatch):
    # another producer's rank L: no subspace of rank <= L is certified or descended, and what
    # comes back (if anything) is above L and holds exactly
    A = attention(24, 8, 4.0, seed)
    free = bn.search(A, float(EPS), 20.0)
    assert free is not None and free[0] >= 2
    floor = free[0] - 1
    tried: list[int] = []
    for name in ("certify_subspace", "descend"):
        real = getattr(bn, name)

        def spy(A_, W, *a, _real=real, **k):
            tried.append(W.shape[1])
            return _real(A_, W, *a, **k)
        monkeypatch.setattr(bn, name, spy)
    got = bn.search(A, float(EPS), 20.0, floor=floor)
    assert tried and min(tried) > floor
    assert got is not None and got[0] > floor
    v = exact_value(A, got[1], got[2], got[3], EPS)
    assert v is not None and v < 1
    tried.clear()
    assert bn.search(A, float(EPS), 2.0, floor=min(A.shape)) is None
    assert tried == []


def test_the_pipeline_hands_bernstein_the_best_earlier_rank(monkeypatch):
    seen: list[int] = []
    real = bn.search

    def spy(*a, floor=0, **k):
        seen.append(floor)
        return real(*a, floor=floor, **k)
    monkeypatch.setattr(bn, "search", spy)
    A = attention(16, 6, 3.0, 1)
    k = KeySetDecoder().produce(A, EPS)
    assert k is not None
    c = get_producer("bernstein").produce(A, EPS, floor=k.rank)
    assert seen == [k.rank]
    assert c is None or c.rank > k.rank


def test_the_keyset_path_gets_path_budgets_and_the_other_phases_one(monkeypatch):
    # in work mode the clock is exact: the path's deadline is PATH_BUDGETS budgets ahead, and
    # the key-set certification after it has one budget of its own
    A = attention(16, 6, 3.0, 2)
    given: list[float] = []
    real_path, real_certify = bn.keyset_path, bn.certify_subspace

    def path_spy(*a, deadline, **k):
        given.append(deadline - clock())
        return real_path(*a, deadline=deadline, **k)

    def certify_spy(A_, W, eps, deadline=None):
        given.append(deadline - clock())
        return real_certify(A_, W, eps, deadline)
    monkeypatch.setattr(bn, "keyset_path", path_spy)
    monkeypatch.setattr(bn, "certify_subspace", certify_spy)
    with budget_settings("work", 1.0):
        bn.search(A, float(EPS), 3.0, ceiling=3)
    assert given[0] == pytest.approx(bn.PATH_BUDGETS * 3.0, abs=0.01)
    assert given[1] <= 3.0 + 0.01  # the first certification: within the next phase's budget



def test_feasible_rows_bound_every_row_optimum_from_above():
    # the minimisers of a nearby subspace, corrected on p rows, are feasible for the new one:
    # their l1 norms bound the row optima from above, and are the optima at the same subspace
    A = attention(24, 10, 3.0, 5)
    rng = np.random.default_rng(2)
    W, _ = bn.normalise(rng.standard_normal((24, 6)))
    f, P, _ = bn.row_values(A, W)
    b, Y = bn.feasible_rows(A @ W, W, P)
    assert np.allclose(b, f, rtol=1e-7, atol=1e-12)
    W2, _ = bn.normalise(W + 0.02 * rng.standard_normal(W.shape))
    f2 = bn.row_values(A, W2)[0]
    b2, Y2 = bn.feasible_rows(A @ W2, W2, P)
    assert np.allclose(Y2 @ (A @ W2), W2, atol=1e-9)
    assert np.all(b2 >= f2 * (1 - 1e-9)) and np.any(b2 > f2 * (1 + 1e-6))
    assert bn.feasible_rows(np.zeros((24, 6)), W2, P) is None  # no p rows of G to solve on


def test_row_values_from_a_nearby_subspace_solve_only_the_rows_near_the_worst(monkeypatch):
    A = attention(24, 10, 3.0, 5)
    rng = np.random.default_rng(2)
    W, _ = bn.normalise(rng.standard_normal((24, 6)))
    P = bn.row_values(A, W)[1]
    W2, _ = bn.normalise(W + 0.02 * rng.standard_normal(W.shape))
    f, _, X = bn.row_values(A, W2)
    solved = []
    real = bn._RowLP.solve
    monkeypatch.setattr(bn._RowLP, "solve", lambda self, c: solved.append(1) or real(self, c))
    g, Q, Y = bn.row_values(A, W2, prev=P)
    assert 0 < len(solved) < len(np.unique(W2, axis=0))  # some rows skipped, not all
    assert g.max() == pytest.approx(f.max(), rel=1e-9)
    act = f >= (1 - bn.ACTIVE) * f.max()  # the rows a descent step uses: the LP optima
    assert np.allclose(g[act], f[act], rtol=1e-7) and np.allclose(Y[act], X[act], atol=1e-7)
    assert np.all(g >= f * (1 - 1e-9))  # the others: upper bounds, each from a feasible row
    assert np.allclose(np.abs(Q).sum(axis=1), g) and np.allclose(Q @ (A @ W2), W2, atol=1e-8)
    solved.clear()
    assert bn.row_values(A, W2, stop_above=0.999 * f.max(), prev=P) is None
    assert len(solved) == 1  # the largest bound is the worst row's


def test_the_hops_start_where_the_last_phase_ran_out(monkeypatch):
    # phases that reach a rank and stop before trying the next leave the hops no failing
    # subspace: the hop phase grows one from the rank reached instead of ending there
    A = attention(24, 8, 4.0, 1)
    real_race, real_aug, real_hop = bn._race, bn.augmented_start, bn.hop
    monkeypatch.setattr(bn, "keyset_path", lambda *a, **k: {})
    monkeypatch.setattr(bn, "_race", lambda *a, **k: real_race(*a, **{**k, "near": None}))
    grown, hops = [], []

    def augment(*a, **k):
        grown.append(a[1].shape[1])
        return None if len(grown) == 1 else real_aug(*a, **k)  # the growth phase: no time

    def hop(A_, F0, W0, *a, **k):
        hops.append(W0.shape[1])
        return real_hop(A_, F0, W0, *a, **k)

    monkeypatch.setattr(bn, "augmented_start", augment)
    monkeypatch.setattr(bn, "hop", hop)
    with budget_settings("work", 1.0, {}):  # CPU seconds ran out with the clock 40x fast
        found = bn.search(A, float(EPS), 1.0)
    assert found is not None and len(grown) >= 2 and hops
    assert hops[0] == grown[1] + 1  # the first hop starts one rank above what was reached
    assert found[0] >= grown[1]
    v = exact_value(A, found[1], found[2], found[3], EPS)
    assert v is not None and v < 1


def test_the_l1fit_start_keeps_to_the_phase_deadline():
    """The start was made by a 300-step alternating-l1 fit with no deadline: at rank 60 of a
    256 x 256 softmax and --budget-scale 0.001 (phases of 0.04 - 0.16 units) the search
    charged 17.8 work units (15 CPU s); each step is now priced against the phase."""
    from softrank.witnesses.producers._common import work_done

    A = attention(256, 256, 3.0, 0)
    with budget_settings(mode="work", scale=0.001):
        w0 = work_done()
        bn.Bernstein().produce(A, Fraction(1, 4), floor=63)
        spent = work_done() - w0
    assert spent < 3.0


@pytest.mark.parametrize("scale", [1.0, 0.001])
def test_the_claim_step_gets_a_scaled_extra_unit(monkeypatch, scale):
    """``_claimable`` gives the certificate step half a phase's budget plus one unit times
    the budget scale: at --budget-scale 0.001 the extra is 0.001 units, not a whole unit
    (25 times a phase's budget there)."""
    given: list[float] = []

    def spy(A, W, eps, deadline=None):
        given.append(deadline - clock())
        return None

    monkeypatch.setattr(bn, "certify_subspace", spy)
    A = softmax64(np.random.default_rng(0).standard_normal((8, 8)))
    with budget_settings(mode="work", scale=scale):
        assert bn._claimable(A, np.eye(8, 2), 0.5, 0.25, 0.04 * scale) is None
    assert len(given) == 1
    assert 0.02 * scale + 0.9 * scale < given[0] <= 0.02 * scale + scale
