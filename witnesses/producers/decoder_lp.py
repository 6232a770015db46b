"""Decoder certificates optimised by alternating linear programs (untrusted search).

A decoder certificate (D, W, X) proves rank >= p when
delta + ||X D||_inf ||W||_inf eps < 1, delta = ||I - X D A W||_inf.  Folding X into D
(D' = X D, X = I) leaves two matrices, and each of the two problems

* D' with W fixed:  minimise ||D'||_inf  subject to  ||I - D' A W||_inf <= cap,
* W with D' fixed:  minimise ||W||_inf   subject to  ||I - D' A W||_inf <= cap,

is a linear program (the first even splits into one small LP per row of D').  Alternating
them lowers ||D'||_inf ||W||_inf at a fixed residual cap; caps 0.02 .. 0.2 are tried and a
last few alternations minimise the exact objective delta + ||D'|| ||W|| eps (minimising that
objective from the start collapses to D' = 0, value 1, hence the caps).  Starts: the key-set
configurations of ``keyset`` (p queries, p disjoint key sets) and one-key-per-query
submatrices, grown greedily to the rank under test, and the previous rank's optimum extended
by one query.  The rank goes up from the key-set rank until no start gets below 1 or the
time budget runs out (per operator and eps: ``budget`` seconds for the key-set path, as much
again for the LPs, each LP under a HiGHS time limit).

Nothing here is trusted: the certificate (D', W, X = I) is replayed by ``certify``.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import BaseProducer, Certificate
from ._common import (
    as_float64,
    budget_from_env,
    budget_mode,
    clock,
    eps_up,
    linprog,
    size_scale,
    time_limit,
    work_done,
)
from .keyset import _grow, _improve, scores_for

CAPS = (0.02, 0.05, 0.1, 0.2)
BUDGET_ENV = "SOFTRANK_DECODER_LP_BUDGET"
DEFAULT_BUDGET = 10.0  # seconds per (operator, eps)
CLAIM_BUDGET = 1.0 - 1e-6


def _inf(X: np.ndarray) -> float:
    return float(np.abs(X).sum(axis=1).max()) if X.size else 0.0


def value(A: np.ndarray, D: np.ndarray, W: np.ndarray, eps: float) -> float:
    """Float64 estimate of ||I - D A W||_inf + ||D||_inf ||W||_inf eps (claim: < 1)."""
    p = D.shape[0]
    return _inf(np.eye(p) - D @ (A @ W)) + _inf(D) * _inf(W) * eps


def _lp(c, A_ub, b_ub, A_eq, b_eq, deadline: float | None = None) -> np.ndarray | None:
    options = {}
    if deadline is not None:
        left = deadline - clock()
        if left <= 0:
            return None
        # HiGHS stops there (status 1: no solution kept); no limit in work mode
        options.update(time_limit(left))
    try:
        r = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=(0, None),
                    method="highs", options=options)
    except (ValueError, np.linalg.LinAlgError):
        return None
    if r.status != 0 or r.x is None or not np.all(np.isfinite(r.x)):
        return None
    return r.x


def solve_D(K: np.ndarray, cap: float | None, wt: float = 0.0, *,
            deadline: float | None = None) -> np.ndarray | None:
    """D' (p x m) for K = A W (m x p).

    cap given: each row minimises ||d_i||_1 subject to ||e_i - d_i K||_1 <= cap.
    cap None: one LP minimising max_i ||e_i - d_i K||_1 + wt max_i ||d_i||_1.
    """
    m, p = K.shape
    if cap is not None:
        rows = []
        A_eq = sp.hstack([sp.csr_matrix(K.T), sp.csr_matrix(-K.T), sp.eye(p), -sp.eye(p)])
        A_ub = sp.csr_matrix(np.concatenate([np.zeros(2 * m), np.ones(2 * p)])[None])
        c = np.concatenate([np.ones(2 * m), np.zeros(2 * p)])
        for i in range(p):
            x = _lp(c, A_ub, [cap], A_eq, np.eye(p)[i], deadline)
            if x is None:
                return None
            rows.append(x[:m] - x[m:2 * m])
        return np.array(rows)
    # variables: D+ (p m), D- (p m), R+ (p p), R- (p p), a, b
    nD, nR = p * m, p * p
    Ip = sp.eye(p)
    # (D K)[i, s] = sum_k D[i, k] K[k, s]: kron(I_p, K^T) on row-major vec(D)
    DK = sp.kron(Ip, sp.csr_matrix(K.T))
    A_eq = sp.hstack([DK, -DK, sp.eye(nR), -sp.eye(nR), sp.csr_matrix((nR, 2))])
    b_eq = np.eye(p).ravel()
    sumR = sp.kron(Ip, sp.csr_matrix(np.ones((1, p))))
    sumD = sp.kron(Ip, sp.csr_matrix(np.ones((1, m))))
    Z = sp.csr_matrix
    A_ub = sp.vstack([
        sp.hstack([Z((p, 2 * nD)), sumR, sumR, -sp.csr_matrix(np.ones((p, 1))), Z((p, 1))]),
        sp.hstack([sumD, sumD, Z((p, 2 * nR)), Z((p, 1)), -sp.csr_matrix(np.ones((p, 1)))]),
    ])
    c = np.zeros(2 * nD + 2 * nR + 2)
    c[-2], c[-1] = 1.0, wt
    x = _lp(c, A_ub, np.zeros(2 * p), A_eq, b_eq, deadline)
    if x is None:
        return None
    return (x[:nD] - x[nD:2 * nD]).reshape(p, m)


def solve_W(G: np.ndarray, cap: float | None, dt: float = 0.0, *,
            deadline: float | None = None) -> np.ndarray | None:
    """W (N x p) for G = D' A (p x N).

    cap given: minimise ||W||_inf subject to ||I - G W||_inf <= cap.
    cap None: minimise ||I - G W||_inf + dt ||W||_inf.
    """
    p, N = G.shape
    nW, nR = N * p, p * p
    Ip = sp.eye(p)
    # (G W)[i, s] = sum_j G[i, j] W[j, s]; vec(W) row-major (j, s) -> kron(G, I_p)
    GW = sp.kron(sp.csr_matrix(G), Ip)
    Z = sp.csr_matrix
    A_eq = sp.hstack([GW, -GW, sp.eye(nR), -sp.eye(nR), Z((nR, 2))])
    b_eq = np.eye(p).ravel()
    sumR = sp.kron(Ip, sp.csr_matrix(np.ones((1, p))))
    sumW = sp.kron(sp.eye(N), sp.csr_matrix(np.ones((1, p))))
    ones_p, ones_N = sp.csr_matrix(np.ones((p, 1))), sp.csr_matrix(np.ones((N, 1)))
    c = np.zeros(2 * nW + 2 * nR + 2)
    if cap is not None:
        A_ub = sp.vstack([sp.hstack([Z((p, 2 * nW)), sumR, sumR, Z((p, 2))]),
                          sp.hstack([sumW, sumW, Z((N, 2 * nR)), Z((N, 1)), -ones_N])])
        b_ub = np.concatenate([np.full(p, cap), np.zeros(N)])
        c[-1] = 1.0
    else:
        A_ub = sp.vstack([sp.hstack([Z((p, 2 * nW)), sumR, sumR, -ones_p, Z((p, 1))]),
                          sp.hstack([sumW, sumW, Z((N, 2 * nR)), Z((N, 1)), -ones_N])])
        b_ub = np.zeros(p + N)
        c[-2], c[-1] = 1.0, dt
    x = _lp(c, A_ub, b_ub, A_eq, b_eq, deadline)
    if x is None:
        return None
    return (x[:nW] - x[nW:2 * nW]).reshape(N, p)


def _balance(D: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rescales D' by c and W by 1/c so that both have the same inf-norm (value unchanged)."""
    d, w = _inf(D), _inf(W)
    if d > 0 and w > 0:
        c = np.sqrt(w / d)
        D, W = D * c, W / c
    return D, W


