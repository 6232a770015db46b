"""polytope lower certificates: the kernel's check vs a plain float64 evaluation, same process.

For softmax matrices of size n (128, 256) of rank-16 logits and ranks p (4, 6, 8), the
certificate is the lift of the leading p right singular vectors (untrusted; the check's cost
depends on the facet count, not on how good the witnesses are): Y = the hull vertices of +-A
W, the facets of conv(+-Y) from qhull, one witness per facet (the subspace's own, W n / ||W
n||_inf). Prints the median wall time of the plain evaluation (facet normals by one batched
float solve, the other points' |n . y| against 1, and min sigma (A z_F)_i: the same
computation without any bound or exact step), of the kernel's float64 tier and of its exact
tier (the sphere part is exact in both), the ratios to the plain time and the facet count.
``--large`` adds a lift of the size met on real heads: n = 256, p = 8, the leading singular
vectors mixed with a random subspace (qhull then finds about 85 hull vertices and 35,000
facets; about 10 s to build).
Run: ``.venv/bin/python benchmarks/bench_polytope.py [--reps N] [--sizes ...] [--large]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_lower import tier_table  # run as a script: its folder is on sys.path

from softrank.witnesses.producers.polytope import subspace_certificate


def certificate(A: np.ndarray, p: int, W: np.ndarray | None = None) -> dict:
    Y, I, F, Z = subspace_certificate(A, np.linalg.svd(A)[2][:p].T if W is None else W)
    return {"kind": "polytope", "rank": p, "Y": Y, "I": I, "F": F, "Z": Z,
            "G": np.arange(len(F))}


def plain_of(A: np.ndarray, c: dict):
    Y, I, F, Z = c["Y"], c["I"], c["F"], c["Z"]
    k, p = Y.shape
    sig = np.where(F < k, 1.0, -1.0)

    def plain() -> float:
        Yf = np.where(F[:, :, None] < k, Y[F % k], -Y[F % k])
        n = np.linalg.solve(Yf, np.ones((len(F), p, 1)))[..., 0]
        inside = np.abs(Y @ n.T) < 1.0  # k x f, the facet's own points included (no bound)
        vals = (Z @ A.T)[np.arange(len(F))[:, None], I[F % k]] * sig
        return float(vals.min()) if inside.size else 0.0
    return plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256])
    ap.add_argument("--large", action="store_true", help="add the 35,000-facet p = 8 case")
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def cases():
        for n in args.sizes:
            # low-rank logits (queries times keys, d = 16), as in an attention head
            S = 3.0 * rng.standard_normal((n, 16)) @ rng.standard_normal((16, n)) / 4.0
            A = np.exp(S - S.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            for p in (4, 6, 8):
                c = certificate(A, p)
                print(f"n = {n}, p = {p}: {len(c['I'])} points, {len(c['F'])} facets")
                yield n, p, A, c, plain_of(A, c)
        if args.large:
            n, p, r2 = 256, 8, np.random.default_rng(1)
            S = 4.0 * r2.standard_normal((n, 24)) @ r2.standard_normal((24, n)) / np.sqrt(24)
            A = np.exp(S - S.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            W = np.linalg.svd(A)[2][:p].T + 8.0 * r2.standard_normal((n, p)) / np.sqrt(n)
            c = certificate(A, p, np.linalg.qr(W)[0])
            print(f"n = {n}, p = {p} (mixed subspace): {len(c['I'])} points, "
                  f"{len(c['F'])} facets")
            yield n, p, A, c, plain_of(A, c)

    tier_table(cases(), args.reps, 0.01)


if __name__ == "__main__":
    main()
