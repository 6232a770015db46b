"""The oracle decides small cells: every 3 x 3 cell, 4 x 4 cells, two-row/two-column cells of
any length; each decision is re-checked by arguments independent of the oracle's code."""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import replace
from fractions import Fraction as F

import flint
import pytest
import sympy

from softrank.exact import oracle, verify_result
from softrank.exact.minors import minor_range, singular_witness
from softrank.exact.polytope import in_row_set, row_points
from softrank.exact.rankone import RankOneWitness, rank_one_search, searchable
from softrank.exact.subspace import subspace_search, verify_search
from softrank.exact.thin import thin_rank_one, verify_thin_refutation

from .test_exact_oracle import independent_check


def random_cell(rng: random.Random, m: int, n: int, stochastic: bool) -> list[list[F]]:
    A = [[F(rng.randint(0, 10), rng.randint(1, 10)) for _ in range(n)] for _ in range(m)]
    if stochastic:
        A = [[x / sum(r) for x in r] if sum(r) else [F(1, n)] * n for r in A]
    return A


def brute_det_range(A, eps, stochastic):
    """Independent range of det B over vertex products: sympy determinants of every product
    of a brute-force vertex set (all points of the admissible set with n - 1 active
    constraints, found by solving every choice of active constraints)."""
    n = len(A)
    pts = [brute_vertices(a, eps, stochastic) for a in A]
    vals = [sympy.Matrix([[sympy.Rational(x.numerator, x.denominator) for x in r]
                          for r in rows]).det() for rows in itertools.product(*pts)]
    return min(vals), max(vals), n


def brute_vertices(a, eps, stochastic):
    """Vertices of {b: ||b - a||_1 <= eps} (and b >= 0, sum b = 1): every solution of n active
    constraints among the 2^n facets s.(b - a) <= eps (and b_j >= 0, sum b = 1)."""
    n = len(a)
    cons = [(list(s), eps + sum(si * ai for si, ai in zip(s, a, strict=True)))
            for s in itertools.product((1, -1), repeat=n)]
    eqs = []
    if stochastic:
        cons += [([-int(k == j) for k in range(n)], F(0)) for j in range(n)]
        eqs = [([1] * n, F(1))]
    out = set()
    for active in itertools.combinations(cons, n - len(eqs)):
        rows = [c[0] for c in list(active) + eqs]
        rhs = [c[1] for c in list(active) + eqs]
        M = flint.fmpq_mat(n, n, [flint.fmpq(int(x)) for r in rows for x in r])
        if M.det() == 0:
            continue
        sol = M.solve(flint.fmpq_mat(n, 1, [flint.fmpq(x.numerator, x.denominator)
                                            for x in rhs]))
        b = tuple(F(int(sol[j, 0].p), int(sol[j, 0].q)) for j in range(n))
        if in_row_set(b, a, eps, stochastic):
            out.add(b)
    return sorted(out)


@pytest.mark.parametrize("stochastic", [False, True])
def test_row_points_contain_every_vertex(stochastic):
    rng = random.Random(5)
    for _ in range(40):
        n = rng.randint(2, 4)
        a = [F(rng.randint(0, 9), 10) for _ in range(n)]
        eps = F(rng.randint(1, 9), 10)
        pts = set(row_points(a, eps, stochastic))
        assert all(in_row_set(p, a, eps, stochastic) for p in pts)
        assert set(brute_vertices(a, eps, stochastic)) <= pts


def test_every_3x3_cell_is_decided():
    """300 random 3 x 3 cells (denominators <= 10, eps in tenths, both modes) all decided;
    full-rank answers are re-derived from an independent determinant range."""
    rng = random.Random(17)
    count = 0
    for c in range(150):
        eps = F(rng.randint(1, 9), 10)
        for stochastic in (False, True):
            A = random_cell(rng, 3, 3, stochastic)
            res = oracle(A, eps, stochastic, budget=30)
            independent_check(res)
            assert res.decided, (A, eps, stochastic, res.notes)
            count += 1
            if c % 10 == 0 and res.rank in (2, 3):
                lo, hi, _ = brute_det_range(A, eps, stochastic)
                assert (res.rank == 3) == (lo > 0 or hi < 0)
    assert count == 300


def test_gauge_cell_is_decided():
    x, y, z = F("0.53"), F("0.07"), F("0.20")
    A = [[x, y, z, z], [y, x, z, z], [z, z, x, y], [z, z, y, x]]
    for stochastic in (False, True):
        res = oracle(A, "1/4", stochastic)
        independent_check(res)
        assert res.decided and res.rank == 3


def test_4x4_cells_quick():
    rng = random.Random(23)
    for c in range(6):
        st = c % 2 == 1
        A = random_cell(rng, 4, 4, st)
        res = oracle(A, F(rng.randint(1, 9), 10), st, budget=60)
        independent_check(res)
        assert res.decided, res.notes


