"""Search for key-set (and submatrix) decoders: p queries, p disjoint key sets, largest p.

With D selecting queries q_1..q_p and W the 0/1 indicators of disjoint key sets S_1..S_p,
||D||_inf = ||W||_inf = 1 and M = D A W has M_ts = sum_{j in S_s} A_{q_t j}.  Every B within
eps of A has rank >= p once eps ||M^{-1}||_inf < 1, so the search minimizes ||M^{-1}||_inf:
greedy growth of the query list (each step adds the query that keeps ||M^{-1}||_inf least),
then swap-based local improvement to reach one more query.  Given the queries, each key goes
to the query that puts the most mass on it, if that mass exceeds what the other chosen
queries put on it together (keys that would hurt more than help stay unassigned).

Inside ``shared_scores()`` (the pipeline opens one per operator) every configuration's score
is kept and not charged again: ``submatrix``, ``keyset`` and ``bernstein``'s key-set path
walk the same growth and swaps at an eps, and the growth is shared across eps.  Scores are
a function of the matrix and the query list only, so the searches find what they found
without the table; only the work charged (and so where a work budget ends) changes.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ._common import charge_keyset, clock

# scores kept per shared_scores() context; past this many, new ones are not kept (a bound on
# memory, about 150 bytes plus 8 p per entry, reached in the same place on every run)
MAX_SCORES = 400_000

_MEMO = threading.local()

Config = tuple[list[int], list[np.ndarray]]


class _OutOfTime(Exception):
    """A search's deadline passed between two configurations (its best so far stands)."""


def _check(deadline: float | None) -> None:
    if deadline is not None and clock() > deadline:
        raise _OutOfTime


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


@contextmanager
def shared_scores() -> Iterator[None]:
    """Keeps the key-set scores computed in this thread until the context ends (a nested
    context shares the outer one's table).  Callers scope it to one operator, so that what a
    search is charged does not depend on which operators a process handled before."""
    if getattr(_MEMO, "tables", None) is not None:
        yield
        return
    _MEMO.tables, _MEMO.count = {}, 0
    try:
        yield
    finally:
        _MEMO.tables = None


def scores_for(A: np.ndarray) -> dict | None:
    """Returns the score table of A's contents in the current ``shared_scores()`` context,
    or None outside one."""
    tables = getattr(_MEMO, "tables", None)
    if tables is None:
        return None
    A = np.ascontiguousarray(A, dtype=np.float64)
    key = (A.shape, hashlib.blake2b(A.tobytes(), digest_size=16).digest())
    return tables.setdefault(key, {})


def _score(A: np.ndarray, rows: list[int], singletons: bool, table: dict | None = None
           ) -> tuple[float, Config | None]:
    """Returns (||M^{-1}||_inf, configuration) of the best key assignment of ``rows``; with a
    ``table`` that has already scored them, (that score, None) at no charge."""
    if table is not None:
        key = (singletons, np.asarray(rows, dtype=np.int64).tobytes())
        hit = table.get(key)
        if hit is not None:
            return hit, None
        res = _score(A, rows, singletons)
        if _MEMO.count < MAX_SCORES:
            table[key] = res[0]
            _MEMO.count += 1
        return res
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


def _grow(A: np.ndarray, rows: list[int], singletons: bool, cands: np.ndarray,
          table: dict | None = None, deadline: float | None = None
          ) -> tuple[float, Config | None]:
    """Returns the best (score, configuration) of ``rows`` plus one candidate query; raises
    _OutOfTime when ``deadline`` (``clock()``) passes before a candidate is scored."""
    best: tuple[float, Config | None] = (np.inf, None)
    chosen = set(rows)
    for q in cands:
        if int(q) in chosen:
            continue
        _check(deadline)
        s, cfg = _adopt(A, [*rows, int(q)], singletons, table, best[0])
        if s < best[0]:
            best = (s, cfg)
    return best


def _adopt(A: np.ndarray, rows: list[int], singletons: bool, table: dict | None,
           bar: float) -> tuple[float, Config | None]:
    """Returns _score's (score, configuration), the configuration rebuilt (and charged)
    when a kept score beats ``bar`` and the caller will keep it."""
    s, cfg = _score(A, rows, singletons, table)
    if cfg is None and s < bar:
        s, cfg = _score(A, rows, singletons)
    return s, cfg


def _improve(A: np.ndarray, cfg: Config, score: float, goal: float, singletons: bool,
             cands: np.ndarray, passes: int = 2, table: dict | None = None,
             deadline: float | None = None) -> tuple[float, Config]:
    """1-swap local search on the query list until ||M^{-1}||_inf <= goal or no progress;
    raises _OutOfTime when ``deadline`` passes before a swap is scored."""
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
                _check(deadline)
                trial = rows.copy()
                trial[pos] = int(q)
                s, c = _adopt(A, trial, singletons, table, score)
                if s < score and c is not None:
                    score, cfg, rows, improved = s, c, trial, True
                    chosen = set(rows)
        if not improved:
            break
    return score, cfg


def keyset_search(A: np.ndarray, eps: float, *, singletons: bool = False,
                  budget: float = 1.0 - 1e-6, max_candidates: int = 256,
                  deadline: float | None = None, stopped: dict | None = None
                  ) -> tuple[list[int], list[np.ndarray], np.ndarray, float] | None:
    """Returns (rows, sets, X, value) of the largest configuration found with value <= budget.

    ``value`` = delta + ||X||_inf eps estimated in float64.  None if not even p = 1 holds.
    The search ends, keeping what it found, once ``deadline`` (``clock()``) passes before a
    configuration is scored; ``stopped["deadline"]`` then says so.  Without a deadline its
    work grows like p^4 max_candidates in the rank p it reaches (measured: 287 CPU s on a
    random 512 x 512 softmax).
    """
    A = np.asarray(A, dtype=np.float64)
    m, N = A.shape
    # candidates: queries ranked by their largest probability (peaked rows first)
    cands = np.argsort(-A.max(axis=1))[:max_candidates]
    goal = budget / eps  # on ||M^{-1}||_inf, before the (tiny) residual delta
    rows: list[int] = []
    best: tuple[list[int], list[np.ndarray], np.ndarray, float] | None = None
    table = scores_for(A)
    try:
        while len(rows) < min(m, N):
            s, cfg = _grow(A, rows, singletons, cands, table, deadline)
            if cfg is None:
                break
            if s > goal:
                s, cfg = _improve(A, cfg, s, goal, singletons, cands, table=table,
                                  deadline=deadline)
                if s > goal:
                    break
            v, X = value(A, cfg[0], cfg[1], eps)
            if X is None or not v <= budget:
                break
            rows = list(cfg[0])
            best = (rows, list(cfg[1]), X, v)
    except _OutOfTime:
        if stopped is not None:
            stopped["deadline"] = True
    return best
