"""Polytope lower certificates lifted from a Bernstein subspace (untrusted search).

A Bernstein subspace col(W) proves rank >= p when ||A w||_inf > t ||w||_inf on all of it.  Its
``polytope`` lift (proofs_notes/polytope.md) keeps only the combinatorics: the points
Y = A W (the hull vertices of +-Y, each labelled by its row of A) and the facets of
conv(+-Y), and lets every facet choose its own witness z (||z||_inf <= 1) with
sigma_i (A z)_i > t for the facet's p labels.  The subspace's own witness for a facet with
normal n is z = W n / ||W n||_inf; where that is too weak, one LP per facet (maximise the
least labelled value over the unit cube) finds the best z for those labels.  On MiniLM heads
whose best subspace at the next rank missed by a few per cent (Bernstein value 1.05 - 1.09
eps), the lift reaches the rank: the witnesses may leave the subspace, facet by facet.

The points are jittered by a relative 1e-9 so that no p + 1 of them share a hyperplane (the
kernel accepts only simplicial facets, verified exactly); nothing here is trusted.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from . import subdivide
from ._common import charge, clock, target

MAX_RANK = 12  # the kernel's limit on a polytope certificate's rank (certify/lower/polytope.py)
# up to FULL_RANK a lift takes every hull vertex of +-A W; past it the hulls of MiniLM heads
# exceed MAX_FACETS (p = 9: 230,000 pairs, 23 s of qhull), so the points are a subset
FULL_RANK = 8
MAX_FACETS = 100_000  # the kernel's limit on listed facets (certify/lower/polytope.py)
# a sparse lift's point set grows (by SPARSE_GROWTH) while the hull of its points has at most
# SPARSE_FACETS facet pairs; the order of the points is that of the Gaussian measure of their
# normal cones (CONE_SAMPLES directions, after whitening A W), then their leverage
SPARSE_FACETS = 40_000
# work units per facet and dimension of a qhull call past 2 MAX_FACETS facets (measured
# about 3.3e-6 s per facet and dimension at p = 7 - 8, 100,000 - 650,000 facets)
QHULL_UNIT = 4e-6
SPARSE_GROWTH = 1.25
CONE_SAMPLES = 20_000
# a lift past FULL_RANK gets this many times the Bernstein search's phase budget (a p = 9
# lift of 30,000 facets with four subdivisions took about 60 CPU s on a MiniLM head)
SPARSE_BUDGETS = 6
LIFT_NEAR = 1.25  # lift subspaces whose Bernstein value is within this factor of the goal
JITTER = 1e-9
SEED = 20261202
POOL_RECENT = 256  # LP witnesses tried on a weak facet before its own LP
POOL = 600  # candidate witnesses of the greedy cover that shares witnesses between facets
# a lift that fails is tried again from subspaces near W: W + s max|W| G (G standard normal,
# seeded), s in turn from PERTURB_SCALES, at most PERTURB_TRIES times.  On a tuning head whose
# lift at rank 5 kept three facets below t (0.969 t), 4 of 18 such copies lifted
PERTURB_SCALES = (0.01, 0.03)
PERTURB_TRIES = 12
PERTURB_SEED = 20261205


def hull_facets(Y: np.ndarray, seed: int = SEED) -> tuple[np.ndarray, np.ndarray] | None:
    """Returns (Yj, F): the points jittered by a relative JITTER and one facet of each mirror
    pair of conv(+-Yj) (indices j < k for Yj[j], j + k for -Yj[j]); None when qhull refuses
    the points (too few, flat) or the facets exceed MAX_FACETS."""
    k, p = Y.shape
    rng = np.random.default_rng(seed)
    Yj = Y * (1.0 + JITTER * rng.standard_normal(Y.shape))
    try:
        H = ConvexHull(np.vstack([Yj, -Yj]))
    except (QhullError, ValueError):
        return None
    S = np.sort(H.simplices, axis=1)
    if len(S) > 2 * MAX_FACETS:
        return None
    mirror = np.sort((S + k) % (2 * k), axis=1)
    key = {tuple(s): r for r, s in enumerate(S.tolist())}
    keep = [r for r, mr in enumerate(mirror.tolist()) if key.get(tuple(mr), r) >= r]
    return Yj, np.ascontiguousarray(H.simplices[keep], dtype=np.int64)


def best_witness(A: np.ndarray, I: np.ndarray, facet: np.ndarray, k: int
                 ) -> tuple[np.ndarray, float] | None:
    """Returns (z, tau): a z in the unit cube maximising tau = min over the facet's labels of
    sigma (A z)_i (an LP with N + 1 unknowns and one constraint per label; ``facet`` may
    list any signed points, e.g. the union of several facets), or None when it fails."""
    return subdivide.witness_lp(A[I[facet % k]] * np.where(facet < k, 1.0, -1.0)[:, None])


def _hull_vertices(G: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Returns (vertices, pairs): the rows (a subset of ``rows``, distinct points only) that
    are vertices of conv(+-G[rows]) and the number of its facet pairs; None when qhull
    refuses the points."""
    try:
        H = ConvexHull(np.vstack([G[rows], -G[rows]]))
    except (QhullError, ValueError):
        return None
    verts = rows[np.unique(H.vertices % len(rows))]
    # distinct rows only: a repeated point would sit on its twin's facets
    _, first = np.unique(G[verts], axis=0, return_index=True)
    return np.sort(verts[first]).astype(np.int64), len(H.simplices) // 2


