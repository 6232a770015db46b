"""Minimum enclosing balls in float64 (untrusted): centre, radius and dual weights.

rad(P) = min_c max_i ||P_i - c|| is the value of the concave dual
    max_{l in simplex} phi(l),  phi(l) = sum_i l_i ||P_i||^2 - ||P^T l||^2,
whose maximiser l (the support weights) gives the centre c = P^T l (Welzl 1991; Gaertner 1999).
Any feasible l gives rad^2 >= phi(l) and any c gives rad <= max_i ||P_i - c||, so the two
numbers returned bracket the radius even when the solver stops early.  The solver is a primal
active-set method on the dual (the circumcentre of the working set in its affine hull, a ratio
test when a weight would turn negative, the farthest violator added otherwise), warm-started
from a previous support set when one is given; it typically needs a few times (dim + 1) steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Ball:
    """A float64 enclosing ball: centre, weights (on the simplex), radius bounds."""

    centre: np.ndarray
    weights: np.ndarray
    upper: float      # max_i ||P_i - centre||
    lower: float      # sqrt(phi(weights))

    @property
    def support(self) -> np.ndarray:
        return np.flatnonzero(self.weights > 0)


def _eqp(P: np.ndarray, W: list[int]) -> np.ndarray:
    """Returns weights on W (summing to 1) whose centre P_W^T l is equidistant from P_W."""
    S = P[W]
    k = len(W)
    if k == 1:
        return np.ones(1)
    # circumcentre in the affine hull: c = S^T l, ||S_i - c||^2 equal for i in W, sum l = 1
    D = S[1:] - S[0]
    G = D @ D.T
    rhs = 0.5 * np.einsum("ij,ij->i", D, D)
    mu, *_ = np.linalg.lstsq(G, rhs, rcond=1e-13)
    lam = np.empty(k)
    lam[1:] = mu
    lam[0] = 1.0 - mu.sum()
    return lam


def _dependency(P: np.ndarray, W: list[int]) -> np.ndarray | None:
    """Returns an affine dependency nu of the points P_W (sum nu = 0, sum nu_i P_i = 0) with
    nu = 1 on the last point, or None when the points are affinely independent."""
    S = P[W]
    D = (S[:-1] - S[-1]).T  # d x (k-1)
    if D.shape[1] <= D.shape[0]:
        sv = np.linalg.svd(D, compute_uv=False)
        if sv.size == 0 or sv[-1] > 1e-12 * max(sv[0], 1e-300):
            return None
    # the last point is an affine combination of the others: S_last = sum mu_i S_i
    mu, *_ = np.linalg.lstsq(np.vstack([S[:-1].T, np.ones(len(W) - 1)]),
                             np.append(S[-1], 1.0), rcond=None)
    return np.append(-mu, 1.0)


def min_ball(P: np.ndarray, *, warm: np.ndarray | None = None, max_iter: int = 500,
             rtol: float = 1e-15) -> Ball:
    """Returns a float64 minimum enclosing ball of the rows of ``P`` (m x d).

    Contract (float, untrusted): ``lower <= rad(P) <= upper`` up to float rounding of the two
    evaluations; on convergence upper / lower - 1 is of the order of the rounding unit.
    """
    P = np.asarray(P, dtype=np.float64)
    m = P.shape[0]
    if m == 1:
        return Ball(P[0].copy(), np.ones(1), 0.0, 0.0)
    sq = np.einsum("ij,ij->i", P, P)
    # start from the point farthest from the mean (or the warm support's farthest point)
    mean = P.mean(axis=0)
    cand = np.arange(m) if warm is None or len(warm) == 0 else np.asarray(warm)
    d0 = np.einsum("ij,ij->i", P[cand] - mean, P[cand] - mean)
    W = [int(cand[int(np.argmax(d0))])]
    lam = np.ones(1)
    if warm is not None and len(warm) > 1:
        Wt = [int(i) for i in warm]
        lt = _eqp(P, Wt)
        if np.all(lt > 0):
            W, lam = Wt, lt
    best: Ball | None = None
    for _ in range(max_iter):
        c = lam @ P[W]
        dist = sq - 2.0 * (P @ c) + c @ c
        r2 = float(dist[W].max())
        k = int(np.argmax(dist))
        if dist[k] <= r2 * (1.0 + 4 * rtol) + 1e-300 or k in W:
            best = _finish(P, W, lam)
            break
        W = W + [k]
        lam = np.append(lam, 0.0)
        nu = _dependency(P, W)
        if nu is not None:
            # W is affinely dependent: moving the weights along the dependency nu keeps the
            # centre and raises phi at rate g_k - s > 0; go until some old weight hits 0
            with np.errstate(divide="ignore", invalid="ignore"):
                steps = np.where(nu[:-1] < 0, lam[:-1] / -nu[:-1], np.inf)
            j = int(np.argmin(steps))
            t = float(steps[j]) if np.isfinite(steps[j]) else 0.0
            lam = np.maximum(lam + t * nu, 0.0)
            del W[j]
            lam = np.delete(lam, j)
            lam /= lam.sum()
        while True:
            target = _eqp(P, W)
            if np.all(target >= 0):
                lam = target
                break
            # ratio test: move from lam toward target until a weight hits zero, drop it
            neg = target < lam
            with np.errstate(divide="ignore", invalid="ignore"):
                steps = np.where(neg, lam / (lam - target), np.inf)
            j = int(np.argmin(steps))
            t = float(steps[j])
            lam = lam + t * (target - lam)
            del W[j]
            lam = np.delete(lam, j)
            lam = np.maximum(lam, 0.0)
            lam /= lam.sum()
            if len(W) == 1:
                lam = np.ones(1)
                break
    if best is None:
        best = _finish(P, W, lam)
    return best


def _finish(P: np.ndarray, W: list[int], lam: np.ndarray) -> Ball:
    weights = np.zeros(P.shape[0])
    weights[W] = np.maximum(lam, 0.0)
    weights /= weights.sum()
    c = weights @ P
    upper = float(np.sqrt(np.max(np.einsum("ij,ij->i", P - c, P - c))))
    S = P[W] - c
    phi = float(weights[W] @ np.einsum("ij,ij->i", S, S))
    return Ball(c, weights, upper, float(np.sqrt(max(phi, 0.0))))
