"""The NaN- and empty-safe float reductions of certify.numerics.tiers: each returns a bound that is
valid whatever a NaN stands for, and the safe value for an empty set."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softrank.certify.numerics.tiers import (
    may_attain_max,
    safe_max_lower,
    safe_max_upper,
    safe_min_lower,
    safe_min_upper,
)

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("values,want", [
    ([], INF), ([1.0, 2.0], 2.0), ([1.0, NAN], INF), ([NAN], INF), ([-INF, 3.0], 3.0),
    ([INF, 1.0], INF),
])
def test_safe_max_upper(values, want) -> None:
    assert safe_max_upper(np.array(values)) == want
    assert safe_max_upper(values) == want


@pytest.mark.parametrize("values,want", [
    ([], -INF), ([1.0, 2.0], 1.0), ([1.0, NAN], -INF), ([NAN], -INF), ([INF, 3.0], 3.0),
])
def test_safe_min_lower(values, want) -> None:
    assert safe_min_lower(np.array(values)) == want


@pytest.mark.parametrize("values,want", [
    ([], -INF), ([1.0, 2.0], 2.0), ([1.0, NAN], 1.0), ([NAN, NAN], -INF), ([-INF], -INF),
])
def test_safe_max_lower(values, want) -> None:
    assert safe_max_lower(np.array(values)) == want


@pytest.mark.parametrize("values,want", [
    ([], INF), ([1.0, 2.0], 1.0), ([NAN, 2.0], 2.0), ([NAN], INF),
])
def test_safe_min_upper(values, want) -> None:
    assert safe_min_upper(np.array(values)) == want


def test_bounds_hold_for_every_value_a_nan_may_stand_for() -> None:
    """Brute force: items x_i with bounds lo_i <= x_i <= hi_i, some bounds replaced by NaN;
    the reductions bound the true max/min for random x consistent with the known bounds."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 6))
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 300, size=n)
        lo = x - np.abs(rng.standard_normal(n))
        hi = x + np.abs(rng.standard_normal(n))
        lo[rng.random(n) < 0.3] = NAN
        hi[rng.random(n) < 0.3] = NAN
        assert safe_max_upper(hi) >= x.max() and safe_min_lower(lo) <= x.min()
        assert safe_max_lower(lo) <= x.max() and safe_min_upper(hi) >= x.min()
        idx = may_attain_max(hi, lo)
        assert int(np.argmax(x)) in set(idx.tolist())


def test_may_attain_max_keeps_nan_rows_and_everything_without_lower_bounds() -> None:
    assert may_attain_max([1.0, NAN, 5.0], [0.5, NAN, 4.0]).tolist() == [1, 2]
    assert may_attain_max([1.0, 2.0], [NAN, NAN]).tolist() == [0, 1]
    assert may_attain_max([NAN, NAN], [NAN, NAN]).tolist() == [0, 1]
    assert may_attain_max([], []).tolist() == []
