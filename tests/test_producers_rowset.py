"""rowset (row sets I with one sign vector per orthant): every certificate it emits is rechecked
here in exact rational arithmetic; the rank it claims is the exact LP optimum's verdict for its
rows, never above an independent upper end; it is deterministic and honours its budget."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower, check_upper
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers import rowset as rs
from softrank.witnesses.producers._common import clock

from .helpers import exact_orthant_min

EPS = Fraction(1, 4)


def attention(n: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = beta * rng.standard_normal((n, d)) @ rng.standard_normal((d, n)) / np.sqrt(d)
    return softmax64(S)


def exact_value(A: np.ndarray, I: np.ndarray, Z: np.ndarray) -> Fraction:
    """min over patterns s and rows i of sigma_i(s) (A[I] z_s)_i in exact rationals, with the
    sign patterns written out in the test helpers, independently of the producer and kernel."""
    return exact_orthant_min([[Fraction(float(a)) for a in A[i]] for i in I], Z)


# seed 0 runs by default; the other seeds (10-20 s each at budget 20) with the slow tests
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_certificate_holds_exactly(seed):
    A = attention(12, 4, 3.0, seed)
    c = rs.RowSet(budget=20.0).produce(A, EPS)
    assert c is not None and c.kind == "rowset"
    I, Z = c.arrays["I"], c.arrays["Z"]
    assert I.dtype == np.int64 and len(set(I.tolist())) == c.rank == len(I)
    assert Z.shape == (1 << (c.rank - 1), A.shape[1]) and np.all(np.abs(Z) <= 1.0)
    v = exact_value(A, I, Z)
    assert v > EPS
    assert abs(float(EPS / v) - c.claims["rowset_value"]) < 1e-9
    assert check_lower(A, {"kind": "rowset", "rank": c.rank, "I": I, "Z": Z}, EPS,
                       tier="exact").status == "holds"


@pytest.mark.parametrize("seed", [4, pytest.param(5, marks=pytest.mark.slow)])
def test_rank_never_above_a_verified_upper_end(seed):
    A = attention(10, 3, 4.0, seed)
    c = rs.RowSet(budget=20.0).produce(A, EPS)
    assert c is not None
    U, s, Vt = np.linalg.svd(A)
    k = next(k for k in range(1, 11)
             if check_upper(A, U[:, :k] * s[:k], Vt[:k], EPS).status == "holds")
    assert c.rank <= k


def test_orthant_lp_is_the_exact_row_set_value():
    # rows with disjoint supports: every orthant reaches 1 (z = sigma on each support)
    A = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    for sigma in rs.patterns(3):
        lam, z = rs.orthant(A, sigma)
        assert lam == pytest.approx(1.0) and np.all(np.abs(z) <= 1.0)
    # two equal rows: the pattern (+, -) cannot be reached at all
    B = np.array([[0.25, 0.75], [0.25, 0.75]])
    lam, _ = rs.orthant(B, np.array([1.0, -1.0]))
    assert lam == pytest.approx(0.0, abs=1e-9)
    assert rs.RowSet(budget=5.0).produce(B, EPS).rank == 1


def test_patterns_follow_the_certificate_order():
    S = rs.patterns(4)
    assert S.shape == (8, 4) and np.all(S[:, 0] == 1)
    assert S[5].tolist() == [1.0, -1.0, 1.0, -1.0]  # bits 0 and 2 of s = 5


def test_deterministic_and_registered():
    A = attention(12, 4, 3.0, 7)
    a = rs.RowSet(budget=20.0).produce(A, EPS)
    b = get_producer("rowset").__class__(budget=20.0).produce(A, EPS)
    assert a.rank == b.rank
    assert np.array_equal(a.arrays["I"], b.arrays["I"])
    assert np.array_equal(a.arrays["Z"], b.arrays["Z"])


def test_budget_from_environment_and_respected(monkeypatch):
    monkeypatch.setenv(rs.BUDGET_ENV, "0.25")
    p = get_producer("rowset")
    assert p.budget == 0.25
    A = attention(64, 8, 3.0, 1)
    t = time.monotonic()
    c = p.produce(A, EPS)
    # one LP may finish after the deadline; the search stops at the next one
    assert time.monotonic() - t < 5.0
    if c is not None:
        assert check_lower(A, {"kind": "rowset", "rank": c.rank, **c.arrays}, EPS,
                           tier="exact").status == "holds"


def test_nothing_claimed_when_no_row_exceeds_eps():
    A = np.full((3, 8), 1 / 32)  # every row has l1 norm 1/4 = eps
    assert rs.RowSet(budget=5.0).produce(A, EPS) is None


def test_mixing_rows_never_lowers_the_value_and_keeps_rows_within_norm_one():
    A = attention(12, 4, 3.0, 3)
    I = [0, 5, 9]
    D = rs.selection(I, 12)
    v0, Z = rs._orthants(D @ A, clock() + 60)
    D2 = rs._mix_step(A, D, Z)
    assert all(sum(abs(Fraction(float(x))) for x in row) <= 1 for row in D2)
    v1, _ = rs._orthants(D2 @ A, clock() + 60)
    assert v1 >= v0 - 1e-12


def test_a_mixture_reaches_past_its_row_set_and_the_kernel_confirms_it():
    # seed 0: mixing these rows lifts the smallest orthant optimum from 0.34 to 0.75
    A = attention(12, 4, 3.0, 0)
    I = [0, 5, 9]
    D = rs.selection(I, 12)
    v0, _ = rs._orthants(D @ A, clock() + 60)
    goal = v0 * (1 + 1e-3)  # the rows alone do not reach it
    found = rs.compress(A, I, goal, clock() + 20)
    assert found is not None
    D2, Z2, v = found
    assert v > goal
    c = check_lower(A, {"kind": "rowmix", "rank": 3, "D": D2, "Z": Z2}, Fraction(goal),
                    tier="exact")
    assert c.status == "holds"
    assert check_lower(A, {"kind": "rowmix", "rank": 3, "D": D, "Z": Z2}, Fraction(goal),
                       tier="exact").status == "fails"


@pytest.mark.parametrize("seed", [0, 1])
def test_warm_started_orthants_agree_with_one_lp_per_pattern(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    A = attention(40, 5, 3.0, seed)
    for trial in range(6):
        p = int(rng.integers(2, 7))
        M = A[rng.choice(40, p, replace=False)] if trial % 2 else rng.standard_normal((p, 40))
        lps = rs.Orthants(M)
        for sigma in rs.patterns(p)[rng.permutation(1 << (p - 1))]:  # any order, many flips
            lam, z = lps.solve(sigma)
            ref, _ = rs.orthant(M, sigma)
            assert np.all(np.abs(z) <= 1.0)
            assert lam == float(np.min(sigma * (M @ z)))  # the value is z's, not the solver's
            assert lam == pytest.approx(ref, rel=1e-7, abs=1e-9)  # two solvers' tolerances
    # without the binding it is the plain LP
    monkeypatch.setattr(rs, "lp_model", lambda *a, **k: None)
    M = A[:3]
    assert rs.Orthants(M).h is None
    for sigma in rs.patterns(3):
        assert rs.Orthants(M).solve(sigma)[0] == rs.orthant(M, sigma)[0]


def test_fit_rows_are_distinct_rows_of_a_and_respect_the_deadline():
    A = attention(60, 6, 3.0, 5)
    rows = rs._fit_rows(A, 3, clock() + 30)
    assert len(rows) == len(set(rows)) == rs.GUIDE_ROWS
    assert all(0 <= r < 60 for r in rows)
    t = time.monotonic()
    late = rs._fit_rows(A, 3, clock() - 1.0)  # past the deadline: the start's rows, at once
    assert len(set(late)) == rs.GUIDE_ROWS and time.monotonic() - t < 2.0


def test_guided_search_finds_a_set_its_start_misses_and_the_kernel_confirms_it():
    A = attention(30, 6, 3.0, 11)
    sets = rs._RowSets(A, clock() + 60)
    start = [0, 1, 2, 3]
    v0, _ = sets.value(start)
    found, J, v = rs._guided(sets, A, start, v0 * 1.05, clock() + 20)
    assert v > v0 * 1.05 if found is None else found[1] > v0 * 1.05
    K, vk, Zk = found if found is not None else (J, v, sets.value(J)[1])
    assert len(set(K)) == 4
    assert exact_value(A, np.asarray(K), Zk) == pytest.approx(vk, rel=1e-9)
    assert check_lower(A, {"kind": "rowset", "rank": 4, "I": np.asarray(K, dtype=np.int64),
                           "Z": Zk}, Fraction(v0), tier="exact").status == "holds"
