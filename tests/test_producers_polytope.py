"""polytope lifts of Bernstein subspaces: every certificate the producer emits is rechecked by
the kernel in exact arithmetic; on a subspace whose best Bernstein certificate provably fails,
the lift proves the rank; shared witnesses keep every facet's values; the Bernstein producer
hands over to the lift only where its own search missed the next rank."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import check_lower, check_upper
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import bernstein as bern
from softrank.witnesses.producers import polytope as poly
from softrank.witnesses.producers._common import clock, target


def attention(n: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = beta * rng.standard_normal((n, d)) @ rng.standard_normal((d, n)) / np.sqrt(d)
    return softmax64(S)


def svd_subspace(A: np.ndarray, p: int) -> np.ndarray:
    return np.linalg.svd(A)[2][:p].T


def bernstein_limit(A: np.ndarray, W: np.ndarray) -> float:
    """1 / beta(col W): the eps below which the subspace's best Bernstein certificate holds."""
    Wn, _ = bern.normalise(W)
    return 1.0 / float(bern.row_values(A, Wn)[0].max())


@pytest.mark.parametrize(("seed", "p", "factor"), [(6, 2, 1.05), (6, 3, 1.05), (7, 4, 1.02)])
def test_the_lift_proves_a_rank_the_subspace_cannot(seed, p, factor):
    A = attention(16, 5, 3.0, seed)
    W = svd_subspace(A, p)
    eps_f = bernstein_limit(A, W) * factor
    eps = Fraction(eps_f).limit_denominator(10**6)
    # the subspace's LP-optimal Bernstein certificate at this eps fails, proved by the kernel
    Wn, J = bern.normalise(W)
    _, P, _ = bern.row_values(A, Wn)
    cb = check_lower(A, {"kind": "bernstein", "rank": p, "W": Wn, "P": P, "J": J}, eps)
    assert cb.status == "fails"
    got = poly.lift(A, W, float(eps), clock() + 30)
    assert got is not None
    arrays, value = got
    assert value <= 1 - 1e-6
    c = check_lower(A, {"kind": "polytope", "rank": p, **arrays}, eps, tier="exact")
    assert c.status == "holds" and c.value is not None
    assert abs(float(c.value.lo) - target(float(eps)) / value) < 1e-9
    # a necessary consequence: no truncated SVD of rank p - 1 is within eps
    if p > 1:
        U, s, Vt = np.linalg.svd(A)
        up = check_upper(A, U[:, :p - 1] * s[:p - 1], Vt[:p - 1], eps)
        assert up.status == "fails"


def test_tampered_lifts_are_refused():
    A = attention(16, 5, 3.0, 6)
    W = svd_subspace(A, 3)
    eps = Fraction(bernstein_limit(A, W) * 1.05).limit_denominator(10**6)
    arrays, _ = poly.lift(A, W, float(eps), clock() + 30)
    cert = {"kind": "polytope", "rank": 3, **arrays}
    assert check_lower(A, cert, eps).status == "holds"
    dropped = {**cert, "F": arrays["F"][1:], "G": arrays["G"][1:]}
    got = check_lower(A, dropped, eps)
    assert got.status == "fails" and "ridge" in got.detail["reason"]
    flipped = {**cert, "Z": -arrays["Z"]}
    assert check_lower(A, flipped, eps).status == "fails"
    moved = {**cert, "Y": arrays["Y"] * np.r_[[3.0], np.ones(len(arrays["Y"]) - 1)][:, None]}
    got = check_lower(A, moved, eps)
    assert got.status == "fails" and got.value is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_witnesses_keep_every_facet_above_the_goal(seed):
    rng = np.random.default_rng(seed)
    k, f, p, N = 12, 40, 3, 9
    AI = rng.standard_normal((k, N))
    F = np.stack([rng.choice(2 * k, p, replace=False) for _ in range(f)])
    sig = np.where(F < k, 1.0, -1.0)
    Z = np.sign((AI[F % k] * sig[:, :, None]).sum(axis=1))  # each facet's own: a sign sum
    own = poly.facet_values(Z, AI, F)
    # independent of facet_values: the labelled values written out one by one
    assert np.allclose(own, [[sig[r, j] * AI[F[r, j] % k] @ Z[r] for j in range(p)]
                             for r in range(f)])
    goal = float(own.min()) - 1e-9
    Zs, G = poly.share_witnesses(AI, F, Z, goal, pool=25)
    assert G.shape == (f,) and 1 <= len(Zs) <= f and G.max() < len(Zs)
    assert poly.facet_values(Zs, AI, F, G).min() > goal
    # every shared witness is one of the facets' own
    assert all(any(np.array_equal(z, w) for w in Z) for z in Zs)


