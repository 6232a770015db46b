"""Producers stop when done and scale with the operator: the lower searches stop at the least
upper rank claimed (``stop_at``), lower producers after a closed bracket do not run, and the
default budgets scale with m N (a 6 x 6 operator at three eps is produced in seconds)."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from softrank.certify import check_lower
from softrank.cli import main
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import (
    ENTRY_POINT_GROUP,
    BaseProducer,
    Certificate,
    bernstein,
    rowset,
)
from softrank.witnesses.producers import _entry_points as real_entry_points
from softrank.witnesses.producers._common import SIZE_FLOOR, budget_settings, size_scale
from softrank.witnesses.producers.pipeline import produce_operator

EPS = Fraction(1, 4)


def attention(m: int, N: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax64(beta * rng.standard_normal((m, d)) @ rng.standard_normal((d, N))
                     / np.sqrt(d))


def test_size_scale_is_proportional_with_a_floor():
    assert size_scale((128, 128)) == 1.0
    assert size_scale((256, 128)) == 2.0
    assert size_scale((64, 64)) == 0.25
    assert size_scale((6, 6)) == SIZE_FLOOR
    assert size_scale((1, 1)) == SIZE_FLOOR > 0


# Bernstein's budget counts work units: 0.1 CPU s failed with the clock run 20 times fast
# (a slow machine), 0.1 units is the same search everywhere (it needs 0.05 here)
@pytest.mark.parametrize("prod, budget, mode", [(rowset.RowSet, 0.5, "cpu"),
                                                (bernstein.Bernstein, 0.1, "work")])
def test_lower_search_stops_at_the_upper_end(prod, budget, mode):
    A = attention(10, 10, 4, 3.0, 2)
    with budget_settings(mode, 1.0, {}):
        free = prod(budget=budget).produce(A, EPS)
        assert free is not None and free.rank >= 2
        capped = prod(budget=budget).produce(A, EPS, stop_at=free.rank - 1)
        assert capped is not None and capped.rank == free.rank - 1
        assert check_lower(A, capped.to_mapping(), EPS, tier="exact").status == "holds"
        # a rank-0 upper end leaves nothing to look for
        assert prod(budget=budget).produce(A, EPS, stop_at=0) is None


def test_the_search_is_told_the_ceiling(monkeypatch):
    seen = {}

    def fake(A, eps, budget, *, max_p=rowset.MAX_P, floor=0, stopped=None):
        seen["max_p"], seen["budget"], seen["floor"] = max_p, budget, floor
        return None

    monkeypatch.setattr(rowset, "search", fake)
    A = attention(6, 6, 2, 3.0, 1)
    assert rowset.RowSet().produce(A, EPS, stop_at=3) is None
    assert seen["max_p"] == 3
    # the default budget is per 128 x 128 operator: a 6 x 6 one gets the floor of it
    assert seen["budget"] == pytest.approx(rowset.RowSet().budget * SIZE_FLOOR)
    rowset.RowSet(budget=2.0).produce(A, EPS)
    assert seen["max_p"] == 6 and seen["budget"] == 2.0  # an explicit budget stands as given
    assert seen["floor"] == 0
    rowset.RowSet(budget=2.0).produce(A, EPS, floor=4)  # another producer's rank reaches it
    assert seen["floor"] == 4


class Closer(BaseProducer):
    """A lower plug-in that claims (wrongly, it does not matter here) the rank it is told."""

    name = "closer"
    role = "lower"
    told: list = []

    def produce(self, A, eps, *, logits=None, stop_at=None):
        Closer.told.append(stop_at)
        return Certificate(kind="nonzero", rank=int(stop_at), claims={})


class OldLower(BaseProducer):
    """A lower plug-in written before ``stop_at`` existed."""

    name = "old_lower"
    role = "lower"
    calls: list = []

    def produce(self, A, eps, *, logits=None):
        OldLower.calls.append(A.shape)
        return None


@pytest.fixture
def lower_plugins(monkeypatch):
    extra = [EntryPoint(name="closer", value=f"{__name__}:Closer", group=ENTRY_POINT_GROUP),
             EntryPoint(name="old_lower", value=f"{__name__}:OldLower",
                        group=ENTRY_POINT_GROUP)]
    monkeypatch.setattr("softrank.witnesses.producers._entry_points",
                        lambda: [*real_entry_points(), *extra])
    Closer.told, OldLower.calls = [], []


def test_lower_producers_after_a_closed_bracket_do_not_run(lower_plugins):
    A = attention(8, 8, 3, 3.0, 4)
    res = produce_operator("op", A, [EPS], ["tsvd", "cpqr"], ["old_lower", "closer",
                                                              "old_lower", "rowset"])
    assert not res.failures
    ranks = [int(b.upper["rank"]) for b in res.brackets]
    assert Closer.told == [min(ranks)]  # the least upper rank claimed
    assert OldLower.calls == [(8, 8)]  # called (without stop_at) before the bracket closed
    anchor = res.brackets[0]
    assert anchor.claims["lower_producers_skipped"] == ["old_lower", "rowset"]
    assert set(anchor.claims["lower_producer_seconds"]) == {"old_lower", "closer"}
    assert anchor.lower["rank"] == min(ranks) and anchor.producer["lower"] == "closer"


def test_produce_on_a_small_matrix_takes_seconds(tmp_path, capsys):
    """The acceptance case: one 6 x 6 operator at eps 0.15 0.25 0.35, default producers
    (62 s before the budgets scaled and the searches stopped at closed brackets; about 3 s
    after, on an idle machine; the bound here leaves room for a loaded one)."""
    rng = np.random.default_rng(0)
    L = 2.0 * rng.normal(size=(6, 6))
    src = tmp_path / "m6.npz"
    np.savez(src, A=softmax64(L))
    store = tmp_path / "st"
    t0 = time.perf_counter()
    assert main(["produce", str(store), "--npz", str(src), "--eps", "0.15", "0.25", "0.35",
                 "--quiet"]) == 0
    seconds = time.perf_counter() - t0
    print(f"produce 6 x 6 at three eps: {seconds:.2f} s")
    assert seconds < 20.0
    records = [json.loads(line) for line in (store / "brackets.jsonl").read_text().splitlines()]
    assert len(records) == 3 * 6  # every default upper producer at every eps
    anchors = [r for r in records if r["producer"]["upper"] == "alt_l1"]
    assert len(anchors) == 3 and all(r["claims"]["lower_rank"] >= 1 for r in anchors)
    # the kernel decides (these producers' claims are not believed): nothing is malformed
    assert main(["check", str(store), "-q"]) in (0, 1)


def test_rowset_skips_its_rescue_below_another_producers_rank():
    """Stuck at p + 1 <= floor, rowset skips the swaps and mixtures that cannot be kept; above
    the floor, or without one, it runs them as before."""
    from softrank.witnesses.producers._common import fresh_count, work_done

    A = attention(24, 24, 6, 3.0, 5)  # the greedy climb gets stuck at 10 rows
    runs = {}
    for floor in (0, 5, 10, 12):
        stopped: dict = {}
        # work budgets: a CPU-second budget ended the climb a row early on a loaded machine
        with budget_settings(mode="work"), fresh_count():
            found = rowset.search(A, float(EPS), 2.0, floor=floor, stopped=stopped)
            runs[floor] = (found[0], found[1], dict(stopped), work_done())
    kind, p, _, full = runs[0]
    assert runs[5][:3] == (kind, p, {})  # a floor below the stuck rank: the same search
    for floor in (10, 12):
        # stuck at q + 1 <= floor: the rescue (which may reach q + 1, as it does without a
        # floor here) is skipped, for far less work
        _, q, why, work = runs[floor]
        assert why == {"floor_stop": q + 1} and q + 1 <= floor and q <= p
        assert work < full / 2
    with budget_settings(mode="work"):
        cert = rowset.RowSet(budget=2.0).produce(A, EPS, floor=12)
    assert cert is not None and cert.claims["rowset_floor_stop"] == runs[12][1] + 1
