"""bernstein lower certificates: the kernel's check vs a plain float64 evaluation, same process.

For softmax matrices of size n (128, 256, 512) and p = n / 4, W is the top-p right singular
subspace with rows J scaled to the identity and P = W pinv(A W).  Prints the median wall time
of the plain evaluation ||P A W - W||_inf + ||P||_inf eps (three float products, no bounds), of
the kernel's float64 tier and of the forced exact tier, and the ratios to the plain time.
Run: ``.venv/bin/python benchmarks/bench_bernstein.py [--reps N] [--sizes ...]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_lower import softmax_matrix, tier_table  # run as a script: its folder is on sys.path


def certificate(A: np.ndarray, p: int) -> dict:
    """Untrusted float64: the top-p right singular subspace, rows J pivoted to the identity."""
    _, _, Vt = np.linalg.svd(A)
    W = Vt[:p].T
    J: list[int] = []
    R = W.copy()
    for k in range(p):
        j = int(np.argmax(np.abs(R[:, k])))
        J.append(j)
        R = R - np.outer(R[:, k] / R[j, k], R[j])
    W = W @ np.linalg.inv(W[J])
    W[J] = np.eye(p)
    return {"kind": "bernstein", "rank": p, "W": W, "P": W @ np.linalg.pinv(A @ W),
            "J": np.array(J)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    eps = 0.01

    def cases():
        for n in args.sizes:
            A = softmax_matrix(n, rng)
            c = certificate(A, n // 4)
            W, P = c["W"], c["P"]

            def plain(A=A, W=W, P=P):
                return float(np.abs(P @ (A @ W) - W).sum(axis=1).max()
                             + np.abs(P).sum(axis=1).max() * eps)
            yield n, n // 4, A, c, plain

    tier_table(cases(), args.reps, eps)


if __name__ == "__main__":
    main()