def _share_by_recount(AI, F, Z, goal, pool):
    """share_witnesses' greedy cover with every gain recounted from scratch per choice."""
    f, k = len(Z), len(AI)
    rng = np.random.default_rng(poly.SEED)
    cand = np.arange(f) if f <= pool else np.sort(rng.choice(f, pool, replace=False))
    sig = np.where(F < k, 1.0, -1.0)
    ok = ((Z[cand] @ AI.T)[:, F % k] * sig).min(axis=2) > goal
    G, open_, chosen = np.arange(f), np.ones(f, dtype=bool), []
    while open_.any():
        gain = (ok & open_).sum(axis=1)
        c = int(gain.argmax())
        if gain[c] <= 1:
            break
        G[ok[c] & open_] = cand[c]
        open_ &= ~ok[c]
        chosen.append(int(cand[c]))
    keep = np.unique(np.concatenate([np.array(chosen, dtype=np.int64), G[open_]]))
    index = np.full(f, -1, dtype=np.int64)
    index[keep] = np.arange(len(keep))
    return Z[keep], index[G]


@pytest.mark.parametrize(("seed", "pool"), [(0, 25), (1, 600), (2, 40)])
def test_the_kept_gains_choose_as_recounted_gains(seed, pool):
    rng = np.random.default_rng(seed)
    k, f, p, N = 15, 300, 3, 9
    AI = rng.standard_normal((k, N))
    F = np.stack([rng.choice(2 * k, p, replace=False) for _ in range(f)])
    Z = np.sign(rng.standard_normal((f, N)))
    goal = float(np.quantile(poly.facet_values(Z, AI, F).min(axis=1), 0.3))
    Zs, G = poly.share_witnesses(AI, F, Z, goal, pool=pool)
    Zr, Gr = _share_by_recount(AI, F, Z, goal, pool)
    assert np.array_equal(Zs, Zr) and np.array_equal(G, Gr)


def missed_search(W: np.ndarray, ratio: float):
    """A stand-in for ``bernstein.search`` that reached rank p - 1 (p = W.shape[1], the SVD
    subspace) and missed rank p with W, by ``ratio`` times the goal."""
    p = W.shape[1]

    def search(A_, eps_, budget, *, near_out=None, **kw):
        Wn, J = bern.normalise(svd_subspace(A_, p - 1))
        _, P, _ = bern.row_values(A_, Wn)
        near_out[p] = (ratio / eps_, W)
        return (p - 1, Wn, P, J, 0.5, "descent")

    return search


def test_the_producer_lifts_only_the_rank_it_missed(monkeypatch):
    A = attention(16, 5, 3.0, 6)
    W = svd_subspace(A, 3)
    eps = float(Fraction(bernstein_limit(A, W) * 1.05).limit_denominator(10**6))

    monkeypatch.setattr(bern, "search", missed_search(W, 1.05))
    c = bern.Bernstein(budget=5.0).produce(A, eps)
    assert c is not None and c.kind == "polytope" and c.rank == 3
    assert c.claims["start"] == "lift"
    assert check_lower(A, {"kind": "polytope", "rank": 3, **c.arrays}, Fraction(eps),
                       tier="exact").status == "holds"

    # missed by too much: no lift tried
    monkeypatch.setattr(bern, "search", missed_search(W, 2.0 * poly.LIFT_NEAR))
    c = bern.Bernstein(budget=5.0).produce(A, eps)
    assert c is not None and c.kind == "bernstein" and c.rank == 2


