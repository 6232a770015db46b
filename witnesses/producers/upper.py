"""Built-in upper producers: truncated SVD, row-reweighted SVD, pivoted QR, representative rows.

Each searches for the least rank k whose float64 witness error max_i sum_j |A - U V|_ij is
at most eps * (1 - 1e-9); ``certify.check_upper`` then decides the claim rigorously.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import scipy.linalg as sla

from . import BaseProducer, Witness
from ._common import as_float64, least_rank, row_l1, target


def _witness(name: str, A: np.ndarray, U: np.ndarray, V: np.ndarray, t: float,
             **extra: object) -> Witness | None:
    err = float(row_l1(A, U, V).max())
    if not err <= t:
        return None
    return Witness(rank=U.shape[1], U=np.ascontiguousarray(U), V=np.ascontiguousarray(V),
                   claims={"upper_error": err, "upper_rank": int(U.shape[1]), **extra})


def _search(A: np.ndarray, eps: Fraction, factors, name: str, kmax: int | None = None
            ) -> Witness | None:
    """Least-rank search over ``factors(k) -> (U, V)`` on [1, kmax]; full rank always succeeds."""
    t = target(eps)
    m, N = A.shape
    kmax = min(m, N) if kmax is None else kmax

    def attempt(k: int) -> tuple[bool, tuple[np.ndarray, np.ndarray] | None]:
        U, V = factors(k)
        return bool(row_l1(A, U, V).max() <= t), (U, V)

    k, payload = least_rank(attempt, kmax)
    U, V = payload  # type: ignore[misc]
    w = _witness(name, A, U, V, t)
    if w is None:
        # the exact factorizations I A (rank m) and A I (rank N) have error 0
        U, V = (np.eye(m), A.copy()) if m <= N else (A.copy(), np.eye(N))
        w = _witness(name, A, U, V, t)
    return w


class TruncatedSVD(BaseProducer):
    """B = U_k S_k V_k^T, the Frobenius-optimal rank-k matrix."""

    name = "tsvd"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        Us, s, Vt = np.linalg.svd(A, full_matrices=False)
        return _search(A, eps, lambda k: (Us[:, :k] * s[:k], Vt[:k]), self.name)


def reweighted_svd(A: np.ndarray, k: int, t: float, iters: int = 8
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Rank-k SVD of diag(w) A with row weights w pushed towards rows of large l1 error.

    Returns the factors of the best iterate (least max-row-l1 error), stopping early once the
    error is at most ``t``.
    """
    m = A.shape[0]
    w = np.ones(m)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(iters):
        Us, s, Vt = np.linalg.svd(w[:, None] * A, full_matrices=False)
        U = (Us[:, :k] * s[:k]) / w[:, None]
        V = Vt[:k]
        r = row_l1(A, U, V)
        err = float(r.max())
        if best is None or err < best[0]:
            best = (err, U, V)
        if err <= t:
            break
        # Lawson-style update: weight grows with the row's share of the worst error
        w = w * np.sqrt(np.maximum(r, 1e-300) / max(err, 1e-300)) ** 0.5
        w = np.maximum(w / w.max(), 1e-6)
    assert best is not None
    return best[1], best[2]


class RowReweightedSVD(BaseProducer):
    """Truncated SVD of the row-reweighted matrix diag(w) A, weights iterated on row errors."""

    name = "rw_svd"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        t = target(eps)
        # the plain truncated SVD is the first iterate, so its rank bounds the search
        k_svd = TruncatedSVD().produce(A, eps)
        kmax = k_svd.rank if k_svd is not None else None
        return _search(A, eps, lambda k: reweighted_svd(A, k, t), self.name, kmax)


def _lstsq_right(C: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Returns V minimizing ||A - C V||_F (C has full column rank in practice)."""
    return np.linalg.lstsq(C, A, rcond=None)[0]


class ColumnPivotedQR(BaseProducer):
    """B = C (C^+ A) with C = k columns of A chosen by column-pivoted QR."""

    name = "cpqr"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        _, _, piv = sla.qr(A, pivoting=True, mode="economic")

        def factors(k: int) -> tuple[np.ndarray, np.ndarray]:
            C = A[:, piv[:k]]
            return C, _lstsq_right(C, A)

        return _search(A, eps, factors, self.name)


class RowPivotedQR(BaseProducer):
    """B = (A R^+) R with R = k rows of A chosen by pivoted QR of A^T."""

    name = "rpqr"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        _, _, piv = sla.qr(A.T, pivoting=True, mode="economic")

        def factors(k: int) -> tuple[np.ndarray, np.ndarray]:
            R = A[piv[:k]]
            return _lstsq_right(R.T, A.T).T, R

        return _search(A, eps, factors, self.name)


def _farthest_point_order(A: np.ndarray) -> np.ndarray:
    """Greedy k-center order of the rows in l1 distance (first: the row of largest mass)."""
    m = A.shape[0]
    order = [int(np.argmax(np.abs(A).sum(axis=1)))]
    dist = np.abs(A - A[order[0]]).sum(axis=1)
    for _ in range(1, m):
        j = int(np.argmax(dist))
        if dist[j] <= 0:
            break
        order.append(j)
        dist = np.minimum(dist, np.abs(A - A[j]).sum(axis=1))
    rest = [i for i in range(m) if i not in set(order)]
    return np.array(order + rest, dtype=np.intp)


class RepresentativeRows(BaseProducer):
    """B_i = A_{r(i)}: every row replaced by its nearest (l1) representative row."""

    name = "rep_rows"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        A = as_float64(A)
        m = A.shape[0]
        order = _farthest_point_order(A)

        def factors(k: int) -> tuple[np.ndarray, np.ndarray]:
            reps = order[:k]
            R = A[reps]
            d = np.abs(A[:, None, :] - R[None, :, :]).sum(axis=2) if m * k * A.shape[1] < 4e7 \
                else np.stack([np.abs(A - r).sum(axis=1) for r in R], axis=1)
            U = np.zeros((m, k))
            U[np.arange(m), np.argmin(d, axis=1)] = 1.0
            return U, R

        t = target(eps)
        N = A.shape[1]
        # m representatives reproduce A exactly, but a rank above min(m, N) is no witness (a
        # tall operator failed at every small eps): past N, A I is the exact rank-N witness
        kmax = min(m, N)

        def attempt(k: int):
            U, V = factors(k)
            return bool(row_l1(A, U, V).max() <= t), (U, V)

        _, (U, V) = least_rank(attempt, kmax)
        w = _witness(self.name, A, U, V, t)
        return w if w is not None else _witness(self.name, A, A.copy(), np.eye(N), t)
