"""rowset lower certificates: the kernel's check vs a plain float64 evaluation, same process.

For softmax matrices of size n (128, 256, 512) and p rows (6, 9, 12: 32 to 2048 sign vectors),
Z holds the sign of each row's pattern on the keys where that row is largest (untrusted, not
optimised: the check's cost does not depend on how good Z is).  Prints the median wall time of
the plain evaluation min_(s,i) sigma_i(s) (A[I] z_s)_i (one float product, no bounds), of the
kernel's float64 tier and of the forced exact tier, and the ratios to the plain time; then the
same for a rowmix certificate with the same Z on the rows of D A (D dense, rows of l1 norm 1).
Run: ``.venv/bin/python benchmarks/bench_rowset.py [--reps N] [--sizes ...]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_lower import softmax_matrix, tier_table  # run as a script: its folder is on sys.path

from softrank.certify.lower.rowset import sign_patterns


def certificate(A: np.ndarray, p: int) -> dict:
    """Untrusted float64: p rows and, per pattern, z_k = sigma_i on the keys row i owns."""
    I = np.arange(0, A.shape[0], A.shape[0] // p)[:p]
    owner = np.argmax(A[I], axis=0)
    S = sign_patterns(p)
    return {"kind": "rowset", "rank": p, "I": I, "Z": S[:, owner]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512])
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def cases():
        for n, p in zip(args.sizes, (6, 9, 12), strict=False):
            A = softmax_matrix(n, rng)
            c = certificate(A, p)
            S, AI, Z = sign_patterns(p), A[c["I"]], c["Z"]

            def plain(S=S, AI=AI, Z=Z):
                return float(np.min(S * (Z @ AI.T)))
            yield n, p, A, c, plain
            # rowmix: the same sign vectors on the rows of D A, D mixing every query
            D = rng.random((p, n))
            D /= np.abs(D).sum(axis=1, keepdims=True) * (1 + 1e-9)
            mix = {"kind": "rowmix", "rank": p, "D": D, "Z": Z}

            def plain_mix(S=S, D=D, A=A, Z=Z):
                return float(np.min(S * (Z @ (D @ A).T)))
            yield n, p, A, mix, plain_mix

    tier_table(cases(), args.reps, 0.01)


if __name__ == "__main__":
    main()
