"""Brackets tightened across eps (certify/tighten.py): the monotonicity r_eps2 <= r_eps1 for
eps1 <= eps2, checked against the exact oracle, and the citation rules."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from softrank.certify.errors import InputError
from softrank.certify.tighten import ProvedEnd, tighten
from softrank.exact import oracle

EPS = [Fraction(k, 20) for k in (1, 3, 5, 7, 9, 12, 15)]


def _cells(seed: int, count: int) -> list[list[list[Fraction]]]:
    rng = random.Random(seed)
    cells = []
    for _ in range(count):
        m, n = rng.choice([(2, 3), (2, 4), (3, 2), (3, 3)])
        rows = []
        for _ in range(m):
            w = [Fraction(rng.randint(0, 9)) for _ in range(n)]
            s = sum(w) or Fraction(1)
            rows.append([x / s for x in w] if sum(w) else [Fraction(1, n)] * n)
        cells.append(rows)
    return cells


@pytest.mark.parametrize("seed", [0, 1])
def test_tightened_ends_bracket_the_exact_rank_at_every_eps(seed):
    """Feed the oracle's proved ends at a random half of the tolerances; the tightened
    bracket at every tolerance (also those with no end of their own) must contain the exact
    r_eps there.  A wrong direction of the monotonicity fails this on the first cell whose
    rank changes with eps."""
    rng = random.Random(seed)
    changed = 0
    for cell in _cells(seed, 12):
        exact = {}
        for e in EPS:
            res = oracle(cell, e)
            assert res.lower == res.upper  # these cells are decided exactly
            exact[e] = res.lower
        changed += len(set(exact.values())) > 1
        given = rng.sample(EPS, 4)
        ends = [ProvedEnd(e, side, exact[e], f"b{i}")
                for i, e in enumerate(given) for side in ("lower", "upper")]
        for e, tb in tighten(ends, at=EPS).items():
            assert tb.consistent
            if tb.lower is not None:
                assert tb.lower <= exact[e] and tb.lower_from.eps >= e
            if tb.upper is not None:
                assert tb.upper >= exact[e] and tb.upper_from.eps <= e
            if e in given:
                assert tb.closed and tb.lower == exact[e]
    assert changed >= 3  # the test exercises tolerances where the rank moves


def test_citations_prefer_the_own_eps_then_the_nearest():
    q = Fraction
    ends = [ProvedEnd(q(1, 4), "lower", 3, "own"), ProvedEnd(q(7, 20), "lower", 3, "far"),
            ProvedEnd(q(3, 10), "lower", 3, "near"), ProvedEnd(q(3, 20), "upper", 5, "u15"),
            ProvedEnd(q(1, 4), "upper", 6, "u25")]
    tb = tighten(ends)[q(1, 4)]
    assert (tb.lower, tb.lower_from.source) == (3, "own")
    assert (tb.upper, tb.upper_from.source) == (5, "u15")
    tb = tighten(ends, at=["0.2"])[q(1, 5)]
    assert (tb.lower, tb.lower_from.source) == (3, "own")  # nearest of the equal ranks
    assert (tb.upper, tb.upper_from.source) == (5, "u15")
    tb = tighten(ends, at=["0.27"])[q(27, 100)]
    assert (tb.lower, tb.lower_from.source) == (3, "near")
    # nothing proved below eps = 1/10 gives no upper end; nothing above 0.4 no lower end
    assert tighten(ends, at=["1/10"])[q(1, 10)].upper is None
    assert tighten(ends, at=["0.4"])[q(2, 5)].lower is None
    assert tighten([]) == {}


def test_a_lower_end_above_an_upper_end_is_reported_inconsistent():
    ends = [ProvedEnd(Fraction(1, 2), "lower", 4, "a"), ProvedEnd(Fraction(1, 4), "upper", 3, "b")]
    assert not tighten(ends)[Fraction(1, 2)].consistent


@pytest.mark.parametrize("end,field", [
    (ProvedEnd(Fraction(1, 4), "middle", 2, "x"), "side"),
    (ProvedEnd(Fraction(1, 4), "lower", -1, "x"), "rank"),
    (ProvedEnd(Fraction(1, 4), "lower", True, "x"), "rank"),
    (ProvedEnd(Fraction(0), "lower", 1, "x"), "eps"),
])
def test_bad_ends_are_input_errors(end, field):
    with pytest.raises(InputError) as err:
        tighten([end])
    assert err.value.field == field


def _reference(items: list[ProvedEnd], points: list[Fraction]) -> dict:
    """The definition, one scan of every end per tolerance (the earlier quadratic form)."""
    out = {}
    for eps in points:
        lows = [e for e in items if e.side == "lower" and e.eps >= eps]
        ups = [e for e in items if e.side == "upper" and e.eps <= eps]
        low = max(lows, key=lambda e: (e.rank, -(e.eps - eps)), default=None)
        up = min(ups, key=lambda e: (e.rank, eps - e.eps), default=None)
        out[eps] = (low, up)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_the_sweep_cites_what_the_definition_cites(seed):
    # ties in rank and in eps, repeated ends and points with no end: same ends, same citations
    rng = random.Random(seed)
    items = [ProvedEnd(Fraction(rng.randint(1, 12), 12), rng.choice(["lower", "upper"]),
                       rng.randint(0, 4), f"r{i}") for i in range(rng.randint(0, 40))]
    points = sorted({Fraction(rng.randint(1, 24), 24) for _ in range(10)}
                    | {e.eps for e in items})
    got = tighten(items, at=points)
    want = _reference(items, points)
    assert set(got) == set(points)
    for eps, (low, up) in want.items():
        assert got[eps].lower_from is low and got[eps].upper_from is up, (eps, seed)


def test_many_tolerances_of_one_operator_are_one_sweep():
    # 20,000 tolerances: the definition's scan would compare 4 * 10^8 pairs
    n = 20_000
    items = [ProvedEnd(Fraction(i + 1, n), "upper" if i % 2 else "lower", (n - i) // 100,
                       f"b{i}") for i in range(n)]
    got = tighten(items)
    assert len(got) == n and all(b.consistent for b in got.values())
    first, last = got[Fraction(1, n)], got[Fraction(1)]
    assert first.upper is None and last.lower is None and last.upper == 0
