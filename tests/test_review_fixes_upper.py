"""Regression tests from an adversarial review of the upper check, the tolerances and
``tighten``: validation before any charge, no unpriced per-row work after the float tier,
exact tolerances whatever their spelling."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import InputError, ProvedEnd, check_bracket, check_upper, tighten
from softrank.certify.numerics import rowl1
from softrank.certify.rationals import parse_eps


@pytest.mark.parametrize("max_work", [0, 50, None])
@pytest.mark.parametrize("where", ["U", "V", "A"])
def test_non_finite_factors_are_an_input_error_under_any_work_limit(where, max_work):
    arrs = {"A": np.array([[0.5, 0.5]]), "U": np.array([[1.0]]), "V": np.array([[1.0, 1.0]])}
    arrs[where] = arrs[where].copy()
    arrs[where].flat[0] = np.nan
    with pytest.raises(InputError) as err:
        check_upper(arrs["A"], arrs["U"], arrs["V"], "1/4", max_work=max_work)
    assert err.value.field == where
    with pytest.raises(InputError):
        check_bracket(arrs["A"], {"kind": "factors", "rank": 1, "U": arrs["U"], "V": arrs["V"]},
                      None, "1/4", max_work=max_work)


def test_only_the_rows_a_later_tier_takes_up_become_rationals(monkeypatch):
    # one row at the boundary, 100,000 rows the float tier settles: converting them all to
    # Fractions was unpriced work (8 s at 2,000,000 rows under a 0.1 s limit)
    m = 100_000
    A = np.full((m, 1), 0.5)
    U = np.ones((m, 1))
    V = np.full((1, 1), 0.5)
    A[7, 0] = 0.5 + 2.0 ** -50
    t = Fraction(1, 2 ** 50)
    calls = []
    real = rowl1.Fraction

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(rowl1, "Fraction", counting)
    d = rowl1.decide_max_row_l1(A, U, V, t)
    assert d.status == "holds" and d.tiers_run[0] == "float64" and len(d.tiers_run) > 1
    assert d.value.lo <= t == d.value.hi or d.value.lo <= t <= d.value.hi
    assert len(calls) < 100, len(calls)


@pytest.mark.parametrize("seed", range(40))
def test_enclosures_contain_the_exact_maximum_in_every_tier(seed):
    rng = np.random.default_rng(seed)
    m, k, N = (int(x) for x in rng.integers(1, 9, 3))
    A = rng.random((m, N))
    U, V = rng.random((m, k)), rng.random((k, N))
    exact = max(sum(abs(Fraction(float(A[i, j])) - sum(Fraction(float(U[i, r])) *
                                                      Fraction(float(V[r, j])) for r in range(k)))
                    for j in range(N)) for i in range(m))
    # tolerances at, next to and away from the exact maximum drive every escalation path
    for t in (exact, exact * (1 + Fraction(1, 2 ** 60)), exact * (1 - Fraction(1, 2 ** 60)),
              exact * 2, exact / 2):
        for tier in ("auto", "float64", "arb", "exact"):
            d = rowl1.decide_max_row_l1(A, U, V, t, tier=tier)
            if d.value is not None:
                assert d.value.lo <= exact <= d.value.hi, (tier, t)
            if d.status == "holds":
                assert exact <= t
            elif d.status == "fails":
                assert exact > t
            else:
                assert tier != "auto" and tier != "exact"


def test_tighten_reads_string_tolerances_as_the_rationals_they_denote():
    ends = [ProvedEnd("1/2", "upper", 1, "a"), ProvedEnd("0.25", "upper", 2, "b"),
            ProvedEnd("1/3", "lower", 1, "c")]
    same = [ProvedEnd(Fraction(1, 2), "upper", 1, "a"), ProvedEnd(Fraction(1, 4), "upper", 2, "b"),
            ProvedEnd(Fraction(1, 3), "lower", 1, "c")]
    got, want = tighten(ends), tighten(same)
    assert list(got) == list(want)
    for eps in got:
        assert (got[eps].lower, got[eps].upper) == (want[eps].lower, want[eps].upper)
    at = tighten(ends, at=["1/2", Fraction(1, 3)])
    assert at[Fraction(1, 2)].upper == 1 and at[Fraction(1, 3)].upper == 2
    assert at[Fraction(1, 3)].lower == 1


@pytest.mark.parametrize("text", ["1_0", "0.1_5", "1/4_0", "1_0e-2"])
def test_underscored_numbers_are_not_tolerances(text):
    with pytest.raises(InputError) as err:
        parse_eps(text)
    assert err.value.field == "eps"


def test_a_long_double_tolerance_names_its_field():
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(InputError) as err:
        parse_eps(np.longdouble(0.25), field="claims.eps")
    assert err.value.field == "claims.eps"
