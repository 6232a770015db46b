"""Untrusted float64 search for the intrinsic-geometry witnesses of one attention head.

For the visible interaction C = P_m (log A) P_N (from logits when stored) and a rank r this
module finds

* T = X Y^T, the rank-r truncated SVD of C in the balanced gauge X = U_r S^1/2, Y = V_r S^1/2;
* offsets ``b`` and one key cycle (``cycle``, ``cycle_rows``) for q(C - T): with
  w(j, l) = max_i (E_ij - E_il), q(E) = min_b max_{j,l} (w(j,l) - b_j + b_l) is the maximum
  cycle mean of w (Karp 1978); b are longest-path potentials of w - q (Bellman-Ford) and the
  cycle is read off the tight edges;
* dual weights ``lam``, ``mu`` (rows of X, rows of Y) and a gauge ``G`` with ball centres
  ``a``, ``c``: exponentiated-gradient ascent (``eg_saddle``) on the concave dual
  F(l, u) = ||Sx(l)^1/2 Sy(u)^1/2||_* (Sx, Sy the weighted covariances of X and Y; F is their
  fidelity), whose gradient is the squared distance of each row from the weighted mean in the
  metric P = Sx^-1 # Sy (matrix geometric mean) of the current weights; the gauge G = P^1/2 of
  the weights gives the upper bound kappa <= rad(XG) rad(YG^-T) (centres from exact-style
  minimum enclosing balls, ``intrinsic_meb``). At a saddle point the two bounds meet.  When
  the covariances are singular (X or Y of deficient column rank) the older search runs
  instead: BFGS over G on log rad(XG) + log rad(YG^-T), then pairwise Frank-Wolfe on (l, u);
* a zero-margin PSD dual (``M``, ``D1``, ``D2``) from the weights: for probability weights l
  on rows and u on columns,
  M = diag(l) X~ W Y~^T diag(u) with W = Sx^+1/2 Z Sy^+1/2 (Z from the SVD of Sx^1/2 Sy^1/2)
  has zero margins, [[diag l, -M], [-M^T, diag u]] is PSD and <M, T> = ||Sx^1/2 Sy^1/2||_*;
* the best rectangle |T_ij - T_il - T_kj + T_kl| / 4 (the 2 x 2 special case);
* ball centres and support weights of the rows of Q and K for Gamma = beta rad(Q) rad(K).

Nothing here is trusted: ``certify`` proves the bounds from these arrays.  Time budget (CPU
seconds of this process, so that a busy machine does not change the result): the
kappa search stops after ``budget`` seconds per (head, r) (default 2 s), or earlier once its
float upper and lower bounds agree to 1e-7 relative; every other step is a fixed number of
O(m n^2) or O(n^3) array operations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from softrank.certify.errors import InputError

from .intrinsic_meb import min_ball

DEFAULT_BUDGET = 2.0
_GRID_BITS = 44   # M is rounded to integers * 2^-44 * scale: every margin sum stays < 2^53
_PSD_SLACK = 1e-9  # added to every diagonal entry of D1, D2 (after scaling max |M| to 1)


@dataclass
class RankWitness:
    """The float witness arrays of one (head, r) and the producer's own float claims."""

    r: int
    arrays: dict[str, np.ndarray]
    claims: dict[str, Any] = field(default_factory=dict)


def interaction_float(A: np.ndarray | None, logits: np.ndarray | None = None,
                      beta: float = 1.0) -> np.ndarray:
    """Returns C = P_m (beta logits) P_N, or P_m (log A) P_N without logits (float64).

    Raises InputError (field "A" or "logits") when the visible interaction is undefined: a zero
    or masked entry (log 0, -inf logits) or non-finite values.
    """
    if logits is not None:
        L = np.asarray(logits, dtype=np.float64)
        if not np.all(np.isfinite(L)):
            raise InputError("the visible interaction is undefined for this operator: masked "
                             "(-inf) or non-finite logits", field="logits")
        S = beta * L
    else:
        A64 = np.asarray(A, dtype=np.float64)
        if not np.all(np.isfinite(A64)) or np.any(A64 <= 0):
            raise InputError("the visible interaction P log A P is undefined for this operator: "
                             "A has zero (masked or underflowed) or non-positive entries and no "
                             "logits are stored", field="A")
        S = np.log(A64)
    S = S - S.mean(axis=1, keepdims=True)
    return S - S.mean(axis=0, keepdims=True)


