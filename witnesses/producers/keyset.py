"""Search for key-set (and submatrix) decoders: p queries, p disjoint key sets, largest p.

With D selecting queries q_1..q_p and W the 0/1 indicators of disjoint key sets S_1..S_p,
||D||_inf = ||W||_inf = 1 and M = D A W has M_ts = sum_{j in S_s} A_{q_t j}.  Every B within
eps of A has rank >= p once eps ||M^{-1}||_inf < 1, so the search minimizes ||M^{-1}||_inf:
greedy growth of the query list (each step adds the query that keeps ||M^{-1}||_inf least),
then swap-based local improvement to reach one more query.  Given the queries, each key goes
to the query that puts the most mass on it, if that mass exceeds what the other chosen
queries put on it together (keys that would hurt more than help stay unassigned).
"""

from __future__ import annotations

import numpy as np

from ._common import charge_keyset

Config = tuple[list[int], list[np.ndarray]]


def assign(A: np.ndarray, rows: list[int], *, singletons: bool, gamma: float = 1.0
           ) -> list[np.ndarray] | None:
    """Returns the key sets for query ``rows`` (None if some query gets no key)."""
    AQ = A[rows]
    p = len(rows)
    if singletons:
        # each query gets one key: the best net gain, keys distinct (in query order)
        gain = AQ - (AQ.sum(axis=0, keepdims=True) - AQ)
        used: set[int] = set()
        sets = []
        for t in range(p):
            for j in np.argsort(-gain[t]):
                if int(j) not in used:
                    used.add(int(j))
                    sets.append(np.array([j]))
                    break
        return sets
    return _sets(_keys(*_ownership(AQ), p, gamma))


