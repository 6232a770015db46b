"""Nerve-chain lower certificates: an odd GF(2) cycle of served label sets (untrusted search).

A set of signed rows (labels) is *served* when one z in the unit cube has s (A z)_i > eps
for each of its labels; the served sets form the nerve of the cones {w : s (A w)_i > eps
||w||_inf}, and an odd cycle of that nerve at dimension p - 1 proves r_eps >= p
(proofs_notes/nerve.md). A sphere certificate over labels in a row set R is a certificate
for A[R, :] too, so it can exist only where no rank-(p - 1) matrix is within eps of A[R, :]:
the search draws R of ROWS[p] rows (16 - 22: fewer at larger ranks) from the rows a rank-(p - 1)
alternating-l1 fit of A leaves worst, in turn by dropping rows one at a time while the fit of
what is left stays largest (``select_rows``, a few short fits per candidate) and by exchanges
that make A[R]'s own fit largest (``swap_rows``, from the worst rows first, then from random
ones among the POOL worst). Over R it lists every
served set level by level (a set is tried only when all its faces are served; a face's
witness that already serves the new label spares the LP), prunes sets with a face no other
set has, and asks GF(2) elimination for a combination of the top sets whose quotient
boundary vanishes and whose chains end in an odd 0-chain. Ranks from the largest lower rank
already claimed plus one, up to the least upper rank claimed (``stop_at``) and MAX_P, while
each succeeds and the budget (``SOFTRANK_NERVE_BUDGET`` CPU seconds, default 120 on a 128 x
128 operator, scaled with its size and ``--budget-scale``) lasts.

Nothing here is trusted: the kernel derives the chains from the tops again and checks every
witness (certify/lower/nerve.py).
"""

from __future__ import annotations

import numpy as np

from ._common import charge, clock
from .altl1 import alt_l1, l1_regression
from .decoder_lp import CLAIM_BUDGET, BudgetedLower, Reached
from .subdivide import witness_lp

BUDGET_ENV = "SOFTRANK_NERVE_BUDGET"
DEFAULT_BUDGET = 120.0
MAX_P = 8  # the served sets over 20 rows grow ~ C(20, p) 2^(p - 1)
# labels come from this many rows, by rank: the served sets grow ~ C(rows, p) 2^(p - 1), and
# the elimination with them (measured over 18 rows at p = 7: 530,000 served sets, 35 s to list
# and 110 s to eliminate)
ROWS = {2: 22, 3: 22, 4: 22, 5: 22, 6: 20, 7: 18, 8: 16}
POOL = 40  # rows the selection starts from (worst of the fit of A)
DROP_TRIES = 6  # candidates per dropped row
FIT_ITERS = 2000  # IRLS steps of the fit of A at rank p - 1
SUB_ITERS = 100  # IRLS steps of each short fit of a row subset
SWAP_STEPS = 25  # exchanges of one block search (swap_rows)
SWAP_FIT_ITERS = 300  # IRLS steps of each start of a block's fit during the exchanges
SWAP_TABU = 3  # exchanges a row just moved in or out waits
MAX_SETS = 1_000_000  # served sets of one level: beyond, the level is not finished
# bits the elimination may hold in its basis (vectors and their combinations of tops): fill-in
# is not bounded by the number of tops, and four searches over 28 rows at p = 6 (over a million
# served sets each) grew to 9 - 19 GB before the kernel's out-of-memory killer stopped them
MAX_HELD_BITS = 1 << 34  # 2 GiB
# work units (about CPU seconds) of one candidate set examined and of one GF(2) reduction step
# (measured: 1.2 million candidates in about 4 s, 50,000 eliminated tops in about 1 s)
CANDIDATE_UNIT = 4e-6
REDUCE_UNIT = 1e-7  # plus XOR_UNIT per 64-bit word of the two integers a step XORs
XOR_UNIT = 1.5e-9
SEED = 20261206


