"""check_bracket: validated ends, outcomes, verdicts, JSON, and the contradiction guard."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from softrank import certify
from softrank.certify import BracketCheck, InputError, check_bracket, exact_error
from softrank.certify.result import Check
from tests.test_svd import softmax


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(3)
    A = softmax(rng, 24, 20, scale=3.0)
    U, s, Vt = np.linalg.svd(A)
    return A, U, s, Vt


def factors(U, s, Vt, k):
    return {"kind": "factors", "rank": k, "U": U[:, :k] * s[:k], "V": Vt[:k]}


def test_confirmed_bracket_and_verdicts(case):
    A, U, s, Vt = case
    k = 16  # truncated SVD is a poor row-l1 approximation: its error is about 0.2 here
    eps = exact_error(A, U[:, :k] * s[:k], Vt[:k])
    assert eps < Fraction(1, 4)
    b = check_bracket(A, eps, factors(U, s, Vt, k), {"kind": "frobenius_tail", "rank": 2})
    assert isinstance(b, BracketCheck)
    assert (b.upper, b.lower, b.upper_claim, b.lower_claim) == (k, 2, k, 2)
    assert b.upper_result == b.lower_result == "proved"
    assert b.upper_outcome == b.lower_outcome == "confirmed"  # the deprecated words
    assert b.shape == (24, 20) and b.full_rank == 20 and b.eps == eps and b.chi == 0
    assert [b.verdict(j) for j in (0, 1, 2, 15, 16, 20)] == [
        "impossible", "impossible", "unresolved", "unresolved", "feasible", "feasible"]
    assert not b.resolved  # 16 > 2 * 2, 14 > 2, 14 > 20 / 10
    js = json.loads(json.dumps(b.to_json()))
    assert js["upper"] == k and js["lower"] == 2 and js["eps"] == str(eps)
    assert js["upper_check"]["status"] == "holds" and js["lower_check"]["status"] == "holds"


def test_failed_inequalities_fall_back(case):
    A, U, s, Vt = case
    k = 16
    eps = exact_error(A, U[:, :k] * s[:k], Vt[:k]) - Fraction(1, 10**9)
    # the witness's error exceeds eps and the rank-19 tail is too small: both inequalities
    # are false, which proves nothing about r_eps (neither claim is refuted)
    b = check_bracket(A, eps, factors(U, s, Vt, k), {"kind": "frobenius_tail", "rank": 19})
    assert b.upper_result == "does_not_hold" and b.upper == 20
    assert b.lower_result == "does_not_hold"
    assert b.upper_outcome == b.lower_outcome == "refuted"  # the deprecated words
    assert "refuted" not in repr(b) and "upper: witness does not hold" in repr(b)
    assert b.lower == 1  # ||A||_row1 = 1 > eps, proved on the spot
    assert b.nonzero_check is not None and b.nonzero_check.holds
    assert b.verdict(0) == "impossible" and b.verdict(19) == "unresolved"
    assert b.verdict(20) == "feasible"


def test_absent_ends_and_large_eps(case):
    A = case[0]
    b = check_bracket(A, "2", None, None)
    assert b.upper_result == b.lower_result == "absent"
    assert (b.upper, b.lower) == (20, 0)  # ||A||_row1 = 1 < 2: even B = 0 is within eps
    assert b.upper_check is None and b.lower_check is None
    assert json.loads(json.dumps(b.to_json()))["lower_check"] is None


def test_nonzero_claim_and_weakened_tier(case):
    A, U, s, Vt = case
    b = check_bracket(A, "0.5", None, {"kind": "nonzero", "rank": 1})
    assert b.lower == 1 and b.lower_result == "proved"
    b = check_bracket(A, "1.001", None, {"kind": "nonzero", "rank": 1})
    assert b.lower == 0 and b.lower_result == "does_not_hold"  # row sums are about 1
    # a tie that the float tier alone cannot decide: weakened, the end falls back
    rng = np.random.default_rng(5)
    B = softmax(rng, 6, 6, scale=1.0)
    Uf, sf, Vtf = np.linalg.svd(B)
    D, W, X = Uf[:, :2].T, Vtf[:2].T, np.diag(1 / sf[:2])
    from tests.test_lower_decoder import exact_parts

    delta, xd, w = exact_parts(B, D, W, X)
    eps_star = (1 - delta) / (xd * w)
    b = check_bracket(B, eps_star, None, {"kind": "decoder", "rank": 2, "D": D, "W": W, "X": X},
                      tier="float64")
    assert b.lower_result == "undecided" and b.lower <= 1
    assert b.lower_outcome == "weakened"  # the deprecated word
    b = check_bracket(B, eps_star, None, {"kind": "decoder", "rank": 2, "D": D, "W": W, "X": X})
    assert b.lower_result == "does_not_hold"  # exact tier: value = 1 exactly, not < 1


def test_slack_moves_both_ends(case):
    A, U, s, Vt = case
    k = 14
    err = exact_error(A, U[:, :k] * s[:k], Vt[:k])
    chi = Fraction(1, 1000)
    b = check_bracket(A, err + chi, factors(U, s, Vt, k), None, chi=chi)
    assert b.upper == k and b.chi == chi
    b = check_bracket(A, err + chi / 2, factors(U, s, Vt, k), None, chi=chi)
    assert b.upper_result == "does_not_hold" and b.upper == 20


def test_refuted_only_by_the_other_proved_end(case):
    """An upper claim k below a proved lower end L is refuted (r_eps >= L > k), and a lower
    claim above a proved upper end likewise; a failed inequality alone never is."""
    A, U, s, Vt = case
    eps = Fraction(1, 4)
    low = check_bracket(A, None, {"kind": "frobenius_tail", "rank": 2}, eps)
    assert low.lower_result == "proved" and low.lower == 2
    # rank-1 factors: their error exceeds eps, and r_eps >= 2 is proved, so r_eps <= 1 is false
    b = check_bracket(A, factors(U, s, Vt, 1), {"kind": "frobenius_tail", "rank": 2}, eps)
    assert b.upper_check.status == "fails" and b.upper_result == "refuted"
    assert "upper: claim refuted" in repr(b) and "lower: proved" in repr(b)
    # without the proved lower end the same factors only do not hold
    b = check_bracket(A, factors(U, s, Vt, 1), None, eps)
    assert b.lower == 1 and b.upper_result == "does_not_hold"
    # a lower claim above a proved upper end: r_eps <= k < L
    k = 16
    e16 = exact_error(A, U[:, :k] * s[:k], Vt[:k])
    b = check_bracket(A, factors(U, s, Vt, k), {"kind": "frobenius_tail", "rank": 19}, e16)
    assert b.upper_result == "proved" and b.lower_check.status != "holds"
    assert b.lower_result == "refuted"


def test_rank_above_full_rank_is_an_input_error(case):
    A, U, s, Vt = case  # 24 x 20
    with pytest.raises(InputError) as err:
        check_bracket(A, None, {"kind": "frobenius_tail", "rank": 21}, "1/4")
    assert err.value.field == "lower.rank"
    with pytest.raises(InputError) as err:
        check_bracket(A, {"kind": "factors", "rank": 21, "U": np.zeros((24, 21)),
                          "V": np.zeros((21, 20))}, None, "1/4")
    assert err.value.field == "upper.rank"
    # the largest rank that fits is checked as usual
    top = check_bracket(A, None, {"kind": "frobenius_tail", "rank": 20}, "1/4")
    assert top.lower_check.status == "fails"  # a tiny tail: its inequality is false


def test_contradiction_is_a_kernel_bug(case, monkeypatch):
    A, U, s, Vt = case
    k = 5
    eps = exact_error(A, U[:, :k] * s[:k], Vt[:k])
    fake = Check(status="holds", kind="frobenius_tail", rank=k + 1, eps=eps, threshold=eps,
                 value=None, tier="float64", claim="fake")
    monkeypatch.setattr(certify.bracket, "check_lower", lambda *a, **kw: fake)
    with pytest.raises(AssertionError, match="kernel bug"):
        check_bracket(A, eps, factors(U, s, Vt, k), {"kind": "frobenius_tail", "rank": k + 1})


def test_bad_input(case):
    A, U, s, Vt = case
    good = factors(U, s, Vt, 2)
    for upper, field in ((["x"], "upper"), ({**good, "kind": "svd"}, "upper.kind"),
                         ({k: v for k, v in good.items() if k != "U"}, "upper.U"),
                         ({**good, "extra": 1}, "upper.extra"), ({**good, "rank": 3}, "upper.rank"),
                         ({**good, "V": np.ones((2, 7))}, "upper.V")):
        with pytest.raises(InputError) as info:
            check_bracket(A, "0.25", upper, None, source="s.npz")
        assert info.value.field == field and info.value.source == "s.npz"
    with pytest.raises(InputError) as info:
        check_bracket(A, "0.25", good, {"kind": "decoder", "rank": 2})
    assert info.value.field == "lower.D"
    with pytest.raises(InputError):
        check_bracket(A, "0", good, None)
    with pytest.raises(InputError):
        check_bracket(np.full((2, 2), np.nan), "0.25", None, None)
    b = check_bracket(A, "0.25", None, None)
    for k in (-1, 1.5, True):
        with pytest.raises(InputError):
            b.verdict(k)
