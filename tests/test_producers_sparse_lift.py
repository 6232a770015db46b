"""Sparse polytope lifts (ranks past ``polytope.FULL_RANK``): the points are hull vertices of a
prefix of the cone order whose hull stays within SPARSE_FACETS facet pairs; every certificate
emitted is rechecked by the kernel in exact arithmetic and by the independent replayer; the
Bernstein producer gives such a lift SPARSE_BUDGETS phase budgets."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from softrank.certify import check_lower
from softrank.witnesses.producers import bernstein as bern
from softrank.witnesses.producers import polytope as poly
from softrank.witnesses.producers._common import clock

from .test_producers_polytope import (
    attention,
    bernstein_limit,
    missed_search,
    stored_checked_and_replayed,
    svd_subspace,
)


def full_vertices(G: np.ndarray) -> set[int]:
    return set((ConvexHull(np.vstack([G, -G])).vertices % len(G)).tolist())


def pairs(G: np.ndarray) -> int:
    return len(ConvexHull(np.vstack([G, -G])).simplices) // 2


def test_cone_order_is_a_permutation_with_the_widest_cone_first():
    rng = np.random.default_rng(3)
    G = rng.standard_normal((50, 6))
    G[17] *= 20.0  # far out along its direction: its normal cone is the widest by far
    order = poly.cone_order(G)
    assert sorted(order.tolist()) == list(range(50))
    assert order[0] == 17
    # whitened directions: a linear change of coordinates that stretches other points does
    # not move the widest cone off the top
    M = np.diag([1.0, 1.0, 1.0, 1.0, 1.0, 50.0]) @ rng.standard_normal((6, 6))
    assert poly.cone_order(G @ M)[0] == 17
    assert np.array_equal(poly.cone_order(G), order)  # seeded


@pytest.mark.parametrize(("seed", "cap"), [(0, 300), (1, 600), (2, 2000)])
def test_sparse_points_are_hull_vertices_within_the_cap(monkeypatch, seed, cap):
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((60, 7))
    monkeypatch.setattr(poly, "SPARSE_FACETS", cap)
    I = poly.sparse_points(G)
    assert I is not None and len(I) >= 7
    assert set(I.tolist()) <= full_vertices(G)
    assert pairs(G[I]) <= cap
    # the points are the vertices of their own hull (no interior point is listed)
    assert full_vertices(G[I]) == set(range(len(I)))
    assert pairs(G) > cap  # the full hull does not fit, so the subset is proper
    assert len(I) < len(full_vertices(G))


def test_sparse_points_take_every_vertex_when_the_hull_fits():
    rng = np.random.default_rng(4)
    G = rng.standard_normal((40, 5))
    G[3] = G[2]  # a repeated point is listed once
    assert pairs(G) <= poly.SPARSE_FACETS
    I = poly.sparse_points(G)
    got = set(I.tolist())
    assert 2 in full_vertices(G)  # the twins are on the hull: exactly one of them is kept
    assert len(got & {2, 3}) == 1
    assert got - {2, 3} == full_vertices(G) - {2, 3}


def test_sparse_points_none_when_no_prefix_fits(monkeypatch):
    G = np.random.default_rng(5).standard_normal((30, 6))
    monkeypatch.setattr(poly, "SPARSE_FACETS", 2 ** 5 - 1)  # p points alone: 2^(p-1) pairs
    assert poly.sparse_points(G) is None
    assert poly.subspace_certificate(np.eye(30), G) is not None  # rank 6: every vertex
    monkeypatch.setattr(poly, "FULL_RANK", 5)
    assert poly.subspace_certificate(np.eye(30), G) is None


@pytest.mark.parametrize(("n", "seed", "p", "cap"),
                         [(40, 2, 9, None), (30, 3, 10, None), (40, 2, 9, 600),
                          (30, 3, 10, 600)])
def test_a_lift_past_full_rank_is_proved(monkeypatch, n, seed, p, cap):
    """Ranks 9 and 10 (past FULL_RANK), on every hull vertex (small hulls) and on a proper
    subset (a cap below the full hull's facets): the subspace's own Bernstein certificate
    fails at this eps and the lift holds in exact arithmetic."""
    if cap is not None:
        monkeypatch.setattr(poly, "SPARSE_FACETS", cap)
    A = attention(n, 12, 4.0, seed)
    W = svd_subspace(A, p)
    eps = Fraction(bernstein_limit(A, W) * 1.02).limit_denominator(10**6)
    Wn, J = bern.normalise(W)
    P = bern.row_values(A, Wn)[1]
    assert check_lower(A, {"kind": "bernstein", "rank": p, "W": Wn, "P": P, "J": J},
                       eps).status == "fails"
    got = poly.lift(A, W, float(eps), clock() + 60)
    assert got is not None
    arrays, value = got
    assert value <= 1 - 1e-6
    k = len(arrays["I"])
    if cap is not None:
        assert k < len(full_vertices(A @ W))
    c = check_lower(A, {"kind": "polytope", "rank": p, **arrays}, eps, tier="exact")
    assert c.status == "holds"
    # the same certificate at a larger eps is refused (a witness value is not above t)
    worse = check_lower(A, {"kind": "polytope", "rank": p, **arrays}, eps * 2, tier="exact")
    assert worse.status == "fails"


def test_no_lift_past_the_kernels_rank():
    A = attention(20, 16, 4.0, 1)
    W = svd_subspace(A, poly.MAX_RANK + 1)
    assert poly.lift(A, W, 0.01, clock() + 30) is None


def test_the_producer_gives_a_sparse_lift_more_budget(monkeypatch):
    """The lift of a rank past FULL_RANK gets SPARSE_BUDGETS phase budgets, a lower rank one."""
    seen: list[tuple[int, float, float]] = []

    def spy(A_, W_, eps_, deadline, retry_deadline, *, report=None):
        now = clock()
        seen.append((W_.shape[1], deadline - now, retry_deadline - now))
        return None

    for p in (poly.FULL_RANK, poly.FULL_RANK + 1):
        A = attention(24, 12, 4.0, 1)
        monkeypatch.setattr(bern, "search", missed_search(svd_subspace(A, p), 1.05))
        monkeypatch.setattr(poly, "lift_near", spy)
        bern.Bernstein(budget=2.0).produce(A, 0.25)
    (p0, d0, r0), (p1, d1, r1) = seen
    assert (p0, p1) == (poly.FULL_RANK, poly.FULL_RANK + 1)
    assert d0 == pytest.approx(2.0, rel=1e-3) and r0 == pytest.approx(4.0, rel=1e-3)
    assert d1 == pytest.approx(2.0 * poly.SPARSE_BUDGETS, rel=1e-3)
    assert r1 == pytest.approx(4.0 * poly.SPARSE_BUDGETS, rel=1e-3)


def test_a_rank_9_lift_survives_the_store_and_the_replayer(tmp_path):
    A = attention(40, 12, 4.0, 2)
    W = svd_subspace(A, 9)
    eps = Fraction(bernstein_limit(A, W) * 1.02).limit_denominator(10**6)
    arrays, _ = poly.lift(A, W, float(eps), clock() + 60)
    stored_checked_and_replayed(tmp_path, A, eps, 9, arrays)


# --- the hulls of the full path (ranks up to FULL_RANK) grow too, and stop at the budget -----

def _sphere_rows(m: int, p: int, seed: int = 7) -> np.ndarray:
    """Rows spread evenly over a p-sphere: the hull of +-G has as many facets as m allows."""
    G = np.random.default_rng(seed).standard_normal((m, p))
    return G / np.linalg.norm(G, axis=1, keepdims=True)


def test_no_hull_call_gets_every_row_when_the_hull_is_over_the_cap(monkeypatch):
    # a review's 512 x 64 operator at p = 8: one qhull call on all 1,024 points built 1.3
    # million facets (44 s, 2.4 GB) before any budget was read; now the points grow from the
    # cone order and stop at the first hull over the cap
    G = _sphere_rows(400, 6)
    sizes = []
    real = poly._hull_vertices

    def spy(G_, rows):
        sizes.append(len(rows))
        return real(G_, rows)

    monkeypatch.setattr(poly, "_hull_vertices", spy)
    monkeypatch.setattr(poly, "MAX_FACETS", 3000)
    hulls, whole = poly.prefix_hulls(G, poly.MAX_FACETS, past_flat=True)
    assert not whole and hulls and max(h[1] for h in hulls) <= 3000
    assert max(sizes) < len(G)
    # no call was given more than SPARSE_GROWTH times the points of a hull within the cap
    within = max(len(poly.cone_order(G)[:k]) for k in sizes[:-1])
    assert max(sizes) <= poly.SPARSE_GROWTH * within + 1
    assert pairs(G[np.arange(len(G))]) > 3000  # the one call it replaced was over the cap


def test_the_full_path_reaches_every_row_when_the_hull_is_small():
    A = attention(40, 6, 2.0, 5)
    W = svd_subspace(A, 4)
    G = A @ W
    hulls, whole = poly.prefix_hulls(G, poly.MAX_FACETS, past_flat=True)
    assert whole
    assert set(hulls[-1][0].tolist()) == full_vertices(G)  # what one call on every row gives
    Y, I, F, Z = poly.subspace_certificate(A, W)
    assert set(I.tolist()) == full_vertices(G)


def test_a_passed_deadline_runs_no_hull_and_large_hulls_are_charged(monkeypatch):
    from softrank.witnesses.producers import _common

    G = _sphere_rows(60, 5)
    calls = []
    real = poly._hull_vertices
    monkeypatch.setattr(poly, "_hull_vertices", lambda G_, r: calls.append(len(r)) or real(G_, r))
    with _common.budget_settings(mode="work"):
        assert poly.subspace_certificate(np.eye(60), G, deadline=clock() - 1.0) is None
        assert calls == []
        # a hull past 2 MAX_FACETS facets is charged by its size, then the growth stops at
        # the deadline it pushed past
        monkeypatch.setattr(poly, "MAX_FACETS", 20)
        before = _common.work_done()
        hulls, whole = poly.prefix_hulls(G, 10**9, deadline=clock() + 1e-3)
        assert _common.work_done() - before > 1e-3
        assert not whole and len(calls) < 10


def test_fewer_rows_than_the_rank_is_no_crash():
    # every lift now orders its points by cone_order, which multiplied an m x m factor by
    # p-row directions when m < p (ValueError); such points are flat, so no hull is listed
    G = np.random.default_rng(2).standard_normal((4, 6))
    assert sorted(poly.cone_order(G).tolist()) == [0, 1, 2, 3]
    assert poly.prefix_hulls(G, poly.MAX_FACETS, past_flat=True) == ([], False)
    assert poly.subspace_certificate(np.eye(4), G) is None