def truncate(C: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns float factors (X m x r, Y n x r) of the rank-r truncated SVD of C, balanced."""
    m, n = C.shape
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1 or r > min(m, n):
        raise InputError(f"rank r = {r!r} must be an integer in 1..min(m, n) = {min(m, n)}",
                         field="r")
    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    h = np.sqrt(s[:r])
    return np.ascontiguousarray(U[:, :r] * h), np.ascontiguousarray(Vt[:r].T * h)


# ----------------------------------------------------------------------------- tau

def edge_weights(E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (w, rows): w[j, l] = max_i (E_ij - E_il) and the arg-max rows."""
    m, n = E.shape
    w = np.empty((n, n))
    rows = np.empty((n, n), dtype=np.int64)
    for j in range(n):
        D = E[:, j:j + 1] - E
        rows[j] = np.argmax(D, axis=0)
        w[j] = D[rows[j], np.arange(n)]
    return w, rows


def max_mean_cycle(w: np.ndarray) -> tuple[float, list[int]]:
    """Returns (lambda, cycle): the maximum cycle mean of the complete digraph with weights
    w (Karp 1978) and the best cycle found on the arg-max walk of Karp's table."""
    n = w.shape[0]
    D = np.empty((n + 1, n))
    D[0] = 0.0
    pred = np.zeros((n + 1, n), dtype=np.int64)
    for k in range(1, n + 1):
        S = D[k - 1][:, None] + w
        pred[k] = np.argmax(S, axis=0)
        D[k] = S[pred[k], np.arange(n)]
    ks = np.arange(n)[:, None]
    per_v = ((D[n][None, :] - D[:n]) / (n - ks)).min(axis=0)
    v = int(np.argmax(per_v))
    walk = [v]
    for k in range(n, 0, -1):
        walk.append(int(pred[k][walk[-1]]))
    walk.reverse()
    return float(per_v[v]), _best_cycle_on_walk(w, walk)


def _cycle_mean(w: np.ndarray, cyc: list[int]) -> float:
    return float(np.mean(w[cyc, np.roll(cyc, -1)]))


def _best_cycle_on_walk(w: np.ndarray, walk: list[int]) -> list[int]:
    """Returns the best-mean simple cycle among the closed sub-walks between repeated nodes."""
    best, best_c = -np.inf, walk[:1]
    last: dict[int, int] = {}
    for pos, node in enumerate(walk):
        if node in last:
            cyc = walk[last[node]:pos]
            if len(set(cyc)) == len(cyc):
                val = _cycle_mean(w, cyc)
                if val > best:
                    best, best_c = val, cyc
        last[node] = pos
    return best_c


def _tight_cycle(w: np.ndarray, b: np.ndarray, lam: float) -> list[int] | None:
    """Returns a cycle of edges j -> l that are tight for the potentials (w(j,l) - b_j + b_l
    within rounding of lam), or None: prune nodes without a tight out-edge, then walk."""
    red = w - b[:, None] + b[None, :]
    tol = 1e-12 * max(1.0, abs(lam), float(np.abs(b).max()))
    tight = red >= lam - tol
    alive = np.ones(w.shape[0], dtype=bool)
    while True:
        has = (tight & alive[None, :]).any(axis=1) & alive
        if np.array_equal(has, alive):
            break
        alive = has
    if not alive.any():
        return None
    j = int(np.flatnonzero(alive)[0])
    walk = []
    for _ in range(w.shape[0] + 1):
        walk.append(j)
        cand = np.flatnonzero(tight[j] & alive)
        j = int(cand[np.argmax(red[j, cand])])
    return _best_cycle_on_walk(w, walk)


def tau_witness(E: np.ndarray) -> dict[str, np.ndarray | float]:
    """Returns offsets b, a cycle with its rows, and float q estimates for E = C - T.

    ``q_upper`` = max_i osc(E_i - b) and ``q_lower`` = the cycle's mean weight, both in float.
    """
    w, rows = edge_weights(E)
    n = w.shape[0]
    lam, cyc = max_mean_cycle(w)
    # longest-path potentials of w - lam: b_j >= b_l + w(j, l) - lam for every edge
    R = w - lam
    b = np.zeros(n)
    for _ in range(n + 1):
        nb = np.maximum(b, (R + b[None, :]).max(axis=1))
        if np.array_equal(nb, b):
            break
        b = nb
    b = b - b.mean()
    other = _tight_cycle(w, b, lam)
    if other is not None and _cycle_mean(w, other) > _cycle_mean(w, cyc):
        cyc = other
    best = _cycle_mean(w, cyc)
    cyc_a = np.asarray(cyc, dtype=np.int64)
    cyc_rows = rows[cyc_a, np.roll(cyc_a, -1)].astype(np.int64)
    F = E - b[None, :]
    q_up = float((F.max(axis=1) - F.min(axis=1)).max())
    return {"b": b, "cycle": cyc_a, "cycle_rows": cyc_rows, "q_upper": q_up,
            "q_lower": max(best, 0.0), "q_karp": lam}


# --------------------------------------------------------------------------- kappa

def _gauge_objective(g: np.ndarray, X: np.ndarray, Y: np.ndarray, state: dict[str, Any]
                     ) -> tuple[float, np.ndarray]:
    r = X.shape[1]
    G = g.reshape(r, r)
    try:
        H = np.linalg.inv(G).T
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(g)
    XG, YH = X @ G, Y @ H
    bx = min_ball(XG, warm=state.get("sx"))
    by = min_ball(YH, warm=state.get("sy"))
    state["sx"], state["sy"] = bx.support, by.support
    rx2, ry2 = bx.upper ** 2, by.upper ** 2
    if not (rx2 > 0 and ry2 > 0):
        return np.inf, np.zeros_like(g)
    gx = X.T @ (bx.weights[:, None] * (XG - bx.centre)) / rx2
    Sy = 2.0 * Y.T @ (by.weights[:, None] * (YH - by.centre))
    gy = -(H @ Sy.T @ H) / (2.0 * ry2)
    f = 0.5 * np.log(rx2) + 0.5 * np.log(ry2)
    if f < state.get("best_f", np.inf):
        state.update(best_f=f, best_G=G.copy(), bx=bx, by=by)
    return float(f), (gx + gy).ravel()


def covariance(P: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (weighted mean, weighted covariance sum_i l_i (P_i - mean)(P_i - mean)^T)."""
    mean = weights @ P
    D = P - mean
    return mean, D.T @ (weights[:, None] * D)


def _psd_sqrt(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ev, V = np.linalg.eigh((S + S.T) / 2)
    top = max(float(ev.max()), 0.0)
    keep = ev > 1e-12 * top
    sq = np.where(keep, np.sqrt(np.where(keep, ev, 1.0)), 0.0)
    isq = np.where(keep, 1.0 / np.where(keep, sq, 1.0), 0.0)
    return (V * sq) @ V.T, (V * isq) @ V.T


def dual_value(X: np.ndarray, Y: np.ndarray, lw: np.ndarray, uw: np.ndarray) -> float:
    """Returns ||Sx^1/2 Sy^1/2||_* (a lower bound on kappa(X Y^T) for any weights)."""
    _, Sx = covariance(X, lw)
    _, Sy = covariance(Y, uw)
    ax, _ = _psd_sqrt(Sx)
    ay, _ = _psd_sqrt(Sy)
    return float(np.linalg.svd(ax @ ay, compute_uv=False).sum())


def psd_dual(X: np.ndarray, Y: np.ndarray, lw: np.ndarray, uw: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (M, D1, D2): M with exactly zero row and column sums (as stored floats),
    D1, D2 > 0 with [[diag D1, -M], [-M^T, diag D2]] PSD up to a slack of about 1e-9 per
    diagonal entry; <M, X Y^T> / sqrt(tr D1 tr D2) is then close to dual_value(...)."""
    mx, Sx = covariance(X, lw)
    my, Sy = covariance(Y, uw)
    ax, axi = _psd_sqrt(Sx)
    ay, ayi = _psd_sqrt(Sy)
    U, _, Vt = np.linalg.svd(ax @ ay)
    W = axi @ (U @ Vt) @ ayi
    M = (lw[:, None] * (X - mx)) @ W @ ((Y - my) * uw[:, None]).T
    scale = float(np.abs(M).max())
    if not scale > 0:
        raise InputError("degenerate dual weights (M = 0)", field="M")
    M = exact_zero_margins(M / scale, int(np.argmax(lw)), int(np.argmax(uw)))
    D1 = lw / scale + _PSD_SLACK
    D2 = uw / scale + _PSD_SLACK
    return M, D1, D2


def exact_zero_margins(M: np.ndarray, i0: int, j0: int) -> np.ndarray:
    """Returns M (|M| <= 1) rounded to the grid 2^-44 with row i0 and column j0 reset so that
    every row and column sums to exactly zero (integer arithmetic, all values < 2^53)."""
    Z = np.rint(M * 2.0 ** _GRID_BITS).astype(np.int64)
    Z[:, j0] = 0
    Z[i0, :] = 0
    Z[:, j0] = -Z.sum(axis=1)
    Z[i0, :] = -Z.sum(axis=0)
    Z[i0, j0] = 0
    Z[i0, j0] = -Z[i0].sum()
    assert not Z.sum(axis=0).any() and not Z.sum(axis=1).any()
    assert np.abs(Z).max() < 2 ** 53
    return Z.astype(np.float64) * 2.0 ** -_GRID_BITS


def _geo(X: np.ndarray, Y: np.ndarray, lw: np.ndarray, uw: np.ndarray
         ) -> tuple[float, np.ndarray | None, np.ndarray, np.ndarray]:
    """Returns (F, P, xbar, ybar): F = ||Sx^1/2 Sy^1/2||_* and the gauge metric
    P = Sx^-1 # Sy (matrix geometric mean) minimising tr(Sx P) + tr(Sy P^-1); P is None
    when Sx or Sy is singular."""
    mx, Sx = covariance(X, lw)
    my, Sy = covariance(Y, uw)
    ev, V = np.linalg.eigh((Sx + Sx.T) / 2)
    if ev.min() <= 1e-14 * max(ev.max(), 1e-300):
        return dual_value(X, Y, lw, uw), None, mx, my
    h = (V * np.sqrt(ev)) @ V.T
    hi = (V / np.sqrt(ev)) @ V.T
    e2, V2 = np.linalg.eigh(h @ Sy @ h)
    e2 = np.maximum(e2, 0.0)
    F = float(np.sqrt(e2).sum())
    mid = (V2 * np.sqrt(e2)) @ V2.T
    return F, hi @ mid @ hi, mx, my


def _line_max(fun: Any, hi: float) -> float:
    """Returns an approximate maximiser in [0, hi] of the concave scalar function ``fun``."""
    from scipy.optimize import minimize_scalar

    if hi <= 0:
        return 0.0
    res = minimize_scalar(lambda t: -fun(t), bounds=(0.0, hi), method="bounded",
                          options={"xatol": max(hi * 1e-10, 1e-300)})
    t = float(res.x)
    return hi if fun(hi) >= fun(t) else t


def dual_ascent(X: np.ndarray, Y: np.ndarray, lw: np.ndarray, uw: np.ndarray, *,
                deadline: float, upper: float, G: np.ndarray, tol: float = 1e-9
                ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, float]:
    """Pairwise Frank-Wolfe on the concave dual max_{l, u} ||Sx(l)^1/2 Sy(u)^1/2||_*.

    The gradient in l_i is ||X_i - xbar||^2_P / 2 + const with P the optimal gauge metric of
    the current weights, so every step moves weight toward the farthest row in the current
    gauge; exact-ish line search.  Every few steps the gauge G = P^1/2 is tried for the upper
    bound.  Returns (l, u, lower, G, upper) with the best pair found; stops at ``deadline``
    (time.process_time) or when upper / lower - 1 < tol.
    """
    m, n = X.shape[0], Y.shape[0]
    lw, uw = lw.copy(), uw.copy()
    F, P, _, _ = _geo(X, Y, lw, uw)
    if P is None:
        lw = 0.99 * lw + 0.01 / m
        uw = 0.99 * uw + 0.01 / n
        F, P, _, _ = _geo(X, Y, lw, uw)
    best = (lw.copy(), uw.copy(), F)
    it = 0
    while time.process_time() < deadline and P is not None:
        it += 1
        for side in (0, 1):
            F0, P, mx, my = _geo(X, Y, lw, uw)
            if P is None:
                break
            if side == 0:
                D = X - mx
                g = np.einsum("ij,jk,ik->i", D, P, D)
                wv = lw
            else:
                D = Y - my
                g = np.einsum("ij,jk,ik->i", D, np.linalg.inv(P), D)
                wv = uw
            sup = np.flatnonzero(wv > 0)
            s_i = int(np.argmax(g))
            a_i = int(sup[np.argmin(g[sup])])
            if s_i == a_i or g[s_i] - g[a_i] <= 1e-15 * abs(g[s_i]):
                continue
            d = np.zeros_like(wv)
            d[s_i], d[a_i] = 1.0, -1.0

            def f(t: float, side: int = side, d: np.ndarray = d) -> float:
                if side == 0:
                    return _geo(X, Y, lw + t * d, uw)[0]
                return _geo(X, Y, lw, uw + t * d)[0]

            t = _line_max(f, float(wv[a_i]))
            wv += t * d
            wv[a_i] = max(wv[a_i], 0.0) if t < wv[a_i] + t else 0.0
            np.maximum(wv, 0.0, out=wv)
            wv /= wv.sum()
        F, P, _, _ = _geo(X, Y, lw, uw)
        if F > best[2]:
            best = (lw.copy(), uw.copy(), F)
        if it % 10 == 0 and P is not None:
            ev, V = np.linalg.eigh(P)
            Gt = (V * np.sqrt(np.maximum(ev, 1e-300))) @ V.T
            bx = min_ball(X @ Gt)
            by = min_ball(Y @ np.linalg.inv(Gt).T)
            if bx.upper * by.upper < upper:
                upper, G = bx.upper * by.upper, Gt
        if upper <= best[2] * (1 + tol):
            break
    return best[0], best[1], best[2], G, upper


def best_rectangle(X: np.ndarray, Y: np.ndarray, *, chunk: int = 32) -> tuple[np.ndarray, float]:
    """Returns ((i, k, j, l), value): the rectangle maximising |T_ij - T_il - T_kj + T_kl| / 4
    over all row pairs (float search)."""
    T = X @ Y.T
    m = T.shape[0]
    best, arg = -1.0, (0, 1 % m, 0, 0)
    for s in range(0, m, chunk):
        D = T[s:s + chunk, None, :] - T[None, :, :]   # (c, m, n)
        hi, lo = D.max(axis=2), D.min(axis=2)
        osc = hi - lo
        a, k = np.unravel_index(int(np.argmax(osc)), osc.shape)
        if osc[a, k] > best:
            best = float(osc[a, k])
            i = s + int(a)
            arg = (i, int(k), int(np.argmax(D[a, k])), int(np.argmin(D[a, k])))
    return np.asarray([arg], dtype=np.int64), best / 4


def r1_gauge(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (G, a, c) for r = 1: g = sqrt(osc(y) / osc(x)), centres at the midpoints."""
    x, y = X[:, 0], Y[:, 0]
    ox, oy = float(np.ptp(x)), float(np.ptp(y))
    g = np.sqrt(oy / ox) if ox > 0 and oy > 0 else 1.0
    G = np.array([[g]])
    a = np.array([(x.max() + x.min()) / 2 * g])
    c = np.array([(y.max() + y.min()) / 2 / g])
    return G, a, c


def _saddle_point(X: np.ndarray, Y: np.ndarray, l: np.ndarray, u: np.ndarray
                  ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """Returns (F, P, gx, gy) at the weights (l, u): F = ||Sx^1/2 Sy^1/2||_* (the dual value),
    P = Sx^-1 # Sy (the gauge metric minimising tr(Sx P) + tr(Sy P^-1), whose minimum is 2 F)
    and the dual gradients gx_i = ||X_i - xbar||^2_P, gy_j = ||Y_j - ybar||^2_{P^-1} (up to
    a constant that the simplex ignores, dF/dl_i = gx_i / 2 by the envelope theorem);
    None when Sx or Sy is numerically singular."""
    mx, Sx = covariance(X, l)
    my, Sy = covariance(Y, u)
    ev, V = np.linalg.eigh((Sx + Sx.T) / 2)
    if not ev.min() > 1e-14 * max(float(ev.max()), 1e-300):
        return None
    h = (V * np.sqrt(ev)) @ V.T
    hi = (V / np.sqrt(ev)) @ V.T
    e2, V2 = np.linalg.eigh(h @ Sy @ h)
    if not e2.min() > 1e-28 * max(float(e2.max()), 1e-300):
        return None
    s2 = np.sqrt(e2)
    Pm = hi @ ((V2 * s2) @ V2.T) @ hi
    Pi = h @ ((V2 / s2) @ V2.T) @ h
    Dx, Dy = X - mx, Y - my
    gx = np.einsum("ij,jk,ik->i", Dx, Pm, Dx)
    gy = np.einsum("ij,jk,ik->i", Dy, Pi, Dy)
    if not (np.isfinite(gx).all() and np.isfinite(gy).all()):
        return None
    return float(s2.sum()), Pm, gx, gy


def _gauge_of(Pm: np.ndarray) -> np.ndarray:
    """Returns the symmetric square root G of the metric P (so P = G G^T)."""
    ev, V = np.linalg.eigh((Pm + Pm.T) / 2)
    return (V * np.sqrt(np.maximum(ev, 1e-300))) @ V.T


def _gauge_upper(X: np.ndarray, Y: np.ndarray, G: np.ndarray) -> float:
    """Returns rad(X G) rad(Y G^-T) (float minimum enclosing balls), inf if G is singular."""
    try:
        H = np.linalg.inv(G).T
    except np.linalg.LinAlgError:
        return np.inf
    v = min_ball(X @ G).upper * min_ball(Y @ H).upper
    return float(v) if np.isfinite(v) else np.inf


def eg_saddle(X: np.ndarray, Y: np.ndarray, *, deadline: float, tol: float = 1e-7,
              every: int = 25, max_iters: int | None = None) -> dict[str, Any] | None:
    """Exponentiated-gradient ascent on the concave dual max_{l, u} ||Sx(l)^1/2 Sy(u)^1/2||_*
    (fidelity of the two weighted covariances, concave in (l, u)), with the gauge
    G = (Sx^-1 # Sy)^1/2 of the current weights tried for the upper bound every ``every``
    steps.

    Why: the primal min over G of rad(XG) rad(YG^-T) is nonsmooth (the enclosing balls'
    supports switch) and BFGS on it stalls well above the optimum at r = 32, whereas the dual
    is smooth where the covariances are nonsingular and its gradient is one geometric mean away.
    Multiplicative updates l_i <- l_i exp(eta (2 gx_i / F - 1)) keep every weight positive
    (so Sx stays nonsingular) and drive the weight of every row that is not on the enclosing
    ball of the saddle gauge to zero; eta grows by 1.2 after an ascent step and halves after a
    rejected one.  Returns {"l", "u", "lower", "G", "upper", "iters"} with the best dual
    weights and the best gauge found, or None when the starting covariances are singular;
    stops at ``deadline`` (time.process_time), after ``max_iters`` steps when given (a
    machine-independent stop for tests), or when upper / lower - 1 < tol.
    """
    m, n = X.shape[0], Y.shape[0]
    lw, uw = np.full(m, 1.0 / m), np.full(n, 1.0 / n)
    cur = _saddle_point(X, Y, lw, uw)
    if cur is None:
        return None
    F, Pm, gx, gy = cur
    G = _gauge_of(Pm)
    best = {"l": lw, "u": uw, "lower": F, "G": G, "upper": _gauge_upper(X, Y, G), "iters": 0}
    eta, it = 0.5, 0
    while time.process_time() < deadline and best["upper"] > best["lower"] * (1 + tol):
        if max_iters is not None and it >= max_iters:
            break
        it += 1
        # exponents are bounded above by eta (gx <= ... is not assumed: shift by the max)
        ex = eta * (2.0 * gx / F - 1.0)
        ey = eta * (2.0 * gy / F - 1.0)
        nl = lw * np.exp(ex - ex.max())
        nu = uw * np.exp(ey - ey.max())
        nl /= nl.sum()
        nu /= nu.sum()
        new = _saddle_point(X, Y, nl, nu)
        if new is not None and new[0] >= F:
            lw, uw = nl, nu
            F, Pm, gx, gy = new
            eta = min(eta * 1.2, 1e6)
            if F > best["lower"]:
                best.update(l=lw, u=uw, lower=F)
        else:
            eta *= 0.5
            if eta < 1e-12:
                break
        if it % every == 0:
            G = _gauge_of(Pm)
            up = _gauge_upper(X, Y, G)
            if up < best["upper"]:
                best.update(G=G, upper=up)
    G = _gauge_of(Pm)
    up = _gauge_upper(X, Y, G)
    if up < best["upper"]:
        best.update(G=G, upper=up)
    best["iters"] = it
    return best


def _pruned(w: np.ndarray, rel: float = 1e-13) -> np.ndarray:
    """Returns w with the weights below rel * max(w) set to zero (the kernel's variance dual
    works on the support, so a smaller support is cheaper to prove; the dual value moves by
    at most about the dropped mass times the radius)."""
    out = np.where(w >= rel * float(w.max()), w, 0.0)
    return out / out.sum()


def _bfgs_gauge(X: np.ndarray, Y: np.ndarray, seconds: float
                ) -> tuple[np.ndarray, Any, Any, int]:
    """Returns (G, ball of XG, ball of YG^-T, iterations): BFGS on log rad(XG) + log rad(YG^-T)
    from G = I for about ``seconds`` of CPU time (the fallback when the dual is degenerate)."""
    r = X.shape[1]
    state: dict[str, Any] = {}
    t0 = time.process_time()

    def stop(_xk: np.ndarray) -> None:
        if time.process_time() - t0 > seconds:
            raise StopIteration

    res = minimize(_gauge_objective, np.eye(r).ravel(), args=(X, Y, state), jac=True,
                   method="BFGS", callback=stop, options={"gtol": 1e-12, "maxiter": 2000})
    return state["best_G"], state["bx"], state["by"], int(res.nit)


def kappa_witness(X: np.ndarray, Y: np.ndarray, *, budget: float = DEFAULT_BUDGET
                  ) -> dict[str, Any]:
    """Returns gauge, centres, rectangle and PSD dual for kappa(X Y^T) with float estimates
    ``kappa_upper`` (rad(XG) rad(YG^-T) in float) and ``kappa_lower`` (best float dual).

    r >= 2: exponentiated-gradient ascent on the dual (``eg_saddle``) for the whole budget,
    its weights for the lower bound and the geometric-mean gauge of its weights for the upper
    bound; BFGS on the gauge plus pairwise Frank-Wolfe (``dual_ascent``) only when the
    weighted covariances are singular (X or Y of deficient column rank).
    """
    r = X.shape[1]
    rects, rect_val = best_rectangle(X, Y)
    out: dict[str, Any] = {"rects": rects}
    if r == 1:
        G, a, c = r1_gauge(X, Y)
        up = float(np.ptp(X[:, 0]) * np.ptp(Y[:, 0]) / 4)
        lw, uw = np.zeros(X.shape[0]), np.zeros(Y.shape[0])
        lw[[int(np.argmax(X[:, 0])), int(np.argmin(X[:, 0]))]] += 0.5
        uw[[int(np.argmax(Y[:, 0])), int(np.argmin(Y[:, 0]))]] += 0.5
        out.update(G=G, a=a, c=c, lam=lw, mu=uw, kappa_upper=up,
                   kappa_lower=max(rect_val, dual_value(X, Y, lw, uw)), gauge_iters=0)
        return out
    t0 = time.process_time()
    sp = eg_saddle(X, Y, deadline=t0 + budget)
    if sp is not None:
        G, iters, method = sp["G"], sp["iters"], "eg-saddle"
        lw, uw = _pruned(sp["l"]), _pruned(sp["u"])
        low = dual_value(X, Y, lw, uw)
    else:
        G, bx, by, iters = _bfgs_gauge(X, Y, budget / 4)
        lw, uw, low, G, _ = dual_ascent(X, Y, bx.weights, by.weights, deadline=t0 + budget,
                                        upper=bx.upper * by.upper, G=G)
        method = "bfgs+fw"
    # balance the two radii (kappa is invariant under G -> s G) and recompute the centres
    H = np.linalg.inv(G).T
    bx, by = min_ball(X @ G), min_ball(Y @ H)
    G = G * np.sqrt(by.upper / bx.upper)
    H = np.linalg.inv(G).T
    bx, by = min_ball(X @ G, warm=bx.support), min_ball(Y @ H, warm=by.support)
    up = bx.upper * by.upper
    bx_l, by_l = bx.weights, by.weights
    if dual_value(X, Y, bx_l, by_l) > low:
        lw, uw, low = bx_l, by_l, dual_value(X, Y, bx_l, by_l)
    out.update(G=G, a=bx.centre, c=by.centre, lam=lw, mu=uw, kappa_upper=float(up),
               gauge_iters=int(iters), gauge_method=method,
               gauge_seconds=round(time.process_time() - t0, 4))
    if low > rect_val:
        M, D1, D2 = psd_dual(X, Y, lw, uw)
        out.update(M=M, D1=D1, D2=D2)
    out["kappa_lower"] = max(low, rect_val)
    return out


# -------------------------------------------------------------------------- native

def native_witness(Q: np.ndarray, K: np.ndarray) -> dict[str, np.ndarray | float]:
    """Returns ball centres and support weights of the rows of Q and of K (float search)."""
    bq, bk = min_ball(np.asarray(Q, dtype=np.float64)), min_ball(np.asarray(K, dtype=np.float64))
    return {"centre_q": bq.centre, "weights_q": bq.weights, "centre_k": bk.centre,
            "weights_k": bk.weights, "rad_q": bq.upper, "rad_k": bk.upper}


# ------------------------------------------------------------------------ one head

def rank_witness(C: np.ndarray, r: int, *, budget: float = DEFAULT_BUDGET) -> RankWitness:
    """Returns every witness array of rank r for the float interaction C (see module doc)."""
    t0 = time.process_time()
    X, Y = truncate(C, r)
    tw = tau_witness(C - X @ Y.T)
    kw = kappa_witness(X, Y, budget=budget)
    arrays: dict[str, np.ndarray] = {"X": X, "Y": Y, "b": tw["b"], "cycle": tw["cycle"],
                                     "cycle_rows": tw["cycle_rows"]}
    for k in ("G", "a", "c", "rects", "lam", "mu", "M", "D1", "D2"):
        if k in kw:
            arrays[k] = np.asarray(kw[k])
    q_up, q_lo = tw["q_upper"], tw["q_lower"]
    claims = {"q_upper": q_up, "q_lower": q_lo,
              "tau_upper": 2 * float(np.tanh(q_up / 4)),
              "kappa_upper": kw["kappa_upper"], "kappa_lower": kw["kappa_lower"],
              "gauge_iters": kw.get("gauge_iters", 0),
              "seconds": round(time.process_time() - t0, 4), "budget": budget}
    return RankWitness(r, arrays, claims)
