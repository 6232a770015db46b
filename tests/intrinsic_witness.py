"""Float prototypes of the intrinsic witness search, used only by the kernel tests.

These are untrusted helpers (like a producer): the kernel must prove bounds from whatever
they return, and the tests compare the proved brackets with exact values.
"""

from __future__ import annotations

import numpy as np


def tau_witness(E: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (b, cycle, cycle_rows) for q(E) by Karp's maximum mean cycle on
    w(j, l) = max_i (E_ij - E_il) and Bellman-Ford potentials for w - q."""
    m, n = E.shape
    W = np.empty((n, n))
    R = np.zeros((n, n), dtype=np.int64)
    for j in range(n):
        d = E[:, [j]] - E
        R[j] = np.argmax(d, axis=0)
        W[j] = d[R[j], np.arange(n)]
    D = np.full((n + 1, n), -np.inf)
    D[0] = 0.0
    P = np.zeros((n + 1, n), dtype=np.int64)
    for k in range(1, n + 1):
        S = D[k - 1][:, None] + W
        P[k] = np.argmax(S, axis=0)
        D[k] = S[P[k], np.arange(n)]
    ks = np.arange(n)[:, None]
    with np.errstate(invalid="ignore"):
        vals = (D[n][None, :] - D[:n]) / (n - ks)
    vals = np.where(np.isfinite(vals), vals, np.inf)
    per_v = vals.min(axis=0)
    v = int(np.argmax(per_v))
    q = per_v[v]
    walk = [v]
    for k in range(n, 0, -1):
        walk.append(int(P[k][walk[-1]]))
    walk = walk[::-1]
    seen: dict[int, int] = {}
    cyc = [v]
    for pos, node in enumerate(walk):
        if node in seen:
            cyc = walk[seen[node]:pos]
            break
        seen[node] = pos
    pi = np.zeros(n)
    Wq = W - q
    for _ in range(n + 1):
        new = np.maximum(pi, (pi[:, None] + Wq).max(axis=0))
        if np.array_equal(new, pi):
            break
        pi = new
    c = np.array(cyc, dtype=np.int64)
    return -pi, c, R[c, np.roll(c, -1)]