def optimise(A: np.ndarray, W0: np.ndarray, eps: float, deadline: float, *,
             goal: float = CLAIM_BUDGET, caps: tuple[float, ...] = CAPS, rounds: int = 6
             ) -> tuple[float, np.ndarray, np.ndarray] | None:
    """Returns (value, D', W) of the best decoder found from the start W0 (None if none).

    Stops early once the value is at most ``goal``, or at ``deadline`` (``_common.clock()``,
    CPU seconds).
    """
    best: tuple[float, np.ndarray, np.ndarray] | None = None

    def consider(D, W):
        nonlocal best
        if D is None or W is None:
            return
        D, W = _balance(D, W)
        v = value(A, D, W, eps)
        if np.isfinite(v) and (best is None or v < best[0]):
            best = (v, D, W)

    for cap in caps:
        W = W0
        prod = np.inf
        for _ in range(rounds):
            if clock() > deadline:
                break
            D = solve_D(A @ W, cap, deadline=deadline)
            if D is None:
                break
            Wn = solve_W(D @ A, cap, deadline=deadline)
            if Wn is None:
                break
            W = Wn
            consider(D, W)
            pn = _inf(D) * _inf(W)
            if pn > prod * (1 - 1e-3):
                break
            prod = pn
        if best is not None and best[0] <= goal:
            break
    # last steps on the exact objective, from the best capped point (never increases it)
    for _ in range(3 if best is not None else 0):
        if best[0] <= goal or clock() > deadline:  # type: ignore[index]
            break
        v0, D, W = best  # type: ignore[misc]
        Dn = solve_D(A @ W, None, _inf(W) * eps, deadline=deadline)
        if Dn is not None:
            consider(Dn, W)
        D = best[1]  # type: ignore[index]
        Wn = solve_W(D @ A, None, _inf(D) * eps, deadline=deadline)
        if Wn is not None:
            consider(D, Wn)
        if best[0] > v0 * (1 - 1e-4):  # type: ignore[index]
            break
    return best


