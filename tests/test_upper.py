"""Upper witnesses: differential tests against exact rational arithmetic, tiers, bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import InputError, check_upper, exact_error
from softrank.certify.numerics.rowl1 import exact_row_l1, float_row_bounds

from .helpers import exact_row1, plain_float_error, random_attention, tsvd_witness


def _cases(n_cases: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n_cases):
        m, n = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        A = random_attention(rng, m, n, scale=float(rng.uniform(0.5, 4)))
        k = int(rng.integers(0, min(m, n) + 1))
        U, V = tsvd_witness(A, k)
        if rng.random() < 0.3:  # perturb so witnesses are not always near-optimal
            U = U + rng.normal(scale=1e-3, size=U.shape)
        yield A, U, V


def test_differential_against_exact_rationals():
    """>= 200 random cases, eps on both sides of and exactly at the exact error."""
    n_checked = 0
    for A, U, V in _cases(80, seed=1):
        exact = exact_row1(A, (U, V))
        for eps in (exact, exact * (1 + Fraction(1, 10**12)), exact * (1 - Fraction(1, 10**12)),
                    Fraction(1, 4)):
            if eps <= 0:
                continue
            c = check_upper(A, U, V, eps)
            want = "holds" if exact <= eps else "fails"
            assert c.status == want, (c, exact, eps)
            assert c.error.lo <= exact <= c.error.hi
            n_checked += 1
    assert n_checked >= 200


def test_float64_gets_it_wrong_in_both_directions_but_we_do_not():
    """eps placed between the float64 evaluation and the exact error."""
    wrong_hold = wrong_fail = 0
    for A, U, V in _cases(400, seed=2):
        if U.shape[1] == 0:
            continue
        exact = exact_row1(A, (U, V))
        f = Fraction(plain_float_error(A, U, V))
        if f == exact or exact == 0 or f == 0:
            continue
        if f > exact:
            eps = exact  # true: error <= eps; float64 says error > eps
            assert plain_float_error(A, U, V) > eps
            assert check_upper(A, U, V, eps).status == "holds"
            wrong_fail += 1
        else:
            eps = f  # false: exact error > eps; float64 says it holds
            assert check_upper(A, U, V, eps).status == "fails"
            wrong_hold += 1
    assert wrong_hold >= 5 and wrong_fail >= 5


@pytest.mark.parametrize("tier", ["float64", "arb", "exact"])
def test_forced_tiers_agree_with_exact(tier):
    for A, U, V in _cases(30, seed=3):
        exact = exact_row1(A, (U, V))
        for eps in (exact + Fraction(1, 1000), exact, exact - Fraction(1, 10**30)):
            if eps <= 0:
                continue
            c = check_upper(A, U, V, eps, tier=tier)
            assert c.tier == tier
            want = "holds" if exact <= eps else "fails"
            if tier == "float64":
                assert c.status in (want, "undecided")
            else:
                assert c.status == want
            assert exact in c.error


def test_float_bounds_contain_exact_rows_on_larger_matrix():
    rng = np.random.default_rng(4)
    A = random_attention(rng, 64, 48, scale=3.0)
    U, V = tsvd_witness(A, 5)
    lo, hi = float_row_bounds(A, U, V)
    exact = exact_row_l1(A, U, V)
    for i, e in enumerate(exact):
        assert Fraction(float(lo[i])) <= e <= Fraction(float(hi[i]))
    # tight: relative width well below 1e-12
    assert float(np.max((hi - lo) / hi)) < 1e-12


def test_escalation_is_rare_and_row_local():
    rng = np.random.default_rng(5)
    A = random_attention(rng, 40, 40)
    U, V = tsvd_witness(A, 6)
    e = exact_error(A, U, V)
    c = check_upper(A, U, V, e)  # exact tie: must escalate, but only the maximal rows
    assert c.status == "holds"
    assert c.tiers_run[0] == "float64" and len(c.tiers_run) > 1
    assert max(c.detail["rows_escalated"].values()) <= 3
    easy = check_upper(A, U, V, e * 2)
    assert easy.tiers_run == ("float64",)


def test_exact_ints_and_dyadic_tie():
    A = np.array([[0.5, 0.5], [0.25, 0.75]])
    U = np.array([[1.0], [1.0]])
    V = np.array([[0.25, 0.75]])
    # row errors: 0.25 + 0.25 = 0.5 and 0
    assert check_upper(A, U, V, "1/2").status == "holds"
    assert check_upper(A, U, V, "0.4999999999999999999").status == "fails"
    assert check_upper(A, U, V, 0.5).error.hi == Fraction(1, 2)


def test_rank_zero_witness_and_chi():
    A = np.array([[0.5, 0.5]])
    U, V = np.zeros((1, 0)), np.zeros((0, 2))
    assert check_upper(A, U, V, 1).status == "holds"
    assert check_upper(A, U, V, 1, chi="1/10").status == "fails"
    assert check_upper(A, U, V, "11/10", chi="1/10").status == "holds"


def test_huge_cancellation_escalates_instead_of_lying():
    # U V has entries ~1e16 that cancel: float product error dwarfs eps, exact tier decides
    # (a zero second row makes the rank-2 factors fit min(m, N) = 2; its error is 0)
    A = np.array([[1.0, 0.0], [0.0, 0.0]])
    U = np.array([[1e16, 1.0], [0.0, 0.0]])
    V = np.array([[1.0, 1.0], [1.0 - 1e16, -1e16]])
    exact = exact_row1(A, (U, V))
    c = check_upper(A, U, V, exact)
    assert c.status == "holds"
    assert "exact" in c.tiers_run or "arb" in c.tiers_run
    assert check_upper(A, U, V, exact - Fraction(1, 10**20)).status == "fails"


def test_overflow_in_float_tier_falls_back():
    A = np.array([[1.0, 0.0], [0.0, 0.0]])  # the zero row keeps rank 2 <= min(m, N)
    U = np.array([[1e300, 1e300], [0.0, 0.0]])
    V = np.array([[1e300, 0.0], [-1e300, 0.0]])
    c = check_upper(A, U, V, 2)
    assert c.status == "holds" and c.error.hi == 1


@pytest.mark.parametrize("bad,field", [
    (dict(A=np.array([[np.nan, 1.0]])), "A"),
    (dict(A=np.array([[np.inf, 1.0]])), "A"),
    (dict(U=np.array([[np.inf]])), "U"),
    (dict(V=np.array([[np.nan, 0.0]])), "V"),
    (dict(U=np.ones((2, 1))), "U"),
    (dict(V=np.ones((1, 3))), "V"),
    (dict(V=np.ones((2, 2))), "V"),
    (dict(A=np.ones(2)), "A"),
    (dict(A=np.array([["a", "b"]])), "A"),
])
def test_bad_arrays_name_the_field(bad, field):
    args = dict(A=np.array([[0.5, 0.5]]), U=np.ones((1, 1)), V=np.array([[0.5, 0.5]]))
    args.update(bad)
    for tier in ("auto", "arb", "exact"):
        with pytest.raises(InputError) as ei:
            check_upper(args["A"], args["U"], args["V"], "1/4", tier=tier)
        assert ei.value.field == field


def test_rank_claim_must_match_shapes():
    A, U, V = np.array([[0.5, 0.5]]), np.ones((1, 1)), np.array([[0.5, 0.5]])
    assert check_upper(A, U, V, "1/4", rank=1).status == "holds"
    with pytest.raises(InputError, match="disagrees"):
        check_upper(A, U, V, "1/4", rank=2)


@pytest.mark.parametrize("eps", [0, -1, "0", "-1/4", "abc", float("nan"), float("inf"), True,
                                 "1/0"])
def test_bad_eps(eps):
    with pytest.raises(InputError):
        check_upper(np.array([[1.0]]), np.ones((1, 1)), np.ones((1, 1)), eps)


def test_unknown_tier():
    with pytest.raises(InputError, match="tier"):
        check_upper(np.array([[1.0]]), np.ones((1, 1)), np.ones((1, 1)), 1, tier="fast")


def test_float32_inputs_are_taken_exactly():
    rng = np.random.default_rng(6)
    A = random_attention(rng, 5, 5).astype(np.float32)
    U, V = tsvd_witness(A.astype(np.float64), 2)
    e = exact_row1(A.astype(np.float64), (U, V))
    assert check_upper(A, U, V, e).status == "holds"
    assert check_upper(A, U, V, e - Fraction(1, 10**25)).status == "fails"


def test_cheap_all_rows_bound_never_decides_wrongly():
    """The one-bound shortcut combines max S (row 0) with max T (row 1); here that bound is
    too wide, so the decision must come from per-row bounds, in the float64 tier alone too."""
    A = np.array([[0.5, 0.5], [0.5, 0.5]])
    U = np.array([[0.0, 0.0], [2.0**40, 2.0**40]])  # row 0: B = 0, error 1
    V = np.array([[1.0, 1.0], [-1.0 + 2.0**-41, -1.0 + 2.0**-41]])  # row 1: B = A exactly
    assert exact_row1(A, (U, V)) == 1
    eps = 1 + Fraction(1, 2**20)
    for tier in ("auto", "float64"):
        c = check_upper(A, U, V, eps, tier=tier)
        assert c.status == "holds" and 1 in c.error
    assert check_upper(A, U, V, Fraction(1) - Fraction(1, 2**60)).status == "fails"
    assert check_upper(A, U, V, 1).status == "holds"
