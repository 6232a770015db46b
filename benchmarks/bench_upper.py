"""Validated upper check vs a plain float64 check, in the same process.

For softmax matrices n x n (n = 128, 256, 512) with truncated-SVD witnesses of rank k = 8, 32, 64,
times ``certify.check_upper`` (auto tier) and the plain ``np.abs(A - U @ V).sum(1).max()`` and
prints the median ratio validated / plain.  eps is set 1% above the error, the common case; the
thin-margin column times an exact tie, which escalates the maximal rows to arb.

Run: .venv/bin/python benchmarks/bench_upper.py [--repeat 31]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from softrank.certify import check_upper


def softmax_matrix(n: int, rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(size=(n, n)) * 2.5
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=31)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'n':>4} {'k':>3} {'plain ms':>9} {'valid ms':>9} {'ratio':>6} {'tie ratio':>9} tiers")
    for n in (128, 256, 512):
        A = softmax_matrix(n, rng)
        u, s, vt = np.linalg.svd(A)
        for k in (8, 32, 64):
            U, V = u[:, :k] * s[:k], vt[:k].copy()
            err = float(np.abs(A - U @ V).sum(1).max())
            eps = err * 1.01

            def plain(A=A, U=U, V=V, eps=eps):
                return np.abs(A - U @ V).sum(1).max() <= eps

            def valid(A=A, U=U, V=V, eps=eps):
                return check_upper(A, U, V, eps)

            def tie(A=A, U=U, V=V, err=err):
                return check_upper(A, U, V, err)

            for _ in range(3):
                plain(), valid()
            # interleave to share machine noise between the two timings
            tp = median_time(plain, args.repeat)
            tv = median_time(valid, args.repeat)
            tt = median_time(tie, max(3, args.repeat // 5))
            c = valid()
            print(f"{n:>4} {k:>3} {tp * 1e3:>9.3f} {tv * 1e3:>9.3f} {tv / tp:>6.2f} "
                  f"{tt / tp:>9.1f} {c.status}/{'+'.join(tie().tiers_run)}")


if __name__ == "__main__":
    main()