def _ownership(AQ: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (owner, top, rest) per key: the query putting the most mass on it, that mass,
    and what the other queries put on it together (the same for every gamma)."""
    owner = np.argmax(AQ, axis=0)
    top = AQ[owner, np.arange(AQ.shape[1])]
    return owner, top, AQ.sum(axis=0) - top


def _keys(owner: np.ndarray, top: np.ndarray, rest: np.ndarray, p: int, gamma: float
          ) -> tuple[np.ndarray, list[tuple[int, int]]] | None:
    """Returns (keys, spans): the assigned keys grouped by query, each group ascending, and
    query t's group keys[a:b] for (a, b) = spans[t]; None when some query gets no key.  One
    stable sort instead of p scans of the keys: the key-set search scores tens of thousands
    of configurations per head."""
    label = np.where(top > gamma * rest, owner, p)
    counts = np.bincount(label, minlength=p + 1)
    if not counts[:p].all():
        return None
    ends = np.cumsum(counts[:p]).tolist()
    return np.argsort(label, kind="stable")[:ends[-1]], list(zip([0, *ends[:-1]], ends,
                                                                    strict=True))


def _sets(split: tuple[np.ndarray, list[tuple[int, int]]] | None
          ) -> list[np.ndarray] | None:
    """Returns the key sets of a ``_keys`` result (as np.flatnonzero would list them)."""
    if split is None:
        return None
    keys, spans = split
    return [keys[a:b] for a, b in spans]


def matrix(A: np.ndarray, rows: list[int], sets: list[np.ndarray]) -> np.ndarray:
    """Returns M (p x p): M_ts = sum over the keys j of set s of A[rows[t], j]."""
    return _matrix(A[rows], sets)


def _matrix(AQ: np.ndarray, sets: list[np.ndarray]) -> np.ndarray:
    return np.stack([AQ[:, S].sum(axis=1) for S in sets], axis=1)


def inv_norm(M: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Returns (||M^{-1}||_inf estimate, inverse) or (inf, None) when M is singular."""
    try:
        X = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        return np.inf, None
    if not np.all(np.isfinite(X)):
        return np.inf, None
    return float(np.abs(X).sum(axis=1).max()), X


def value(A: np.ndarray, rows: list[int], sets: list[np.ndarray], eps: float
          ) -> tuple[float, np.ndarray | None]:
    """Float64 estimate of delta + ||X||_inf eps for the configuration (claim: < 1)."""
    M = matrix(A, rows, sets)
    nrm, X = inv_norm(M)
    if X is None:
        return np.inf, None
    delta = float(np.abs(np.eye(len(rows)) - X @ M).sum(axis=1).max())
    return delta + nrm * eps, X


def _score(A: np.ndarray, rows: list[int], singletons: bool) -> tuple[float, Config | None]:
    charge_keyset(len(rows), A.shape[1])  # what a work-mode budget counts
    best: tuple[float, Config | None] = (np.inf, None)
    AQ = A[rows]
    if singletons:
        sets = assign(A, rows, singletons=True)
        nrm = inv_norm(_matrix(AQ, sets))[0]
        return (nrm, (rows, sets)) if nrm < best[0] else best
    own = _ownership(AQ)
    for gamma in (1.0, 0.5, 2.0):
        split = _keys(*own, len(rows), gamma)
        if split is None:
            continue
        # one gather, then sums over contiguous spans: the same numbers as summing each
        # set's gathered columns (pairwise summation along a contiguous row either way)
        G = AQ[:, split[0]]
        nrm, _ = inv_norm(np.stack([G[:, a:b].sum(axis=1) for a, b in split[1]], axis=1))
        if nrm < best[0]:
            best = (nrm, (rows, _sets(split)))
    return best


def _grow(A: np.ndarray, rows: list[int], singletons: bool, cands: np.ndarray
          ) -> tuple[float, Config | None]:
    best: tuple[float, Config | None] = (np.inf, None)
    chosen = set(rows)
    for q in cands:
        if int(q) in chosen:
            continue
        s, cfg = _score(A, [*rows, int(q)], singletons)
        if s < best[0]:
            best = (s, cfg)
    return best


def _improve(A: np.ndarray, cfg: Config, score: float, goal: float, singletons: bool,
             cands: np.ndarray, passes: int = 2) -> tuple[float, Config]:
    """1-swap local search on the query list until ||M^{-1}||_inf <= goal or no progress."""
    rows = list(cfg[0])
    for _ in range(passes):
        improved = False
        for pos in range(len(rows)):
            if score <= goal:
                return score, cfg
            chosen = set(rows)
            for q in cands:
                if int(q) in chosen:
                    continue
                trial = rows.copy()
                trial[pos] = int(q)
                s, c = _score(A, trial, singletons)
                if s < score and c is not None:
                    score, cfg, rows, improved = s, c, trial, True
                    chosen = set(rows)
        if not improved:
            break
    return score, cfg


def keyset_search(A: np.ndarray, eps: float, *, singletons: bool = False,
                  budget: float = 1.0 - 1e-6, max_candidates: int = 256
                  ) -> tuple[list[int], list[np.ndarray], np.ndarray, float] | None:
    """Returns (rows, sets, X, value) of the largest configuration found with value <= budget.

    ``value`` = delta + ||X||_inf eps estimated in float64.  None if not even p = 1 holds.
    """
    A = np.asarray(A, dtype=np.float64)
    m, N = A.shape
    # candidates: queries ranked by their largest probability (peaked rows first)
    cands = np.argsort(-A.max(axis=1))[:max_candidates]
    goal = budget / eps  # on ||M^{-1}||_inf, before the (tiny) residual delta
    rows: list[int] = []
    best: tuple[list[int], list[np.ndarray], np.ndarray, float] | None = None
    while len(rows) < min(m, N):
        s, cfg = _grow(A, rows, singletons, cands)
        if cfg is None:
            break
        if s > goal:
            s, cfg = _improve(A, cfg, s, goal, singletons, cands)
            if s > goal:
                break
        v, X = value(A, cfg[0], cfg[1], eps)
        if X is None or not v <= budget:
            break
        rows = list(cfg[0])
        best = (rows, list(cfg[1]), X, v)
    return best