def _indicator(N: int, sets: list[np.ndarray]) -> np.ndarray:
    W = np.zeros((N, len(sets)))
    for t, S in enumerate(sets):
        W[S, t] = 1.0
    return W


def keyset_path(A: np.ndarray, eps: float, *, singletons: bool, extra: int, deadline: float,
                max_candidates: int = 256) -> dict[int, tuple[list[int], np.ndarray, float]]:
    """{p: (rows, W, value)} of the key-set search at every rank it reaches, plus ``extra``
    ranks past the last one that holds (greedy growth + swap search as ``keyset_search``,
    which stops at the first rank that fails).  W holds the 0/1 key-set indicators; value
    is ||M^{-1}||_inf eps for M = D A W (inf when M is singular)."""
    m, N = A.shape
    cands = np.argsort(-A.max(axis=1))[:max_candidates]
    goal = CLAIM_BUDGET / eps
    rows: list[int] = []
    out: dict[int, tuple[list[int], np.ndarray, float]] = {}
    failed = 0
    table = scores_for(A)
    while len(rows) < min(m, N) and failed <= extra and clock() < deadline:
        s, cfg = _grow(A, rows, singletons, cands, table)
        if cfg is None:
            break
        if s > goal:
            s, cfg = _improve(A, cfg, s, goal, singletons, cands, table=table)
            failed += s > goal
        rows = list(cfg[0])
        out[len(rows)] = (rows, _indicator(N, cfg[1]), s * eps)
    return out