def test_a_lift_that_fails_is_tried_from_nearby_subspaces(monkeypatch):
    A = attention(16, 5, 3.0, 4)
    W = svd_subspace(A, 4)
    eps = float(Fraction(bernstein_limit(A, W) * 1.2).limit_denominator(10**6))
    assert poly.lift(A, W, eps, clock() + 30) is None  # W itself does not lift
    report: dict = {}
    got = poly.lift_near(A, W, eps, clock() + 30, clock() + 60, report=report)
    assert got is not None and report["perturbed"] >= 1
    c = check_lower(A, {"kind": "polytope", "rank": 4, **got[0]}, Fraction(eps), tier="exact")
    assert c.status == "holds"
    again = poly.lift_near(A, W, eps, clock() + 30, clock() + 60)  # seeded: the same lift
    assert again is not None and all(np.array_equal(got[0][k], again[0][k]) for k in got[0])
    # no time left for the copies: only W is tried
    assert poly.lift_near(A, W, eps, clock() + 30, clock() - 1.0) is None

    monkeypatch.setattr(bern, "search", missed_search(W, 1.1))
    c = bern.Bernstein(budget=30.0).produce(A, eps)
    assert c is not None and c.kind == "polytope" and c.rank == 4
    assert c.claims["start"].startswith("lift+perturbed")


def test_perturbed_lifts_are_bounded(monkeypatch):
    seen: list[np.ndarray] = []

    def never(A_, W_, eps_, deadline, *, report=None):
        seen.append(W_)
        return None

    monkeypatch.setattr(poly, "lift", never)
    W = np.eye(6, 3)
    assert poly.lift_near(np.eye(6), W, 0.25, clock() + 100, clock() + 100) is None
    assert len(seen) == 1 + poly.PERTURB_TRIES
    assert np.array_equal(seen[0], W) and not any(np.array_equal(w, W) for w in seen[1:])
    seen.clear()  # a zero subspace has no scale to perturb by
    assert poly.lift_near(np.eye(6), np.zeros((6, 3)), 0.25, clock() + 100,
                          clock() + 100) is None
    assert len(seen) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_star_cover_serves_every_facet_with_fewer_witnesses(seed):
    """The star cover on a real lift: every facet's witness keeps its labelled values above
    the goal, witnesses are no more than the greedy pool's, and the kernel agrees exactly."""
    A = attention(24, 6, 3.0, 10 + seed)
    W = svd_subspace(A, 4) + 0.3 * np.random.default_rng(seed).standard_normal((24, 4))
    Y, I, F, Z = poly.subspace_certificate(A, W)
    k = len(I)
    AI = A[I]
    for r in range(len(F)):  # the lift's per-facet LP witnesses
        Z[r] = poly.best_witness(A, I, F[r], k)[0]
    goal = 0.999 * float(poly.facet_values(Z, AI, F).min(axis=1).min())
    Zs, G = poly.star_cover(A, I, F, Z, goal, clock() + 60)
    assert G.shape == (len(F),) and G.min() >= 0 and G.max() < len(Zs)
    assert poly.facet_values(Zs, AI, F, G).min() > goal
    Zg, _ = poly.share_witnesses(AI, F, Z, goal)
    assert len(Zs) <= len(Zg) and len(Zs) < len(F)
    cert = {"kind": "polytope", "rank": 4, "Y": Y, "I": I, "F": F, "Z": Zs, "G": G}
    assert check_lower(A, cert, Fraction(goal).limit_denominator(10**9) * Fraction(999, 1000),
                       tier="exact").status == "holds"


