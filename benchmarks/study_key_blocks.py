"""Can a lower bound be assembled from blocks of keys?  A float64 probe of the product idea.

Split the keys into disjoint blocks G_1, ..., G_b (columns left out of every block cost
nothing) and give block j the rows R_j whose attention mass on the *other* blocks' keys is at
most lam.  With lam_j = max over i in R_j of that mass, a lower certificate of rank p_j for
the block A[R_j, G_j] at threshold t + lam_j gives one of rank p_1 + ... + p_b for A at t:
for Bernstein blocks W = W_1 + ... + W_b (disjoint supports, so ||W c||_inf is the largest
block's) is a Bernstein subspace of A, since a row of R_j loses at most lam_j ||W c||_inf to
the other blocks; for sphere certificates the free sum of the polytopes has the facets
F_1 u ... u F_b, served by the sum of the blocks' witnesses for the same reason (the join of
the spheres; proofs_notes/polytope.md, "Limits").  Both are kinds the kernel already checks,
so only the search would be new.  This probe asks whether the blocks' ranks add up to more
than the store's lower end, running the default `bernstein` producer (lifts included) on
each block at eps + lam.

    .venv/bin/python benchmarks/study_key_blocks.py STORE OPERATOR [--eps 0.25] \
        [--blocks 2 4] [--lam 0.05 0.1 0.15] [--sinks 1]

Blocks are contiguous runs of key positions (equal widths), after removing the ``--sinks``
columns of most attention mass from every block.  The ranks are float64 producer claims,
not checked by the kernel (a sum that beat the store's end would have to be, as one
`bernstein` or `polytope` certificate of A).
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from study_gap import claimed_brackets  # noqa: E402  (scripts run from benchmarks/)

from softrank.witnesses.producers import get_producer  # noqa: E402
from softrank.witnesses.producers._common import one_blas_thread  # noqa: E402
from softrank.witnesses.store import open_store  # noqa: E402


def key_blocks(A: np.ndarray, blocks: int, sinks: int) -> list[np.ndarray]:
    """Returns ``blocks`` disjoint runs of key positions of equal width, without the ``sinks``
    columns of largest attention mass."""
    N = A.shape[1]
    keys = np.setdiff1d(np.arange(N), np.argsort(A.sum(0))[::-1][:sinks])
    edges = np.linspace(0, N, blocks + 1).round().astype(int)
    return [keys[(keys >= edges[j]) & (keys < edges[j + 1])] for j in range(blocks)]


def block_rows(A: np.ndarray, G: list[np.ndarray], j: int, eps: float, lam: float) -> np.ndarray:
    """Returns the rows whose mass on the other blocks is at most lam and whose mass on block
    j exceeds eps + lam (a row below that cannot carry a label of the block's certificate)."""
    other = np.concatenate([G[k] for k in range(len(G)) if k != j])
    leak, mine = A[:, other].sum(1), A[:, G[j]].sum(1)
    return np.flatnonzero((leak <= lam) & (mine > eps + lam))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("operator")
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--blocks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--lam", type=float, nargs="+", default=[0.05, 0.1, 0.15])
    ap.add_argument("--sinks", type=int, default=1)
    a = ap.parse_args()
    eps = Fraction(a.eps)
    lo, up = claimed_brackets(a.store, eps)[a.operator]
    A = np.asarray(open_store(a.store).operator(a.operator).load()["A"], dtype=np.float64)
    producer = get_producer("bernstein")
    with one_blas_thread():
        for b in a.blocks:
            G = key_blocks(A, b, a.sinks)
            for lam in a.lam:
                t = eps + Fraction(lam).limit_denominator(1000)
                ranks, rows, start = [], [], time.process_time()
                for j in range(b):
                    R = block_rows(A, G, j, float(eps), lam)
                    rows.append(len(R))
                    got = producer.produce(A[np.ix_(R, G[j])], t) if len(R) else None
                    ranks.append(got.rank if got is not None else 0)
                print(f"{a.operator} [{lo}, {up}] blocks {b} lam {lam}: rows {rows} ranks {ranks}"
                      f" sum {sum(ranks)} ({time.process_time() - start:.0f} CPU s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
