"""Exact oracle: pinned cells, re-verification of every witness/certificate, bad input."""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest
import sympy

from softrank.certify.errors import InputError
from softrank.exact import oracle, verify_result
from softrank.exact.bracket import decoder_certificate, verify_decoder
from softrank.exact.rankone import (
    RankOneRefutation,
    RankOneWitness,
    rank_one_search,
    verify_refutation,
)


def independent_check(res) -> None:
    """Re-verifies the result with code that does not share the oracle's helpers."""
    assert verify_result(res) == []
    if res.witness is None:
        return
    B = res.witness.B
    # rank by sympy (not flint), error by plain Fraction sums
    assert sympy.Matrix([[sympy.Rational(x.numerator, x.denominator) for x in r]
                         for r in B]).rank() == res.witness.rank == res.upper
    err = max(sum(abs(a - b) for a, b in zip(ra, rb, strict=True))
              for ra, rb in zip(res.A, B, strict=True))
    assert err == res.witness.error <= res.eps
    if res.stochastic:
        assert all(x >= 0 for r in B for x in r) and all(sum(r) == 1 for r in B)


@pytest.mark.parametrize("stochastic", [False, True])
def test_identity_2x2_rank_2(stochastic):
    res = oracle([[1, 0], [0, 1]], "1/4", stochastic)
    assert res.rank == 2 and res.decided
    assert res.lower_certificate.kind == "rank-one-refutation"
    independent_check(res)


@pytest.mark.parametrize("stochastic", [False, True])
def test_constant_rows_rank_1(stochastic):
    res = oracle([["1/2", "1/2"], ["1/2", "1/2"]], "1/4", stochastic)
    assert res.rank == 1
    independent_check(res)


def test_rank_zero_and_nonzero():
    small = [["1/10", "1/20"], ["0", "-1/10"]]
    res = oracle(small, "3/20")  # ||A||_row1 = 3/20 <= eps
    assert res.rank == 0
    independent_check(res)
    res = oracle(small, "1/7")  # 3/20 > 1/7: B = 0 excluded
    assert res.lower >= 1 and res.rank == 1
    independent_check(res)
    # the stochastic mode never admits B = 0
    res = oracle([["1/2", "1/2"]], "1/4", stochastic=True)
    assert res.rank == 1
    independent_check(res)


def test_unrestricted_one_stochastic_two():
    """A = [[1, 0], [1/2, 1/2]], eps = 1/3: rank 1 unrestricted, rank 2 row-stochastic."""
    A = [[1, 0], ["1/2", "1/2"]]
    eps = F(1, 3)
    # by hand: B = x y^T with y = (1, 1/3), x = (1, 1/2) has row errors 1/3 and 1/3
    x, y = [F(1), F(1, 2)], [F(1), F(1, 3)]
    Aq = [[F(1), F(0)], [F(1, 2), F(1, 2)]]
    assert max(sum(abs(Aq[i][j] - x[i] * y[j]) for j in range(2)) for i in range(2)) == eps
    # by hand: a rank-one stochastic B has equal rows p = (q, 1 - q), and
    # err_1 + err_2 = 2(1 - q) + 2|q - 1/2| >= 1, so max err >= 1/2 > 1/3.
    u = oracle(A, eps)
    s = oracle(A, eps, stochastic=True)
    assert u.rank == 1 and s.rank == 2
    assert s.lower_certificate.kind == "rank-one-refutation"
    independent_check(u)
    independent_check(s)
    # one-sided consistency with the hand argument on a fine grid of q
    for k in range(0, 301):
        q = F(k, 300)
        assert max(2 * (1 - q), 2 * abs(q - F(1, 2))) >= F(1, 2)


def test_found_gap_cells_are_decided():
    """Random 2 x 3 stochastic cells: every unrestricted-1 / stochastic-2 cell found is proved."""
    rng = random.Random(11)
    gaps = 0
    for _ in range(40):
        A = [[F(rng.randint(0, 4)) for _ in range(3)] for _ in range(2)]
        A = [[x / sum(r) for x in r] if sum(r) else [F(1, 3)] * 3 for r in A]
        eps = F(rng.randint(1, 9), 10)
        u, s = oracle(A, eps), oracle(A, eps, stochastic=True)
        assert u.decided and s.decided  # two rows: always decided
        assert u.rank <= s.rank  # stochastic B are a subset
        independent_check(u)
        independent_check(s)
        gaps += u.rank == 1 and s.rank == 2
    assert gaps >= 1


def test_all_small_cells_decide_zero_one():
    """Up to 4 x 4 every answer 0 or 1 is decided, and otherwise rank >= 2 is proved."""
    rng = random.Random(3)
    for _ in range(25):
        m, n = rng.randint(1, 4), rng.randint(1, 4)
        A = [[F(rng.randint(-3, 6), rng.randint(1, 6)) for _ in range(n)] for _ in range(m)]
        eps = F(rng.randint(1, 19), 20)
        results = []
        for st in (False, True):
            res = oracle(A, eps, st)
            independent_check(res)
            assert res.decided or res.lower >= 2
            if min(m, n) <= 2:
                assert res.decided
            results.append(res)
        u, s = results
        assert u.lower <= s.upper  # stochastic B are admissible unrestricted B


def test_empty_stochastic_problem():
    res = oracle([[2, -1], [0, 1]], "1/4", stochastic=True)
    assert res.rank == float("inf") and res.witness is None
    assert res.lower_certificate.kind == "empty"
    assert verify_result(res) == []


