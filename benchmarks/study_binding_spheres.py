"""Do the rows that bind a rank-(p - 1) fit carry a sphere at rank p?  A float64 probe.

A certificate of the Borsuk-Ulam family proving r_eps >= p needs a mod-2 (p - 1)-cycle of
served label sets on which w^(p-1) is odd (proofs_notes/polytope.md, "Limits");
`study_label_cycles.py` decides that exhaustively for row sets of up to about 20 rows.
A sphere's labels must come from rows R whose submatrix A[R, :] has no rank-(p - 1) fit within
eps, and the rows that bind the best rank-(p - 1) fit found (within FRAC of its largest row
error) are the natural such R (some 30 - 50 rows on MiniLM heads): too many to enumerate.
This probe samples instead. It fits rank p - 1 (alternating l1 from the SVD), projects A[R]
onto p-dimensional subspaces (the top right singular vectors of A[R], perturbations of them,
random ones), normalises the points to the unit sphere (so every row of R is a hull vertex)
with optional random radial scales, and collects the facets of conv(+-Y) whose label sets one
z serves (one LP each).  Every ``--every`` hulls it prunes the collected sets (a set with a
face that no other collected set has is in no cycle) and asks, by GF(2) elimination, whether
the rest carries an odd cycle: "True" means a certificate at rank p exists over these labels
(up to the float64 LPs); "False" only that the sampled sets do not carry one.

    cd benchmarks && python study_binding_spheres.py ARRAYS.npz p [--hulls 200] [--every 50]

Run it at the proved rank as a control: there the first hulls already carry a cycle.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from study_label_cycles import faces, odd_cycle_exists

from softrank.witnesses.producers import polytope
from softrank.witnesses.producers.altl1 import alt_l1
from softrank.witnesses.producers.subdivide import LabelLP

FRAC = 0.95
Key = tuple[tuple[int, ...], tuple[int, ...]]


def prune(simplices: set[Key]) -> list[Key]:
    """Returns the sets left after removing, repeatedly, every set with a face that no other
    remaining set has: a mod-2 cycle contains none of those."""
    alive = set(simplices)
    count: dict[Key, int] = defaultdict(int)
    incident: dict[Key, list[Key]] = defaultdict(list)
    for s in alive:
        for f in faces(s):
            count[f] += 1
            incident[f].append(s)
    stack = [f for f, c in count.items() if c == 1]
    while stack:
        f = stack.pop()
        if count[f] != 1:
            continue
        s = next(x for x in incident[f] if x in alive)
        alive.discard(s)
        for g in faces(s):
            count[g] -= 1
            if count[g] == 1:
                stack.append(g)
    return sorted(alive)


def binding_rows(A: np.ndarray, k: int, eps: float) -> tuple[np.ndarray, float]:
    """Returns (R, err/eps): the rows within FRAC of the largest row error of a rank-k
    alternating-l1 fit (from the SVD) and that fit's error relative to eps."""
    Us, s, Vt = np.linalg.svd(A)
    U, V, err = alt_l1(A, k, eps, Us[:, :k] * s[:k], Vt[:k], iters=3000, patient=True,
                       polish=True)
    r = np.abs(A - U @ V).sum(axis=1)
    return np.flatnonzero(r >= FRAC * r.max()), err / eps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arrays", help="an operator's .npz (array 'A')")
    ap.add_argument("p", type=int, help="the rank to probe")
    ap.add_argument("--eps", type=float, default=0.25)
    ap.add_argument("--hulls", type=int, default=200)
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args()
    with np.load(args.arrays, allow_pickle=False) as z:
        A = np.asarray(z["A"], dtype=np.float64)
    p, goal = args.p, args.eps / (1 - 1e-6)
    R, fit = binding_rows(A, p - 1, args.eps)
    k = len(R)
    print(f"rank-{p - 1} fit {fit:.4f} eps; {k} rows within {FRAC} of its largest row error")
    lp = LabelLP(A)
    served: set[Key] = set()
    unserved: set[Key] = set()
    rng = np.random.default_rng(5)
    W0 = np.linalg.svd(A[R])[2][:p].T
    t0 = time.process_time()
    for it in range(args.hulls):
        W, c = W0, np.ones(k)
        if it % 3 == 0 and it:
            W = W0 + rng.choice([0.05, 0.1, 0.2]) * np.abs(W0).max() * rng.standard_normal(W0.shape)
        elif it % 3 == 1:
            c = np.exp(0.15 * rng.standard_normal(k))
        elif it % 3 == 2:
            W = np.linalg.qr(rng.standard_normal((A.shape[1], p)))[0]
        G = A[R] @ W
        got = polytope.hull_facets(G / np.linalg.norm(G, axis=1, keepdims=True) * c[:, None],
                                   seed=it)
        if got is not None:
            for facet in got[1]:
                rows, sg = R[facet % k], np.where(facet < k, 1, -1)
                o = np.argsort(rows)
                rows, sg = rows[o], sg[o] * (1 if sg[o][0] > 0 else -1)
                key = (tuple(int(x) for x in rows), tuple(int(x) for x in sg))
                if key not in served and key not in unserved:
                    labels = [2 * a + (s < 0) for a, s in zip(*key, strict=True)]
                    (served if lp.best(labels)[1] > goal else unserved).add(key)
        if (it + 1) % args.every == 0 or it + 1 == args.hulls:
            kept = prune(served)
            found = odd_cycle_exists(kept)
            print(f"{it + 1} hulls: {len(served)} served sets, {len(unserved)} not; "
                  f"{len(kept)} after pruning; odd cycle {found} "
                  f"({time.process_time() - t0:.0f} CPU s)", flush=True)
            if found:
                break


if __name__ == "__main__":
    main()
