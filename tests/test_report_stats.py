"""Unit tests of the statistics layer (softrank/audit/stats.py) and of the short display of
margins and claims."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from softrank.audit import stats
from softrank.audit import tables as T
from softrank.audit.report import short_claim


def _pairs(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        L = rng.choice([0, 1, 2, 3, 5])
        U = rng.choice([max(L, 1), L + 1, L + 7, 9])
        out.append({"operator": f"o{i:02d}", "resolved": T.is_resolved(U, L, 64), "lower": L,
                    "upper": U, "ratio": None if L == 0 else str(Fraction(U, L))})
    return out


def _by_definition(ps, rng, R):
    """Resample, recompute point_statistics on each resample, take the percentile interval."""
    draws = {s: [] for s in stats.STATISTICS}
    for _ in range(R):
        sample = [ps[rng.randrange(len(ps))] for _ in range(len(ps))]
        for k, v in stats.point_statistics(sample).items():
            draws[k].append(v)
    return {k: stats.percentile_interval(v) for k, v in draws.items()}


@pytest.mark.parametrize("n", [1, 2, 3, 8, 25])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_bootstrap_equals_the_definition(seed, n):
    ps = _pairs(seed, n)
    assert stats.bootstrap(ps, random.Random(seed), 150) == \
        _by_definition(ps, random.Random(seed), 150)


def test_percentile_interval_order_statistics_and_infinity():
    vals = [Fraction(i) for i in range(80)]
    assert stats.percentile_interval(vals) == [2, 77]  # j = floor(80/40) = 2
    assert stats.percentile_interval(vals[:39]) == [0, 38]  # j = 0: the full range
    assert stats.percentile_interval([Fraction(1)] * 38 + [None] * 2) == [1, None]
    with pytest.raises(ValueError):
        stats.percentile_interval([])


def test_closure_and_point_statistics_exact():
    ps = [{"operator": "a", "resolved": True, "lower": 4, "upper": 4, "ratio": "1"},
          {"operator": "b", "resolved": False, "lower": 0, "upper": 9, "ratio": None},
          {"operator": "c", "resolved": True, "lower": 3, "upper": 5, "ratio": "5/3"}]
    got = stats.point_statistics(ps)
    assert got == {"resolved_share": Fraction(2, 3), "closed_share": Fraction(1, 3),
                   "median_lower": 3, "median_upper": 5, "median_ratio": Fraction(5, 3)}
    assert stats.point_statistics(ps[1:2])["median_ratio"] is None


def test_interval_rows_seeded_per_row_and_refuse_zero_resamples():
    ps = [dict(p, family="f", eps="1/4") for p in _pairs(5, 20)]
    qs = [dict(p, family="g", eps="1/4") for p in _pairs(6, 20)]
    alone = stats.interval_rows(ps, seed=3, resamples=100)
    both = stats.interval_rows(ps + qs, seed=3, resamples=100)
    assert [r["family"] for r in both] == ["f", "g", None]
    assert both[0] == alone[0]  # adding a family does not move another row's intervals
    assert stats.interval_rows(ps, seed=4, resamples=100) != alone
    with pytest.raises(ValueError):
        stats.interval_rows(ps, resamples=0)


def test_layer_rows_and_layer_of():
    assert stats.layer_of({"layer": 3}) == 3 and stats.layer_of({"layer": True}) is None
    assert stats.layer_of({}) is None and stats.layer_of("x") is None
    ps = [dict(p, family="f", eps="1/4") for p in _pairs(1, 6)]
    rows = stats.layer_rows(ps, {p["operator"]: i % 2 for i, p in enumerate(ps)})
    assert [(r["layer"], r["operators"]) for r in rows] == [(0, 3), (1, 3)]
    assert stats.layer_rows(ps, {}) == []


@pytest.mark.parametrize(("q", "want"), [
    (Fraction(3, 20), "0.1500"), (Fraction(-4719, 10000), "-0.4719"), (Fraction(1, 3), "0.3333"),
    (Fraction(99996, 100000), "1.000"), (Fraction(12345678), "1.235e+07"),
    (Fraction(1, 10**9), "1.000e-09"), (Fraction(0), "0"), (Fraction(25), "25.00"),
])
def test_fmt_short(q, want):
    assert T.fmt_short(q) == want


def test_short_claim_keeps_short_numbers_and_shortens_long_rationals():
    t = Fraction(3, 20) - Fraction(1, 2**60)
    text = f"||A - UV||_row1 <= eps - chi = {t}"
    assert len(str(t)) > 30
    assert short_claim(text) == "||A - UV||_row1 <= eps - chi = ~0.1500"
    assert short_claim("value < 1") == "value < 1"
    assert short_claim("||A||_row1 > 3/20") == "||A||_row1 > 3/20"
