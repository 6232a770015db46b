"""Intrinsic checks on inputs a review found mishandled: a reused logits buffer, results past
Python's digit limit, profiles past the arb exponent limit, beta past the float range, ragged
vectors, NumPy ranks and non-mapping witnesses."""

from __future__ import annotations

from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.certify.intrinsic import (
    Bracket,
    check_intrinsic,
    interaction_from_logits,
    profile,
    tau_bracket,
)


def _q(bracket: Bracket) -> tuple:
    return bracket.lo, bracket.hi


def test_a_reused_logits_buffer_does_not_change_the_interaction():
    rng = np.random.default_rng(1)
    H_old, H_new = rng.standard_normal((4, 5)), 3 * rng.standard_normal((4, 5))
    X, Y = rng.standard_normal((4, 1)), rng.standard_normal((5, 1))
    buf = H_old.copy()
    C = interaction_from_logits(buf)
    buf[:] = H_new  # the caller loads the next head into the same array
    fresh = interaction_from_logits(H_old)
    got = tau_bracket(C, X, Y, cycle=[0, 1, 2], cycle_rows=[0, 1, 2], tier="arb")
    want = tau_bracket(fresh, X, Y, cycle=[0, 1, 2], cycle_rows=[0, 1, 2], tier="arb")
    assert _q(got.q) == _q(want.q)


def test_results_past_the_digit_limit_serialise_exactly():
    tiny = Fraction(1, 3**9000)
    b = Bracket("kappa", tiny, Fraction(1), "exact", {"rad_Y_sq": tiny})
    doc = b.to_json()
    assert int(flint.fmpz(doc["lo"].split("/")[1])) == 3**9000


@pytest.mark.parametrize("eps, r", [(Fraction(1), 10**6),
                                    (Fraction(1, 10) + Fraction(1, 2**1100), 2000)])
def test_a_profile_past_the_exponent_limit_keeps_safe_ends(eps, r):
    kappa = Bracket("kappa", Fraction(1), Fraction(10), "exact")
    tau = Bracket("tau", Fraction(0), Fraction(1, 10), "exact")
    p = profile(kappa, tau, eps, r)
    assert p.status == "applicable"
    # lower ends at kappa 1, tau 0: (r/2) log(1 + 1/eps^2); at the upper ends the profile is
    # past 2**(2**20) (kappa 10, eps - tau 9/10 or 2^-1100), so no upper end is claimed
    def mp(q: Fraction) -> mpmath.mpf:
        return mpmath.mpf(q.numerator) / q.denominator

    with mpmath.workprec(300):
        want = mpmath.mpf(r) / 2 * mpmath.log(1 + 1 / mp(eps) ** 2)
        assert abs(mp(p.log_profile.lo) / want - 1) < mpmath.mpf(2) ** -100
    assert p.profile.lo >= 1 and p.profile.hi is None
    p.log_profile.to_json()
    p.profile.to_json()


@pytest.mark.parametrize("beta", ["1e400", Fraction(10**400), 2**1024])
def test_beta_past_the_float_range_is_an_input_error(beta):
    with pytest.raises(InputError) as err:
        interaction_from_logits(np.zeros((2, 3)) + 0.5, beta)
    assert err.value.field == "beta"


def test_a_ragged_vector_witness_is_an_input_error():
    rng = np.random.default_rng(0)
    C = interaction_from_logits(rng.standard_normal((4, 5)))
    X, Y = rng.standard_normal((4, 2)), rng.standard_normal((5, 2))
    with pytest.raises(InputError) as err:
        tau_bracket(C, X, Y, b=[[1.0], [2.0, 3.0]])
    assert err.value.field == "b"


def test_rank_and_witness_types_are_checked_before_any_work():
    rng = np.random.default_rng(0)
    C = interaction_from_logits(rng.standard_normal((4, 5)))
    w = {"X": rng.standard_normal((4, 1)), "Y": rng.standard_normal((5, 1))}
    res = check_intrinsic(C, w, "1/2", np.int64(1))
    assert res.r == 1
    with pytest.raises(InputError) as err:
        check_intrinsic(C, [w["X"], w["Y"]], "1/2", 1)
    assert err.value.field == "witness"
    with pytest.raises(InputError) as err:
        check_intrinsic(C, w, "1/2", 1.0)
    assert err.value.field == "r"
