"""frobenius_tail and nonzero lower certificates on matrices with exactly known answers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import InputError, check_lower
from softrank.certify.lower import tail_enclosure
from softrank.certify.result import Enclosure
from tests.test_svd import known_svd_matrix, softmax

# singular values: tail from index 7 (1-indexed) is 4 * (1/2)^2 = 1 exactly
D = [Fraction(x) for x in (4, 3, 2, 1.5, 1, 0.75, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0)]


def tail(d: list[Fraction], L: int) -> Fraction:
    return sum((x * x for x in d[L - 1:]), Fraction(0))


def eps_for_relative_margin(T: Fraction, m: int, rel: Fraction) -> Fraction:
    """Largest eps on a 10^-30 grid with m eps^2 <= T (1 - rel): margin just above rel."""
    target = T * (1 - rel) / m
    scale = 10**30
    return Fraction(math.isqrt(target.numerator * scale**2 // target.denominator), scale)


@pytest.fixture(scope="module", params=[(16, 16), (24, 16), (16, 24)])
def exact_case(request):
    m, n = request.param
    return m, known_svd_matrix(m, n, D, seed=11 * m + n)


@pytest.mark.parametrize("tier", ["auto", "float64", "arb", "exact"])
def test_margin_tie_and_beyond(exact_case, tier):
    m, A = exact_case
    L = 7
    T = tail(D, L)
    assert T == 1
    # exact tie: m eps^2 = tail, i.e. eps = 1 / sqrt(m) -- rational for m = 16 only
    rel = Fraction(1, 10**12)
    eps = eps_for_relative_margin(T, m, rel)
    margin = T - m * eps * eps
    assert rel <= margin / T <= rel * (1 + Fraction(1, 10**6))
    c = check_lower(A, {"kind": "frobenius_tail", "rank": L}, eps, tier=tier)
    assert c.status == "holds" and c.rank == L and c.detail["sense"] == ">"
    assert c.value.lo <= T <= c.value.hi and c.threshold == m * eps * eps
    # the claim one beyond: the tail drops to 3/4 < threshold
    c = check_lower(A, {"kind": "frobenius_tail", "rank": L + 1}, eps, tier=tier)
    assert c.status == "fails"
    assert c.value.lo <= tail(D, L + 1) <= c.value.hi
    if m == 16:
        tie = check_lower(A, {"kind": "frobenius_tail", "rank": L}, Fraction(1, 4), tier=tier)
        assert tie.threshold == T
        assert tie.status != "holds"  # a tie is not a proof
        assert tie.value.lo <= T <= tie.value.hi


def test_operator_slack_is_charged():
    A = known_svd_matrix(16, 16, D, seed=3)
    eps = eps_for_relative_margin(Fraction(1), 16, Fraction(1, 10**6))
    assert check_lower(A, {"kind": "frobenius_tail", "rank": 7}, eps).status == "holds"
    # chi pushes the threshold m (eps + chi)^2 above the tail
    c = check_lower(A, {"kind": "frobenius_tail", "rank": 7}, eps, chi=Fraction(1, 10**5))
    assert c.status == "fails" and c.chi == Fraction(1, 10**5)
    assert c.threshold == 16 * (eps + c.chi) ** 2


def test_rank_beyond_min_dimension_is_an_input_error():
    # no 24 x 16 matrix has rank 17: the claim is malformed input, not a false inequality
    A = known_svd_matrix(24, 16, D, seed=5)
    with pytest.raises(InputError) as err:
        check_lower(A, {"kind": "frobenius_tail", "rank": 17}, "0.001")
    assert err.value.field == "lower.rank" and "min(m, N) = 16" in str(err.value)
    # rank 16 (the last singular value alone) is checked as usual
    c = check_lower(A, {"kind": "frobenius_tail", "rank": 16}, "0.001")
    assert c.status in ("holds", "fails") and c.value is not None


def test_rank_one_tail_is_frobenius_norm():
    rng = np.random.default_rng(0)
    A = softmax(rng, 30, 20)
    F2 = sum(Fraction(float(x)) ** 2 for x in A.ravel())
    for eps in ("0.01", "0.5"):
        c = check_lower(A, {"kind": "frobenius_tail", "rank": 1}, eps)
        assert c.value.lo <= F2 <= c.value.hi
        assert c.status == ("holds" if F2 > 30 * Fraction(eps) ** 2 else "fails")


def test_softmax_tail_statuses_agree_with_mpmath():
    import mpmath

    rng = np.random.default_rng(1)
    A = softmax(rng, 40, 40, scale=4.0)
    with mpmath.workdps(40):
        s = mpmath.svd_r(mpmath.matrix(A.tolist()), compute_uv=False)
        s = sorted((s[i] for i in range(len(s))), reverse=True)
        for L in (1, 3, 10, 25, 40):
            t = sum(x * x for x in s[L - 1:])
            for eps in (Fraction(1, 20), Fraction(1, 4)):
                c = check_lower(A, {"kind": "frobenius_tail", "rank": L}, eps)
                q = 40 * eps * eps
                thr = mpmath.mpf(q.numerator) / q.denominator
                assert c.status == ("holds" if t > thr else "fails")


def test_tail_enclosure_uses_both_bounds():
    lo = (Fraction(3), Fraction(0), Fraction(0))
    hi = (Fraction(4), Fraction(1, 10), Fraction(1, 10))
    # the tail from the enclosures alone is [0, 2/100]; the Frobenius norm sharpens the lower end
    e = tail_enclosure(lo, hi, 2, Enclosure(Fraction(16) + Fraction(1, 100), Fraction(16)
                                            + Fraction(1, 100)))
    assert e.lo == Fraction(1, 100) and e.hi == Fraction(2, 100)
    e = tail_enclosure(lo, hi, 2, None)
    assert e.lo == 0 and e.hi == Fraction(2, 100)


# ---------------------------------------------------------------- nonzero


def test_nonzero_boundary_is_exact():
    rng = np.random.default_rng(2)
    A = softmax(rng, 7, 9) * 0.999
    n = max(sum(Fraction(float(abs(x))) for x in row) for row in A)
    assert check_lower(A, {"kind": "nonzero", "rank": 1}, n).status == "fails"  # tie
    below = n - Fraction(1, 2**70)
    c = check_lower(A, {"kind": "nonzero", "rank": 1}, below)
    assert c.status == "holds" and c.value.lo <= n <= c.value.hi
    assert check_lower(A, {"kind": "nonzero", "rank": 1}, below, chi=Fraction(1, 2**69)
                       ).status == "fails"
    for tier in ("float64", "arb"):
        c = check_lower(A, {"kind": "nonzero", "rank": 1}, below, tier=tier)
        assert c.status in ("holds", "undecided")


def integer_reflections(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """2^k Q as an int64 matrix, Q a product of k reflections I - v v^T / 2 (v: four +-1)."""
    Q = np.eye(n, dtype=np.int64)
    for _ in range(k):
        v = np.zeros(n, dtype=np.int64)
        v[rng.choice(n, size=4, replace=False)] = rng.choice([-1, 1], size=4)
        Q = 2 * Q - np.outer(v, v @ Q)  # 2 (I - v v^T / 2) Q, exact in integers
    return Q


def test_margin_tie_and_beyond_at_96():
    """The same acceptance test on a 96 x 96 matrix."""
    n, k = 96, 10
    rng = np.random.default_rng(9)
    d = np.array([256 - 3 * i for i in range(40)] + [32] * 24 + [0] * 32, dtype=np.int64)
    Q1, Q2 = integer_reflections(n, k, rng), integer_reflections(n, k, rng)
    M = (Q1 * d) @ Q2.T  # = 2^(2k) Q1 diag(d) Q2^T, |entries| < 2^53: exact
    assert np.abs(M).max() < 2**53
    A = M.astype(np.float64) / 2.0 ** (2 * k + 8)  # singular values d / 2^8, exactly
    sig = sorted((Fraction(int(x), 2**8) for x in d), reverse=True)
    L = 41
    T = sum((x * x for x in sig[L - 1:]), Fraction(0))
    assert T == Fraction(3, 8) == n * Fraction(1, 16) ** 2  # the tie is at eps = 1/16
    eps = eps_for_relative_margin(T, n, Fraction(1, 10**12))
    for tier in ("float64", "auto"):
        c = check_lower(A, {"kind": "frobenius_tail", "rank": L}, eps, tier=tier)
        assert c.status == "holds" and c.value.lo <= T <= c.value.hi
        tie = check_lower(A, {"kind": "frobenius_tail", "rank": L}, Fraction(1, 16), tier=tier)
        assert tie.status != "holds"
        for e in (eps, Fraction(1, 16)):
            assert check_lower(A, {"kind": "frobenius_tail", "rank": L + 1}, e, tier=tier
                               ).status == "fails"


def test_naive_float_tail_is_wrong_at_the_tie_but_kernel_is_not():
    """At the exact tie, plain float64 (np.linalg.svd, sum of squares) often says "> m eps^2"."""
    wrong = 0
    for seed in (3, 7, 8, 16, 26, 0, 1):  # seeds where the naive sum lands above 1, and two more
        A = known_svd_matrix(16, 16, D, seed=100 + seed)
        s = np.linalg.svd(A, compute_uv=False)
        naive_tail = float(np.sum(s[6:] ** 2))
        if naive_tail > 16 * (1 / 4) ** 2:  # T = 1 exactly; naive says the claim holds
            wrong += 1
            c = check_lower(A, {"kind": "frobenius_tail", "rank": 7}, Fraction(1, 4))
            assert c.status != "holds"
    assert wrong >= 3  # the trap is real


def test_naive_float_row_sum_is_wrong_at_the_tie_but_kernel_is_not():
    wrong = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        A = rng.random((4, 40)) * 2.0 ** rng.integers(-30, 2, size=(4, 40))
        exact = max(sum(Fraction(float(x)) for x in row) for row in A)
        if Fraction(float(np.abs(A).sum(axis=1).max())) > exact:  # naive: "> eps" holds
            wrong += 1
            assert check_lower(A, {"kind": "nonzero", "rank": 1}, exact).status == "fails"
    assert wrong >= 5
