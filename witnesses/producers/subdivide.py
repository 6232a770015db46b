"""Repairing a polytope lift's weak facets by stellar subdivision of an edge (untrusted search).

A polytope certificate (proofs_notes/polytope.md) needs, on every facet of conv(+-Y), a
witness z in the unit cube with sigma (A z)_i > t for the facet's p labels.  Lifted from one
subspace, some facets carry labels no z satisfies together (their LP optimum stays below
t).  The kernel accepts any labelled point set, so the combinatorics may be changed: adding
the point v = (1 + delta) (y_a + y_b) / 2 just outside the edge {a, b} of a weak facet (delta
below the room every other facet leaves) replaces each facet G containing the edge by
G - a + v and G - b + v, and nothing else (the beneath-beyond rule: v is beyond exactly the
facets through the edge).  Its mirror -v does the same on the mirror edge.  The new point's
label is free: any signed row c.  A conflict between the labels of a and b leaves every
facet, and the repair succeeds when one label c is compatible with the rest of each facet of
the edge's star.

The search: the weakest facet, its edges ordered by how feasible the facet is without each
end (one LP per point), and for an edge the labels c ranked by the least value any known
witness of the new facets' other labels gives c; a new facet is taken from a witness it
already has (the facet's own witness serves G - x when G was strong) and one LP only where
none is strong enough.  The kernel checks the result from scratch; nothing here is trusted.
"""

from __future__ import annotations

import functools

import numpy as np

from ._common import charge_lp, clock, linprog
from ._highs import linprog_ub

MAX_POINTS = 4096  # the kernel's limit on points (certify/lower/polytope.py)
MAX_FACETS = 100_000  # the kernel's limit on listed facets
MAX_NEW = 64  # subdivisions per lift
EDGES = 4  # edges of the weak facet tried per subdivision
CANDIDATES = 12  # labels tried per edge with LPs (all 2m are ranked)
MIN_DELTA = 1e-6  # below it the new point is too close to the facets for qhull's jitter


@functools.lru_cache(maxsize=8)
def _cube_model(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (cost, lower, upper) of the witness LP over N keys (read-only arrays): the
    same for every LP of an operator, and np.r_ took a tenth of a solve."""
    out = (np.r_[np.zeros(N), -1.0], np.r_[np.full(N, -1.0), -np.inf],
           np.r_[np.full(N, 1.0), np.inf])
    for a in out:
        a.setflags(write=False)
    return out


def witness_lp(rows: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Returns (z, tau): a z in the unit cube maximising tau = min_j rows[j] . z (an LP with
    N + 1 unknowns and one constraint per row, each row a signed row of A), or None when
    HiGHS fails."""
    N = rows.shape[1]
    c, lo, hi = _cube_model(N)
    A_ub, b_ub = np.hstack([-rows, np.ones((len(rows), 1))]), np.zeros(len(rows))
    # the lifts solve tens of thousands of these small LPs (most of a failing lift's CPU):
    # linprog's model and options without its per-call overhead, and without presolve, which
    # finds nothing to remove here (dense rows, cube columns) and took 40% of each solve
    # (0.67 -> 0.41 ms on 3,000 label sets of a MiniLM head, the same z on every one)
    got = linprog_ub(c, A_ub, b_ub, lo, hi, presolve=False)
    if got is None:  # pragma: no cover - a scipy without the HiGHS binding
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(-1.0, 1.0)] * N + [(None, None)],
                      method="highs")
        ok, x = res.status == 0, res.x
    else:
        ok, x, nit = got
        charge_lp(len(rows) + N + 1, nit)
    if not ok:
        return None
    z = np.clip(x[:N], -1.0, 1.0)
    return z, float((rows @ z).min())


class LabelLP:
    """The best witness of a set of signed labels (row * 2 + (1 if negative)), cached: z in
    the unit cube maximising the least sigma (A z)_i over the set (one HiGHS LP)."""

    def __init__(self, A: np.ndarray):
        self.A = A
        self.cache: dict[tuple[int, ...], tuple[np.ndarray | None, float]] = {}

    def best(self, labels: list[int]) -> tuple[np.ndarray | None, float]:
        """Returns (z, value) of the LP over ``labels`` ((None, -inf) when it fails)."""
        key = tuple(sorted(set(labels)))
        got = self.cache.get(key)
        if got is not None:
            return got
        rows = self.A[[x >> 1 for x in key]] * np.array([-1.0 if x & 1 else 1.0
                                                          for x in key])[:, None]
        got = witness_lp(rows) or (None, -np.inf)
        self.cache[key] = got
        return got


