"""Validated singular values vs plain ``np.linalg.svd`` (values only), same process.

Prints the median wall time of each and their ratio for softmax matrices of size 128, 256 and
512 (the target: ratio at most 4 at 256, goal 3), plus the widest enclosure
relative to sigma_1.  Run: ``.venv/bin/python benchmarks/bench_lower.py [--reps N]``;
``--breakdown`` also times the pieces (LAPACK SVD with vectors, the two Gram defects, the
product residual), each as a ratio to the values-only SVD.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from softrank.certify.numerics import ballmat
from softrank.certify.numerics.svd import approximate_factors, singular_values


def softmax_matrix(n: int, rng: np.random.Generator, scale: float = 3.0) -> np.ndarray:
    L = rng.standard_normal((n, n)) * scale
    A = np.exp(L - L.max(axis=1, keepdims=True))
    return A / A.sum(axis=1, keepdims=True)


def median_time(fn, reps: int, clock=time.perf_counter) -> float:
    # numpy and scipy ship separate OpenBLAS builds; after one has run multithreaded its
    # workers spin for a while and would slow the other down: let them go idle first
    time.sleep(0.3)
    fn()  # warm-up (threads, caches)
    ts = []
    for _ in range(reps):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return float(np.median(ts))


def machine_line() -> str:
    """The first line of every table: BLAS threads, cpus and load average."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, "
            f"cpus={os.cpu_count()}, load average {load:.2f}")


def tier_table(cases, reps: int, eps: float) -> None:
    """Prints, per (n, p, A, certificate, plain) case, the median time of ``plain()`` (the
    same value in float64 without bounds), of check_lower's float64 tier and of its exact
    tier, with the ratios to the plain time and the auto status."""
    from softrank.certify import check_lower

    print(machine_line())
    print(f"{'n':>5} {'p':>4} {'plain (ms)':>11} {'float64 tier':>13} {'ratio':>6} "
          f"{'exact tier':>11} {'ratio':>7} {'status':>7}")
    for n, p, A, c, plain in cases:
        t_plain = median_time(plain, reps)
        t_f = median_time(lambda A=A, c=c: check_lower(A, c, eps, tier="float64"), reps)
        t_e = median_time(lambda A=A, c=c: check_lower(A, c, eps, tier="exact"),
                          max(1, reps // 3))
        status = check_lower(A, c, eps).status
        print(f"{n:>5} {p:>4} {1e3 * t_plain:>11.3f} {1e3 * t_f:>13.2f} "
              f"{t_f / t_plain:>6.1f} {1e3 * t_e:>11.1f} {t_e / t_plain:>7.0f} {status:>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512])
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu = process time (robust on a busy machine; use with "
                         "OPENBLAS_NUM_THREADS=1)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the pieces of the float64 tier")
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    rng = np.random.default_rng(0)
    print(f"{machine_line()}, clock={args.clock}")
    print(f"{'n':>5} {'svd values (ms)':>16} {'validated (ms)':>15} {'ratio':>6} "
          f"{'max width / sigma_1':>20} {'min lo / sigma_min':>19}")
    for n in args.sizes:
        A = softmax_matrix(n, rng)
        t_plain = median_time(lambda A=A: np.linalg.svd(A, compute_uv=False), args.reps,
                              clock)
        t_val = median_time(lambda A=A: singular_values(A, tier="float64"), args.reps, clock)
        sv = singular_values(A, tier="float64")
        s = np.linalg.svd(A, compute_uv=False)
        print(f"{n:>5} {1e3 * t_plain:>16.2f} {1e3 * t_val:>15.2f} {t_val / t_plain:>6.2f} "
              f"{sv.max_width / s[0]:>20.2e} {sv.lo_f[-1] / s[-1]:>19.12f}")
        if args.breakdown:
            print("      " + breakdown(A, t_plain, args.reps, clock))


def breakdown(A: np.ndarray, t_plain: float, reps: int, clock) -> str:
    """Times of the float64 tier's pieces as ratios to the values-only SVD."""
    fac = approximate_factors(A)
    ws = ballmat.thread_workspace()
    P = fac.U * fac.s
    pieces = {
        "svd+vectors": lambda: approximate_factors(A),
        "f=|VtV-I|": lambda: ballmat.gram_residual_frob_upper(fac.Vt.T, ws),
        "g=|UtU-I|": lambda: ballmat.gram_residual_frob_upper(fac.U, ws),
        "e=|USVt-A|": lambda: ballmat.split_residual_frob_upper(P, fac.Vt, fac.B, ws),
        "one GEMM": lambda: fac.U @ fac.Vt,
    }
    return "  ".join(f"{k} {median_time(fn, reps, clock) / t_plain:.2f}"
                     for k, fn in pieces.items())


if __name__ == "__main__":
    main()