def _extend(A: np.ndarray, W: np.ndarray, cands: np.ndarray) -> np.ndarray | None:
    """W with one more column: the key set of the candidate query that the current decoder
    explains worst (largest mass outside the keys W already uses)."""
    N = A.shape[1]
    used = np.abs(W).sum(axis=1) > 0
    free = ~used
    if not free.any():
        return None
    mass = A[cands][:, free].sum(axis=1)
    q = int(cands[int(np.argmax(mass))])
    keys = np.flatnonzero(free & (A[q] >= 0.5 * A[q][free].max()))
    col = np.zeros((N, 1))
    col[keys, 0] = 1.0
    return np.hstack([W, col])


def search(A: np.ndarray, eps: float, budget: float, *, extra: int = 2,
           ceiling: int | None = None
           ) -> tuple[int, np.ndarray, np.ndarray, float, str] | None:
    """Returns (p, D', W, value, start) of the largest rank reached with value <= 1 - 1e-6.

    Ranks are tried upwards from the key-set rank up to ``ceiling`` (default min(m, N)); the
    first rank no start reaches ends the search, as does the time budget (seconds, for the
    whole call).
    """
    A = as_float64(A)
    m, N = A.shape
    top = min(m, N) if ceiling is None else min(m, N, ceiling)
    # one budget for the key-set path (the configurations to start from), one for the LPs;
    # a path cut short only means fewer ranks tried (``keyset`` itself runs separately)
    paths = {"keyset": keyset_path(A, eps, singletons=False, extra=extra,
                                   deadline=clock() + budget)}
    deadline = clock() + budget
    found: tuple[int, np.ndarray, np.ndarray, float, str] | None = None
    p0 = 0
    for p in sorted(paths["keyset"]):
        rows, W, v = paths["keyset"][p]
        if p != p0 + 1 or p > top or not v < CLAIM_BUDGET:
            break
        M = A[rows] @ W
        try:
            X = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            break
        D = _select(X, rows, m)
        val = value(A, D, W, eps)
        if not val <= CLAIM_BUDGET:
            break
        p0, found = p, (p, D, W, val, "keyset")
    p = p0 + 1
    while p <= top and clock() < deadline:
        hit = None
        for label in ("keyset", "submatrix", "extended"):
            if clock() > deadline:
                break
            if label == "submatrix" and label not in paths:
                paths[label] = keyset_path(A, eps, singletons=True, extra=extra,
                                           deadline=deadline)
            if label == "extended":
                if found is None or found[0] != p - 1 or found[4] == "keyset":
                    continue
                W0 = _extend(A, found[2], np.argsort(-A.max(axis=1))[:64])
            else:
                W0 = paths[label][p][1] if p in paths[label] else None
            if W0 is None:
                continue
            r = optimise(A, W0, eps, deadline)
            if r is not None and r[0] <= CLAIM_BUDGET:
                hit = (p, r[1], r[2], r[0], label)
                break
        if hit is None:
            break
        found = hit
        p += 1
    return found


def _select(X: np.ndarray, rows: list[int], m: int) -> np.ndarray:
    """X D for D the 0/1 selection of ``rows``: the columns of X placed at those rows."""
    out = np.zeros((X.shape[0], m))
    out[:, rows] = X
    return out


@dataclass(frozen=True)
class Reached:
    """What a ``BudgetedLower._search`` found (``found``, as ``_parts`` reads it, or None) with
    claims of its own to store beside the certificate's (JSON-safe numbers)."""

    found: tuple | None
    claims: dict[str, float | int] = field(default_factory=dict)


