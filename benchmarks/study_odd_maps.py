"""Is an odd polynomial map S^(p-1) -> Omega easier to find than a lift?  A float64 probe.

Every certificate of the Borsuk-Ulam family is an odd continuous map phi of a (p - 1)-sphere
into Omega = {w : ||A w||_inf > t ||w||_inf} (proofs_notes/polytope.md); a `bernstein`
certificate is a linear one, phi(x) = W x.  This probe starts from the best rank-p subspace
the Bernstein search ends with (the one that missed rank p), adds an odd cubic term,

    phi(x) = W x + V (M x)^3        (cube taken entrywise, M: Q x p, V: N x Q),

and trains W, M, V by gradient steps on a soft minimum of log(||A phi||_inf / ||phi||_inf)
over sampled directions.  It reports the least ratio / t three ways: on a fixed sample the
training never sees, on SAMPLES fresh directions, and after local descent of the ratio from
the worst of those (an attack).  Above 1 on the first two and below 1 after the attack means
the bad set of the map is thin: sampled checks say nothing, and only a kernel-checked
certificate is evidence.  ``--adversarial`` adds the attack's points to the training set.

    cd benchmarks && python study_odd_maps.py ARRAYS.npz p [--steps 2000] [--adversarial 0]

Needs torch (the `models` extra).  Nothing here is a proof; results in proofs_notes/polytope.md
("Limits, measured").
"""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
import torch

from softrank.witnesses.producers import bernstein
from softrank.witnesses.producers._common import budget_settings

SAMPLES = 2_000_000
T = 0.25


def best_subspace(A: np.ndarray, p: int) -> np.ndarray:
    """Returns the rank-p subspace the default Bernstein search keeps as the best that missed
    rank p (its seeds for a smaller eps), searching with the bracket's upper end p."""
    hints: dict = {}
    with budget_settings("work"):
        bernstein.Bernstein().produce(A, Fraction(1, 4), hints=hints, stop_at=p)
    got = [W for _, W in hints.get(bernstein.SEEDS, []) if W.shape[1] == p]
    if not got:
        raise SystemExit(f"the search kept no rank-{p} subspace (it proved rank {p}?)")
    return got[0]


class OddCubic(torch.nn.Module):
    def __init__(self, W: np.ndarray, q: int, gen: torch.Generator):
        super().__init__()
        N, p = W.shape
        self.W = torch.nn.Parameter(torch.tensor(W))
        self.M = torch.nn.Parameter(0.5 * torch.randn(q, p, generator=gen, dtype=torch.float64))
        self.V = torch.nn.Parameter(torch.zeros(N, q, dtype=torch.float64))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.W.T + ((X @ self.M.T) ** 3) @ self.V.T


def ratio(phi: OddCubic, A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    P = phi(X)
    return (P @ A.T).abs().amax(1) / P.abs().amax(1)


def soft_log_ratio(phi: OddCubic, A: torch.Tensor, X: torch.Tensor, sharp: float) -> torch.Tensor:
    P = phi(X)
    Y = P @ A.T
    top = torch.logsumexp(sharp * torch.cat([Y, -Y], 1), 1) / sharp
    return top.log() - (torch.logsumexp(sharp * torch.cat([P, -P], 1), 1) / sharp).log()


def sphere(n: int, p: int, gen: torch.Generator) -> torch.Tensor:
    X = torch.randn(n, p, generator=gen, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True)


def attack(phi: OddCubic, A: torch.Tensor, p: int, gen: torch.Generator, keep: int = 200,
           steps: int = 300) -> tuple[torch.Tensor, float]:
    """Returns (points, least ratio / t): the worst of SAMPLES fresh directions after ``steps``
    Adam steps of local descent of the (sharply smoothed) ratio."""
    worst = []
    with torch.no_grad():
        for _ in range(SAMPLES // 100_000):
            X = sphere(100_000, p, gen)
            worst.append(X[torch.argsort(ratio(phi, A, X))[:keep]])
        X = torch.cat(worst)
        X = X[torch.argsort(ratio(phi, A, X))[:keep]]
    Xv = X.clone().requires_grad_(True)
    opt = torch.optim.Adam([Xv], lr=3e-3)
    for _ in range(steps):
        loss = soft_log_ratio(phi, A, Xv / Xv.norm(dim=1, keepdim=True), 2000.0).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        Xn = Xv / Xv.norm(dim=1, keepdim=True)
        return Xn, float(ratio(phi, A, Xn).min()) / T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arrays")
    ap.add_argument("p", type=int)
    ap.add_argument("--q", type=int, default=32, help="cubic features")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--adversarial", type=int, default=0, help="rounds of attack + 300 steps")
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    A_np = np.load(a.arrays, allow_pickle=False)["A"]
    A = torch.tensor(A_np)
    gen = torch.Generator().manual_seed(0)
    phi = OddCubic(best_subspace(A_np, a.p), a.q, gen)
    held = sphere(100_000, a.p, gen)

    def show(what: str) -> torch.Tensor:
        with torch.no_grad():
            fixed = float(ratio(phi, A, held).min()) / T
        pool_pts, attacked = attack(phi, A, a.p, gen)
        print(f"{what}: least ratio / t  held-out sample {fixed:.4f}  after attack "
              f"{attacked:.4f}", flush=True)
        return pool_pts

    show("linear start (W x)")
    opt = torch.optim.Adam(phi.parameters(), lr=a.lr)
    pool = sphere(0, a.p, gen)
    for rnd in range(a.adversarial + 1):
        for _ in range(a.steps if rnd == 0 else 300):
            X = torch.cat([sphere(4000, a.p, gen), pool])
            loss = torch.logsumexp(-60 * soft_log_ratio(phi, A, X, 300.0), 0) / 60
            opt.zero_grad()
            loss.backward()
            opt.step()
        pts = show(f"after round {rnd}")
        pool = torch.cat([pool, pts])[-4000:]


if __name__ == "__main__":
    main()
