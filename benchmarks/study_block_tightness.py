"""Is the topological lower bound tight on row blocks of real heads?  A float64 study.

Usage (a few minutes a line):

    .venv/bin/python benchmarks/study_block_tightness.py STORE OPERATOR P [--rows 20 24]
                          [--starts 80] [--budget 1500] [--exchange 25] [--more-ranks 2]

For an operator of STORE and a rank P: the best rank-(P - 1) alternating-l1 fit of the
whole operator A (seven starts, 2,000 steps each) orders the rows by their error; for each
block size n of ``--rows`` the block R = the n rows it leaves worst is examined twice.

* *Upper side of the block*: ``--starts`` rank-(P - 1) fits of A[R] from four kinds of start
  (random rows of the block, random positive matrices, random rotations of the block's
  singular vectors, perturbations of the whole fit's V; 3,000 IRLS steps each, never stopped
  at eps).  Printed: the least max-row-l1 error over eps, and how many starts ended within
  0.5% of it.  When most end there and it is above 1, r_eps(A[R]) >= P is very likely.
* *Lower side of the block*: every served set of P signed rows of R (one z in the unit cube
  with s (A z)_i > eps on all of them, decided by an LP) and a GF(2) search for an odd cycle
  (the `nerve` producer's ``served_sets`` and ``odd_cycle``).  Every certificate of the
  polytope family over the rows R (bernstein, rowset, polytope lifts, nerve) is such a cycle
  (proofs_notes/nerve.md), so "no cycle" means none of them proves r_eps(A[R]) >= P, and
  nor does any other Z2-index argument of homological form over R.  With ``--check`` a
  cycle found is checked as a `nerve` certificate by the kernel (``check_lower``).

With ``--exchange STEPS`` each block is not the worst rows but the block of the same size
whose fit is largest among those that many exchanges visit from them (the ``nerve``
producer's ``swap_rows``):
the rows a fit of A leaves worst need not bind a block's own fit.  ``--more-ranks J`` also
fits the block at ranks P .. P + J - 1, the ranks its fits suggest it has.

Sub-blocks only lower r_eps (r_eps(A) >= r_eps(A[R])), so a block whose fits stay above eps
while its complex carries no odd cycle is a real block on which the topological bound is not
tight, if the fits found the block's optimum (which no float64 search proves).  The LPs'
answers are float64 too: a study, not a proof.  One JSON line per block.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softrank.witnesses.producers import nerve  # noqa: E402
from softrank.witnesses.producers._common import clock  # noqa: E402
from softrank.witnesses.producers.altl1 import alt_l1  # noqa: E402
from softrank.witnesses.store import open_store  # noqa: E402

EPS = 0.25


def _err(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> float:
    return float(np.abs(A - U @ V).sum(axis=1).max())


def _from_v(A: np.ndarray, V0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.linalg.lstsq(V0.T, A.T, rcond=None)[0].T, V0


def whole_fit(A: np.ndarray, k: int, rng: np.random.Generator
              ) -> tuple[float, np.ndarray, np.ndarray]:
    """Returns (error, U, V): the best of seven rank-k fits of A (SVD and random-row starts)."""
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    starts = [(u[:, :k] * s[:k], vt[:k])]
    starts += [_from_v(A, A[rng.choice(len(A), k, replace=False)]) for _ in range(6)]
    best = (np.inf, None, None)
    for U0, V0 in starts:
        U, V, _ = alt_l1(A, k, 0.0, U0, V0, iters=2000, patient=True)
        e = _err(A, U, V)
        if e < best[0]:
            best = (e, U, V)
    return best  # type: ignore[return-value]


def block_fits(AR: np.ndarray, k: int, V: np.ndarray, starts: int,
               rng: np.random.Generator) -> np.ndarray:
    """Returns the max-row-l1 errors over EPS of ``starts`` rank-k fits of AR."""
    n = len(AR)
    u, s, vt = np.linalg.svd(AR, full_matrices=False)
    out = []
    for i in range(starts):
        kind = i % 4
        if kind == 0:
            V0 = AR[rng.choice(n, k, replace=False)]
        elif kind == 1:
            V0 = rng.standard_normal((k, AR.shape[1])) * AR.mean(axis=0)
        elif kind == 2:
            Q = np.linalg.qr(rng.standard_normal((len(s), len(s))))[0][:, :k]
            V0 = Q.T @ (s[:, None] * vt)
        else:
            V0 = V + 0.3 * np.abs(V).mean() * rng.standard_normal(V.shape)
        U, V2, _ = alt_l1(AR, k, 0.0, *_from_v(AR, V0), iters=3000, patient=True)
        out.append(_err(AR, U, V2) / EPS)
    return np.array(out)


def kernel_check(A: np.ndarray, p: int, items: list, wits: list, cyc: list[int]) -> str:
    """Returns the kernel's status for the nerve certificate of the cycle ``cyc`` of served
    sets ``items`` (the producer's arrays, ``nerve.cycle_arrays``)."""
    from softrank.certify import check_lower

    arrays, _ = nerve.cycle_arrays(A, items, wits, cyc)
    return check_lower(A, {"kind": "nerve", "rank": p, **arrays}, "1/4").status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("operator")
    ap.add_argument("p", type=int)
    ap.add_argument("--rows", type=int, nargs="+", default=[20, 24])
    ap.add_argument("--starts", type=int, default=80)
    ap.add_argument("--budget", type=float, default=1500.0, help="CPU s for each complex")
    ap.add_argument("--exchange", type=int, default=0, metavar="STEPS",
                    help="choose each block by STEPS exchanges from the worst rows "
                         "(the nerve producer's swap_rows) instead of taking the worst rows")
    ap.add_argument("--more-ranks", type=int, default=0, metavar="J",
                    help="also fit each block at ranks p .. p + J - 1 (its likely r_eps)")
    ap.add_argument("--check", action="store_true",
                    help="check a cycle found as a nerve certificate in the kernel (eps 1/4)")
    a = ap.parse_args()
    A = np.asarray(open_store(a.store).operator(a.operator).load()["A"], dtype=np.float64)
    k = a.p - 1
    rng = np.random.default_rng(20261207)
    e, U, V = whole_fit(A, k, rng)
    order = np.argsort(-np.abs(A - U @ V).sum(axis=1))
    nerve.MAX_SETS = 3_000_000
    for n in a.rows:
        R = sorted(order[:n].tolist())
        t0 = time.process_time()
        if a.exchange:  # the nerve producer's exchanges, kept whatever the block's fit
            nerve.SWAP_STEPS = a.exchange
            R = nerve.swap_rows(A, k, 0.0, R, clock() + 1e9, rng)
        fits = block_fits(A[R], k, V, a.starts, rng)
        more = {}
        for j in range(k + 1, k + 1 + a.more_ranks):
            Vj = np.linalg.svd(A[R], full_matrices=False)[2][:j]
            more[str(j)] = round(float(block_fits(A[R], j, Vj, max(4, a.starts // 4),
                                                  rng).min()), 5)
        t1 = time.process_time()
        got = nerve.served_sets(A, R, a.p, EPS / nerve.CLAIM_BUDGET, clock() + a.budget)
        cyc = None if got is None else nerve.odd_cycle([s for s, _ in got[0]],
                                                       clock() + a.budget)
        best = float(fits.min())
        proved = None
        if cyc is not None and a.check:
            proved = kernel_check(A, a.p, got[0], got[1], cyc)
        print(json.dumps({
            "operator": a.operator, "p": a.p, "rows": n, "whole_fit": round(e / EPS, 5),
            "block_fit_best": round(best, 5), "block_fit_median": round(float(np.median(fits)), 5),
            "starts": a.starts, "starts_within_half_percent": int((fits <= best * 1.005).sum()),
            "rows_chosen": "exchanges" if a.exchange else "worst", "block": R,
            "block_fit_at_rank": more,
            "served_sets": None if got is None else len(got[0]),
            "odd_cycle": None if got is None else cyc is not None,
            "cycle_tops": None if cyc is None else len(cyc), "kernel": proved,
            "cpu_fits": round(t1 - t0, 1), "cpu_complex": round(time.process_time() - t1, 1)}),
            flush=True)


if __name__ == "__main__":
    main()
