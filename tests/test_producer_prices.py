"""Built-in producers without a search budget of their own are priced before they start and
skipped, with a note, where the price is above their budget (``prices``)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from softrank.cli import main
from softrank.witnesses import open_store
from softrank.witnesses.producers import prices
from softrank.witnesses.producers._common import budget_settings, least_rank
from softrank.witnesses.producers.pipeline import produce_operator

from .helpers import softmax_rows

PRICED = ("tsvd", "rw_svd", "cpqr", "rpqr", "rep_rows", "frobenius_tail", "pinv_decoder")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 513])
def test_attempts_bound_the_rank_search(n):
    """``attempts`` bounds the ranks ``least_rank`` tries, wherever the least passing rank
    lies (the priced producers each try at most that many fits)."""
    for least in range(1, n + 1):
        tried = []

        def attempt(k, least=least, tried=tried):
            tried.append(k)
            return k >= least, k

        assert least_rank(attempt, n)[0] == least
        assert len(tried) <= prices.attempts(n, n)


def test_prices_grow_with_the_operator_and_stay_within_budget_at_the_default_scale():
    for name in PRICED:
        ps = [prices.price(name, (n, n)) for n in (64, 128, 512, 4096)]
        assert all(a < b for a, b in zip(ps, ps[1:], strict=False))
        with budget_settings(mode="work", scale=1.0):
            assert prices.over_budget(name, (4096, 4096)) is None
    # a budgeted search is priced by its longest step without a budget check
    assert prices.price("alt_l1", (128, 128)) == prices.price("tsvd", (128, 128))
    assert prices.price("bernstein", (128, 128)) < prices.price("nerve", (128, 128))
    assert prices.price("keyset", (128, 128)) is None  # every step under its own budget
    assert prices.price("my_plugin", (128, 128)) is None


def test_alt_l1_start_is_not_run_above_its_price():
    """At a scale where tsvd's work is above the budget, alt_l1 (whose start is that work,
    before its own budget is first read) is skipped with a note, not run."""
    A = softmax_rows(np.random.default_rng(2).standard_normal((200, 200)) * 3)
    scale = _scale_between("frobenius_tail", "tsvd", A.shape)
    with budget_settings(mode="work", scale=scale):
        assert prices.over_budget("alt_l1", A.shape) is not None
        res = produce_operator("op", A, [Fraction(1, 4)], ["alt_l1", "tsvd"], ["nonzero"])
    assert not res.brackets and not res.failures
    assert sum("alt_l1 skipped" in s for s in res.skipped) == 1


def _scale_between(cheap: str, dear: str, shape: tuple[int, int]) -> float:
    """A budget scale at which ``cheap`` runs and ``dear`` is skipped on ``shape``."""
    with budget_settings(mode="work", scale=1.0):
        unit = prices.budget(shape)
    return (prices.price(cheap, shape) * prices.price(dear, shape)) ** 0.5 / unit


def test_a_small_scale_skips_the_expensive_calls_and_says_so():
    A = softmax_rows(np.random.default_rng(0).standard_normal((200, 200)) * 3)
    ups, lows = ["tsvd", "rw_svd", "cpqr"], ["nonzero", "frobenius_tail", "pinv_decoder"]
    scale = _scale_between("tsvd", "cpqr", A.shape)
    with budget_settings(mode="work", scale=scale):
        res = produce_operator("op", A, [Fraction(1, 4), Fraction(1, 2)], ups, lows)
        over = {n for n in PRICED if prices.over_budget(n, A.shape) is not None}
    assert {"rw_svd", "cpqr"} <= over and "tsvd" not in over  # the case this test is about
    uppers = {b.producer["upper"] for b in res.brackets}
    assert uppers == set(ups) - over
    assert len(res.skipped) == len(over & {*ups, *lows})  # once per operator, not per eps
    assert all("priced at" in s and s.startswith("op: ") for s in res.skipped)
    anchor = [b for b in res.brackets if b.producer["upper"] == "tsvd"]
    assert all(b.claims["lower_producers_over_budget"] == sorted(over & set(lows),
                                                                 key=lows.index)
               for b in anchor)
    assert not res.failures
    with budget_settings(mode="work", scale=1.0):
        full = produce_operator("op", A, [Fraction(1, 4)], ups, lows)
    assert not full.skipped and {b.producer["upper"] for b in full.brackets} == set(ups)


def test_produce_reports_skipped_calls_and_exits_0(tmp_path, capsys):
    A = softmax_rows(np.random.default_rng(1).standard_normal((160, 160)) * 3)
    npz = tmp_path / "a.npz"
    np.savez(npz, A=A)
    out = tmp_path / "s"
    scale = _scale_between("tsvd", "rw_svd", A.shape)
    code = main(["produce", str(out), "--npz", str(npz), "--eps", "0.25", "--budget-scale",
                 f"{scale:.6g}", "--producers", "tsvd", "rw_svd", "nonzero", "--json", "-q"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and not summary["producer_failures"]
    assert len(summary["producers_over_budget"]) == 1
    assert "rw_svd skipped" in summary["producers_over_budget"][0]
    assert {b.producer["upper"] for b in open_store(out).brackets} == {"tsvd"}