class BudgetedLower(BaseProducer):
    """A lower producer whose search gets ``budget`` seconds per (operator, eps): from the
    constructor, else from the environment variable ``budget_env``, else ``default_budget``
    (these two times ``budget_scale()``, the ``produce --budget-scale`` factor, and, being
    stated for a 128 x 128 operator, times ``size_scale`` of the operator's shape).
    ``produce(..., stop_at=U)``: U is a rank some upper witness claims (the pipeline passes the
    best one of the operator and eps); the search stops once it reaches rank U, since no lower
    end can pass a valid upper end. ``produce(..., floor=L)``: L is a rank another lower
    producer already claims; a ``_search`` that takes the keyword ``floor`` may skip work that
    can only end at ranks <= L (it would not be kept). ``produce(..., hints=H)``: H is a dict
    the pipeline keeps for this producer and operator across its eps (searched from the largest
    eps down); a ``_search`` that takes ``hints`` may read what its search at a larger eps left
    there and leave its own (untrusted search state, never a claim). Subclasses supply
    ``_search(A, eps, budget, ceiling)`` (their module's search, ranks up to ``ceiling``: None
    when nothing was found) and ``_parts(found)``, which turns what it found into (kind, rank,
    arrays, value, start); a value above the claim budget is not claimed. ``_search`` may wrap
    what it found in ``Reached`` to add claims of its own (float64 numbers about the search,
    never a verdict)."""

    role = "lower"
    budget_env: str
    default_budget: float

    def __init__(self, budget: float | None = None):
        self._sized = budget is None  # an explicit budget is seconds per call as it stands
        self.budget = (budget_from_env(self.budget_env, self.default_budget) if budget is None
                       else float(budget))

    def produce(self, A, eps, *, logits=None, stop_at: int | None = None,
                floor: int | None = None, hints: dict | None = None):
        A = as_float64(A)
        t0, w0 = time.perf_counter(), work_done()
        ceiling = min(A.shape) if stop_at is None else min(min(A.shape), int(stop_at))
        if ceiling < 1:  # a rank-0 upper end: there is no lower end above 0 to look for
            return None
        budget = self.budget * size_scale(A.shape) if self._sized else self.budget
        kw: dict[str, Any] = {}
        params = inspect.signature(self._search).parameters
        if floor is not None and "floor" in params:
            kw["floor"] = int(floor)
        if hints is not None and "hints" in params:
            kw["hints"] = hints
        found = self._search(A, eps_up(eps), budget, ceiling, **kw)
        extra: dict[str, float | int] = {}
        if isinstance(found, Reached):
            found, extra = found.found, dict(found.claims)
        if found is None:
            return None
        kind, p, arrays, v, start = self._parts(found)
        if not v <= CLAIM_BUDGET:
            return None
        return Certificate(kind=kind, rank=p, arrays=arrays,
                           claims={"lower_rank": p, f"{kind}_value": v, "start": start,
                                   **extra, **_cost("search", t0, w0)})

    def _search(self, A: np.ndarray, eps: float, budget: float, ceiling: int
                ) -> tuple | Reached | None:
        raise NotImplementedError

    def _parts(self, found: tuple) -> tuple[str, int, dict[str, np.ndarray], float, str]:
        raise NotImplementedError


def _cost(name: str, t0: float, w0: float) -> dict[str, float]:
    """Returns {name_work: units} in work mode (deterministic: a claim of a byte-identical
    bracket), else {name_seconds: wall seconds since t0}."""
    if budget_mode() == "work":
        return {f"{name}_work": round(work_done() - w0, 3)}
    return {f"{name}_seconds": round(time.perf_counter() - t0, 3)}


class DecoderLP(BudgetedLower):
    """Decoder (D', W, X = I) optimised by alternating LPs, rank raised from keyset's."""

    name = "decoder_lp"
    budget_env = BUDGET_ENV
    default_budget = DEFAULT_BUDGET

    def _search(self, A, eps, budget, ceiling):
        # looked up at call time: tests may replace it
        return search(A, eps, budget, ceiling=ceiling)

    def _parts(self, found):
        p, D, W, v, start = found
        return ("decoder", p, {"D": np.ascontiguousarray(D), "W": np.ascontiguousarray(W),
                               "X": np.eye(p)}, v, start)
