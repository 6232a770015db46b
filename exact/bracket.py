"""Exact upper witnesses and lower certificates for r_eps(A) beyond the rank-one decision.

Float64 routines (SVD, scipy's ``linprog``) only *propose* matrices; every proposal is turned
into exact rationals and re-checked exactly here (rank by exact elimination, error by exact
row sums, row-stochasticity by exact sums), so a bad proposal can only be discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np

from softrank.certify.rationals import qstr

from .budget import Unaffordable, afford, tick
from .inputs import float_view
from .linalg import (
    Matrix,
    inverse_row1_norm,
    inverse_seconds,
    is_row_stochastic,
    matmul,
    product_seconds,
    rank,
    row1_error,
    row1_norm,
    simplex_distance,
    to_fmpq_mat,
    transpose,
)

#: Cells with both sides at most this size get exhaustive submatrix decoders.
SUBMATRIX_EXHAUSTIVE = 6
#: Alternating refinement of witnesses runs for cells with at most this many entries.
ALTERNATE_MAX = 256
_DEN = 1 << 16


@dataclass
class Witness:
    """An exact matrix B with exact ``rank`` and exact ``error`` = ||A - B||_row1 <= eps."""

    kind: str
    B: Matrix
    rank: int
    error: Fraction
    stochastic: bool = False  # True when B was checked to be row-stochastic (exactly)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "rank": self.rank, "error": qstr(self.error),
                "row_stochastic": self.stochastic,
                "B": [[qstr(x) for x in row] for row in self.B]}


@dataclass
class Certificate:
    """An exact proof that every admissible B within eps of A has rank >= ``bound``."""

    kind: str
    bound: int | float
    data: dict[str, Any] = field(default_factory=dict)
    json_data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "bound": _jnum(self.bound), **self.json_data}


def _jnum(x: int | float) -> int | str:
    return "inf" if x == float("inf") else int(x)


def _q(x: float) -> Fraction:
    return Fraction(float(x)).limit_denominator(_DEN)


def make_witness(A: Matrix, eps: Fraction, B: Matrix, kind: str,
                 stochastic: bool) -> Witness | None:
    """Returns ``B`` as a :class:`Witness` if it is exactly admissible and within eps."""
    if stochastic and not is_row_stochastic(B):
        return None
    err = row1_error(A, B)
    if err > eps:
        return None
    return Witness(kind, B, rank(B), err, stochastic)


def verify_witness(A: Matrix, eps: Fraction, w: Witness, stochastic: bool) -> bool:
    """Returns True iff w.B is exactly within eps of A, has exactly rank w.rank and (in the
    stochastic mode) is row-stochastic; every quantity is recomputed."""
    return (rank(w.B) == w.rank and row1_error(A, w.B) == w.error and w.error <= eps
            and (not stochastic or is_row_stochastic(w.B)))


# ---------------------------------------------------------------- lower certificates

def nonzero_certificate(A: Matrix, eps: Fraction) -> Certificate | None:
    """||A||_row1 > eps excludes B = 0, so rank B >= 1."""
    norm = row1_norm(A)
    if norm <= eps:
        return None
    return Certificate("nonzero", 1, {"row1_norm": norm}, {"row1_norm": qstr(norm)})


def decoder_certificate(A: Matrix, eps: Fraction, D: Matrix, W: Matrix,
                        kind: str = "decoder") -> Certificate | None:
    """Returns the certificate rank B >= p if M = D A W (p x p) is invertible and
    ||M^{-1}||_inf ||D||_inf ||W||_inf eps < 1 (exact); else None.

    Why: D B W = M - D E W with ||D E W||_inf <= ||D||_inf ||E||_inf ||W||_inf and
    ||E||_inf = ||A - B||_row1 <= eps, so ||M^{-1} D E W||_inf < 1 and D B W is invertible.
    """
    p = len(D)
    # each exact step is priced before it starts (one inverse of big rationals ran 85 s past
    # the budget, one product 78 s) and stays in flint: Fractions only for the norm
    Df, Af, Wf = to_fmpq_mat(D), to_fmpq_mat(A), to_fmpq_mat(W)
    afford(product_seconds(Df, Af))
    DA = Df * Af
    afford(product_seconds(DA, Wf))
    M = DA * Wf
    afford(inverse_seconds(M))
    inv_norm = inverse_row1_norm(M)
    if inv_norm is None:
        return None
    value = inv_norm * row1_norm(D) * row1_norm(W) * eps
    if value >= 1:
        return None
    data = {"D": D, "W": W, "value": value}
    js = {"value": qstr(value), "D": [[qstr(x) for x in r] for r in D],
          "W": [[qstr(x) for x in r] for r in W]}
    return Certificate(kind, p, data, js)


def verify_decoder(A: Matrix, eps: Fraction, cert: Certificate) -> bool:
    """Returns True iff ``cert`` (decoder or submatrix) re-checks exactly."""
    again = decoder_certificate(A, eps, cert.data["D"], cert.data["W"], cert.kind)
    return again is not None and again.bound == cert.bound == len(cert.data["D"])


def _selection(idx: list[int], size: int, rows: bool) -> Matrix:
    S = [[Fraction(int(i == j)) for j in range(size)] for i in idx]
    return S if rows else transpose(S)


def best_decoder(A: Matrix, eps: Fraction, above: int,
                 at_most: int | None = None) -> Certificate | None:
    """Returns a decoder certificate with the largest bound p, above < p <= at_most, found
    (or None).

    Small cells try every square submatrix, largest first; larger cells try pivoted-QR
    submatrices and rounded singular-vector decoders with a bisection on p.
    """
    m, n = len(A), len(A[0])
    pmax = min(m, n) if at_most is None else min(m, n, at_most)
    if m <= SUBMATRIX_EXHAUSTIVE and n <= SUBMATRIX_EXHAUSTIVE:
        for p in range(pmax, above, -1):
            for R in combinations(range(m), p):
                for S in combinations(range(n), p):
                    tick()  # the oracle's budget (exact.budget)
                    c = decoder_certificate(A, eps, _selection(list(R), m, True),
                                            _selection(list(S), n, False), "submatrix")
                    if c is not None:
                        return c
        return None
    return _bisect_decoder(A, eps, above, pmax)


def _decoders_at(A: Matrix, eps: Fraction, p: int, arr: np.ndarray, svd) -> Certificate | None:
    import scipy.linalg as sla

    m, n = arr.shape
    _, _, cols = sla.qr(arr, pivoting=True, mode="economic")
    S = sorted(int(c) for c in cols[:p])
    _, _, rws = sla.qr(arr[:, S].T, pivoting=True, mode="economic")
    R = sorted(int(r) for r in rws[:p])
    c = decoder_certificate(A, eps, _selection(R, m, True), _selection(S, n, False), "submatrix")
    if c is not None:
        return c
    u, _, vt = svd
    D = [[_q(x) for x in u[:, k]] for k in range(p)]
    W = [[_q(vt[k, j]) for k in range(p)] for j in range(n)]
    return decoder_certificate(A, eps, D, W, "decoder")


def _bisect_decoder(A: Matrix, eps: Fraction, above: int, pmax: int) -> Certificate | None:
    arr = float_view(A)
    if arr is None:
        return None
    svd = np.linalg.svd(arr)
    best, lo, hi = None, above, pmax  # invariant: best certifies lo (or lo == above)
    while lo < hi:
        tick()
        mid = (lo + hi + 1) // 2
        try:
            c = _decoders_at(A, eps, mid, arr, svd)
        except Unaffordable:  # too costly for the time left: a smaller rank may not be
            c = None
        if c is not None:
            best, lo = c, mid
        else:
            hi = mid - 1
    return best


# ---------------------------------------------------------------- upper witnesses

def _l1_fit(arr: np.ndarray, V: np.ndarray, simplex: bool) -> np.ndarray | None:
    """Per row, argmin_c ||a - c V||_1 (optionally c in the simplex), by float LP."""
    from scipy.optimize import linprog

    k, n = V.shape
    out = []
    for a in arr:
        # variables (c, t): minimise sum t with -t <= a - c V <= t
        cost = np.r_[np.zeros(k), np.ones(n)]
        A_ub = np.block([[-V.T, -np.eye(n)], [V.T, -np.eye(n)]])
        b_ub = np.r_[-a, a]
        kw: dict[str, Any] = {"bounds": [(None, None)] * k + [(0, None)] * n}
        if simplex:
            kw["bounds"] = [(0, None)] * k + [(0, None)] * n
            kw["A_eq"] = np.r_[np.ones(k), np.zeros(n)][None, :]
            kw["b_eq"] = [1.0]
        res = linprog(cost, A_ub=A_ub, b_ub=b_ub, method="highs", **kw)
        if res.status != 0:
            return None
        out.append(res.x[:k])
    return np.array(out)


def _stochastic_combination(c: np.ndarray) -> list[Fraction]:
    q = [max(Fraction(0), _q(x)) for x in c]
    s = sum(q, Fraction(0))
    if s == 0:
        q, s = [Fraction(1)] + [Fraction(0)] * (len(c) - 1), Fraction(1)
    return [x / s for x in q]


def _rank_k_candidates(A: Matrix, k: int, stochastic: bool, base: Matrix):
    arr = float_view(A)
    if arr is None:
        return
    m, n = arr.shape
    if stochastic:
        # Prototype rows are exactly stochastic (rows of ``base`` or their exact mean), so
        # any exactly stochastic mixture of them is row-stochastic with rank <= k.
        mean = [sum(col, Fraction(0)) / len(base) for col in zip(*base, strict=True)]
        pool = [mean, *base]
        for start in (0, 1):
            protos = _farthest_rows(np.array(pool, dtype=float), k, start)
            P = [pool[i] for i in protos]
            C = _l1_fit(arr, np.array(P, dtype=float), simplex=True)
            if C is not None:
                coeffs = [_stochastic_combination(c) for c in C]
                yield "prototype-mixture", matmul(coeffs, P)
                if m * n <= ALTERNATE_MAX:
                    Pf = _alternate(arr, C, np.array(P, dtype=float), True)
                    if Pf is not None:
                        Pq = [_stochastic_combination(row) for row in Pf]
                        C2 = _l1_fit(arr, np.array(Pq, dtype=float), simplex=True)
                        if C2 is not None:
                            coeffs = [_stochastic_combination(c) for c in C2]
                            yield "alternating-mixture", matmul(coeffs, Pq)
        return
    _, _, vt = np.linalg.svd(arr)
    Vq = [[_q(x) for x in vt[i]] for i in range(k)]
    import scipy.linalg as sla

    _, _, piv = sla.qr(arr.T, pivoting=True, mode="economic")
    for kind, V in (("svd-l1", Vq), ("rows-l1", [A[int(i)] for i in piv[:k]])):
        C = _l1_fit(arr, np.array(V, dtype=float), simplex=False)
        if C is not None:
            yield kind, matmul([[_q(x) for x in c] for c in C], V)
        if C is not None and m * n <= ALTERNATE_MAX:
            Vf = _alternate(arr, C, np.array(V, dtype=float), False)
            if Vf is not None:
                V2 = [[_q(x) for x in row] for row in Vf]
                C2 = _l1_fit(arr, np.array(V2, dtype=float), simplex=False)
                if C2 is not None:
                    yield "alternating-l1", matmul([[_q(x) for x in c] for c in C2], V2)
    u, s, _ = np.linalg.svd(arr)
    yield "truncated-svd", matmul([[_q(u[i, j] * s[j]) for j in range(k)] for i in range(m)], Vq)


def _alternate(arr: np.ndarray, C: np.ndarray, P: np.ndarray, simplex: bool,
               rounds: int = 4) -> np.ndarray | None:
    """Alternating minimax-l1 refinement of B = C P (float proposals only)."""
    for _ in range(rounds):
        P2 = _fit_right(arr, C, simplex)
        if P2 is None:
            return P
        P = P2
        C2 = _l1_fit(arr, P, simplex)
        if C2 is None:
            return P
        C = C2
    return P


def _fit_right(arr: np.ndarray, C: np.ndarray, simplex: bool) -> np.ndarray | None:
    """argmin_P max_i ||A_i - C_i P||_1 (P rows in the simplex if asked), by float LP."""
    from scipy.optimize import linprog
    from scipy.sparse import bmat, csr_matrix, eye, kron

    m, n = arr.shape
    k = C.shape[1]
    CP = kron(csr_matrix(C), eye(n))  # (m n) x (k n): vec(C P) row-major
    In = eye(m * n)
    rowsum = kron(eye(m), np.ones((1, n)))
    zcol = csr_matrix(np.ones((m * n, 1)) * 0)
    A_ub = bmat([[-CP, -In, zcol], [CP, -In, zcol],
                 [csr_matrix((m, k * n)), rowsum, csr_matrix(-np.ones((m, 1)))]])
    a = arr.reshape(-1)
    b_ub = np.r_[-a, a, np.zeros(m)]
    cost = np.r_[np.zeros(k * n + m * n), 1.0]
    bounds = [(0, None) if simplex else (None, None)] * (k * n) + [(0, None)] * (m * n + 1)
    kw: dict[str, Any] = {}
    if simplex:
        kw["A_eq"] = bmat([[kron(eye(k), np.ones((1, n))), csr_matrix((k, m * n + 1))]])
        kw["b_eq"] = np.ones(k)
    res = linprog(cost, A_ub=A_ub.tocsr(), b_ub=b_ub, bounds=bounds, method="highs", **kw)
    if res.status != 0:
        return None
    return res.x[:k * n].reshape(k, n)


def _farthest_rows(arr: np.ndarray, k: int, start: int = 0) -> list[int]:
    chosen = [start]
    dist = np.abs(arr - arr[start]).sum(axis=1)
    while len(chosen) < min(k, len(arr)):
        i = int(np.argmax(dist))
        chosen.append(i)
        dist = np.minimum(dist, np.abs(arr - arr[i]).sum(axis=1))
    return chosen


def base_witness(A: Matrix, eps: Fraction, stochastic: bool) -> Witness | None:
    """B = A (unrestricted) or the row-wise l1 projection of A onto the simplex (stochastic;
    None when some row is farther than eps from every probability vector)."""
    if not stochastic:
        return Witness("identity", [list(r) for r in A], rank(A), Fraction(0), False)
    proj = [simplex_distance(row)[1] for row in A]
    return make_witness(A, eps, proj, "simplex-projection", True)


def improve_upper(A: Matrix, eps: Fraction, stochastic: bool, lower: int,
                  current: Witness) -> Witness:
    """Returns a witness of rank < current.rank if a heuristic proposal checks exactly,
    searching ranks in (lower, current.rank) by bisection; else ``current``."""
    best = current
    base = current.B
    lo, hi = max(lower, 1), current.rank - 1
    while lo <= hi:
        k = (lo + hi) // 2
        found = None
        for kind, B in _rank_k_candidates(A, k, stochastic, base):
            tick()  # the oracle's budget (exact.budget)
            w = make_witness(A, eps, B, kind, stochastic)
            if w is not None and w.rank <= k:
                found = w
                break
        if found is not None:
            best, hi = found, found.rank - 1
        else:
            lo = k + 1
    return best
