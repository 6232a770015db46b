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


def _rec(bid, op, eps, *, lower, upper, lo_out="confirmed", up_out="confirmed", kind="keyset",
         margin=None):
    return {"bracket": bid, "operator": op, "family": "f", "eps": eps, "shape": [8, 8],
            "lower": lower, "upper": upper, "lower_outcome": lo_out, "upper_outcome": up_out,
            "upper_check": {"kind": "factors", "status": "holds", "margin": margin},
            "lower_check": {"kind": kind, "status": "holds"} if lo_out == "confirmed"
            else None}


def test_per_head_rows_kinds_fallbacks_and_natural_order():
    recs = [_rec("a1", "L0.H10", "1/4", lower=3, upper=5),
            _rec("a2", "L0.H10", "1/4", lower=4, upper=8, kind="decoder"),
            _rec("b1", "L0.H2", "1/4", lower=1, upper=8, lo_out="refuted", up_out="weakened"),
            _rec("c1", "L0.H2", "1/8", lower=0, upper=8, lo_out="absent", up_out="refuted"),
            {"bracket": "e1", "operator": "L0.H3", "eps": "1/4", "error": "bad"}]
    pairs = T.group_pairs(recs, [4])
    rows = stats.per_head_rows(pairs, recs)
    # digit runs compare as numbers: H2 before H10; eps ascending within an operator
    assert [(r["operator"], r["eps"]) for r in rows] == [
        ("L0.H2", "1/8"), ("L0.H2", "1/4"), ("L0.H10", "1/4")]
    h10 = rows[2]
    # L from a2 (decoder), U from a1 (factors): each end's kind is its own record's
    assert (h10["lower"], h10["upper"], h10["gap"]) == (4, 5, 1)
    assert (h10["lower_kind"], h10["upper_kind"]) == ("decoder", "factors")
    assert (rows[1]["lower_kind"], rows[1]["upper_kind"]) == ("nonzero", "trivial")
    assert (rows[0]["lower_kind"], rows[0]["upper_kind"]) == ("none", "trivial")


def test_figure_counts_are_what_the_figures_draw():
    m = {"lo": "1/100", "hi": "3/100"}
    recs = [_rec("a1", "o1", "1/4", lower=2, upper=2, margin=m),
            _rec("a2", "o2", "1/4", lower=1, upper=9, margin=m),
            _rec("a3", "o2", "1/2", lower=1, upper=9),
            {"bracket": "e1", "operator": "o3", "family": "f", "eps": "1/4", "error": "bad",
             "upper_check": {"kind": "factors", "margin": m}}]
    recs[0]["chi"], recs[1]["chi"], recs[2]["chi"] = "0", "1/1000", "1/1000"
    pairs = T.group_pairs(recs, [4])
    c = stats.figure_counts(pairs, recs)
    assert c["brackets"] == {"brackets": 3, "pairs": 3, "panels": 2,
                             "within_criterion": sum(p["resolved"] for p in pairs),
                             "closed": 1}
    panels = stats.margin_panels(recs)
    assert list(panels) == [("upper", "factors")]
    assert panels[("upper", "factors")] == [(Fraction(1, 50), "holds")] * 2
    assert c["margins"] == {"brackets": 3, "checks": 2, "panels": 1}
    assert c["chi"] == {"brackets": 3, "operators": 2, "positive": 1, "families": 1}


def test_interval_rows_equal_the_definition_on_many_small_groups():
    # single-pair groups take a shortcut and rows are grouped in one pass: both must give
    # exactly what filtering every pair per row and resampling by definition gives
    base = _pairs(11, 30)
    ps = [dict(p, family=f"f{i % 17}", eps=("1/4" if i % 3 else "1/10"))
          for i, p in enumerate(base)]
    got = stats.interval_rows(ps, seed=5, resamples=60)
    assert any(r["operators"] == 1 for r in got) and any(r["operators"] > 1 for r in got)
    for row in got:
        fam, eps = row["family"], row["eps"]
        mine = sorted((p for p in ps if p["eps"] == eps and (fam is None or p["family"] == fam)),
                      key=lambda p: p["operator"])
        assert row["operators"] == len(mine)
        rng = random.Random(stats.stream_seed(5, "all" if fam is None else fam, eps))
        want = _by_definition(mine, rng, 60)
        assert row["intervals"] == {k: [stats._q(v) for v in want[k]] for k in stats.STATISTICS}
