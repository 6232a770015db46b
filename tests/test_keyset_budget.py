"""The key-set searches of ``submatrix`` and ``keyset`` end at their budget (work units times
the operator's size and ``--budget-scale``) and keep what they found; within it they find
what the search without a deadline finds."""

from __future__ import annotations

from fractions import Fraction

import pytest

from softrank import certify
from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers import keyset as ks
from softrank.witnesses.producers._common import budget_settings, work_done
from softrank.witnesses.producers.lower import DEFAULT_KEYSET_BUDGET

from .test_keyset_shared_scores import attention, same_search


@pytest.mark.parametrize("singletons", [False, True])
def test_a_deadline_far_off_changes_nothing(singletons):
    A = attention(40, 40, 3.0, 1)
    with budget_settings(mode="work"):
        plain = ks.keyset_search(A, 0.2, singletons=singletons)
        stopped: dict = {}
        timed = ks.keyset_search(A, 0.2, singletons=singletons, deadline=1e9, stopped=stopped)
    assert plain is not None and same_search(plain, timed) and not stopped


@pytest.mark.parametrize("name", ["submatrix", "keyset"])
def test_the_budget_ends_the_search_and_what_it_found_stands(name):
    """A high-rank 96 x 96 softmax: the full search reaches a large rank; at budget scale
    1/1000 it stops early (claimed), within its budget plus one configuration's charge, and
    its certificate is one the kernel proves."""
    A = attention(96, 96, 3.0, 2)
    eps = Fraction(1, 4)
    with budget_settings(mode="work"):
        full = get_producer(name).produce(A, eps)
    scale = 1e-3
    budget = DEFAULT_KEYSET_BUDGET * 96 * 96 / 128**2 * scale
    with budget_settings(mode="work", scale=scale):
        w0 = work_done()
        short = get_producer(name).produce(A, eps)
        spent = work_done() - w0
    assert "keyset_budget_ended" not in full.claims
    assert short.claims["keyset_budget_ended"] is True
    assert spent <= budget * 1.5 and short.rank < full.rank
    lower = {"kind": short.kind, "rank": short.rank, **short.arrays}
    assert certify.check_lower(A, lower, eps).status == "holds"
