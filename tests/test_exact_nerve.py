"""Nerve-chain certificates of the exact oracle: found, re-checked, tampered copies refused,
exact ties, and never above an exact witness's rank."""

from __future__ import annotations

import copy
import random
from fractions import Fraction as F

import pytest

from softrank.exact import oracle, verify_result
from softrank.exact.nerve import (
    boundary,
    candidates,
    mirror,
    nerve_certificate,
    served_witness,
    verify_nerve,
)


def identity(n: int) -> list[list[F]]:
    return [[F(int(i == j)) for j in range(n)] for i in range(n)]


def certificate(A, eps, p):
    served = None
    for q in range(1, p + 1):
        data, served = nerve_certificate(A, F(eps), q, served)
    return data


def random_cell(rng: random.Random, m: int, n: int) -> list[list[F]]:
    """A row-stochastic cell with entries k / 20 (ties with eps = j / 20 are common)."""
    rows = []
    for _ in range(m):
        w = [rng.randint(0, 6) for _ in range(n)]
        w[rng.randrange(n)] += 1
        rows.append([F(x, sum(w)) for x in w])
    return rows


@pytest.mark.parametrize("n", [2, 3, 4])
def test_identity_has_full_rank_chains(n):
    # ||I - B||_inf <= 1/2 forces B invertible, and the cross-polytope's nerve proves it
    data = certificate(identity(n), "1/2", n)
    assert data is not None and verify_nerve(identity(n), F(1, 2), n, data)
    assert [len(s) for s in data["tops"]] == [n] * len(data["tops"])
    assert len(data["chains"]) == n and len(data["chains"][0]) % 2 == 1


def test_chains_satisfy_the_smith_relations_independently():
    A = identity(3)
    data = certificate(A, "1/2", 3)
    c = data["chains"]
    for k in range(1, 3):
        lower = set(c[k - 1]) ^ {mirror(s) for s in c[k - 1]}
        assert boundary(c[k]) == lower
    # each top's witness serves its labels, recomputed here with plain sums
    for s, z in zip(data["tops"], data["witnesses"], strict=True):
        assert all(abs(x) <= 1 for x in z)
        assert all(g * sum(a * x for a, x in zip(A[i], z, strict=True)) > F(1, 2) for i, g in s)


def test_served_decides_an_exact_tie():
    # labels (0, +), (1, -): max over the cube of min(3/4 z1 + 1/4 z2, -1/4 z1 - 3/4 z2) = 1/2
    A = [[F(3, 4), F(1, 4)], [F(1, 4), F(3, 4)]]
    s = ((0, 1), (1, -1))
    assert served_witness(A, F(1, 2), s) is None  # the value equals eps: not served
    tiny = F(1, 2**60)  # below float64 resolution near 1/2
    z = served_witness(A, F(1, 2) - tiny, s)
    assert z is not None
    assert F(3, 4) * z[0] + F(1, 4) * z[1] > F(1, 2) - tiny
    assert -(F(1, 4) * z[0] + F(3, 4) * z[1]) > F(1, 2) - tiny


def test_float_proposals_decide_exactly_as_the_exact_lp():
    """Differential: with the float LP's point and dual weights checked exactly, and the exact
    LP otherwise, every label set is served or not exactly as the exact LP alone says (eps
    on the grid of the entries: ties are common)."""
    import numpy as np

    rng = random.Random(3)
    agree = ties_or_close = 0
    for _ in range(60):
        m = n = rng.choice([3, 4, 5])
        A = random_cell(rng, m, n)
        Af = np.array([[float(x) for x in row] for row in A])
        eps = F(rng.randint(1, 12), 20)
        p = rng.randint(2, m)
        rows = sorted(rng.sample(range(m), p))
        s = tuple((i, rng.choice((1, -1))) for i in rows)
        fast, slow = served_witness(A, eps, s, Af), served_witness(A, eps, s)
        assert (fast is None) == (slow is None), (A, eps, s)
        if fast is not None:
            assert all(abs(x) <= 1 for x in fast)
            assert all(g * sum(a * x for a, x in zip(A[i], fast, strict=True)) > eps
                       for i, g in s)
        agree += 1
        ties_or_close += fast is None
    assert agree == 60 and 0 < ties_or_close < 60
    # the exact tie: the float LP's optimum is eps itself; neither path calls it served
    A = [[F(3, 4), F(1, 4)], [F(1, 4), F(3, 4)]]
    Af = np.array([[0.75, 0.25], [0.25, 0.75]])
    assert served_witness(A, F(1, 2), ((0, 1), (1, -1)), Af) is None
    assert served_witness(A, F(1, 2) - F(1, 2**60), ((0, 1), (1, -1)), Af) is not None
    # plain float64 gets that one wrong: eps rounds to 1/2 and the optimum 1/2 is not above it
    assert not 0.75 * 1.0 + 0.25 * -1.0 > float(F(1, 2) - F(1, 2**60))


