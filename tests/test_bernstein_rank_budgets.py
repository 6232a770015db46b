"""The Bernstein producer's budget grows with the ceiling its ranks may climb to.

Untrusted producer code: what is checked is the factor itself (one phase budget up to
RANK_STEP, in proportion above it, capped at RANK_BUDGETS), that ``produce`` hands the search
exactly that many budgets for the ceiling it was given (the best upper end, else min(m, N)),
and that what a scaled search finds is still proved by the kernel.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower
from softrank.witnesses.producers import bernstein as bn
from softrank.witnesses.producers._common import budget_settings

from .helpers import random_attention


def test_the_factor_is_one_up_to_a_step_then_proportional_then_capped() -> None:
    assert bn.rank_budgets(1) == bn.rank_budgets(bn.RANK_STEP) == 1.0
    assert bn.rank_budgets(bn.RANK_STEP * 2) == 2.0
    assert bn.rank_budgets(int(bn.RANK_STEP * 2.5)) == 2.5
    top = int(bn.RANK_STEP * bn.RANK_BUDGETS)
    assert bn.rank_budgets(top) == bn.rank_budgets(10 * top) == bn.RANK_BUDGETS
    ceilings = range(1, 2 * top)
    factors = [bn.rank_budgets(c) for c in ceilings]
    assert factors == sorted(factors)  # never less budget for a higher ceiling


@pytest.mark.parametrize("stop_at, factor", [(3, 1.0), (25, 2.5), (None, 4.0)])
def test_produce_gives_the_search_the_budgets_of_its_ceiling(monkeypatch, stop_at, factor
                                                             ) -> None:
    seen: list[tuple[float, int]] = []

    def spy(A, eps, budget, *, ceiling, **kwargs):
        seen.append((budget, ceiling))
        return None

    monkeypatch.setattr(bn, "search", spy)
    # without an upper end the ceiling is min(m, N) = 48
    A = random_attention(np.random.default_rng(0), 48, 48)
    assert bn.Bernstein(budget=1.5).produce(A, Fraction(1, 4), stop_at=stop_at) is None
    assert seen == [(1.5 * factor, 48 if stop_at is None else stop_at)]


def test_a_search_on_scaled_budgets_is_proved_by_the_kernel() -> None:
    A = random_attention(np.random.default_rng(1), 48, 48)
    with budget_settings(mode="work"):
        c = bn.Bernstein(budget=0.02).produce(A, Fraction(1, 4), stop_at=30)
    assert c is not None and c.rank >= 1
    assert check_lower(A, c.to_mapping(), "1/4").status == "holds"
    assert c.kind == "bernstein"
    forged = c.to_mapping()
    forged["P"] = 2.0 * forged["P"]  # P A W = 2 W, far from W: the value passes 1
    assert check_lower(A, forged, "1/4").status == "fails"
