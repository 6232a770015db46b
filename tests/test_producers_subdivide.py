"""Edge subdivisions of polytope lifts: the new point is beyond exactly the facets through the
edge, so the subdivided facets are exactly the facets of the new hull (decided by the kernel
in exact arithmetic); on subspaces whose lift has facets no witness serves (every facet's LP
optimum is computed, so no plain lift exists), the repaired lift proves the rank; tampered
repairs are refused; the repair ends at its deadline."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower
from softrank.certify.lower.polytope import sphere_defect
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import polytope as poly
from softrank.witnesses.producers import subdivide as sd
from softrank.witnesses.producers._common import clock, target


def attention(n: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax64(beta * rng.standard_normal((n, n)))


def split(F: np.ndarray, k: int, a: int, b: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The rows of F through the edge {a, b} and their replacements G - a + v, G - b + v
    (v written -1), as the repair makes them."""
    rows, G, _ = sd.star(F, k, a, b)
    new = []
    for g in G:
        for x in (a, b):
            h = g.copy()
            h[h == x] = -1
            new.append(h)
    return rows, new


@pytest.mark.parametrize(("p", "seed"), [(2, 0), (3, 1), (3, 2), (4, 3), (5, 4)])
def test_an_edge_subdivision_is_the_hull_of_the_new_points(p, seed):
    rng = np.random.default_rng(seed)
    Y, F = poly.hull_facets(rng.standard_normal((3 * p + 4, p)))
    k = len(Y)
    I = np.arange(k)
    for step in range(4):  # subdivisions on top of subdivisions
        r = int(rng.integers(len(F)))
        a, b = (int(x) for x in rng.choice(F[r], 2, replace=False))
        v, rows = sd.edge_point(Y, F, a, b)
        assert len(rows) >= (1 if p == 2 else 2)  # p = 2: the edge is the facet
        _, new = split(F, len(I), a, b)
        label = int(rng.integers(2 * k))
        Y2, I2, F2, keep = sd.insert_point(Y, I, F, rows, new, v, label)
        assert sphere_defect(Y2, F2) is None, (p, seed, step)
        assert keep.sum() == len(F) - len(rows) and len(F2) == keep.sum() + 2 * len(rows)
        # the point's label is the one asked for: v is +Y2[-1] or the mirror of -v
        assert I2[-1] == label >> 1
        assert np.array_equal(Y2[-1], v if label % 2 == 0 else -v)
        if step == 0:
            # the same facets with the point pulled inside the edge's facets are refused
            inside = Y2.copy()
            inside[-1] = 0.5 * inside[-1]
            assert sphere_defect(inside, F2) is not None
        Y, I, F = Y2, I2, F2
    assert sd.strictly_inside(Y, F)


# (n, beta, seed, p, eps): the SVD subspace's hull has facets whose labels no z in the cube
# serves above eps, and one subdivision repairs it (found by a scan of seeds)
CASES = [(12, 2.0, 1, 3, "0.8"), (12, 2.0, 1, 4, "0.7"), (12, 2.0, 5, 3, "0.8"),
         (16, 3.0, 4, 4, "0.8")]


@pytest.mark.parametrize(("n", "beta", "seed", "p", "eps"), CASES)
def test_repair_proves_a_rank_no_plain_lift_of_the_subspace_can(n, beta, seed, p, eps):
    A = attention(n, beta, seed)
    eps = Fraction(eps)
    W = np.linalg.svd(A)[2][:p].T
    Y, I, F, _ = poly.subspace_certificate(A, W)
    goal = target(float(eps)) / (1 - 1e-6)
    best = np.array([poly.best_witness(A, I, f, len(I))[1] for f in F])
    assert best.min() <= goal  # the LP optimum of some facet: the plain lift cannot hold
    report: dict = {}
    got = poly.lift(A, W, float(eps), clock() + 60, report=report)
    assert got is not None and report["subdivisions"] >= 1
    arrays, value = got
    assert value <= 1 - 1e-6 and len(arrays["I"]) > len(I)
    cert = {"kind": "polytope", "rank": p, **arrays}
    c = check_lower(A, cert, eps, tier="exact")
    assert c.status == "holds"
    assert abs(float(c.value.lo) - target(float(eps)) / value) < 1e-9