def test_rounded_witnesses_are_float32_and_keep_the_goal():
    rng = np.random.default_rng(5)
    k, f, p, N = 10, 30, 3, 12
    AI = np.abs(rng.standard_normal((k, N)))
    AI /= AI.sum(axis=1, keepdims=True)
    F = np.stack([rng.choice(2 * k, p, replace=False) for _ in range(f)])
    sig = np.where(F < k, 1.0, -1.0)
    Z = np.sign((AI[F % k] * sig[:, :, None]).sum(axis=1)) * rng.uniform(0.3, 1.0, (f, N))
    G = np.arange(f)
    own = poly.facet_values(Z, AI, F).min(axis=1)
    goal = float(own.min()) - 0.05  # every witness has room for a grid of 2^-4
    Zr = poly.round_witnesses(Z, AI, F, G, goal)
    assert Zr.dtype == np.float32 and np.all(np.abs(Zr) <= 1)
    assert poly.facet_values(Zr.astype(np.float64), AI, F, G).min() > goal
    assert np.all(Zr.astype(np.float64) * 2.0**24 == np.round(Zr.astype(np.float64) * 2.0**24))
    assert len(np.unique(Zr)) < len(np.unique(Z))  # coarse grids: fewer distinct values
    # z = (2^-26, 2^-26) on the labels e1, e2: every grid (2^-24 at the finest) rounds it to
    # 0, below a goal of 2^-27, so the witness stays float64, unrounded; z = (0.9, 0.9) at
    # goal 1/2: the coarsest grid 2^-3 already serves (7/8)
    AI2, F2, G2 = np.eye(2), np.array([[0, 1]]), np.zeros(1, dtype=np.int64)
    Z2 = np.full((1, 2), 2.0**-26)
    Zt = poly.round_witnesses(Z2, AI2, F2, G2, 2.0**-27)
    assert Zt.dtype == np.float64 and np.array_equal(Zt, Z2)
    Zc = poly.round_witnesses(np.full((1, 2), 0.9), AI2, F2, G2, 0.5)
    assert Zc.dtype == np.float32 and np.array_equal(Zc, [[0.875, 0.875]])


def test_small_int_keeps_the_values():
    X = np.array([[0, 8191], [5, 7]])
    assert poly.small_int(X, 8192).dtype == np.int16
    assert poly.small_int(X, 40000).dtype == np.int32
    assert poly.small_int(X, 2**40).dtype == np.int64
    assert all(np.array_equal(poly.small_int(X, b), X) for b in (8192, 40000, 2**40))


def stored_checked_and_replayed(tmp_path, A: np.ndarray, eps: Fraction, rank: int,
                                arrays: dict[str, np.ndarray]) -> None:
    """Stores the polytope certificate with an SVD upper end, checks the store and asserts
    that the kernel proves it and the independent replayer agrees."""
    from replay import replay as rp
    from softrank.export import write_bundle
    from softrank.runner import iter_checks
    from softrank.witnesses import Store

    U, s, Vt = np.linalg.svd(A)
    with Store.create(tmp_path / "st", description=f"polytope of rank {rank}") as st:
        st.add_operator(A, family="t", id="op")
        st.add_bracket("op", eps, {"kind": "factors", "rank": len(s), "U": U * s, "V": Vt},
                       {"kind": "polytope", "rank": rank, **arrays}, id="b")
    records = list(iter_checks(tmp_path / "st"))
    assert [r["lower_check"]["status"] for r in records] == ["holds"]
    write_bundle(tmp_path / "st", records, tmp_path / "b.zip")
    got = rp.replay(str(tmp_path / "b.zip"))
    poly_results = [r for r in got["results"] if r["kind"] == "polytope"]
    assert [(r["replay"], r["agrees"]) for r in poly_results] == [("holds", True)]
    assert got["disagreements"] == 0


def test_a_compact_lift_survives_the_store_and_the_bundle(tmp_path):
    """int16 indices and float32 witnesses: stored, read back, checked and replayed."""
    A = attention(16, 5, 3.0, 6)
    W = svd_subspace(A, 3)
    eps = Fraction(bernstein_limit(A, W) * 1.05).limit_denominator(10**6)
    arrays, _ = poly.lift(A, W, float(eps), clock() + 30)
    assert arrays["F"].dtype == np.int16 and arrays["Z"].dtype == np.float32
    stored_checked_and_replayed(tmp_path, A, eps, 3, arrays)
