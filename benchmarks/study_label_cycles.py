"""How far can a Borsuk-Ulam lower bound reach on a head?  An exhaustive probe on a row set.

Every lower kind the kernel has except the Frobenius tail is a Z2-index argument
(proofs_notes/polytope.md): it exhibits an odd map from a (p - 1)-sphere into the cone
C = {w : ||A w||_inf > t ||w||_inf}.  C is the union of the open convex cones
K_(i,s) = {w : s (A w)_i > t ||w||_inf}, so (nerve theorem, with a symmetric partition of
unity) it maps oddly into the nerve N of that cover and back: a set of signed rows is a
simplex of N when one z in the unit cube has s (A z)_i > t for all its labels (one LP).  An
odd map S^(p-1) -> C exists only if w^(p-1) != 0 in H^(p-1)(N / Z2; F2) (w the class of the
double cover N -> N / Z2; its pull-back to RP^(p-1) is the generator's power, which is
non-zero), that is only if some mod-2 (p-1)-cycle of N / Z2 pairs to 1 with w^(p-1).

This probe decides the last statement exactly (F2 linear algebra) for the sub-nerve N_R whose
labels are rows in a set R: a cycle exists iff the cochain e of w^(p-1) is not in the row space
of the boundary matrix.  w is the 1-cocycle that is 1 on an edge whose two ends have
different signs (rows ordered by index; the section picks sign +), and Alexander-Whitney makes
w^(p-1) the indicator of the simplices whose signs alternate along increasing row index.
"False" means: no odd map S^(p-1) -> C_R = union of the K_(i,s) with i in R, so no
`rowset` or `polytope` certificate at rank p whose labels lie in R, no `bernstein` subspace
inside C_R (with 0), and no sphere of any other shape.  It says nothing about r_eps, nor
about certificates with labels outside R; the LPs are float64 (a diagnostic, not a proof).
Cost: C(|R|, p) 2^(p-1) candidate simplices, most ruled out by a pair no z serves; at p = 6
on 18 rows of a MiniLM head, 594,048 candidates, 96,726 served, about 5 minutes (most of it
the elimination).  Where the study stands: proofs_notes/polytope.md, "Limits".

    cd benchmarks && python study_label_cycles.py ARRAYS.npz p k [--hull W.npz]
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
from gf2 import in_span  # benchmarks/gf2.py (scripts run from this folder)

from softrank.witnesses.producers.subdivide import witness_lp


def simplex_ok(A: np.ndarray, labels: list[tuple[int, int]], t: float) -> bool:
    """Whether a z in the unit cube has s (A z)_i > t for every label (i, s) (float64 LP)."""
    got = witness_lp(np.array([s * A[i] for i, s in labels]))
    return got is not None and got[1] > t


def nerve_simplices(A: np.ndarray, rows: list[int], p: int, t: float
                    ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Returns the (p - 1)-simplices of N_R / Z2 as (rows, signs) with rows increasing and the
    first sign +1.  Labels of one sign always form a simplex: rows of A are probability
    vectors, so z = (1, ..., 1) gives (A z)_i = 1 > t (t < 1 assumed)."""
    rows = sorted(rows)
    mixed_edge = {(i, j): simplex_ok(A, [(i, 1), (j, -1)], t)
                  for i, j in itertools.combinations(rows, 2)}
    out = []
    for S in itertools.combinations(rows, p):
        for tail in itertools.product((1, -1), repeat=p - 1):
            signs = (1, *tail)
            # a simplex's edges are simplices: one failing pair rules it out without an LP
            if any(signs[a] != signs[b] and not mixed_edge[(S[a], S[b])]
                   for a in range(p) for b in range(a + 1, p)):
                continue
            if len(set(signs)) == 1 or simplex_ok(A, list(zip(S, signs, strict=True)), t):
                out.append((S, signs))
    return out


def faces(simplex: tuple[tuple[int, ...], tuple[int, ...]]
          ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Returns the codimension-one faces of a simplex of N / Z2 (rows increasing, first sign
    +1), each as its orbit's representative of the same form (first sign made +1)."""
    S, signs = simplex
    out = []
    for x in range(len(S)):
        fs = signs[:x] + signs[x + 1:]
        if fs and fs[0] == -1:
            fs = tuple(-s for s in fs)
        out.append((S[:x] + S[x + 1:], fs))
    return out


def odd_cycle_exists(simplices: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> bool:
    """Whether some mod-2 sum of the given (p - 1)-simplices of N / Z2 has zero boundary and
    an odd number of sign-alternating simplices (w^(p-1) evaluates to 1 on it)."""
    if not simplices:
        return False
    rows_of_face: dict[tuple, int] = {}
    e = 0
    for c, (S, signs) in enumerate(simplices):
        if all(signs[a] != signs[a + 1] for a in range(len(S) - 1)):
            e |= 1 << c
        for key in faces((S, signs)) if len(S) > 1 else ():  # a vertex has no boundary
            rows_of_face[key] = rows_of_face.get(key, 0) ^ (1 << c)
    return not in_span(rows_of_face.values(), e)  # e outside the coboundaries


def farthest_rows(A: np.ndarray, k: int) -> list[int]:
    """Returns k rows by farthest-point sampling in l1 (the first: largest total distance)."""
    D = np.abs(A[:, None, :] - A[None, :, :]).sum(axis=-1)
    chosen = [int(np.argmax(D.sum(axis=1)))]
    d = D[chosen[0]].copy()
    while len(chosen) < min(k, len(A)):
        j = int(np.argmax(d))
        chosen.append(j)
        d = np.minimum(d, D[j])
    return sorted(chosen)


def hull_rows(A: np.ndarray, W: np.ndarray, k: int) -> list[int]:
    """Returns the k rows that are vertices of the most facets of conv(+-A W)."""
    from scipy.spatial import ConvexHull

    m = len(A)
    G = A @ W
    hull = ConvexHull(np.vstack([G, -G]))
    verts = np.unique(hull.vertices % m)
    count = np.bincount(hull.simplices.ravel() % m, minlength=m)
    return sorted(verts[np.argsort(-count[verts], kind="stable")][:k].tolist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arrays", help="an operator's .npz (array 'A')")
    ap.add_argument("p", type=int, help="the rank to probe")
    ap.add_argument("k", type=int, help="rows in R")
    ap.add_argument("--eps", type=float, default=0.25)
    ap.add_argument("--hull", help="an .npz with array 'W' (N x p): R = top hull rows of A W")
    args = ap.parse_args()
    with np.load(args.arrays, allow_pickle=False) as z:
        A = np.asarray(z["A"], dtype=np.float64)
    if args.hull:
        with np.load(args.hull, allow_pickle=False) as z:
            R = hull_rows(A, np.asarray(z["W"], dtype=np.float64), args.k)
    else:
        R = farthest_rows(A, args.k)
    simplices = nerve_simplices(A, R, args.p, args.eps)
    print(f"rows {R}\nsimplices {len(simplices)}\n"
          f"odd cycle at rank {args.p}: {odd_cycle_exists(simplices)}")


if __name__ == "__main__":
    main()
