"""Is the topological lower bound tight on small cells?  The study behind the "limits" paragraph
of proofs_notes/polytope.md.

Usage (a few minutes for the default 60 cells):

    .venv/bin/python benchmarks/study_topology_tightness.py [--cells 60] [--seed 7] [--side 4]

Every lower certificate of the ``polytope`` family (bernstein, rowset, polytope lifts) is a
Borsuk-Ulam argument on the complex whose simplices are the sets of signed rows (i, s) that one
z in the unit cube serves together (s (A z)_i > t for all of them): an odd map from a sphere
of dimension p - 1 into that complex proves r_eps >= p.  The best such bound is one more than
the complex's Z2-index; this script bounds the index from below by its homological version
(chains c_0, ..., c_n over GF(2) with c_0 of odd size and boundary(c_k) = c_(k-1) + its mirror,
solved exactly over GF(2) on the whole complex) and compares index + 1 with the exact oracle's
bracket (``softrank.exact.oracle``) for random softmax cells with 3-decimal rational entries at
five tolerances.  Which label sets are served is decided by float64 LPs with a 1e-9 margin:
a study, not a proof (the oracle's brackets are proofs).

Prints one JSON line per (cell, eps) and a summary line: how often index + 1 equals the
oracle's upper end, lies inside its bracket, or (which would contradict the theorem, or the LP
margin) exceeds it.
"""

from __future__ import annotations

import argparse
import itertools
import json
from fractions import Fraction

import numpy as np
from gf2 import solvable  # benchmarks/gf2.py (scripts run from this folder)
from scipy.optimize import linprog

from softrank.exact.oracle import oracle

EPS = ("1/10", "1/5", "1/4", "3/10", "2/5")
MARGIN = 1e-9


def served(A: np.ndarray, labels: tuple[int, ...]) -> float:
    """max over the unit cube of min over labels of sigma (A z)_i (label 2 i + (sigma < 0))."""
    rows = np.array([A[x >> 1] * (-1.0 if x & 1 else 1.0) for x in labels])
    n = A.shape[1]
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.hstack([-rows, np.ones((len(rows), 1))]), b_ub=np.zeros(len(rows)),
                  bounds=[(-1.0, 1.0)] * n + [(None, None)], method="highs")
    return -res.fun


def complex_of(A: np.ndarray, t: float) -> dict[frozenset[int], int]:
    """The served label sets (no row twice), each with its dimension."""
    m = A.shape[0]
    out = {}
    for size in range(1, m + 1):
        for rows in itertools.combinations(range(m), size):
            for signs in itertools.product((0, 1), repeat=size):
                labels = tuple(2 * r + s for r, s in zip(rows, signs, strict=True))
                if served(A, labels) > t + MARGIN:
                    out[frozenset(labels)] = size - 1
    return out


def index_bound(simplices: dict[frozenset[int], int], m: int) -> int:
    """The largest n (or -1) with GF(2) chains c_0..c_n as in the module docstring."""
    best = -1
    for n in range(m):
        if not any(d == n for d in simplices.values()):
            break
        cols = []
        for s, d in simplices.items():
            if d > n:
                continue
            col: set = set()
            if d >= 1:
                for x in s:
                    col ^= {("eq", s - {x})}
            if d < n:  # s in c_d adds s + its mirror to the level-(d + 1) equation
                col ^= {("eq", s)} ^ {("eq", frozenset(x ^ 1 for x in s))}
            if d == 0:
                col ^= {"odd"}
            cols.append(col)
        if not solvable(cols, {"odd"}):
            break
        best = n
    return best


def cells(side: int, count: int, seed: int
          ) -> list[tuple[list[list[Fraction]], np.ndarray, float]]:
    """Returns ``count`` random softmax cells (side x side, temperature beta uniform in
    [0.5, 4]) as exact 3-decimal rationals with unit row sums, their float64 copies and beta."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        beta = rng.uniform(0.5, 4.0)
        P = np.exp(beta * rng.standard_normal((side, side)))
        P /= P.sum(axis=1, keepdims=True)
        Q = [[Fraction(round(x * 1000), 1000) for x in row] for row in P]
        for row in Q:
            row[-1] = 1 - sum(row[:-1])
        out.append((Q, np.array([[float(x) for x in row] for row in Q]), beta))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--side", type=int, default=4)
    ap.add_argument("--budget", type=float, default=20.0, help="oracle seconds per call")
    args = ap.parse_args()
    counts = {"equal": 0, "inside": 0, "above": 0, "below": 0, "total": 0}
    for cell, (Q, Af, beta) in enumerate(cells(args.side, args.cells, args.seed)):
        for eps in EPS:
            res = oracle(Q, eps, budget=args.budget)
            topo = index_bound(complex_of(Af, float(Fraction(eps))), args.side) + 1
            counts["total"] += 1
            counts["equal" if topo == res.upper else "above" if topo > res.upper
                   else "below" if topo < res.lower else "inside"] += 1
            print(json.dumps({"cell": cell, "beta": round(beta, 3), "eps": eps,
                              "oracle": [res.lower, res.upper], "topological": topo}), flush=True)
    print(json.dumps({"summary": counts}), flush=True)


if __name__ == "__main__":
    main()