def test_bracket_beyond_search_is_valid():
    rows = [[22, 22, 20, 23, 21], [20, 21, 20, 22, 23], [21, 23, 20, 21, 20],
            [21, 23, 22, 21, 23], [21, 20, 21, 23, 21]]
    A = [[F(x, sum(r)) for x in r] for r in rows]
    res = oracle(A, "1/50")
    assert res.lower <= res.upper
    independent_check(res)
    with pytest.raises(InputError, match="too large for the complete rank-one search"):
        oracle(A, "1/50", complete=True)


def test_identity_5x5_decided_by_submatrix_decoder():
    I5 = [[int(i == j) for j in range(5)] for i in range(5)]
    res = oracle(I5, "1/4")
    assert res.rank == 5 and res.lower_certificate.kind in ("submatrix", "decoder")
    independent_check(res)


# ------------------------------------------------------------ invalid certificates

def test_tampered_refutation_rejected():
    # rank-one error of this A is exactly 1/3 (the boundary is decided exactly)
    A = [[F(1), F(0)], [F(1, 2), F(1, 2)]]
    e = F(3, 10)
    ref = rank_one_search(A, e)
    assert isinstance(ref, RankOneRefutation)
    assert verify_refutation(A, e, ref)
    # at eps = 1/3 rank one is feasible, so the same certificate must not verify there
    w = rank_one_search(A, F(1, 3))
    assert isinstance(w, RankOneWitness) and w.error == F(1, 3)
    assert not verify_refutation(A, F(1, 3), ref)
    for k in range(len(ref.nodes)):
        dropped = RankOneRefutation(False, ref.nodes[:k] + ref.nodes[k + 1:], ref.row1_norm)
        assert not verify_refutation(A, e, dropped)
    (asg, sup), *rest = ref.nodes
    bent = [(c, lam * 2 if k == 0 else lam) for k, (c, lam) in enumerate(sup)]
    assert not verify_refutation(A, e, RankOneRefutation(False, [(asg, bent), *rest],
                                                         ref.row1_norm))
    # a stochastic certificate is not accepted as an unrestricted one and vice versa
    sref = rank_one_search(A, e, stochastic=True)
    assert verify_refutation(A, e, sref)
    assert not verify_refutation(A, e, RankOneRefutation(False, sref.nodes, sref.row1_norm))


def test_tampered_witness_and_decoder_rejected():
    res = oracle([["1/2", "1/2"], ["1/2", "1/2"]], "1/4")
    res.witness.B[0][0] += F(1, 2)
    assert verify_result(res) != []
    res = oracle([[1, 0], [0, 1]], "1/4")
    res.witness.rank = 1
    assert verify_result(res) != []
    A = [[F(1), F(0)], [F(0), F(1)]]
    I2 = [[F(1), F(0)], [F(0), F(1)]]
    cert = decoder_certificate(A, F(1, 4), I2, I2)
    assert cert is not None and cert.bound == 2 and verify_decoder(A, F(1, 4), cert)
    assert decoder_certificate(A, F(1), I2, I2) is None  # ||M^-1|| eps = 1: not < 1
    assert not verify_decoder(A, F(1), cert)


# ------------------------------------------------------------ bad input

@pytest.mark.parametrize("bad", [
    [["abc", 1]], [[sympy.sqrt(2), 1]], [[float("nan"), 1]], [[None, 1]],
    [[1, 2], [3]], [], [[]], "1/2",
])
def test_bad_matrix(bad):
    with pytest.raises(InputError, match="matrix"):
        oracle(bad, "1/4")


@pytest.mark.parametrize("eps", ["0", "1", "-1/4", "3/2", "x", float("inf")])
def test_bad_eps(eps):
    with pytest.raises(InputError, match="eps"):
        oracle([[1]], eps)


def test_oversized_rank_one_search():
    A = [[F(i == j) for j in range(5)] for i in range(5)]
    with pytest.raises(InputError, match="too large"):
        rank_one_search(A, F(1, 4))
    with pytest.raises(InputError, match="too large"):
        rank_one_search([[F(1)] * 7] * 2, F(1, 4), stochastic=True)


def test_inputs_in_every_rational_form():
    a = oracle([[1, F(1, 2)], [sympy.Rational(1, 3), "0.25"]], sympy.Rational(1, 10))
    b = oracle([["1", "1/2"], ["1/3", "1/4"]], "0.1")
    assert a.A == b.A and a.eps == b.eps and (a.lower, a.upper) == (b.lower, b.upper)


def test_oracle_refuses_huge_cells():
    with pytest.raises(InputError, match="limit"):
        oracle([[1] * 33], "1/4")


def test_verify_result_reports_malformed_results_instead_of_raising():
    """Tampered results (a ragged witness, a float entry, a record replaced by None, an index
    past the cell) raised ValueError, AttributeError or IndexError from the re-checks."""
    import copy

    r = oracle([[1, 0], [0, 1], ["1/2", "1/2"]], "1/10")
    assert verify_result(r) == []
    tampered = []
    t = copy.deepcopy(r)
    t.witness.B = t.witness.B[:-1]
    tampered.append(t)
    t = copy.deepcopy(r)
    t.witness.B[0][0] = 1.0
    tampered.append(t)
    e = oracle([[2, 0], [0, 1]], "1/4", "stochastic")
    assert e.lower_certificate.kind == "empty" and verify_result(e) == []
    t = copy.deepcopy(e)
    t.lower_certificate.data["row"] = 7
    tampered.append(t)
    t = copy.deepcopy(e)
    t.lower_certificate.data = {}
    tampered.append(t)
    for t in tampered:
        problems = verify_result(t)
        assert problems and any("malformed" in p for p in problems)
