"""The rowset producer's orthant LPs: one warm-started HiGHS model per row set vs a fresh
``linprog`` per sign pattern, same process.

For softmax matrices of size n (128, 256, 512) and p rows (6, 8, 10: 32 to 512 patterns),
times solving every orthant LP of one row set in a shuffled pattern order (the producer
solves the hardest patterns first, so consecutive patterns differ in many signs) and prints
the median wall times and their ratio, and the largest difference of the optimal values.
Run: ``.venv/bin/python benchmarks/bench_orthants.py [--reps N] [--sizes ...]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_lower import machine_line, median_time, softmax_matrix  # script: folder on sys.path

from softrank.witnesses.producers.rowset import Orthants, orthant, patterns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(machine_line())
    print(f"{'n':>5} {'p':>3} {'patterns':>8} {'linprog s':>10} {'warm s':>9} {'ratio':>6} "
          f"{'max |dv|':>9}")
    for n, p in zip(args.sizes, (6, 8, 10), strict=False):
        A = softmax_matrix(n, rng)
        M = A[rng.choice(n, p, replace=False)]
        S = patterns(p)[rng.permutation(1 << (p - 1))]

        def fresh(M=M, S=S):
            return [orthant(M, s)[0] for s in S]

        def warm(M=M, S=S):
            lps = Orthants(M)  # the model is built inside the timed call, as in the producer
            return [lps.solve(s)[0] for s in S]

        t_fresh = median_time(fresh, args.reps)
        t_warm = median_time(warm, args.reps)
        dv = max(abs(a - b) for a, b in zip(fresh(), warm(), strict=True))
        print(f"{n:>5} {p:>3} {len(S):>8} {t_fresh:>10.4f} {t_warm:>9.4f} "
              f"{t_fresh / t_warm:>6.1f} {dv:>9.1e}")


if __name__ == "__main__":
    main()