def cone_order(G: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Returns the rows of G ordered by how many of CONE_SAMPLES Gaussian directions u make
    |(Q u)_j| largest (Q the orthonormal factor of G: the same points in coordinates where
    they are spread evenly), most first, ties by the row's leverage ||Q_j||.  A point whose
    normal cone in conv(+-G) is wide shapes many facets; the order is a heuristic only."""
    Q = np.linalg.qr(G)[0]
    # Q has min(m, p) columns: with fewer rows than columns the directions live in R^m
    u = np.random.default_rng(seed).standard_normal((Q.shape[1], CONE_SAMPLES))
    # directions a block at a time: Q @ u whole is m x 20,000 (655 MB at m = 4096)
    step = max(1, (1 << 22) // max(1, len(G)))
    best = np.concatenate([np.abs(Q @ u[:, j:j + step]).argmax(axis=0)
                           for j in range(0, CONE_SAMPLES, step)])
    hits = np.bincount(best, minlength=len(G))
    return np.lexsort((-np.linalg.norm(Q, axis=1), -hits))


def prefix_hulls(G: np.ndarray, cap: int, deadline: float | None = None, *,
                 past_flat: bool = False) -> tuple[list[tuple[np.ndarray, int]], bool]:
    """Returns (hulls, whole): for the prefixes S of ``cone_order(G)`` (lengths min(m, p), then
    SPARSE_GROWTH times more, up to every row) in turn, the hull vertices of +-G[S] and its
    number of facet pairs, up to the first prefix whose hull has more than ``cap`` pairs, that
    qhull refuses (with ``past_flat``, a refused prefix is passed over instead: its points may
    be flat where more are not), or that would start after ``deadline`` (none of those
    listed); ``whole`` says the last one listed is every row (its hull is then computed on the
    rows in index order, as one call on every row would).

    No qhull call gets more than SPARSE_GROWTH times the points of a hull within ``cap``, so
    what one call builds stays near ``cap`` whatever m is; one call on every row at once built
    1.3 million facets in 44 s (2.4 GB) on 512 rows at p = 8, before any budget was read.  A
    call that builds more than 2 MAX_FACETS facets (a hull no certificate can list) is charged
    in full (QHULL_UNIT per facet and dimension), so the budget stops the growth there; the
    hulls of lifts on attention heads stay within that (below 20,000 facets up to rank 8,
    about 2 SPARSE_FACETS past it), and their time is not counted, as it never was."""
    m, p = G.shape
    order = cone_order(G)
    k, hulls = min(m, p), []
    while deadline is None or clock() <= deadline:
        got = _hull_vertices(G, np.arange(m) if k == m else order[:k])
        if got is None:
            if not past_flat or k == m:
                break
        else:
            if got[1] > MAX_FACETS:  # pairs: the call built twice as many facets
                charge(QHULL_UNIT * p * 2 * got[1])
            if got[1] > cap:
                break
            hulls.append(got)
            if k == m:
                return hulls, True
        k = min(m, max(k + 1, int(k * SPARSE_GROWTH)))
    return hulls, False


def sparse_points(G: np.ndarray, deadline: float | None = None) -> np.ndarray | None:
    """Returns the rows of a sparse lift: the hull vertices of +-G[S] for the longest prefix S
    of ``cone_order(G)`` (lengths p, then SPARSE_GROWTH times more, up to every row) whose
    hull has at most SPARSE_FACETS facet pairs; None when no prefix qualifies (or the first
    starts after ``deadline``)."""
    hulls = prefix_hulls(G, SPARSE_FACETS, deadline)[0]
    return hulls[-1][0] if hulls else None


def subspace_certificate(A: np.ndarray, W: np.ndarray, deadline: float | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns (Y, I, F, Z): labelled points Y = (A W)[I] (distinct rows only, jittered), one
    facet of each mirror pair of conv(+-Y), and on every facet the subspace's own witness
    z = W n / ||W n||_inf (n the facet's normal, Y[F] n = 1).  The points are every hull
    vertex of +-A W up to rank FULL_RANK (when their facets are within MAX_FACETS), else
    those of ``sparse_points``.  None when qhull refuses the points, the facets exceed
    MAX_FACETS, a facet's normal cannot be solved, or the hulls (``prefix_hulls``) reach
    ``deadline``."""
    G0 = A @ W
    hf = None
    if W.shape[1] <= FULL_RANK:
        hulls, whole = prefix_hulls(G0, MAX_FACETS, deadline, past_flat=True)
        if whole:
            I = hulls[-1][0]
            hf = hull_facets(G0[I])
    if hf is None:
        I = sparse_points(G0, deadline)
        if I is None:
            return None
        hf = hull_facets(G0[I])
    if hf is None:
        return None
    Y, F = hf
    try:
        n = subdivide.normals(Y, F)
    except np.linalg.LinAlgError:
        return None
    Z = n @ W.T
    Z /= np.maximum(np.abs(Z).max(axis=1, keepdims=True), 1e-300)
    return Y, I, F, np.clip(Z, -1.0, 1.0)


def lift(A: np.ndarray, W: np.ndarray, eps: float, deadline: float, *,
         report: dict | None = None) -> tuple[dict[str, np.ndarray], float] | None:
    """Returns (arrays, value) of a polytope certificate at rank p = W.shape[1] whose float64
    value eps / min_F tau_F is at most 1 - 1e-6 (the claim budget), or None (no such lift
    found by ``deadline``, ``_common.clock()`` seconds).  Facets whose labels no witness
    serves together are repaired by edge subdivisions (``subdivide.repair``); a dict
    ``report`` receives {"subdivisions": points added} of a lift returned."""
    if not 1 <= W.shape[1] <= MAX_RANK:
        return None
    goal = target(eps) / (1.0 - 1e-6)  # every facet's tau must exceed this
    got0 = subspace_certificate(A, W, deadline)
    if got0 is None or clock() > deadline:
        return None
    Y, I, F, Z = got0
    k = len(I)
    AI = np.ascontiguousarray(A[I])
    tau = facet_values(Z, AI, F).min(axis=1)
    sig = np.where(F < k, 1.0, -1.0)
    pool = np.empty((0, A.shape[1]))  # recent LP witnesses: neighbouring facets share many
    for r in np.argsort(tau):
        if tau[r] > goal:
            break
        if clock() > deadline:
            return None
        if len(pool):
            v = (pool @ AI[F[r] % k].T * sig[r]).min(axis=1)
            c = int(v.argmax())
            if v[c] > goal:
                Z[r], tau[r] = pool[c], v[c]
                continue
        got = best_witness(A, I, F[r], k)
        if got is None:
            return None
        Z[r], tau[r] = got
        pool = np.vstack([got[0], pool[:POOL_RECENT - 1]])
    if not tau.min() > goal:  # labels no witness serves together: subdivide their edges
        fixed = subdivide.repair(A, Y, I, F, Z, tau, goal, deadline)
        if fixed is None or not subdivide.strictly_inside(fixed[0], fixed[2]):
            return None
        Y, I, F, Z = fixed
        AI = np.ascontiguousarray(A[I])
    Zs, G = star_cover(A, I, F, Z, goal, deadline)
    Zs = round_witnesses(Zs, AI, F, G, goal)
    tau = facet_values(Zs, AI, F, G).min(axis=1)
    if not tau.min() > goal:  # cannot happen (every step keeps it): never emit a weak lift
        return None
    if report is not None:
        report["subdivisions"] = len(I) - k
    k = len(I)
    arrays = {"Y": np.ascontiguousarray(Y), "I": small_int(I, A.shape[0]),
              "F": small_int(F, 2 * k), "Z": Zs, "G": small_int(G, len(Zs))}
    return arrays, float(target(eps) / tau.min())


def lift_near(A: np.ndarray, W: np.ndarray, eps: float, deadline: float, retry_deadline: float,
              *, report: dict | None = None) -> tuple[dict[str, np.ndarray], float] | None:
    """Returns what ``lift`` returns for W (by ``deadline``) or, when that fails, for the first
    of up to PERTURB_TRIES perturbed copies of W that lifts (all by ``retry_deadline``);
    None when none does.  A dict ``report`` also receives {"perturbed": the try that lifted,
    0 for W itself}.  The hull's facets change with the subspace: a copy may avoid the label
    sets no witness serves together."""
    rep: dict = {}
    got = lift(A, W, eps, deadline, report=rep)
    tries = 0
    rng = np.random.default_rng(PERTURB_SEED)
    scale = float(np.abs(W).max()) if W.size else 0.0
    while got is None and tries < PERTURB_TRIES and clock() < retry_deadline and scale > 0:
        s = PERTURB_SCALES[tries % len(PERTURB_SCALES)]
        tries += 1
        rep = {}
        got = lift(A, W + s * scale * rng.standard_normal(W.shape), eps, retry_deadline,
                   report=rep)
    if got is not None and report is not None:
        report.update(rep, perturbed=tries)
    return got


def facet_values(Z: np.ndarray, AI: np.ndarray, F: np.ndarray,
                 G: np.ndarray | None = None) -> np.ndarray:
    """Returns the f x p float64 values sigma_x (A z)_(I[x mod k]) of every facet's labels
    under its witness (Z[G[r]], or Z[r] when G is None); AI = A[I] (k x N)."""
    k = len(AI)
    V = Z @ AI.T  # witnesses x points
    rows = np.arange(len(F)) if G is None else G
    return V[rows[:, None], F % k] * np.where(F < k, 1.0, -1.0)


def share_witnesses(AI: np.ndarray, F: np.ndarray, Z: np.ndarray, goal: float, *,
                    pool: int = POOL, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Returns (Zs, G): a few witnesses and every facet's index into them, each facet's
    witness keeping all its labelled values above ``goal`` (``Z``: one witness per facet
    that does; AI = A[I]).  Greedy set cover over up to ``pool`` candidate witnesses
    (neighbouring facets' witnesses often serve each other: a store keeps a few hundred
    witnesses instead of thousands); facets no candidate covers keep their own."""
    f, k = len(Z), len(AI)
    rng = np.random.default_rng(seed)
    cand = np.arange(f) if f <= pool else np.sort(rng.choice(f, pool, replace=False))
    Vc = Z[cand] @ AI.T  # candidates x points
    sig = np.where(F < k, 1.0, -1.0)
    ok = np.zeros((len(cand), f), dtype=bool)  # candidate c serves facet r
    for c0 in range(0, f, 4096):  # blocks keep the candidates x facets x p values small
        blk = slice(c0, c0 + 4096)
        ok[:, blk] = (Vc[:, F[blk] % k] * sig[blk]).min(axis=2) > goal
    G = np.arange(f)
    open_ = np.ones(f, dtype=bool)
    chosen: list[int] = []
    gain = ok.sum(axis=1)  # kept up to date as facets are served
    while open_.any():
        c = int(gain.argmax())
        if gain[c] <= 1:
            break
        served = ok[c] & open_
        G[served] = cand[c]
        open_ &= ~served
        chosen.append(int(cand[c]))
        gain -= ok[:, served].sum(axis=1)
    keep = np.unique(np.concatenate([np.array(chosen, dtype=np.int64), G[open_]]))
    index = np.full(f, -1, dtype=np.int64)
    index[keep] = np.arange(len(keep))
    return np.ascontiguousarray(Z[keep]), index[G]


def small_int(X: np.ndarray, bound: int) -> np.ndarray:
    """Returns X (entries in [0, bound)) as the narrowest of int16, int32, int64 holding
    them: the kernel widens any integer array, and a store file shrinks."""
    for dt in (np.int16, np.int32):
        if bound <= np.iinfo(dt).max:
            return np.ascontiguousarray(X, dtype=dt)
    return np.ascontiguousarray(X, dtype=np.int64)


def star_cover(A: np.ndarray, I: np.ndarray, F: np.ndarray, Z: np.ndarray, goal: float,
               deadline: float) -> tuple[np.ndarray, np.ndarray]:
    """Returns (Zs, G): few witnesses and every facet's index into them, each facet's
    witness keeping all its labelled values above ``goal`` (``Z``: one witness per facet that
    does).  Greedy over stars: the signed point x in the most uncovered facets; one LP for a
    witness of all their labels at once, and while that misses the goal, the facets are
    narrowed to those also containing the most frequent other point (down to a single
    facet, whose LP witness exists); the witness then serves every uncovered facet it can.
    Stars stop at ``deadline`` (``_common.clock()``); the facets left then share witnesses
    greedily (:func:`share_witnesses`)."""
    f = len(F)
    k = len(I)
    AI = np.ascontiguousarray(A[I])
    sig = np.where(F < k, 1.0, -1.0)
    G = np.full(f, -1, dtype=np.int64)
    found: list[np.ndarray] = []
    while clock() < deadline:
        open_ = G < 0
        if open_.sum() <= 1:
            break
        counts = np.bincount(F[open_].ravel(), minlength=2 * k)
        x = int(counts.argmax())
        if counts[x] <= 1:
            break
        S = open_ & (F == x).any(axis=1)
        z = None
        while S.any():
            got = best_witness(A, I, np.unique(F[S]), k)
            if got is not None and got[1] > goal:
                z = got[0]
                break
            if S.sum() == 1 or clock() > deadline:
                break
            c = np.bincount(F[S].ravel(), minlength=2 * k)
            c[c >= S.sum()] = 0  # points in every facet of S (x among them) narrow nothing
            y = int(c.argmax())
            S = S & (F == y).any(axis=1)  # a proper, nonempty subset: the loop ends
        if z is None:  # the LP fails even on one facet: that facet keeps its own witness
            r = int(np.flatnonzero(S)[0]) if S.any() else int(np.flatnonzero(open_)[0])
            z = Z[r]
        served = open_ & ((z @ AI.T)[F % k] * sig > goal).all(axis=1)
        if not served.any():  # cannot serve even its own facets: give up on stars
            break
        G[served] = len(found)
        found.append(z)
    rest = np.flatnonzero(G < 0)
    if rest.size:
        Zr, Gr = share_witnesses(AI, F[rest], Z[rest], goal)
        G[rest] = len(found) + Gr
        found.extend(Zr)
    Zs = np.array(found, dtype=np.float64).reshape(-1, A.shape[1])
    # a second greedy pass over the star witnesses and a pool of the facets' own: it may
    # need fewer (every facet is served by its star witness, so the pass covers them all)
    rng = np.random.default_rng(SEED)
    pool = np.arange(f) if f <= POOL else np.sort(rng.choice(f, POOL, replace=False))
    C = np.vstack([Zs, Z[pool]])
    if len(C) * f > 1 << 27:  # the table of who serves whom would pass 128 MB: keep the cover
        return Zs, G
    ok = np.zeros((len(C), f), dtype=bool)
    Vc = C @ AI.T
    step = max(1, (1 << 23) // (len(C) * F.shape[1]))
    for c0 in range(0, f, step):
        blk = slice(c0, c0 + step)
        ok[:, blk] = (Vc[:, F[blk] % k] * sig[blk]).min(axis=2) > goal
    G2 = np.full(f, -1, dtype=np.int64)
    chosen: list[int] = []
    gain = ok.sum(axis=1)  # kept up to date: recounting per choice was quadratic in f
    while (G2 < 0).any() and len(chosen) < len(Zs):
        c = int(gain.argmax())
        newly = ok[c] & (G2 < 0)
        if not newly.any():  # no candidate serves an open facet: the cover stays as it is
            break
        G2[newly] = len(chosen)
        chosen.append(c)
        gain -= ok[:, newly].sum(axis=1)
    if (G2 >= 0).all() and len(chosen) < len(Zs):
        return np.ascontiguousarray(C[chosen]), G2
    return Zs, G


ROUND_BITS = (3, 4, 5, 6, 8, 10, 12, 16, 20, 24)


def round_witnesses(Z: np.ndarray, AI: np.ndarray, F: np.ndarray, G: np.ndarray,
                    goal: float) -> np.ndarray:
    """Returns the witnesses Z rounded, each to the coarsest grid 2^-b (b in ROUND_BITS)
    that keeps every labelled value of the facets it serves above ``goal``, as float32
    (exact: multiples of 2^-24 in [-1, 1] are float32 numbers); a witness no grid keeps
    stays as it is, and then the array stays float64.  Rounding moves (A z)_i by at most
    2^-(b+1) ||A_i||_1, so coarse grids suit witnesses with room above the goal, and the
    store's compression shrinks them (few distinct values).  Nothing here is trusted: the
    kernel checks the stored numbers exactly."""
    k = len(AI)
    sig = np.where(F < k, 1.0, -1.0)
    out = Z.copy()
    exact32 = True
    for c in range(len(Z)):
        rows = np.flatnonzero(G == c)
        if rows.size == 0:
            continue
        lab = AI[F[rows] % k] * sig[rows][:, :, None]  # served facets x p x N
        for b in ROUND_BITS:
            zq = np.clip(np.round(Z[c] * 2.0 ** b) / 2.0 ** b, -1.0, 1.0)
            if (lab @ zq).min() > goal:
                out[c] = zq
                break
        else:
            exact32 = False
    if exact32:
        return np.ascontiguousarray(out, dtype=np.float32)
    return out