def _tamper(data, how):
    d = copy.deepcopy(data)
    if how == "witness_outside_cube":
        z = list(d["witnesses"][0])
        z[0] = F(3, 2)
        d["witnesses"][0] = tuple(z)
    elif how == "witness_not_above_eps":
        d["witnesses"][0] = tuple(F(0) for _ in d["witnesses"][0])
    elif how == "top_chain_missing_a_simplex":
        d["chains"][-1] = d["chains"][-1][1:]
    elif how == "even_c0":
        extra = next(s for s in [((i, g),) for i in range(3) for g in (1, -1)]
                     if s not in d["chains"][0])
        d["chains"][0] = d["chains"][0] + [extra]
    elif how == "duplicate_simplex":
        d["chains"][1] = d["chains"][1] + [d["chains"][1][0]]
    elif how == "chain_outside_complex":
        d["tops"], d["witnesses"] = d["tops"][:1], d["witnesses"][:1]
    elif how == "complementary_labels":
        d["tops"][0] = ((0, 1), (0, -1), (2, 1))
    elif how == "too_few_chains":
        d["chains"] = d["chains"][1:]
    elif how == "row_out_of_range":
        d["tops"][0] = ((0, 1), (1, 1), (7, 1))
    elif how == "missing_field":
        del d["chains"]
    return d


@pytest.mark.parametrize("how", ["witness_outside_cube", "witness_not_above_eps",
                                 "top_chain_missing_a_simplex", "even_c0", "duplicate_simplex",
                                 "chain_outside_complex", "complementary_labels",
                                 "too_few_chains", "row_out_of_range", "missing_field"])
def test_tampered_certificates_are_refused(how):
    A, eps = identity(3), F(1, 2)
    data = certificate(A, eps, 3)
    assert verify_nerve(A, eps, 3, data)
    assert not verify_nerve(A, eps, 3, _tamper(data, how))


def test_a_certificate_does_not_prove_a_larger_rank_or_a_larger_eps():
    A = identity(3)
    data = certificate(A, "1/2", 3)
    assert not verify_nerve(A, F(1, 2), 4, data)
    # at eps = 1 the witnesses' values (at most 1) no longer exceed eps
    assert not verify_nerve(A, F(1), 3, data)


def test_nerve_bound_never_exceeds_an_exact_witness_rank():
    """Differential: on random cells the largest rank with chains is at most the rank of every
    exact witness the oracle finds (B within eps, rank by exact elimination)."""
    rng = random.Random(11)
    seen_above_other_lower = 0
    for trial in range(24):
        m = n = 3 + trial % 2
        A = random_cell(rng, m, n)
        eps = F(rng.choice([2, 3, 4, 5, 6, 8]), 20)
        res = oracle(A, eps, budget=5.0)
        assert verify_result(res) == []
        served, best = None, 0
        for p in range(1, m + 1):
            data, served = nerve_certificate(A, eps, p, served)
            if data is None:
                break
            assert verify_nerve(A, eps, p, data)
            best = p
        assert best <= res.upper
        seen_above_other_lower += res.lower_certificate.kind == "nerve-chain"
    assert seen_above_other_lower > 0  # the oracle used the kind somewhere


def test_oracle_closes_with_a_nerve_chain_and_verify_catches_a_forged_bound():
    # a 5 x 5 softmax-like cell where the subspace search (r (n - r) <= 4) cannot reach r = 2
    rng = random.Random(5)
    for _ in range(40):
        A = random_cell(rng, 5, 5)
        res = oracle(A, "1/4", budget=2.0)
        if res.lower_certificate.kind == "nerve-chain" and res.lower >= 3:
            break
    else:
        pytest.fail("no cell whose lower end came from a nerve chain at rank >= 3")
    assert verify_result(res) == []
    forged = copy.copy(res)
    forged.lower = res.lower + 1
    forged.lower_certificate = copy.copy(res.lower_certificate)
    forged.lower_certificate.bound = res.lower + 1
    assert verify_result(forged) != []


def test_the_recheck_refuses_sizes_the_search_never_makes():
    # rank 16 of a 16-row cell lists 2^16 faces a top: refused before any is listed
    A = identity(16)
    big = {"tops": [tuple((i, 1) for i in range(16))], "witnesses": [(F(1),) * 16],
           "chains": [[((0, 1),)]] * 16}
    assert candidates(16, 16) > 20_000 and not verify_nerve(A, F(1, 2), 16, big)
    data = certificate(identity(3), "1/2", 3)
    many = {**data, "tops": data["tops"] * 9, "witnesses": data["witnesses"] * 9}
    assert not verify_nerve(identity(3), F(1, 2), 3, many)  # 9 x 4 tops > 2 x 4 simplices


def test_candidate_count_is_bounded_before_the_search():
    assert candidates(32, 4) > 20_000
    with pytest.raises(ValueError):
        nerve_certificate([[F(1, 32)] * 32 for _ in range(32)], F(1, 4), 4)
