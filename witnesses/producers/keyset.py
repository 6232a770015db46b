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
    owner = np.argmax(AQ, axis=0)
    top = AQ[owner, np.arange(AQ.shape[1])]
    rest = AQ.sum(axis=0) - top
    keep = top > gamma * rest
    sets = [np.flatnonzero(keep & (owner == t)) for t in range(p)]
    if any(s.size == 0 for s in sets):
        return None
    return sets


def matrix(A: np.ndarray, rows: list[int], sets: list[np.ndarray]) -> np.ndarray:
    AQ = A[rows]
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
    for gamma in ((1.0,) if singletons else GAMMAS):
        sets = assign(A, rows, singletons=singletons, gamma=gamma)
        if sets is None:
            continue
        nrm, _ = inv_norm(matrix(A, rows, sets))
        if nrm < best[0]:
            best = (nrm, (rows, sets))
    return best


GAMMAS = (1.0, 0.5, 2.0)  # the ownership thresholds tried per configuration, in this order
# scores this close count as equal: M's sums round differently stacked and alone, and on
# softmax rows exact ties are common (every single query scores 1), so a choice among equals
# goes to the first in candidate order, not to the last bits of a sum
TIE = 1e-12


def _inv_norms(M: np.ndarray) -> np.ndarray:
    """Returns ||M_c^{-1}||_inf for every matrix of the stack M (inf where singular or the
    inverse is not finite), as ``inv_norm`` returns it for each one alone."""
    try:
        X = np.linalg.inv(M)
    except np.linalg.LinAlgError:  # one singular matrix fails the whole stack
        return np.array([inv_norm(Mc)[0] for Mc in M])
    nrm = np.abs(X).sum(axis=-1).max(axis=-1)
    return np.where(np.isfinite(X).all(axis=(-2, -1)), nrm, np.inf)


def _scores(A: np.ndarray, trials: np.ndarray, *, charged: bool = True
            ) -> tuple[np.ndarray, np.ndarray]:
    """Returns (score, gamma index) of every query list in ``trials`` (n x p): the least
    ||M^{-1}||_inf over GAMMAS of its non-singleton configurations (the first gamma among
    equals, inf when none is usable), what ``_score`` returns for each list alone; one
    stacked pass instead of n calls.  Charges the n scorings to the budget (unless not
    ``charged``: the caller charges what a scan one list at a time would have scored)."""
    n, p = trials.shape
    if charged:
        _charge(n, p, A.shape[1])
    AQ, owner, top, rest = _ownership(A, trials)
    mine = owner[:, :, None] == np.arange(p)  # n x N x p: key j is query t's
    best = np.full(n, np.inf)
    which = np.zeros(n, dtype=np.int64)
    for g, gamma in enumerate(GAMMAS):
        H = mine & (top > gamma * rest)[:, :, None]
        ok = H.any(axis=1).all(axis=1)  # no query without a key
        nrm = np.full(n, np.inf)
        if ok.any():
            nrm[ok] = _inv_norms(AQ[ok] @ H[ok].astype(np.float64))
        better = nrm < best
        best[better], which[better] = nrm[better], g
    return best, which


def _charge(n: int, p: int, N: int) -> None:
    for _ in range(n):  # one charge per scoring, so the work count sums as it always did
        charge_keyset(p, N)


def _ownership(A: np.ndarray, trials: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (AQ, owner, top, rest) of the query lists ``trials`` (n x p): their rows of A
    (n x p x N), each key's query of most mass, that mass, and the others' mass on it."""
    AQ = A[trials]
    owner = np.argmax(AQ, axis=1)
    top = np.take_along_axis(AQ, owner[:, None, :], axis=1)[:, 0, :]
    return AQ, owner, top, AQ.sum(axis=1) - top


def _config(A: np.ndarray, rows: list[int], gamma: int) -> Config:
    """The key sets of ``rows`` at GAMMAS[gamma], by the arithmetic ``_scores`` used (a
    stack of one list: the same sums, so the same keys)."""
    _, owner, top, rest = _ownership(A, np.array([rows], dtype=np.int64))
    keep = top[0] > GAMMAS[gamma] * rest[0]
    return rows, [np.flatnonzero(keep & (owner[0] == t)) for t in range(len(rows))]


def _first_better(scores: np.ndarray, than: float) -> int | None:
    """Returns the first index whose score is below ``than`` by more than rounding."""
    hit = np.flatnonzero(scores < than * (1 - TIE))
    return int(hit[0]) if hit.size else None


def _grow(A: np.ndarray, rows: list[int], singletons: bool, cands: np.ndarray
          ) -> tuple[float, Config | None]:
    chosen = set(rows)
    free = [int(q) for q in cands if int(q) not in chosen]
    if not singletons:
        if not free:
            return np.inf, None
        trials = np.array([[*rows, q] for q in free], dtype=np.int64)
        scores, gammas = _scores(A, trials)
        least = float(scores.min())
        if not least < np.inf:
            return np.inf, None
        c = int(np.flatnonzero(scores <= least * (1 + TIE))[0])  # the first among equals
        return float(scores[c]), _config(A, [*rows, free[c]], int(gammas[c]))
    best: tuple[float, Config | None] = (np.inf, None)
    for q in free:
        s, cfg = _score(A, [*rows, q], singletons)
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
            # the candidates in order, each scored against the list as it stands when its
            # turn comes: a swap taken changes the list for the candidates after it
            queue = [int(q) for q in cands]
            while queue:
                chosen = set(rows)
                free = [q for q in queue if q not in chosen]
                if not free:
                    break
                if singletons:
                    q = free[0]
                    queue = queue[queue.index(q) + 1:]
                    trial = rows.copy()
                    trial[pos] = q
                    s, c = _score(A, trial, singletons)
                    if s < score and c is not None:
                        score, cfg, rows, improved = s, c, trial, True
                    continue
                trials = np.array([rows[:pos] + [q] + rows[pos + 1:] for q in free],
                                  dtype=np.int64)
                scores, gammas = _scores_upto(A, trials, score)
                hit = _first_better(scores, score)
                if hit is None:
                    break
                trial = trials[hit].tolist()
                score, cfg, rows, improved = (float(scores[hit]),
                                              _config(A, trial, int(gammas[hit])), trial, True)
                queue = queue[queue.index(free[hit]) + 1:]
        if not improved:
            break
    return score, cfg


def _scores_upto(A: np.ndarray, trials: np.ndarray, than: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``_scores`` of the trials up to the first one scoring below ``than``, charged for
    those only (the rest are inf: a scan one list at a time would score them against the
    list that first one makes).  Scored in chunks that double, as a hit tends to come early."""
    n, p = trials.shape
    scores, gammas = np.full(n, np.inf), np.zeros(n, dtype=np.int64)
    start, step = 0, 16
    while start < n:
        s, g = _scores(A, trials[start:start + step], charged=False)
        scores[start:start + step], gammas[start:start + step] = s, g
        hit = _first_better(s, than)
        if hit is not None:
            _charge(hit + 1, p, A.shape[1])
            scores[start + hit + 1:] = np.inf
            break
        _charge(len(s), p, A.shape[1])
        start += step
        step *= 2
    return scores, gammas


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