def test_tampered_repairs_are_refused():
    n, beta, seed, p, eps = CASES[0]
    A = attention(n, beta, seed)
    eps = Fraction(eps)
    W = np.linalg.svd(A)[2][:p].T
    k0 = len(poly.subspace_certificate(A, W)[1])
    arrays, _ = poly.lift(A, W, float(eps), clock() + 60)
    cert = {"kind": "polytope", "rank": p, **arrays}
    assert check_lower(A, cert, eps).status == "holds"
    I = np.asarray(arrays["I"], dtype=np.int64)
    # the added points' labels: any other row breaks a facet's witness or leaves it weak
    for j in range(k0, len(I)):
        for other in range(n):
            if other == I[j]:
                continue
            I2 = I.copy()
            I2[j] = other
            got = check_lower(A, {**cert, "I": I2}, eps)
            if got.status != "holds":
                assert got.status == "fails" and got.value is not None
                break
        else:
            pytest.fail("no other label of an added point is refused")
    # an added point moved inside: the facets are no longer the hull's
    Y = np.array(arrays["Y"], dtype=np.float64)
    Y[k0] *= 0.9
    got = check_lower(A, {**cert, "Y": Y}, eps)
    assert got.status == "fails" and got.value is None and got.detail["reason"]
    # the added point's sign flipped: the same
    Y = np.array(arrays["Y"], dtype=np.float64)
    Y[k0] = -Y[k0]
    assert check_lower(A, {**cert, "Y": Y}, eps).status == "fails"


def test_the_repair_ends_at_its_deadline():
    n, beta, seed, p, eps = CASES[0]
    A = attention(n, beta, seed)
    W = np.linalg.svd(A)[2][:p].T
    Y, I, F, Z = poly.subspace_certificate(A, W)
    tau = poly.facet_values(Z, A[I], F).min(axis=1)
    goal = target(float(eps)) / (1 - 1e-6)
    assert tau.min() <= goal
    assert sd.repair(A, Y, I, F, Z, tau, goal, clock() - 1.0) is None
    assert poly.lift(A, W, float(eps), clock() - 1.0) is None


def test_label_lps_are_cached_by_label_set():
    A = attention(12, 2.0, 1)
    lp = sd.LabelLP(A)
    z, v = lp.best([4, 7, 4])
    assert lp.best([7, 4]) == (z, v) and len(lp.cache) == 1
    # the value is the least signed entry of A z over the labels, z in the cube
    assert np.abs(z).max() <= 1 and v == pytest.approx(min(A[2] @ z, -(A[3] @ z)))


@pytest.mark.parametrize("case", CASES[:2])
def test_the_replayer_agrees_on_repaired_lifts(case):
    from replay import replay as rp

    n, beta, seed, p, eps = case
    A = attention(n, beta, seed)
    eps = Fraction(eps)
    arrays, _ = poly.lift(A, np.linalg.svd(A)[2][:p].T, float(eps), clock() + 60)
    c = check_lower(A, {"kind": "polytope", "rank": p, **arrays}, eps, tier="exact")
    as_list = {x: np.asarray(arrays[x]).tolist() for x in ("I", "F", "G")}
    status, value = rp.check_polytope(
        rp.dyadic(A.tolist()), rp.dyadic(np.asarray(arrays["Y"], dtype=np.float64).tolist()),
        as_list["I"], as_list["F"], rp.dyadic(np.asarray(arrays["Z"], dtype=np.float64).tolist()),
        as_list["G"], eps)
    assert status == c.status == "holds"
    assert value == Fraction(c.value.lo) == Fraction(c.value.hi)


def test_the_bernstein_producer_names_a_subdivided_lift(monkeypatch):
    from softrank.witnesses.producers import bernstein as bern

    n, beta, seed, p, eps = CASES[0]
    A = attention(n, beta, seed)
    W = np.linalg.svd(A)[2][:p].T
    eps_f = float(eps)

    def missed(A_, eps_, budget, *, near_out=None, **kw):  # the search reached p - 1 only
        Wn, J = bern.normalise(np.linalg.svd(A_)[2][:p - 1].T)
        _, P, _ = bern.row_values(A_, Wn)
        near_out[p] = (1.1 / eps_, W)
        return (p - 1, Wn, P, J, 0.5, "descent")

    monkeypatch.setattr(bern, "search", missed)
    c = bern.Bernstein(budget=30.0).produce(A, eps_f)
    assert c is not None and c.kind == "polytope" and c.rank == p
    assert c.claims["start"] == "lift+subdivided"
    assert check_lower(A, {"kind": "polytope", "rank": p, **c.arrays}, Fraction(eps),
                       tier="exact").status == "holds"
