"""Does a volume argument (Vaaler's and Ball's cube sections) reach the stored lower ends?

A lower bound that uses the linearity of B and not only the oddness of a map.  If B has rank
r and ||M - B||_row1 <= t (M is m x n, m >= n), then ker B has dimension >= n - r; on a
subspace L of it of dimension d = n - r, ||M x||_inf <= t ||x||_inf, so M maps the central
section L cap [-1, 1]^n into the section ML cap t [-1, 1]^m.  Vaaler (1979): every
d-dimensional central section of the unit cube has d-volume at least that of the d-cube, so
vol(L cap [-1, 1]^n) >= 2^d.  Ball (1989): every d-dimensional central section of
[-1/2, 1/2]^m has d-volume at most min((m / d)^(d / 2), 2^((m - d) / 2)), so that of
t [-1, 1]^m at most (2t)^d times that.  M stretches d-volumes on L by at least the product of
its d smallest singular values (interlacing), so

    prod_(j > r) sigma_j(M) / t  <=  min((m / d)^(d / 2), 2^((m - d) / 2))    (d = n - r),

and a matrix whose tail product is larger has r_t(M) >= r + 1.  Every T A S with rows of T
and of S of l1 norm at most 1 has r_t(T A S) <= r_t(A) (||T E S||_row1 <= ||E||_row1), so the
bound may be applied to row selections or averages and column selections or merged column
groups of A.

This probe (float64, no kernel check: a bound that reached a stored end would have to become a
certificate kind first) takes the best bound over M = A, pivoted-QR row and column selections
and k-means row averages times merged column groups (k = 4 .. 96, three seeds each) and
compares it with the store's claimed lower end.

    .venv/bin/python benchmarks/study_volume_bound.py STORE [--eps 0.25]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.linalg import qr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from study_gap import claimed_brackets  # noqa: E402  (scripts run from benchmarks/)

from softrank.witnesses.store import open_store  # noqa: E402

SIZES = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96)


def volume_bound(M: np.ndarray, t: float) -> int:
    """Returns the largest r + 1 the float64 volume inequality gives for M (0 for none).  The
    inequality is not monotone in r, so every r is tried."""
    m, n = M.shape
    if m < n:
        return 0
    with np.errstate(divide="ignore"):
        logs = np.log(np.linalg.svd(M, compute_uv=False) / t)
    best = 0
    for r in range(n):
        d = n - r
        if logs[r:].sum() > min(d / 2 * math.log(m / d), (m - d) / 2 * math.log(2)):
            best = r + 1
    return best


def reductions(A: np.ndarray, rng: np.random.Generator):
    """Yields the matrices T A S the probe tries (rows of T and S of l1 norm <= 1)."""
    m, n = A.shape
    yield A
    _, _, cols = qr(A, pivoting=True, mode="economic")
    _, _, rows = qr(A.T, pivoting=True, mode="economic")
    for k in SIZES:
        yield A[np.ix_(rows[:k], cols[:k])]
        yield A[:, cols[:k]]
        for _ in range(3):
            _, col_groups = kmeans2(A.T.copy(), k, seed=int(rng.integers(1 << 30)), minit="++")
            _, row_groups = kmeans2(A.copy(), k, seed=int(rng.integers(1 << 30)), minit="++")
            S = np.zeros((n, k))
            S[np.arange(n), col_groups] = 1.0
            T = np.zeros((k, m))
            for g in range(k):
                members = np.flatnonzero(row_groups == g)
                T[g, members] = 1.0 / max(1, len(members))
            yield A @ S
            yield T @ A @ S


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--eps", default="0.25")
    a = ap.parse_args()
    eps = Fraction(a.eps)
    store = open_store(a.store)
    rng = np.random.default_rng(0)
    ratios = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k-means on matrices with fewer distinct rows than k
        for op, (lo, up) in sorted(claimed_brackets(a.store, eps).items()):
            A = np.asarray(store.operator(op).load()["A"], dtype=np.float64)
            best = max(volume_bound(M, float(eps)) for M in reductions(A, rng))
            ratios.append(best / max(lo, 1))
            print(f"{op} [{lo}, {up}] volume {best}", flush=True)
    print(f"{len(ratios)} operators: volume >= L on {sum(x >= 1 for x in ratios)}, "
          f"median volume / L {np.median(ratios):.3f}, largest {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