def _svd_start(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    return u[:, :k] * s[:k], vt[:k]


def _row_start(A: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    V0 = A[idx]
    return np.linalg.lstsq(V0.T, A.T, rcond=None)[0].T, V0


def _fit(A: np.ndarray, k: int, t: float, starts: list, iters: int, deadline: float
         ) -> tuple[float, np.ndarray, np.ndarray]:
    """Returns (err, row errors, V) of the best of alternating-l1 runs from ``starts`` (the
    first start's V when none ran)."""
    best = (np.inf, np.zeros(len(A)), starts[0][1])
    for U0, V0 in starts:
        U, V, e = alt_l1(A, k, t, U0, V0, iters=iters, deadline=deadline, patient=True)
        if e < best[0]:
            best = (e, np.abs(A - U @ V).sum(axis=1), V)
        if e <= t or clock() > deadline:
            break
    return best


def _sub_fit(A: np.ndarray, R: list[int], k: int, t: float, V: np.ndarray,
             rng: np.random.Generator, deadline: float) -> float:
    """The best rank-k fit error of A[R] found from three starts (SVD, the fit of A's V,
    random rows)."""
    AR = A[R]
    starts = [_svd_start(AR, k), (np.linalg.lstsq(V.T, AR.T, rcond=None)[0].T, V),
              _row_start(AR, rng.choice(len(R), k, replace=False))]
    return _fit(AR, k, t, starts, SUB_ITERS, deadline)[0]


def rank_fit(A: np.ndarray, k: int, t: float, deadline: float, rng: np.random.Generator
             ) -> tuple[float, np.ndarray, np.ndarray]:
    """Returns (err, row errors, V) of the best rank-k alternating-l1 fit of A found from the
    SVD and two random-row starts (V: a short SVD-started fit's, a start for the subsets)."""
    starts = [_svd_start(A, k)] + [_row_start(A, rng.choice(len(A), k, replace=False))
                                   for _ in range(2)]
    err, r, _ = _fit(A, k, t, starts, FIT_ITERS, deadline)
    U0, V0 = _svd_start(A, k)
    _, V, _ = alt_l1(A, k, t, U0, V0, iters=SUB_ITERS, deadline=deadline, patient=True)
    return err, r, V


def select_rows(A: np.ndarray, k: int, t: float, r: np.ndarray, V: np.ndarray,
                deadline: float, rng: np.random.Generator) -> list[int] | None:
    """Returns ROWS[k + 1] rows whose rank-k fits all stay above t (the best found): from the POOL
    rows of largest error r of a fit of A, the row whose removal keeps the best short fit of
    the rest largest (among DROP_TRIES drawn) is dropped in turn.  None when every drawn
    removal leaves a fit within t, or the budget ran out."""
    R = sorted(np.argsort(-r, kind="stable")[:POOL].tolist())
    while len(R) > ROWS[k + 1]:
        if clock() > deadline:
            return None
        best: tuple[float, int] | None = None
        for x in rng.choice(R, min(len(R), DROP_TRIES), replace=False).tolist():
            v = _sub_fit(A, [y for y in R if y != x], k, t, V, rng, deadline)
            if best is None or v > best[0]:
                best = (v, x)
        if best is None or best[0] <= t:  # what is left has a fit within eps: no sphere
            return None
        R.remove(best[1])
    return R


def _block_fit(A: np.ndarray, R: list[int], k: int, V: np.ndarray | None,
               rng: np.random.Generator, deadline: float
               ) -> tuple[float, np.ndarray, np.ndarray]:
    """Returns (err, row errors, V) of the best rank-k fit of A[R] found from the SVD, the
    previous block's V (when given) and random rows, SWAP_FIT_ITERS steps each."""
    AR = A[R]
    starts = [_svd_start(AR, k), _row_start(AR, rng.choice(len(R), k, replace=False))]
    if V is not None:
        starts.insert(1, (np.linalg.lstsq(V.T, AR.T, rcond=None)[0].T, V))
    return _fit(AR, k, 0.0, starts, SWAP_FIT_ITERS, deadline)


def swap_rows(A: np.ndarray, k: int, t: float, R0: list[int], deadline: float,
              rng: np.random.Generator) -> list[int] | None:
    """Returns a block of len(R0) rows whose rank-k fit is the largest found by exchanges
    from R0, or None when none found stays above t or the budget ran out.  Each exchange fits
    the block, then puts in the row outside it farthest in l1 from the fit's row space (one
    LP each) in place of the block row the fit serves best; rows just exchanged wait
    SWAP_TABU exchanges.  Why: the rows a fit of A leaves worst need not bind a block's own
    fit (their fits can fall to eps while A's stays far above), and a sphere over R exists
    only where A[R]'s fits stay above eps; on a MiniLM head whose rank-5 fit of A ends at
    1.28 eps, the 20 worst rows fit at 1.01 eps and carry no cycle at rank 6, and 25
    exchanges found 20 rows fitting at 1.22 eps that carry one (the kernel proves it)."""
    R = sorted(R0)
    best: tuple[float, list[int]] = (-np.inf, R)
    tabu: list[int] = []
    V = None
    for _ in range(SWAP_STEPS):
        if clock() > deadline:
            break
        e, r, V = _block_fit(A, R, k, V, rng, deadline)
        if e > best[0]:
            best = (e, list(R))
        outside = [j for j in range(A.shape[0]) if j not in R and j not in tabu]
        if not outside:
            break
        far, dist = None, -np.inf
        for j in outside:
            if clock() > deadline:
                break
            u = l1_regression(V, A[j])
            d = np.inf if u is None else float(np.abs(A[j] - u @ V).sum())
            if d > dist:
                far, dist = j, d
        if far is None:
            break
        movable = [n for n in np.argsort(r, kind="stable").tolist() if R[n] not in tabu]
        if not movable:
            break
        out = R[movable[0]]
        R = sorted([x for x in R if x != out] + [far])
        tabu = (tabu + [out, far])[-2 * SWAP_TABU:]
    return best[1] if best[0] > t else None


Simplex = tuple[tuple[int, ...], tuple[int, ...]]  # rows increasing, first sign +1


def _rep(S: tuple[int, ...], sg: tuple[int, ...]) -> Simplex:
    return (S, sg) if sg[0] == 1 else (S, tuple(-x for x in sg))


def served_sets(A: np.ndarray, R: list[int], p: int, goal: float, deadline: float
                ) -> tuple[list[Simplex], list[np.ndarray]] | None:
    """Returns the served p-label sets over rows R (representatives: rows increasing, first
    sign +1) with the index of each one's witness in the returned list of witnesses (a z
    with s (A z)_i >= goal on its labels), or None when the budget or MAX_SETS stops it."""
    R = sorted(R)
    pos = {r: n for n, r in enumerate(R)}
    wits: list[np.ndarray] = [np.ones(A.shape[1])]  # serves every set of one sign
    AZ: list[np.ndarray] = [A[R] @ wits[0]]  # rows R against each witness
    level: dict[Simplex, int] = {((r,), (1,)): 0 for r in R}
    for k in range(2, p + 1):
        nxt: dict[Simplex, int] = {}
        for (S, sg), _ in level.items():
            if clock() > deadline:
                return None
            charge(CANDIDATE_UNIT * 2 * (len(R) - 1 - pos[S[-1]]))
            for j in R:
                if j <= S[-1]:
                    continue
                for s in (1, -1):
                    S2, sg2 = S + (j,), sg + (s,)
                    faces = [_rep(S2[:x] + S2[x + 1:], sg2[:x] + sg2[x + 1:])
                             for x in range(k)]
                    if any(f not in level for f in faces):
                        continue
                    w = _reuse(S2, sg2, faces, level, AZ, pos, goal)
                    if w is None:
                        got = witness_lp(np.array([g * A[i] for i, g in zip(S2, sg2,
                                                                             strict=True)]))
                        if got is None or not got[1] >= goal:
                            continue
                        w = len(wits)
                        wits.append(got[0])
                        AZ.append(A[R] @ got[0])
                    nxt[(S2, sg2)] = w
            if len(nxt) > MAX_SETS:
                return None
        level = nxt
    return list(level.items()), wits  # type: ignore[return-value]


def _reuse(S2: tuple[int, ...], sg2: tuple[int, ...], faces: list[Simplex],
           level: dict[Simplex, int], AZ: list[np.ndarray], pos: dict[int, int],
           goal: float) -> int | None:
    """A witness of a face that also serves the label it lacks (the face's witness serves
    the face's labels; a mirrored face's witness serves them negated), or None."""
    for x, f in enumerate(faces):
        w = level[f]  # -1 - n stands for the mirror (negation) of witness n
        if f[1] != sg2[:x] + sg2[x + 1:]:  # the face is the mirror of its representative
            w = -1 - w
        col = AZ[w] if w >= 0 else -AZ[-1 - w]
        if all(g * col[pos[i]] >= goal for i, g in zip(S2, sg2, strict=True)):
            return w
    return None


def _faces(s: Simplex) -> list[Simplex]:
    S, sg = s
    return [_rep(S[:x] + S[x + 1:], sg[:x] + sg[x + 1:]) for x in range(len(S))]


def _parity(signs: tuple[int, ...]) -> int:
    """|c_0| mod 2 of the chains one top with these signs starts (rows do not matter)."""
    c = {(tuple(range(len(signs))), signs)}
    while len(next(iter(c))[0]) > 1:
        out: set = set()
        for S, sg in c:
            for x in range(len(S)):
                f = (S[:x] + S[x + 1:], sg[:x] + sg[x + 1:])
                out ^= {f}
        c = {f for f in out if f[1][0] == 1}
        if not c:
            return 0
    return len(c) % 2


def odd_cycle(tops: list[Simplex], deadline: float) -> list[int] | None:
    """Returns indices of tops whose quotient boundary vanishes and whose chains end in an
    odd 0-chain, or None (none exists among them, or the budget or MAX_HELD_BITS ran out)."""
    alive = list(range(len(tops)))
    faces = [_faces(s) for s in tops]
    while True:  # a top with a face no other live top has is in no cycle
        count: dict[Simplex, int] = {}
        for n in alive:
            for f in faces[n]:
                count[f] = count.get(f, 0) + 1
        keep = [n for n in alive if all(count[f] > 1 for f in faces[n])]
        if len(keep) == len(alive):
            break
        alive = keep
    if not alive:
        return None
    par: dict[tuple[int, ...], int] = {}
    key: dict[Simplex, int] = {}
    basis: dict[int, tuple[int, int]] = {}
    held = 0
    for b, n in enumerate(alive):
        if b % 256 == 0 and clock() > deadline:
            return None
        sg = tops[n][1]
        if sg not in par:
            par[sg] = _parity(sg)
        v = par[sg]
        for f in faces[n]:
            v ^= 1 << (1 + key.setdefault(f, len(key)))
        c = 1 << b
        while v:
            charge(REDUCE_UNIT + XOR_UNIT * ((v.bit_length() + c.bit_length()) >> 6))
            top = v.bit_length() - 1
            if top not in basis:
                held += v.bit_length() + c.bit_length()
                if held > MAX_HELD_BITS:
                    return None
                basis[top] = (v, c)
                break
            bv, bc = basis[top]
            v, c = v ^ bv, c ^ bc
    target, comb = 1, 0  # boundary 0, parity 1
    while target:
        top = target.bit_length() - 1
        if top not in basis:
            return None
        bv, bc = basis[top]
        target, comb = target ^ bv, comb ^ bc
    return [alive[b] for b in range(len(alive)) if comb >> b & 1]


def certificate(A: np.ndarray, R: list[int], p: int, eps: float, deadline: float
                ) -> tuple[dict[str, np.ndarray], float] | None:
    """Returns (arrays T, Z, G of a nerve certificate of rank p over rows R, its least
    witness value min s (A z_T)_i) or None."""
    goal = eps / CLAIM_BUDGET
    got = served_sets(A, R, p, goal, deadline)
    if got is None:
        return None
    items, wits = got
    cyc = odd_cycle([s for s, _ in items], deadline)
    if cyc is None:
        return None
    return cycle_arrays(A, items, wits, cyc)


def cycle_arrays(A: np.ndarray, items: list, wits: list[np.ndarray], cyc: list[int]
                 ) -> tuple[dict[str, np.ndarray], float]:
    """Returns (arrays T, Z, G of the nerve certificate whose tops are the served sets
    ``items[n]`` for n in ``cyc``, each with its witness from ``wits``, equal witnesses stored
    once; its least witness value min s (A z_T)_i)."""
    m = A.shape[0]
    used: dict[int, int] = {}
    T, G, Z = [], [], []
    for n in cyc:
        (S, sg), w = items[n]
        T.append([i if g == 1 else i + m for i, g in zip(S, sg, strict=True)])
        if w not in used:
            used[w] = len(Z)
            Z.append(wits[w] if w >= 0 else -wits[-1 - w])
        G.append(used[w])
    Zm = np.clip(np.array(Z), -1.0, 1.0)
    Tm = np.array(T, dtype=np.int64)
    Gm = np.array(G, dtype=np.int64)
    rows, sig = Tm % m, np.where(Tm < m, 1.0, -1.0)
    vals = sig * np.einsum("qpn,qn->qp", A[rows], Zm[Gm])
    return {"T": Tm, "Z": Zm, "G": Gm}, float(vals.min())


def _draw(A: np.ndarray, p: int, eps: float, r: np.ndarray, V: np.ndarray, draw: int,
          deadline: float, rng: np.random.Generator) -> list[int] | None:
    """The rows of the ``draw``-th attempt at rank p: random drops from the worst rows of A's
    fit (``select_rows``) first, then exchanges (``swap_rows``) from the worst rows, then
    drops again, then exchanges from a random choice among the worst rows, and so on in
    turn.  (Drops first: a draw that carried a cycle before the exchanges existed is still
    drawn first, with the same random numbers.)"""
    if draw % 2 == 0:
        return select_rows(A, p - 1, eps, r, V, deadline, rng)
    pool = np.argsort(-r, kind="stable")[:POOL]
    n = min(ROWS[p], len(pool))
    start = pool[:n] if draw == 1 else rng.choice(pool, n, replace=False)
    return swap_rows(A, p - 1, eps, sorted(start.tolist()), deadline, rng)


def search(A: np.ndarray, eps: float, budget: float, ceiling: int, floor: int = 0,
           tries: dict[int, int] | None = None
           ) -> tuple[int, dict[str, np.ndarray], float] | None:
    """Returns (p, arrays, value) for the largest rank p in floor + 1 .. min(ceiling, MAX_P)
    reached in turn, or None.  Each rank draws row sets (random drops) until one carries a
    cycle or the budget ends; ``tries`` (when given) receives the row sets drawn per rank."""
    deadline = clock() + budget
    rng = np.random.default_rng(SEED)
    best = None
    for p in range(max(floor + 1, 2), min(ceiling, MAX_P) + 1):
        err, r, V = rank_fit(A, p - 1, eps, deadline, rng)
        if err <= eps:  # a rank-(p - 1) fit within eps: r_eps < p, no certificate exists
            break
        got = None
        draw = 0
        while got is None and clock() < deadline:
            R = _draw(A, p, eps, r, V, draw, deadline, rng)
            draw += 1
            if tries is not None:
                tries[p] = tries.get(p, 0) + 1
            if R is not None:
                got = certificate(A, R, p, eps, deadline)
        if got is None:
            break
        best = (p, *got)
    return best


class NerveChain(BudgetedLower):
    """Nerve-chain certificate (T, Z, G): an odd cycle of served label sets over chosen rows."""

    name = "nerve"
    budget_env = BUDGET_ENV
    default_budget = DEFAULT_BUDGET

    def _search(self, A, eps, budget, ceiling, floor: int = 0):
        tries: dict[int, int] = {}
        found = search(A, eps, budget, ceiling, floor=floor, tries=tries)
        if found is None:
            return None
        return Reached((*found, eps), {"nerve_row_sets": tries.get(found[0], 0),
                                       "nerve_rows": ROWS[found[0]]})

    def _parts(self, found):
        p, arrays, v, eps = found
        return "nerve", p, arrays, eps / v, "rows"


__all__ = ["NerveChain", "certificate", "cycle_arrays", "odd_cycle", "search", "select_rows",
           "served_sets", "swap_rows"]
