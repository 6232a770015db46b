"""The exact oracle on accepted cells a review made crash or overrun its budget: entries past
the float range, numbers past Python's int-to-str limit, and one exact inverse of big
rationals that ran 85 s between two budget checks."""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction as F

import pytest

from softrank.certify.errors import InputError
from softrank.exact import oracle, verify_result
from softrank.exact.budget import OutOfTime, Unaffordable, afford, deadline
from softrank.exact.linalg import (
    inverse,
    inverse_row1_norm,
    inverse_seconds,
    product_seconds,
    row1_norm,
    to_fmpq_mat,
)
from softrank.exact.oracle import MAX_CELL_BITS


def test_entries_beyond_the_float_range_skip_the_float_proposals():
    for A in ([["1e3000", "0", "0"], ["0", "1", "0"], ["0", "0", "1"]],
              [["1e3000", "0"], ["0", "1"]]):
        res = oracle(A, "1/2")
        assert res.decided and res.lower == len(A)  # the diagonal cannot lose a rank
        assert verify_result(res) == []  # the list of problems found


def test_numbers_past_the_int_to_str_limit_are_written():
    """Five entries of 12,000-bit numerators and denominators (accepted: 13,000 a part, and
    the cell is under its bit limit) sum to a row norm of about 18,000 digits."""
    rng = random.Random(5)
    row = [F(rng.getrandbits(12000), rng.getrandbits(12000) | 1) for _ in range(5)]
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(4300)  # Python's default; the CLI's workers raise it
    try:
        res = oracle([row, [F(0)] * 4 + [F(1)]], "1/2", budget=3, total_budget=3)
        doc = json.dumps(res.to_json())
    finally:
        sys.set_int_max_str_digits(before)
    assert res.lower >= 1 and len(doc) > 18000


def test_a_cell_past_the_bit_limit_is_refused_before_any_work():
    rng = random.Random(2)
    bits = MAX_CELL_BITS // (2 * 4 * 4) + 64
    A = [[F(rng.getrandbits(bits), rng.getrandbits(bits) | 1) for _ in range(4)]
         for _ in range(4)]
    with pytest.raises(InputError, match="bits of numerators and denominators"):
        oracle(A, "1/4")


def test_an_inverse_is_priced_before_it_starts():
    with deadline(1.0):
        afford(0.5)
        with pytest.raises(Unaffordable):
            afford(2.0)
    assert issubclass(Unaffordable, OutOfTime)  # callers that stop on time stop on it too
    rng = random.Random(3)
    small = [[F(rng.randint(-9, 9), rng.randint(1, 9)) for _ in range(4)] for _ in range(4)]
    big = [[F(rng.getrandbits(500), rng.getrandbits(500) | 1) for _ in range(16)]
           for _ in range(16)]
    S, B = to_fmpq_mat(small), to_fmpq_mat(big)
    assert inverse_seconds(S) < 1e-3 < 1 < inverse_seconds(B)
    assert product_seconds(S, S) < 1e-3 < product_seconds(B, B)


def test_the_inverse_norm_in_flint_equals_the_fraction_one():
    rng = random.Random(4)
    for n in range(1, 7):
        for _ in range(20):
            A = [[F(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(n)] for _ in range(n)]
            inv = inverse(A)
            got = inverse_row1_norm(to_fmpq_mat(A))
            assert (got is None) == (inv is None)
            if inv is not None:
                assert got == row1_norm(inv)


def test_an_unaffordable_decoder_candidate_is_not_found_and_a_cheaper_one_is_tried(
        monkeypatch):
    from softrank.exact import bracket, linalg

    rng = random.Random(6)
    n = bracket.SUBMATRIX_EXHAUSTIVE + 2  # the bisection path
    A = [[F(rng.randint(0, 9), 10) for _ in range(n)] for _ in range(n)]
    for i in range(n):
        A[i][i] += 5
    eps = F(1, 100)
    with deadline(30):
        found = bracket.best_decoder(A, eps, 0)
    assert found is not None and found.bound >= 2
    calls = []

    def priced(M):  # a rank-p candidate "costs" p seconds: only small ones fit in 3 s
        calls.append(M.nrows())
        return float(M.nrows())

    monkeypatch.setattr(linalg, "inverse_seconds", priced)
    monkeypatch.setattr(bracket, "inverse_seconds", priced)
    with deadline(3):
        cheap = bracket.best_decoder(A, eps, 0)
    assert max(calls) > 3 and cheap is not None and cheap.bound <= 3


def test_entries_near_the_float_maximum_leave_the_float_proposals_out():
    # exact cells whose entries fit in float64 but whose float work does not: a rank-2 cell
    # of 8e307 entries (the truncated SVD's u s overflowed) and a row (1.2e308, -1.2e308)
    # (an LP cost overflowed) ended in OverflowError / ValueError, exit 3
    from fractions import Fraction as Fq

    from softrank.exact.inputs import FLOAT_HEADROOM, float_view
    from softrank.exact.oracle import oracle

    M = 8 * 10**307
    eps = Fq(1, 4)
    B0 = [[M, M, 0], [0, M, M], [M, 2 * M, M]]
    E = [[eps, 0, 0], [0, -eps, 0], [0, 0, eps]]
    A = [[Fq(b) + e for b, e in zip(rb, re, strict=True)] for rb, re in zip(B0, E, strict=True)]
    assert float_view(A) is None and float_view([[FLOAT_HEADROOM - 1]]) is not None
    res = oracle(A, eps, budget=5, total_budget=20)
    assert res.lower <= 2 <= res.upper  # B0 has rank 2 and is eps from A
    H = 12 * 10**307
    xs = [Fq(1), Fq(3, 10**6), Fq(-7, 10**5), Fq(1, 10**7), Fq(-2, 10**8)]
    A = []
    for i, x in enumerate(xs):
        v = [Fq((i + j) % 3 - 1) for j in range(5)]
        v = v if any(v) else [Fq(1)] + v[1:]
        s = sum(abs(t) for t in v)
        A.append([x * yj + Fq(1, 3) * t / s for yj, t in zip([H, -H, 0, 0, 0], v, strict=True)])
    res = oracle(A, Fq(1, 3), budget=5, total_budget=20)
    assert res.lower <= 1 <= res.upper  # the rank-1 x y^T is within 1/3 of every row
