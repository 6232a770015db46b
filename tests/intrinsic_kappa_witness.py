"""Float prototype of the kappa witness search (gauge, centres, dual weights), used only by
the kernel tests and the benchmark: untrusted, the kernel proves whatever it returns.

kappa(T) = min over A = G G^T of rad(X G) rad(Y G^{-T}); for fixed enclosing-ball dual
weights (l, u) the best A is the matrix geometric mean A = S_l^{-1} # S'_u of the weighted
covariances, and for fixed A the weights are the dual of the two minimum enclosing balls.
The search alternates the two with geodesic damping and keeps the best of each side.
"""

from __future__ import annotations

import numpy as np


def meb(P: np.ndarray, iters: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Returns (centre, weights) of an approximate minimum enclosing ball of the rows of P:
    pairwise Frank-Wolfe on the dual max_w sum w_i |p_i|^2 - |P^T w|^2 over the simplex."""
    m = P.shape[0]
    sq = (P * P).sum(axis=1)
    w = np.zeros(m)
    i0 = int(np.argmax(((P - P[0]) ** 2).sum(axis=1)))
    i1 = int(np.argmax(((P - P[i0]) ** 2).sum(axis=1)))
    w[i0] = w[i1] = 0.5
    for _ in range(iters):
        c = P.T @ w
        g = sq - 2 * P @ c  # gradient of the dual
        s = int(np.argmax(g))
        act = np.nonzero(w > 0)[0]
        v = int(act[np.argmin(g[act])])
        if g[s] - g[v] <= 1e-15 * max(1.0, abs(g[s])):
            break
        d = P[s] - P[v]
        dd = float(d @ d)
        if dd == 0:
            break
        # exact line search for the concave quadratic along e_s - e_v, step in [0, w_v]
        t = min(w[v], (g[s] - g[v]) / (2 * dd))
        w[s] += t
        w[v] -= t
    return P.T @ w, w


def _sqrtm(A: np.ndarray) -> np.ndarray:
    e, V = np.linalg.eigh((A + A.T) / 2)
    return (V * np.sqrt(np.maximum(e, 1e-300))) @ V.T


def _geomean_inv(S: np.ndarray, Sp: np.ndarray) -> np.ndarray:
    """Returns S^{-1} # S' = S^{-1/2} (S^{1/2} S' S^{1/2})^{1/2} S^{-1/2} (S, S' > 0)."""
    h = _sqrtm(S)
    hi = np.linalg.inv(h)
    return hi @ _sqrtm(h @ Sp @ h) @ hi


def _cov(P: np.ndarray, w: np.ndarray) -> np.ndarray:
    c = P.T @ w
    Z = P - c
    return (Z * w[:, None]).T @ Z


def kappa_witness(X: np.ndarray, Y: np.ndarray, rounds: int = 60) -> dict:
    """Returns {G, a, c, lam, mu, upper, lower}: a gauge with centres (upper) and dual
    weights (lower) for kappa(X Y^T); upper/lower are float estimates only."""
    r = X.shape[1]
    A = np.eye(r)
    best_up = (np.inf, None)
    best_lo = (0.0, None)
    for _ in range(rounds):
        G = _sqrtm(A)
        Gi = np.linalg.inv(G)
        XG, YG = X @ G, Y @ Gi.T
        a, lam = meb(XG)
        c, mu = meb(YG)
        up = (np.sqrt(((XG - a) ** 2).sum(axis=1).max())
              * np.sqrt(((YG - c) ** 2).sum(axis=1).max()))
        if up < best_up[0]:
            best_up = (up, (G, a, c))
        S, Sp = _cov(X, lam), _cov(Y, mu)
        h = _sqrtm(S)
        lo = float(np.sqrt(np.maximum(np.linalg.eigvalsh(h @ Sp @ h), 0)).sum())
        if lo > best_lo[0]:
            best_lo = (lo, (lam, mu))
        if best_lo[0] > 0 and best_up[0] <= best_lo[0] * (1 + 1e-7):
            break
        reg = 1e-6 * np.eye(r)
        Anew = _geomean_inv(S + reg * np.trace(S) / r, Sp + reg * np.trace(Sp) / r)
        Anew /= np.sqrt(np.linalg.det(Anew)) ** (2 / r)
        # geodesic midpoint A # Anew (damping against cycling between ball supports)
        A = _sqrtm(A) @ _sqrtm(np.linalg.inv(_sqrtm(A)) @ Anew @ np.linalg.inv(_sqrtm(A))) \
            @ _sqrtm(A)
        A = (A + A.T) / 2
    G, a, c = best_up[1]
    out = {"G": G, "a": a, "c": c, "upper": best_up[0], "lower": best_lo[0]}
    if best_lo[1] is not None:
        out["lam"], out["mu"] = best_lo[1]
    return out


def _nuc(S: np.ndarray, Sp: np.ndarray) -> float:
    """||S^{1/2} S'^{1/2}||_* = sum sqrt eig(S^{1/2} S' S^{1/2})."""
    h = _sqrtm(S)
    return float(np.sqrt(np.maximum(np.linalg.eigvalsh(h @ Sp @ h), 0)).sum())


def _opt_A(S: np.ndarray, Sp: np.ndarray) -> np.ndarray:
    r = S.shape[0]
    reg = 1e-12 * np.eye(r)
    return _geomean_inv(S + reg * np.trace(S), Sp + reg * np.trace(Sp))


def _fw_step(P, w, A, other, which, Q):
    """One pairwise Frank-Wolfe step on log ||S_w^{1/2} S_other^{1/2}||_* over w."""
    c = P.T @ w
    Z = P - c
    d = np.einsum("ij,jk,ik->i", Z, A, Z)
    s = int(np.argmax(d))
    act = np.nonzero(w > 0)[0]
    v = int(act[np.argmin(d[act])])
    if d[s] <= d[v] * (1 + 1e-12):
        return w, False
    tmax = w[v]

    def f(t):
        w2 = w.copy()
        w2[s] += t
        w2[v] -= t
        S = _cov(P, w2)
        return _nuc(S, Q) if which == 0 else _nuc(Q, S)

    lo, hi = 0.0, tmax
    g = (np.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(30):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
    t = (lo + hi) / 2
    if f(t) <= f(0.0):
        return w, False
    w = w.copy()
    w[s] += t
    w[v] -= t
    return w, True


def kappa_witness_fw(X: np.ndarray, Y: np.ndarray, steps: int = 300) -> dict:
    """Dual-first search: pairwise Frank-Wolfe on the concave max over (lam, mu) of
    log ||S_lam^{1/2} S'_mu^{1/2}||_*, then the gauge G = A^{1/2} with A = S^{-1} # S'."""
    w0 = kappa_witness(X, Y, rounds=6)
    lam = w0.get("lam", np.full(X.shape[0], 1 / X.shape[0]))
    mu = w0.get("mu", np.full(Y.shape[0], 1 / Y.shape[0]))
    for _ in range(steps):
        S, Sp = _cov(X, lam), _cov(Y, mu)
        A = _opt_A(S, Sp)
        lam, ch1 = _fw_step(X, lam, A, Sp, 0, Sp)
        S = _cov(X, lam)
        A = _opt_A(S, Sp)
        mu, ch2 = _fw_step(Y, mu, np.linalg.inv(A), S, 1, S)
        if not (ch1 or ch2):
            break
    S, Sp = _cov(X, lam), _cov(Y, mu)
    G = _sqrtm(_opt_A(S, Sp))
    XG, YG = X @ G, Y @ np.linalg.inv(G).T
    a, _ = meb(XG, 2000)
    c, _ = meb(YG, 2000)
    up = (np.sqrt(((XG - a) ** 2).sum(axis=1).max())
          * np.sqrt(((YG - c) ** 2).sum(axis=1).max()))
    out = {"G": G, "a": a, "c": c, "lam": lam, "mu": mu, "upper": up, "lower": _nuc(S, Sp)}
    if w0["upper"] < up:
        out.update(G=w0["G"], a=w0["a"], c=w0["c"], upper=w0["upper"])
    return out
