"""The nerve producer (untrusted): what it claims the kernel proves, it stops at the least
upper rank claimed, it stays within its budget, its work-mode output is the same bytes twice,
and its pieces (odd-cycle search, witness reuse) agree with direct computations."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower
from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers import nerve as pn
from softrank.witnesses.producers._common import budget_settings

from .helpers import random_attention


def near_identity(n: int, delta: float = 0.125) -> np.ndarray:
    return (1 - delta) * np.eye(n) + delta / n


def test_claims_are_proved_and_stop_at_the_least_upper_rank():
    A = near_identity(7)
    assert get_producer("nerve").name == "nerve"
    prod = pn.NerveChain(budget=30.0)  # the default scales with m N: 0.4 s on 7 x 7
    cert = prod.produce(A, Fraction(1, 4), stop_at=5, floor=2)
    assert cert is not None and cert.rank == 5 and cert.kind == "nerve"
    c = check_lower(A, {"kind": "nerve", "rank": cert.rank, **cert.arrays}, "1/4")
    assert c.status == "holds"
    assert cert.claims["lower_rank"] == 5 and cert.claims["nerve_value"] < 1
    # a closed bracket: nothing to search
    assert prod.produce(A, Fraction(1, 4), stop_at=3, floor=3) is None


def test_no_claim_where_a_lower_rank_fit_is_within_eps():
    """A rank-1 operator (equal rows): every rank-2 sphere is impossible, and the producer
    finds the rank-1 fit within eps and claims nothing."""
    A = np.full((6, 6), 1 / 6)
    assert pn.NerveChain(budget=30.0).produce(A, Fraction(1, 4), stop_at=4, floor=1) is None


def test_the_budget_bounds_the_search():
    rng = np.random.default_rng(2)
    A = random_attention(rng, 40, 40, scale=3.0)
    t0 = time.process_time()
    pn.NerveChain(budget=0.5).produce(A, Fraction(1, 4), stop_at=8, floor=3)
    assert time.process_time() - t0 < 20


def test_work_mode_output_is_the_same_bytes_twice():
    rng = np.random.default_rng(4)
    A = random_attention(rng, 9, 9, scale=3.0)
    outs = []
    with budget_settings("work"):
        for _ in range(2):
            c = pn.NerveChain(budget=5.0).produce(A, Fraction(1, 5), stop_at=9, floor=1)
            outs.append(None if c is None else (c.rank, {k: v.tobytes() for k, v in
                                                         c.arrays.items()}))
    assert outs[0] == outs[1]
    assert outs[0] is not None


def test_exchanged_blocks_are_row_sets_whose_fits_stay_above_eps():
    rng = np.random.default_rng(6)
    A = random_attention(rng, 40, 40, scale=3.0)
    k, t = 3, 0.25
    err, r, V = pn.rank_fit(A, k, t, pn.clock() + 60, rng)
    assert err > t
    start = sorted(np.argsort(-r)[:12].tolist())
    R = pn.swap_rows(A, k, t, start, pn.clock() + 60, rng)
    assert R is not None and len(R) == 12 == len(set(R)) and R == sorted(R)
    assert all(0 <= x < 40 for x in R)
    # the block's own fits, from other starts, stay above eps
    assert pn._block_fit(A, R, k, None, np.random.default_rng(9), pn.clock() + 60)[0] > t
    # where a rank-k fit is within eps (k = the rank of A), no block is returned
    B = np.full((10, 10), 0.1)
    assert pn.swap_rows(B, 1, t, list(range(6)), pn.clock() + 60, rng) is None


@pytest.mark.parametrize("draw", range(4))
def test_every_draw_works_when_the_operator_has_fewer_rows_than_a_block(draw):
    A = near_identity(7)
    rng = np.random.default_rng(1)
    err, r, V = pn.rank_fit(A, 3, 0.25, pn.clock() + 30, rng)
    R = pn._draw(A, 4, 0.25, r, V, draw, pn.clock() + 30, rng)
    assert R is not None and sorted(R) == list(range(7))


@pytest.mark.parametrize("seed", range(4))
def test_every_served_set_is_served_by_its_witness(seed):
    rng = np.random.default_rng(seed)
    A = random_attention(rng, 8, 8, scale=3.0)
    goal = 0.25 / pn.CLAIM_BUDGET
    items, wits = pn.served_sets(A, list(range(8)), 3, goal, float("inf"))
    assert items
    for (S, sg), w in items:
        z = wits[w] if w >= 0 else -wits[-1 - w]
        assert np.all(np.abs(z) <= 1)
        for i, s in zip(S, sg, strict=True):
            assert s * (A[i] @ z) >= goal * (1 - 1e-12)


def test_the_odd_cycle_search_finds_the_cross_polytope_and_rejects_a_disk():
    # the quotient of the cross-polytope's boundary on rows 0..2 (signs of rows 1, 2 free)
    tops = [((0, 1, 2), (1, a, b)) for a in (1, -1) for b in (1, -1)]
    got = pn.odd_cycle(tops, float("inf"))
    assert got is not None and sorted(got) == [0, 1, 2, 3]
    assert pn.odd_cycle(tops[:3], float("inf")) is None  # a disk: no cycle


def test_the_elimination_gives_up_past_its_memory_cap(monkeypatch):
    """The basis it holds is capped in bits (fill-in is not bounded by the tops): past the cap
    no cycle is returned, below it the same tops give one."""
    tops = [((0, 1, 2, 3), (1, a, b, c)) for a in (1, -1) for b in (1, -1) for c in (1, -1)]
    assert pn.odd_cycle(tops, float("inf")) is not None
    monkeypatch.setattr(pn, "MAX_HELD_BITS", 40)
    assert pn.odd_cycle(tops, float("inf")) is None


def _reference_exists(tops) -> bool:
    """Plain GF(2) elimination on (boundary, parity) without any reduction."""
    key: dict = {}
    basis: dict = {}
    for S, sg in tops:
        v = pn._parity(sg)
        for f in pn._faces((S, sg)):
            v ^= 1 << (1 + key.setdefault(f, len(key)))
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                basis[top] = v
                break
            v ^= basis[top]
    t = 1
    while t:
        top = t.bit_length() - 1
        if top not in basis:
            return False
        t ^= basis[top]
    return True


@pytest.mark.parametrize("seed", range(6))
def test_the_pruned_elimination_finds_a_cycle_exactly_when_plain_elimination_does(seed):
    """Random subsets of the served sets of random cells (so many are not cycles): the
    collapse keeps every solution, and what it returns is an odd cycle to the kernel."""
    from softrank.certify.lower import nerve as kn

    rng = np.random.default_rng(seed)
    m = 8
    found = 0
    for trial in range(25):
        A = random_attention(rng, m, m, scale=3.0)
        p = 2 + trial % 3
        items, _ = pn.served_sets(A, list(range(m)), p, 0.25, float("inf"))
        tops = [s for s, _ in items]
        if trial % 2:
            keep = rng.random(len(tops)) < 0.8
            tops = [s for s, k in zip(tops, keep, strict=True) if k]
        if not tops:
            continue
        got = pn.odd_cycle(tops, float("inf"))
        assert (got is not None) == _reference_exists(tops)
        if got is not None:
            found += 1
            T = np.array([[i if g == 1 else i + m for i, g in zip(*tops[n], strict=True)]
                          for n in got], dtype=np.int64)
            assert kn.chain_defect(kn.canonical(T, m), m) is None
    assert found >= 3