def _labels(I: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Returns the signed label row * 2 + (1 if negative) of every entry of F."""
    k = len(I)
    return I[F % k] * 2 + (F >= k)


def _signed_values(A: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Returns the value of every signed label (2m entries, indexed as labels) under z."""
    v = A @ z
    out = np.empty(2 * len(v))
    out[0::2] = v
    out[1::2] = -v
    return out


def normals(Y: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Returns the normals n (Y[F] n = 1, points of index >= k negated) of the facets F."""
    k = len(Y)
    Yf = np.where(F[:, :, None] < k, Y[F % k], -Y[F % k])
    return np.linalg.solve(Yf, np.ones((len(F), Y.shape[1], 1)))[..., 0]


def _room(n: np.ndarray, star: np.ndarray, m: np.ndarray) -> float:
    """Returns the largest delta such that (1 + delta) m is beneath every facet (and mirror)
    outside ``star`` (rows of the facets, with normals n, whose facet or mirror contains the
    edge of midpoint m)."""
    rest = np.ones(len(n), dtype=bool)
    rest[star] = False
    d = np.abs(n[rest] @ m)
    d = d[d > 0]
    return float((1.0 / d - 1.0).min()) if d.size else 1.0


def star(F: np.ndarray, k: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (rows, facets, flipped): the rows of F whose facet or mirror contains both a
    and b, those facets written so that they contain a and b, and which were mirrored."""
    mir = (F + k) % (2 * k)
    direct = (F == a).any(1) & (F == b).any(1)
    flip = (mir == a).any(1) & (mir == b).any(1)
    rows = np.flatnonzero(direct | flip)
    return rows, np.where(flip[rows, None], mir[rows], F[rows]), flip[rows]


def _try_edge(A: np.ndarray, lp: LabelLP, I: np.ndarray, F: np.ndarray, Z: np.ndarray,
              tau: np.ndarray, a: int, b: int, goal: float, deadline: float
              ) -> tuple[float, int, list[tuple[np.ndarray, np.ndarray, float]]] | None:
    """Returns (score, label, new): the best label c found for a point on edge {a, b}, the
    least witnessed value over the new facets, and every new facet (written with the point
    as index -1) with its witness and value; None when no label is worth trying."""
    k = len(I)
    rows, G, flip = star(F, k, a, b)
    L = _labels(I, G)
    parts = []  # (facet, position dropped, witness, value of the other labels)
    for j, (g, lab) in enumerate(zip(G, L, strict=True)):
        z_own = -Z[rows[j]] if flip[j] else Z[rows[j]]
        for x in (a, b):
            pos = int(np.flatnonzero(g == x)[0])
            if tau[rows[j]] > goal:
                parts.append((g, pos, z_own, tau[rows[j]]))
                continue
            z, v = lp.best(np.delete(lab, pos).tolist())
            if z is None:
                return None
            parts.append((g, pos, z, v))  # may stay weak: a later subdivision goes on
        if clock() > deadline:
            return None
    vals = np.array([_signed_values(A, z) for _, _, z, _ in parts])  # parts x 2m
    rank = np.argsort(-vals.min(axis=0))[:CANDIDATES]
    best = None
    for c in rank.tolist():
        new = []
        score = np.inf
        for (g, pos, z, v), cv in zip(parts, vals[:, c], strict=True):
            h = g.copy()
            h[pos] = -1
            if cv > goal:
                new.append((h, z, min(v, cv)))
            else:
                z2, v2 = lp.best(np.append(np.delete(_labels(I, g), pos), c).tolist())
                if z2 is None:
                    v2 = -np.inf
                new.append((h, z2, v2))
            score = min(score, new[-1][2])
            if best is not None and score <= best[0]:
                break
        if best is None or score > best[0]:
            best = (score, int(c), new)
        if best[0] > goal or clock() > deadline:
            break
    return best


def repair(A: np.ndarray, Y: np.ndarray, I: np.ndarray, F: np.ndarray, Z: np.ndarray,
           tau: np.ndarray, goal: float, deadline: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns (Y, I, F, Z) with every facet's witness value above ``goal``: the lift (one
    facet of each mirror pair in F, Z one witness per facet with value tau) after stellar
    subdivisions of edges of weak facets; None when no subdivision helps, the limits are
    reached, or ``deadline`` (``_common.clock()``) passes."""
    lp = LabelLP(A)
    Y, I, F, Z, tau = Y.copy(), I.copy(), F.copy(), Z.copy(), tau.copy()
    for _ in range(MAX_NEW):
        if not (tau <= goal).any():
            return Y, I, F, Z
        k = len(I)
        if k + 1 > MAX_POINTS or clock() > deadline:
            return None
        r = int(np.argmin(tau))
        lab = _labels(I, F[r])
        drop = [lp.best(np.delete(lab, j).tolist())[1] for j in range(len(lab))]
        pairs = sorted(((i, j) for i in range(len(lab)) for j in range(i + 1, len(lab))),
                       key=lambda ij: -min(drop[ij[0]], drop[ij[1]]))
        n = normals(Y, F)  # once per point added: every edge tried measures its room in them
        best = None
        for n_edge, (i, j) in enumerate(pairs):
            if n_edge >= EDGES and best is not None and best[0] > tau[r]:
                break  # an improvement is in hand: the other edges only when none is
            a, b = int(F[r, i]), int(F[r, j])
            place = edge_point(Y, F, a, b, n)
            if place is None:
                continue
            got = _try_edge(A, lp, I, F, Z, tau, a, b, goal, deadline)
            if got is not None and (best is None or got[0] > best[0]):
                best = (*got, a, b, place[1], place[0])
            if best is not None and best[0] > goal or clock() > deadline:
                break
        if best is None or not best[0] > tau[r]:
            return None
        _, c, new, a, b, rows, v = best
        if len(F) - len(rows) + len(new) > MAX_FACETS:
            return None
        Y, I, F, keep = insert_point(Y, I, F, rows, [h for h, _, _ in new], v, c)
        Z = np.vstack([Z[keep], [z for _, z, _ in new]])
        tau = np.concatenate([tau[keep], [x for _, _, x in new]])
    return None if (tau <= goal).any() else (Y, I, F, Z)


def edge_point(Y: np.ndarray, F: np.ndarray, a: int, b: int, n: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """Returns (v, rows): the point v = (1 + delta) (y_a + y_b) / 2 beyond exactly the facets
    (and mirrors) through the edge {a, b} of conv(+-Y), which are the rows ``rows`` of F (one
    facet of each mirror pair), with delta half the room the other facets leave (at most
    1e-2); None when that room is below MIN_DELTA (float64 normals: a screen, not a proof).
    ``n``: the normals of F's rows when already solved (:func:`normals`)."""
    k = len(Y)
    ya = Y[a % k] * (1.0 if a < k else -1.0)
    yb = Y[b % k] * (1.0 if b < k else -1.0)
    m = 0.5 * (ya + yb)
    rows = star(F, k, a, b)[0]
    delta = min(0.5 * _room(normals(Y, F) if n is None else n, rows, m), 1e-2)
    if not delta >= MIN_DELTA:
        return None
    return (1.0 + delta) * m, rows


def insert_point(Y: np.ndarray, I: np.ndarray, F: np.ndarray, rows: np.ndarray,
                 new: list[np.ndarray], v: np.ndarray, label: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (Y, I, F, keep) after adding the point v with the signed label ``label``
    (row * 2 + (1 if negative)): Y gains v (or -v for a negative label, so that v itself is
    the point labelled (row, -1)), the rows ``rows`` of F are dropped (``keep`` marks the old
    rows kept, in order) and the facets ``new`` (old indices, -1 for v) appended.  Old point
    indices x >= k move to x + 1 (the mirror copies of 2(k + 1) points)."""
    k = len(I)
    vi = k if label % 2 == 0 else 2 * k + 1
    keep = np.ones(len(F), dtype=bool)
    keep[rows] = False
    old = np.where(F[keep] >= k, F[keep] + 1, F[keep])
    added = [np.where(h == -1, vi, np.where(h >= k, h + 1, h)) for h in new]
    F2 = np.vstack([old, *added]).astype(np.int64) if added else old.astype(np.int64)
    Y2 = np.vstack([Y, v if label % 2 == 0 else -v])
    return Y2, np.append(I, label >> 1), F2, keep


def strictly_inside(Y: np.ndarray, F: np.ndarray, slack: float = 1e-12,
                    block: int = 4096) -> bool:
    """Returns whether, in float64, every point of +-Y off a facet (and off its mirror's
    points) has |n . y| <= 1 - slack for the facet's normal n: a screen before the kernel's
    exact check, so a lift that would fail it is not claimed."""
    k = len(Y)
    P = np.vstack([Y, -Y])
    for r0 in range(0, len(F), block):
        Fb = F[r0:r0 + block]
        D = np.abs(normals(Y, Fb) @ P.T)
        idx = np.arange(len(Fb))[:, None]
        D[idx, Fb] = 0.0
        D[idx, (Fb + k) % (2 * k)] = 0.0
        if not (D <= 1.0 - slack).all():
            return False
    return True
