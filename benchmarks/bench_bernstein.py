"""bernstein lower certificates: the kernel's check vs a plain float64 evaluation, same process.

For softmax matrices of size n (128, 256, 512) and p = n / 4, W is the top-p right singular
subspace with rows J scaled to the identity and P = W pinv(A W).  Prints the median wall time
of the plain evaluation ||P A W - W||_inf + ||P||_inf eps (three float products, no bounds), of
the kernel's float64 tier and of the forced exact tier, and the ratios to the plain time.
Run: ``.venv/bin/python benchmarks/bench_bernstein.py [--reps N] [--sizes ...]``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from bench_lower import median_time, softmax_matrix  # run as a script: its folder is on sys.path

from softrank.certify import check_lower


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
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, "
          f"cpus={os.cpu_count()}, load average {load:.2f}")
    print(f"{'n':>5} {'p':>4} {'plain (ms)':>11} {'float64 tier':>13} {'ratio':>6} "
          f"{'exact tier':>11} {'ratio':>7} {'status':>7}")
    eps = 0.01
    for n in args.sizes:
        A = softmax_matrix(n, rng)
        c = certificate(A, n // 4)
        W, P = c["W"], c["P"]

        def plain(A=A, W=W, P=P):
            return float(np.abs(P @ (A @ W) - W).sum(axis=1).max()
                         + np.abs(P).sum(axis=1).max() * eps)

        t_plain = median_time(plain, args.reps)
        t_f = median_time(lambda A=A, c=c: check_lower(A, c, eps, tier="float64"), args.reps)
        t_e = median_time(lambda A=A, c=c: check_lower(A, c, eps, tier="exact"),
                          max(1, args.reps // 3))
        status = check_lower(A, c, eps).status
        print(f"{n:>5} {n // 4:>4} {1e3 * t_plain:>11.2f} {1e3 * t_f:>13.2f} "
              f"{t_f / t_plain:>6.2f} {1e3 * t_e:>11.1f} {t_e / t_plain:>7.1f} {status:>7}")


if __name__ == "__main__":
    main()