@pytest.mark.slow
def test_4x4_cells_98_percent():
    count = int(os.environ.get("SOFTRANK_ORACLE_CELLS", "50"))
    rng = random.Random(29)
    decided = 0
    for c in range(count):
        st = c % 2 == 1
        A = random_cell(rng, 4, 4, st)
        res = oracle(A, F(rng.randint(1, 9), 10), st, budget=60)
        independent_check(res)
        decided += res.decided
    assert decided >= 0.98 * count


@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.parametrize("shape", [(2, 8), (2, 13), (9, 2), (2, 20)])
def test_two_row_and_two_column_cells_any_length(shape, stochastic):
    rng = random.Random(shape[0] * 100 + shape[1])
    for _ in range(2):
        A = random_cell(rng, *shape, stochastic)
        eps = F(rng.randint(1, 9), 10)
        res = oracle(A, eps, stochastic, complete=True)
        independent_check(res)
        assert res.decided


@pytest.mark.parametrize("stochastic", [False, True])
def test_thin_decision_agrees_with_complete_search(stochastic):
    rng = random.Random(41)
    for _ in range(60):
        shape = rng.choice([(2, 3), (2, 4), (3, 2), (5, 2)])
        if not searchable(*shape, stochastic):
            continue
        A = [[F(rng.randint(-2, 9), rng.randint(1, 6)) for _ in range(shape[1])]
             for _ in range(shape[0])]
        eps = F(rng.randint(1, 19), 20)
        thin, data = thin_rank_one(A, eps, stochastic)
        full = rank_one_search(A, eps, stochastic)
        assert (thin == "witness") == isinstance(full, RankOneWitness)
        if thin == "refutation":
            assert verify_thin_refutation(A, eps, stochastic, data)


def test_tampered_minor_certificate_rejected():
    A = [[F(1), F(0), F(0)], [F(0), F(1), F(0)], [F(0), F(0), F(1)]]
    res = oracle(A, "1/4")
    assert res.rank == 3
    mr = minor_range(A, F(1, 4), False, (0, 1, 2), (0, 1, 2))
    assert mr.sign_invariant
    res.lower_certificate = replace(res.lower_certificate, kind="minor-sign", bound=3,
                                    data={"minor": mr})
    assert verify_result(res) == []
    bad = replace(mr, lo=F(-1))  # claims a range the vertices do not give
    res.lower_certificate = replace(res.lower_certificate, data={"minor": bad})
    assert verify_result(res) != []
    # the gauge cell's determinant range contains 0: an exact singular admissible B exists
    x, y, z = F("0.53"), F("0.07"), F("0.20")
    G = [[x, y, z, z], [y, x, z, z], [z, z, x, y], [z, z, y, x]]
    assert not minor_range(G, F(1, 4), False, range(4), range(4)).sign_invariant
    B = singular_witness(G, F(1, 4), False)
    assert sympy.Matrix(B).det() == 0
    assert all(in_row_set(b, a, F(1, 4), False) for a, b in zip(G, B, strict=True))


def test_tampered_search_rejected():
    x, y, z = F("0.53"), F("0.07"), F("0.20")
    A = [[x, y, z, z], [y, x, z, z], [z, z, x, y], [z, z, y, x]]
    eps = F(1, 4)
    found = subspace_search(A, eps, 2, False, budget=60)
    assert found.status == "infeasible"
    assert verify_search(A, eps, 2, False, found.leaves)
    assert not verify_search(A, eps, 2, False, found.leaves[1:])  # a hole in the cover
    leaf = found.leaves[0]
    if leaf.lam is not None:
        worse = replace(leaf, lam=tuple(reversed(leaf.lam)) if len(set(leaf.lam)) > 1
                        else tuple(F(0) for _ in leaf.lam))
    else:
        worse = replace(leaf, z=tuple(-v for v in leaf.z))
    assert not verify_search(A, eps, 2, False, [worse, *found.leaves[1:]])
    # at a larger eps the same leaves prove nothing
    assert not verify_search(A, F(9, 10), 2, False, found.leaves)


def test_feasible_search_gives_exact_witness():
    # rank 2 exactly: the search at r = 2 must find an admissible B of rank <= 2
    A = [[F(1), F(0), F(1), F(0)], [F(0), F(1), F(0), F(1)], [F(1), F(1), F(1), F(1)],
         [F(1, 2), F(1, 2), F(1, 2), F(1, 2)]]
    found = subspace_search(A, F(1, 10), 2, False, budget=60)
    assert found.status == "feasible"
    err = max(sum(abs(a - b) for a, b in zip(ra, rb, strict=True))
              for ra, rb in zip(A, found.B, strict=True))
    assert err <= F(1, 10) and sympy.Matrix(found.B).rank() <= 2


def test_budget_exhaustion_keeps_a_valid_bracket():
    x, y, z = F("0.53"), F("0.07"), F("0.20")
    A = [[x, y, z, z], [y, x, z, z], [z, z, x, y], [z, z, y, x]]
    res = oracle(A, "1/4", budget=1e-9)
    independent_check(res)
    assert res.lower <= 3 <= res.upper
    if not res.decided:
        assert any("budget" in note for note in res.notes)
