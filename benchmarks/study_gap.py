"""How far the open brackets of a store are from closing, from both sides (float64 searches,
not proofs): the study behind "How far the kind can reach" in proofs_notes/bernstein.md.

Usage (minutes of CPU per bracket; one line per bracket as it finishes):

    .venv/bin/python benchmarks/study_gap.py STORE [--eps 0.25] [--gap 1] [--hop 120] \
        [--restarts 200] [--upper-budget 90] [--part 0 --parts 1]

For every operator whose claimed bracket [L, U] at ``--eps`` has U - L in ``--gap`` it prints

* upper side: the least max-row-l1 error / eps of an alternating-l1 fit of rank U - 1 from the
  SVD start (5,000 steps) and up to ``--restarts`` seeded restarts (600 steps each), within
  ``--upper-budget`` CPU seconds: below 1 would lower U;
* lower side: the least Bernstein value (eps sup ||w|| / ||A w|| over the subspace) at p = U
  from the SVD and l1-fit starts (20 s of descent each), then ``--hop`` CPU seconds of basin
  hopping with the pace rule off: below 1 would raise L.

Both are what a producer with those budgets could reach; the kernel is not involved, since
nothing here is claimed.  ``--part/--parts`` split the brackets between processes.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from softrank.witnesses.producers import bernstein as bern  # noqa: E402
from softrank.witnesses.producers._common import clock, one_blas_thread, target  # noqa: E402
from softrank.witnesses.producers.altl1 import _starts, alt_l1  # noqa: E402
from softrank.witnesses.store import open_store  # noqa: E402


def claimed_brackets(store: Path, eps: Fraction) -> dict[str, list[int]]:
    """Returns {operator: [L, U]}: the largest claimed lower and least claimed upper rank at eps."""
    out: dict[str, list[int]] = {}
    with open(store / "brackets.jsonl") as fh:
        for line in fh:
            r = json.loads(line)
            if Fraction(r["eps"]) != eps:
                continue
            x = out.setdefault(r["operator"], [0, 10**9])
            if r.get("lower"):
                x[0] = max(x[0], int(r["lower"]["rank"]))
            if r.get("upper"):
                x[1] = min(x[1], int(r["upper"]["rank"]))
    return out


def upper_at(A: np.ndarray, k: int, eps: float, restarts: int, budget: float) -> tuple[float, int]:
    """Returns (least error / eps of a rank-k fit, runs tried)."""
    t = target(eps)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    best, end, runs = np.inf, clock() + budget, 0
    for i, (U0, V0) in enumerate(_starts(A, k, Us, s, Vt, restarts)):
        if clock() > end or best <= t:
            break
        best = min(best, alt_l1(A, k, t, U0, V0, iters=5000 if i == 0 else 600, deadline=end,
                                patient=True)[2])
        runs = i + 1
    return best / eps, runs


def lower_at(A: np.ndarray, p: int, eps: float, hop: float) -> tuple[float, float]:
    """Returns (Bernstein value after the descents, after the hops) at rank p."""
    goal = bern.CLAIM_BUDGET * (1 - 1e-4) / eps
    Vt = np.linalg.svd(A, full_matrices=False)[2]
    F, W = np.inf, None
    for _, make in bern._descent_starts(A, p, Vt, eps):
        F2, W2 = bern.descend(A, make(clock() + 20), goal, clock() + 20)
        if F2 < F:
            F, W = F2, W2
    if W is None:
        return np.inf, np.inf
    saved, bern.HOP_PATIENCE = bern.HOP_PATIENCE, 10**9
    try:
        F3, _ = bern.hop(A, F, W, goal, clock() + hop, seed=1)
    finally:
        bern.HOP_PATIENCE = saved
    return F * eps, F3 * eps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--gap", default="1", help="comma-separated values of U - L to study")
    ap.add_argument("--hop", type=float, default=120.0)
    ap.add_argument("--restarts", type=int, default=200)
    ap.add_argument("--upper-budget", type=float, default=90.0)
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    a = ap.parse_args()
    eps = Fraction(a.eps)
    gaps = {int(g) for g in a.gap.split(",")}
    st = open_store(a.store)
    brackets = claimed_brackets(a.store, eps)
    ops = sorted(k for k, (lo, up) in brackets.items() if up - lo in gaps)[a.part::a.parts]
    with one_blas_thread():
        for op in ops:
            lo, up = brackets[op]
            A = np.asarray(st.operator(op).load()["A"], dtype=np.float64)
            e_up, runs = upper_at(A, up - 1, float(eps), a.restarts, a.upper_budget)
            v0, v1 = lower_at(A, up, float(eps), a.hop)
            print(f"{op} L={lo} U={up}  upper@{up - 1}: {e_up:.4f} eps ({runs} runs)  "
                  f"bernstein@{up}: {v0:.4f} -> {v1:.4f} after hops", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
