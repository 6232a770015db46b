"""Would a Gelfand-number check on one (p + 1)-dimensional subspace close gap-1 brackets?

r_t(A) >= p follows if some subspace S of R^N of dimension p + 1 contains no 2-plane on which
||A w||_inf <= t ||w||_inf: the kernel of a B of rank <= p - 1 meets S in a plane or more,
and on ker B, ||A w||_inf = ||(A - B) w||_inf <= t ||w||_inf.  With

    c(S) = min over 2-planes Y of S of  max over w in Y  ||A w||_inf / ||w||_inf,

the condition is c(S) > t.  Every p-dimensional S' in S meets each plane, so c(S) is at least
the Bernstein ratio b(S') = min over w in S' of ||A w|| / ||w||: the check extends the
`bernstein` kind by one dimension of slack.  (Checking it would need a branch and bound over
the 2(p - 1)-dimensional Grassmannian of planes; this probe only asks whether c(S) > t is
within reach.)

For each bracket [p - 1, p] with p <= 12 the probe finds a p-dimensional subspace S_p by the
Bernstein producer's descents and hops (float64), adds one direction from a list of candidates
(right singular vectors, unit vectors of the keys where the worst direction of S_p is large,
rows of A where its image is large, its sign vector), and estimates c by a Nelder-Mead search
over planes started from the planes through pairs of per-row worst directions and from random
planes.  A search finds a plane, so the estimate of c is an upper bound up to the sampling of
each plane's circle (2880 angles): an estimate below t means that S fails.

    .venv/bin/python benchmarks/study_plane_sections.py STORE [--eps 0.25] [--hop 60]
        [--part I --parts K]
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.optimize import linprog, minimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from study_gap import claimed_brackets  # noqa: E402  (scripts run from benchmarks/)

from softrank.witnesses.producers import bernstein as bern  # noqa: E402
from softrank.witnesses.producers._common import clock, one_blas_thread  # noqa: E402
from softrank.witnesses.store import open_store  # noqa: E402


def circle(n: int) -> np.ndarray:
    th = np.linspace(0, np.pi, n + 1)[:-1]
    return np.stack([np.cos(th), np.sin(th)])


def plane_max(AQ: np.ndarray, Q: np.ndarray, G: np.ndarray, C: np.ndarray) -> float:
    """max over the sampled directions w of col(Q G) of ||A w||_inf / ||w||_inf."""
    X = np.linalg.qr(G)[0] @ C
    return float(np.max(np.abs(AQ @ X).max(0) / np.abs(Q @ X).max(0)))


def row_minima(AQ: np.ndarray, Q: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """(min ||A w|| / ||w||, argmin) over w = Q x in col(Q) with w_j = ||w||_inf = 1, per j."""
    (N, k), m = Q.shape, AQ.shape[0]
    A_ub = np.vstack([np.hstack([AQ, -np.ones((m, 1))]), np.hstack([-AQ, -np.ones((m, 1))]),
                      np.hstack([Q, np.zeros((N, 1))]), np.hstack([-Q, np.zeros((N, 1))])])
    b_ub = np.concatenate([np.zeros(2 * m), np.ones(2 * N)])
    out = []
    for j in range(N):
        r = linprog(np.eye(k + 1)[k], A_ub=A_ub, b_ub=b_ub, A_eq=np.append(Q[j], 0)[None],
                    b_eq=[1], bounds=[(None, None)] * (k + 1), method="highs")
        if r.status == 0:
            out.append((float(r.fun), r.x[:k]))
    return sorted(out, key=lambda z: z[0])


def plane_min(AQ: np.ndarray, Q: np.ndarray, rng: np.random.Generator, starts: int = 8,
              fev: int = 2000) -> float:
    k = Q.shape[1]
    worst = [x for _, x in row_minima(AQ, Q)[:40]]
    coarse, search, fine = circle(180), circle(360), circle(2880)
    pairs = sorted((plane_max(AQ, Q, np.stack([a, b], 1), coarse), i, j)
                   for i, a in enumerate(worst) for j, b in enumerate(worst[:i])
                   if np.linalg.matrix_rank(np.stack([a, b], 1), 1e-9) == 2)
    G0s = [np.stack([worst[i], worst[j]], 1) for _, i, j in pairs[:starts // 2]]
    G0s += [rng.standard_normal((k, 2)) for _ in range(starts - len(G0s))]
    best = np.inf
    for G0 in G0s:
        r = minimize(lambda g: plane_max(AQ, Q, g.reshape(k, 2), search), G0.ravel(),
                     method="Nelder-Mead", options={"maxfev": fev, "adaptive": True})
        best = min(best, plane_max(AQ, Q, r.x.reshape(k, 2), fine))
    return best


def subspace_at(A: np.ndarray, p: int, eps: float, hop: float) -> np.ndarray:
    goal = bern.CLAIM_BUDGET * (1 - 1e-4) / eps
    path = bern.keyset_path(A, eps, singletons=False, extra=2, deadline=clock() + 30)
    makers = [m for _, m in bern._descent_starts(A, p, np.linalg.svd(A)[2], eps)]
    if p in path:
        makers.append(lambda until: path[p][1])
    F, W = np.inf, None
    for make in makers:
        F2, W2 = bern.descend(A, make(clock() + 20), goal, clock() + 20)
        if F2 < F:
            F, W = F2, W2
    saved, bern.HOP_PATIENCE = bern.HOP_PATIENCE, 10**9
    try:
        return bern.hop(A, F, W, goal, clock() + hop, seed=1)[1]
    finally:
        bern.HOP_PATIENCE = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--hop", type=float, default=60.0)
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    a = ap.parse_args()
    eps = Fraction(a.eps)
    t = float(eps)
    st = open_store(a.store)
    rng = np.random.default_rng(0)
    with one_blas_thread():
        brackets = claimed_brackets(a.store, eps)
        ops = [op for op, (lo, up) in sorted(brackets.items()) if up - lo == 1 and up <= 12]
        for op in ops[a.part::a.parts]:
            lo, up = brackets[op]
            A = np.asarray(st.operator(op).load()["A"], dtype=np.float64)
            Qp = np.linalg.qr(subspace_at(A, up, t, a.hop))[0]
            b, x0 = row_minima(A @ Qp, Qp)[0]
            w0 = Qp @ x0
            cands = [np.linalg.svd(A)[2][i] for i in range(up + 3)]
            cands += [np.eye(A.shape[1])[j] for j in np.argsort(-np.abs(w0))[:4]]
            cands += [A[i] for i in np.argsort(-np.abs(A @ w0))[:3]] + [np.sign(w0)]
            best = 0.0
            for v in cands:
                v = v - Qp @ (Qp.T @ v)
                if np.linalg.norm(v) > 1e-8:
                    Q = np.hstack([Qp, v[:, None] / np.linalg.norm(v)])
                    best = max(best, plane_min(A @ Q, Q, rng))
            print(f"{op} [{lo}, {up}]  bernstein ratio b(S_p) {b / t:.4f} t   "
                  f"best c(S_p + v) {best / t:.4f} t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
