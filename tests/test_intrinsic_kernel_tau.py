"""Kernel checks for the visible interaction and tau: differential, tampering, bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.certify.intrinsic.interaction import (
    interaction_from_logits,
    interaction_from_positive,
)
from softrank.certify.intrinsic.tau import tau_bracket
from softrank.certify.numerics.arbutil import endpoints
from tests.intrinsic_witness import tau_witness


def _exact_C(H: np.ndarray, beta: Fraction) -> list[list[Fraction]]:
    F = [[Fraction(float(x)) for x in row] for row in H]
    m, n = len(F), len(F[0])
    r = [sum(row) / n for row in F]
    c = [sum(F[i][j] for i in range(m)) / m for j in range(n)]
    g = sum(r) / m
    return [[beta * (F[i][j] - r[i] - c[j] + g) for j in range(n)] for i in range(m)]


def _exact_q(E: list[list[Fraction]]) -> Fraction:
    """q(E) as the maximum cycle mean by brute force over all simple cycles (n <= 5)."""
    from itertools import permutations

    n = len(E[0])
    w = [[max(row[j] - row[l] for row in E) for l in range(n)] for j in range(n)]
    best = Fraction(0)
    for k in range(1, n + 1):
        for cyc in permutations(range(n), k):
            if cyc[0] != min(cyc):
                continue
            best = max(best, sum(w[cyc[t]][cyc[(t + 1) % k]] for t in range(k)) / k)
    return best


def _case(seed: int, m: int, n: int, r: int):
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, n)) * 2
    C = interaction_from_logits(H, "3/2")
    U, s, Vt = np.linalg.svd(C.mid)
    return H, C, U[:, :r] * s[:r], Vt[:r].T.copy()


def test_interaction_encloses_exact_logits() -> None:
    rng = np.random.default_rng(0)
    H = rng.standard_normal((5, 7)) * 10
    C = interaction_from_logits(H, "3/2")
    ex = _exact_C(H, Fraction(3, 2))
    for i in range(5):
        for j in range(7):
            assert abs(ex[i][j] - Fraction(float(C.mid[i, j]))) <= Fraction(C.rad)
    balls = C.row_balls([2], 128)[0]
    for j in range(7):
        lo, hi = endpoints(balls[j])
        assert lo <= ex[2][j] <= hi and hi - lo < Fraction(1, 2**100)
    assert C.rad < 1e-12


def test_interaction_from_attention_matches_logits() -> None:
    rng = np.random.default_rng(1)
    H = rng.standard_normal((6, 6))
    A = np.exp(H)
    A /= A.sum(axis=1, keepdims=True)
    CA = interaction_from_positive(A)
    CL = interaction_from_logits(H)
    # A is softmax(H) up to float rounding: the two enclosures nearly overlap
    assert np.abs(CA.mid - CL.mid).max() < 1e-13
    assert CA.rad < 1e-12


@pytest.mark.parametrize("seed,r", [(0, 1), (1, 2), (2, 3)])
def test_tau_bracket_contains_exact_q(seed: int, r: int) -> None:
    H, C, X, Y = _case(seed, 6, 5, r)
    Cex = _exact_C(H, Fraction(3, 2))
    E = [[Cex[i][j] - sum(Fraction(float(X[i, k])) * Fraction(float(Y[j, k]))
                           for k in range(r)) for j in range(5)] for i in range(6)]
    q = _exact_q(E)
    b, cyc, rows = tau_witness(C.mid - X @ Y.T)
    res = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows)
    assert res.q.lo <= q <= res.q.hi
    assert res.q.ratio <= 1 + Fraction(1, 10**9)
    assert res.tau.lo <= res.tau.hi
    # kernel-chosen rows give the same proof
    res2 = tau_bracket(C, X, Y, b=b, cycle=cyc)
    assert res2.q.lo <= q <= res2.q.hi


@pytest.mark.parametrize("seed", range(6))
def test_tampered_tau_witness_never_false(seed: int) -> None:
    H, C, X, Y = _case(10 + seed, 6, 5, 2)
    Cex = _exact_C(H, Fraction(3, 2))
    E = [[Cex[i][j] - sum(Fraction(float(X[i, k])) * Fraction(float(Y[j, k]))
                           for k in range(2)) for j in range(5)] for i in range(6)]
    q = _exact_q(E)
    rng = np.random.default_rng(seed)
    b, cyc, rows = tau_witness(C.mid - X @ Y.T)
    b2 = b + rng.standard_normal(5) * 10.0 ** rng.integers(-16, 0)
    cyc2 = rng.permutation(5)[: rng.integers(1, 6)]
    rows2 = rng.integers(0, 6, size=len(cyc2))
    res = tau_bracket(C, X, Y, b=b2, cycle=cyc2, cycle_rows=rows2)
    assert res.q.lo <= q <= res.q.hi
    for t in ("float64", "arb"):
        res = tau_bracket(C, X, Y, b=b2, cycle=cyc2, tier=t)
        assert res.q.lo <= q <= res.q.hi


def test_tau_zero_for_exact_factorisation() -> None:
    # C = P H P with H = 2 X0 X0^T integer and n a power of two: T = C exactly
    rng = np.random.default_rng(3)
    X0 = rng.integers(-3, 4, size=(8, 2)).astype(float)
    X = X0 - X0.mean(axis=0)  # exact: n = 8
    H = X0 @ X0.T
    C = interaction_from_logits(H)
    res = tau_bracket(C, X, X.copy(), b=np.zeros(8), cycle=[0])
    assert res.q.lo == 0 and res.q.hi < 1e-13
    assert res.tau.lo == 0


@pytest.mark.parametrize("bad,field", [
    (lambda H: np.where(np.eye(4, 5) > 0, -np.inf, H), "logits"),
    (lambda H: np.where(np.eye(4, 5) > 0, np.nan, H), "logits"),
])
def test_bad_logits(bad, field) -> None:
    H = np.ones((4, 5))
    with pytest.raises(InputError) as e:
        interaction_from_logits(bad(H))
    assert e.value.field == field and "undefined" in str(e.value)


def test_zero_attention_entry_is_undefined() -> None:
    A = np.full((3, 3), 1 / 3)
    A[1, 2] = 0.0
    with pytest.raises(InputError) as e:
        interaction_from_positive(A)
    assert e.value.field == "A" and "undefined" in str(e.value)
    with pytest.raises(InputError) as e:
        interaction_from_positive(A, field="block")
    assert e.value.field == "block"


@pytest.mark.parametrize("kw,field", [
    ({"b": np.full(5, np.nan)}, "b"),
    ({"b": np.zeros(4)}, "b"),
    ({"cycle": [0, 0]}, "cycle"),
    ({"cycle": [0, 7]}, "cycle"),
    ({"cycle": [0, 1], "cycle_rows": [0]}, "cycle_rows"),
    ({"cycle_rows": [0]}, "cycle_rows"),
])
def test_bad_tau_witness(kw, field) -> None:
    _, C, X, Y = _case(0, 6, 5, 2)
    with pytest.raises(InputError) as e:
        tau_bracket(C, X, Y, **kw)
    assert e.value.field == field


def test_bad_factors() -> None:
    _, C, X, Y = _case(0, 6, 5, 2)
    with pytest.raises(InputError) as e:
        tau_bracket(C, np.ones((6, 6)), np.ones((5, 6)))
    assert e.value.field == "r"
    with pytest.raises(InputError) as e:
        tau_bracket(C, X, Y, r=3)
    assert e.value.field == "r"
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InputError) as e:
        tau_bracket(C, Xn, Y)
    assert e.value.field == "X"


def test_operator_prefers_logits_then_block() -> None:
    from softrank.certify.intrinsic.interaction import interaction_from_operator

    rng = np.random.default_rng(5)
    H = rng.standard_normal((4, 6))
    block = np.exp(H) * 3.0  # row renormalisation cancels the scale
    A = block / block.sum(axis=1, keepdims=True)
    assert interaction_from_operator(A, logits=H).source == "logits"
    Cb = interaction_from_operator(A, block=block)
    assert Cb.source == "block"
    ex = _exact_C(H, Fraction(1))
    # log(block) = H + log 3 up to the rounding of exp: within 1e-14 of the exact C
    assert max(abs(ex[i][j] - Fraction(float(Cb.mid[i, j]))) for i in range(4)
               for j in range(6)) < Fraction(1, 10**13)
    assert interaction_from_operator(A).source == "A"
    with pytest.raises(InputError) as e:
        interaction_from_operator()
    assert e.value.field == "A"


def test_attention_source_arb_tier() -> None:
    rng = np.random.default_rng(8)
    H = rng.standard_normal((6, 5))
    A = np.exp(H)
    A /= A.sum(axis=1, keepdims=True)
    C = interaction_from_positive(A)
    U, s, Vt = np.linalg.svd(C.mid)
    X, Y = U[:, :2] * s[:2], Vt[:2].T.copy()
    b, cyc, rows = tau_witness(C.mid - X @ Y.T)
    f = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows, tier="float64")
    a = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows, tier="arb")
    assert a.q.tier == "arb" and f.q.tier == "float64"
    # both contain q: they intersect, and the arb bracket is at least as narrow
    assert max(a.q.lo, f.q.lo) <= min(a.q.hi, f.q.hi)
    assert a.q.hi - a.q.lo <= f.q.hi - f.q.lo
    assert a.q.ratio <= 1 + Fraction(1, 10**12)


def test_claim_status_three_valued() -> None:
    _, C, X, Y = _case(4, 6, 5, 2)
    b, cyc, rows = tau_witness(C.mid - X @ Y.T)
    q = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows).q
    assert q.claim_status(hi=q.hi * 2) == "holds"
    assert q.claim_status(lo=q.lo / 2, hi=q.hi * 2) == "holds"
    assert q.claim_status(hi=q.lo / 2) == "fails"
    assert q.claim_status(lo=q.hi * 2) == "fails"
    assert q.claim_status(hi=(q.lo + q.hi) / 2) == "undecided"
    js = q.to_json()
    assert Fraction(js["lo"]) == q.lo and Fraction(js["hi"]) == q.hi


def test_logits_whose_sums_overflow_are_an_input_error():
    from softrank.certify import InputError
    from softrank.certify.intrinsic import interaction_from_logits
    for H in ([[1.5e308, 1.5e308], [0.0, 1.0]], [[1e308, 1e308, -1e308], [1, 2, 3]]):
        with pytest.raises(InputError, match="overflows"):
            interaction_from_logits(np.array(H))


def test_huge_logits_give_a_bracket_not_a_memory_blowup():
    # q near 1e61: tanh(q/4) is a ball whose radius is near 2**(-1e61); its exact endpoints
    # would never finish, so the tiny radius is widened outward
    from fractions import Fraction

    from softrank.certify.intrinsic import interaction_from_logits, tau_bracket
    H = np.array([[7e60, 3e60, 0.0], [-5e60, -6e60, -7e60], [-8e60, -8e60, 7e60]])
    C = interaction_from_logits(H, beta=Fraction(1, 3))
    b = tau_bracket(C, np.zeros((3, 1)), np.zeros((3, 1)), tier="arb")
    assert b.tau.hi is not None and 2 <= b.tau.hi < 2 + Fraction(1, 2**1000)


def test_endpoints_widen_tiny_parts_outward_and_refuse_huge_ones():
    from flint import arb, arf

    from softrank.certify.numerics.arbutil import EXP_LIMIT
    tiny = Fraction(1, 2**EXP_LIMIT)
    # a ball 1 +- 2**-1200000: the radius is widened to 2**-EXP_LIMIT, never below
    lo, hi = endpoints(arb(1, arf((1, -1_200_000))))
    assert (lo, hi) == (1 - tiny, 1 + tiny)
    # a midpoint below 2**-EXP_LIMIT becomes 0 with that much more radius
    lo, hi = endpoints(arb(arf((3, -1_200_000)), arf((1, -1_200_001))))
    assert (lo, hi) == (-2 * tiny, 2 * tiny)
    # ordinary balls: their own endpoints (mag radii are rounded up a little by Arb)
    lo, hi = endpoints(arb(arf((3, -4)), arf((1, -10))))
    assert lo <= Fraction(3, 16) - Fraction(1, 1024) < Fraction(3, 16) + Fraction(1, 1024) <= hi
    assert hi - lo < Fraction(1, 500)
    with pytest.raises(ValueError):
        endpoints(arb(arf((1, EXP_LIMIT + 5))))


# --- overflow in the float tier: huge factors whose product cancels ------------------------

def _exact_E(H: np.ndarray, X: np.ndarray, Y: np.ndarray) -> list[list[Fraction]]:
    Cex = _exact_C(H, Fraction(1))
    return [[Cex[i][j] - sum((Fraction(float(x)) * Fraction(float(y))
                              for x, y in zip(X[i], Y[j], strict=True)), Fraction(0))
             for j in range(len(Y))] for i in range(len(X))]


def _tau_interval(q: Fraction) -> tuple[Fraction, Fraction]:
    from flint import arb, fmpq

    from softrank.certify.numerics.arbutil import precision

    with precision(128):
        return endpoints(2 * (arb(fmpq(q.numerator, q.denominator)) / 4).tanh())


_A = 1e200
_HUGE = {
    # rows (a, a) and (a, -a) for both factors: fl(X Y^T) overflows to inf / inf - inf
    "X=Y": (np.array([[_A, _A], [_A, -_A]]), np.array([[_A, _A], [_A, -_A]])),
    # X rows (a, a), Y rows (a, -a): T = X Y^T = 0 exactly, fl(X Y^T) is not finite
    "T=0": (np.array([[_A, _A], [_A, _A]]), np.array([[_A, -_A], [_A, -_A]])),
}


@pytest.mark.parametrize("tier", ["arb", "auto"])
@pytest.mark.parametrize("name", sorted(_HUGE))
def test_huge_cancelling_factors_never_give_tau_zero(name: str, tier: str) -> None:
    """Regression: an overflowing float residual made every row bound NaN, the arb tier was
    handed no candidate rows and returned 0, so q and tau were reported in [0, 0] and the
    profile at eps = 1/100 "applicable".  Now the bracket contains the exact q (and tau) of
    the exact product, and the profile is not applicable (or undecided)."""
    from softrank.certify.intrinsic.check import check_intrinsic

    H = np.array([[0.0, 3.0], [1.0, -2.0]])
    C = interaction_from_logits(H)
    X, Y = _HUGE[name]
    q = _exact_q(_exact_E(H, X, Y))
    assert q > 0
    t_lo, t_hi = _tau_interval(q)
    res = tau_bracket(C, X, Y, cycle=[0, 1], tier=tier, r=2)
    assert res.q.lo <= q and (res.q.hi is None or q <= res.q.hi)
    assert res.tau.lo <= t_hi and (res.tau.hi is None or t_lo <= res.tau.hi)
    assert res.q.hi != 0 and res.tau.hi != 0
    chk = check_intrinsic(C, {"X": X, "Y": Y, "cycle": [0, 1]}, "1/100", 2, tier=tier)
    assert chk.profile.status != "applicable"
    if name == "T=0":
        # the same T given as zero factors: a tight bracket, which the huge one must contain
        z = tau_bracket(C, np.zeros((2, 2)), np.zeros((2, 2)), cycle=[0, 1], tier=tier, r=2)
        assert z.q.lo <= q <= z.q.hi and z.q.hi - z.q.lo < Fraction(1, 10**9)
        assert res.q.lo <= z.q.hi and (res.q.hi is None or z.q.lo <= res.q.hi)
        # the kernel's own row choice uses the exact product after the overflow: just as tight
        assert res.q.hi is not None and res.q.hi - res.q.lo < Fraction(1, 10**9)
        assert chk.profile.status == "not applicable"  # tau(0) ~ 1.27 >= 1/100, proved
        # with the rows of the optimal cycle given, arb closes the bracket exactly
        tight = tau_bracket(C, X, Y, cycle=[0, 1], cycle_rows=[1, 0], tier="arb", r=2)
        assert tight.q.lo == q == tight.q.hi
    else:  # T = 2 a^2 I: q ~ 2 a^2, tau ~ 2, proved from the cycle alone
        assert res.q.lo > Fraction(10) ** 400 and res.tau.lo > Fraction(199, 100)
        assert chk.profile.status == "not applicable"


def test_huge_factors_float_tier_alone_proves_no_upper_bound() -> None:
    H = np.array([[0.0, 3.0], [1.0, -2.0]])
    C = interaction_from_logits(H)
    for X, Y in _HUGE.values():
        res = tau_bracket(C, X, Y, cycle=[0, 1], tier="float64", r=2)
        assert res.q.hi is None and res.tau.hi is None and res.q.lo == 0
