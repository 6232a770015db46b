"""Complete exact decision of rank <= 1 feasibility: is there B = x y^T (unrestricted) or a
row-stochastic B of rank 1 with ||A - B||_row1 <= eps?

Unrestricted (proof in proofs_notes/exact.md): B = 0 or B = x y^T with y != 0.  For fixed
y != 0 the rows separate and f_i(x) = sum_j |A_ij - x y_j| is convex piecewise linear in x,
coercive, with breakpoints A_ij / y_j (y_j != 0), so its minimum is attained at a breakpoint.
Hence a feasible (x, y) exists iff there are a pivot map p (row -> column) with y_p(i) != 0
and, multiplying row i's condition by |y_p(i)|,

    sum_{j != p} |A_ij y_p - A_ip y_j| <= eps * sigma_p * y_p,   sigma_p * y_p > 0,

for every row i, with sigma_p = sign(y_p).  Both sides are homogeneous of degree one, so
``sigma_p * y_p > 0`` may be replaced by ``sigma_p * y_p >= 1``; expanding each absolute value
sum over sign vectors makes every (pivot map, signs) a polyhedron in y.  Replacing (x, y) by
(-x, -y) fixes the sign of row 0's pivot to +1.  The search assigns rows one by one and
decides every partial system exactly (:mod:`exact.lp`): an infeasible partial system (Farkas
certificate) prunes all its extensions, a feasible full system gives a witness.

Row-stochastic: a rank-one B with unit row sums has all rows equal to one probability vector
p (B = x y^T, x_i * sum(y) = 1), so feasibility is one polyhedron in p.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.certify.rationals import qstr

from .budget import tick
from .linalg import Matrix, is_row_stochastic, rank, row1_error, row1_norm
from .lp import check_farkas, check_point, decide

Constraint = tuple[tuple[Fraction, ...], Fraction]  # (coefficients g, rhs b): g . y <= b
Assignment = tuple[tuple[int, int], ...]  # per row: (pivot column, sign of y_pivot)

#: The unrestricted search handles cells with n**m * 2**(n-1) <= SEARCH_BUDGET
#: (every cell up to 4 x 4, 2 x 6, 3 x 5, 5 x 3, 10 x 2, ...).
SEARCH_BUDGET = 2048
#: The row-stochastic rank-one polyhedron (2**n constraints per row) is built for cells with
#: at most 16 rows and 6 columns.
STOCHASTIC_MAX = (16, 6)


def search_size(m: int, n: int) -> int:
    """Returns n**m * 2**(n-1), the size measure compared with :data:`SEARCH_BUDGET`."""
    return n ** m * 2 ** (n - 1)


def searchable(m: int, n: int, stochastic: bool) -> bool:
    """Returns True iff the complete rank-one decision runs on an m x n cell."""
    if stochastic:
        return m <= STOCHASTIC_MAX[0] and n <= STOCHASTIC_MAX[1]
    return search_size(m, n) <= SEARCH_BUDGET


@dataclass
class RankOneWitness:
    """A matrix B with rank(B) <= 1, ||A - B||_row1 = error <= eps (all exact)."""

    B: Matrix
    rank: int
    error: Fraction
    factors: tuple[list[Fraction], list[Fraction]]  # B = x y^T


@dataclass
class RankOneRefutation:
    """Exact proof that no admissible B of rank <= 1 lies within eps of A.

    ``nodes`` maps partial assignments (unrestricted) or ``()`` (stochastic) to the support of
    a Farkas certificate: a list of (constraint, multiplier) pairs.  ``row1_norm`` is ||A||_row1
    (> eps, which excludes B = 0; unused in the stochastic mode, where B = 0 is inadmissible).
    """

    stochastic: bool
    nodes: list[tuple[Assignment, list[tuple[Constraint, Fraction]]]]
    row1_norm: Fraction
    lps_solved: int = 0
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "rank_one_refutation",
            "stochastic": self.stochastic,
            "row1_norm": qstr(self.row1_norm),
            "farkas_nodes": [
                {"assignment": [list(a) for a in asg],
                 "support": [{"g": [qstr(c) for c in g], "b": qstr(b), "lam": qstr(lam)}
                             for (g, b), lam in sup]}
                for asg, sup in self.nodes],
            "lps_solved": self.lps_solved,
        }


# ---------------------------------------------------------------- constraint generation

def row_constraints(A: Matrix, eps: Fraction, i: int, p: int, sigma: int) -> list[Constraint]:
    """Returns the polyhedral form of row i's condition with pivot column p, sign sigma."""
    n = len(A[0])
    others = [j for j in range(n) if j != p]
    out: list[Constraint] = []
    for taus in product((1, -1), repeat=len(others)):
        c = [Fraction(0)] * n
        for tau, j in zip(taus, others, strict=True):
            c[p] += tau * A[i][j]
            c[j] -= tau * A[i][p]
        c[p] -= eps * sigma
        out.append((tuple(c), Fraction(0)))
    piv = [Fraction(0)] * n
    piv[p] = Fraction(-sigma)
    out.append((tuple(piv), Fraction(-1)))
    return out


def assignment_system(A: Matrix, eps: Fraction, asg: Assignment,
                      cache: dict | None = None) -> list[Constraint]:
    """Returns the de-duplicated constraints of rows 0..len(asg)-1 under ``asg``.

    ``cache`` (optional) memoises :func:`row_constraints` for this (A, eps).
    """
    seen: dict[Constraint, None] = {}
    for i, (p, s) in enumerate(asg):
        if cache is None:
            rows = row_constraints(A, eps, i, p, s)
        else:
            rows = cache.get((i, p, s))
            if rows is None:
                rows = cache[(i, p, s)] = row_constraints(A, eps, i, p, s)
        for con in rows:
            seen.setdefault(con, None)
    return list(seen)


def stochastic_system(A: Matrix, eps: Fraction) -> list[Constraint]:
    """Returns constraints on p in Q^n: p >= 0, sum p = 1, ||A_i - p||_1 <= eps for all i."""
    n = len(A[0])
    cons: dict[Constraint, None] = {}
    for j in range(n):
        e = [Fraction(0)] * n
        e[j] = Fraction(-1)
        cons.setdefault((tuple(e), Fraction(0)), None)
    cons.setdefault((tuple(Fraction(1) for _ in range(n)), Fraction(1)), None)
    cons.setdefault((tuple(Fraction(-1) for _ in range(n)), Fraction(-1)), None)
    for row in A:
        for sig in product((1, -1), repeat=n):
            g = tuple(Fraction(-s) for s in sig)
            b = eps - sum((s * a for s, a in zip(sig, row, strict=True)), Fraction(0))
            cons.setdefault((g, b), None)
    return list(cons)


# ---------------------------------------------------------------- witnesses from a y

def best_row_multiplier(a: Sequence[Fraction], y: Sequence[Fraction]) -> tuple[Fraction, Fraction]:
    """Returns (x, f): x minimises f(x) = sum_j |a_j - x y_j| exactly, f = f(x).

    The minimum of this convex piecewise-linear function is attained at a breakpoint
    a_j / y_j (or anywhere, e.g. x = 0, when y = 0).
    """
    def f(x: Fraction) -> Fraction:
        return sum((abs(aj - x * yj) for aj, yj in zip(a, y, strict=True)), Fraction(0))
    cands = [aj / yj for aj, yj in zip(a, y, strict=True) if yj != 0] or [Fraction(0)]
    best = min(cands, key=f)
    return best, f(best)


def witness_from_y(A: Matrix, eps: Fraction, y: Sequence[Fraction]) -> RankOneWitness | None:
    """Returns the exact best B = x y^T for this y if it is within eps of A, else None."""
    xs, worst = [], Fraction(0)
    for row in A:
        x, err = best_row_multiplier(row, y)
        if err > eps:
            return None
        xs.append(x)
        worst = max(worst, err)
    B = [[x * yj for yj in y] for x in xs]
    return RankOneWitness(B, rank(B), row1_error(A, B), (xs, list(y)))


def _heuristic_ys(A: Matrix) -> list[list[Fraction]]:
    ys = [list(row) for row in A]
    try:
        _, _, vt = np.linalg.svd(np.array(A, dtype=float))
        v = vt[0]
        ys.append([Fraction(float(t)).limit_denominator(1 << 12) for t in v])
    except (np.linalg.LinAlgError, ValueError, OverflowError):  # heuristics only
        pass
    return ys


# ---------------------------------------------------------------- the searches

def _check_size(m: int, n: int, stochastic: bool) -> None:
    if not searchable(m, n, stochastic):
        if stochastic:
            lim = f"at most {STOCHASTIC_MAX[0]} rows and {STOCHASTIC_MAX[1]} columns"
        else:
            lim = f"n**m * 2**(n-1) <= {SEARCH_BUDGET} (every cell up to 4 x 4)"
        raise InputError(f"{m} x {n} cell is too large for the complete rank-one search "
                         f"(needs {lim})", field="matrix")


def rank_one_search(A: Matrix, eps: Fraction, stochastic: bool = False
                    ) -> RankOneWitness | RankOneRefutation:
    """Decides exactly whether an admissible B of rank <= 1 has ||A - B||_row1 <= eps.

    Returns a :class:`RankOneWitness` (verified exactly) or a :class:`RankOneRefutation`
    (verified by :func:`verify_refutation` before it is returned).  Raises
    :class:`InputError` for cells outside the size limit of the complete search.
    """
    m, n = len(A), len(A[0])
    _check_size(m, n, stochastic)
    result = _stochastic(A, eps) if stochastic else _unrestricted(A, eps)
    if isinstance(result, RankOneRefutation):
        if not verify_refutation(A, eps, result):
            raise RuntimeError("rank-one refutation failed its own exact re-check")
    elif result.error > eps or result.rank > 1 or (stochastic and not is_row_stochastic(result.B)):
        raise RuntimeError("rank-one witness failed its own exact re-check")
    return result


def _stochastic(A: Matrix, eps: Fraction) -> RankOneWitness | RankOneRefutation:
    n = len(A[0])
    cons = stochastic_system(A, eps)
    ans = decide([g for g, _ in cons], [b for _, b in cons], n)
    if ans.status == "feasible":
        p = list(ans.vector)
        B = [list(p) for _ in A]
        return RankOneWitness(B, rank(B), row1_error(A, B), ([Fraction(1)] * len(A), p))
    sup = [(c, lam) for c, lam in zip(cons, ans.vector, strict=True) if lam]
    return RankOneRefutation(True, [((), sup)], row1_norm(A), lps_solved=1)


def _unrestricted(A: Matrix, eps: Fraction) -> RankOneWitness | RankOneRefutation:
    m, n = len(A), len(A[0])
    norm = row1_norm(A)
    if norm <= eps:
        zero = [[Fraction(0)] * n for _ in range(m)]
        return RankOneWitness(zero, 0, norm, ([Fraction(0)] * m, [Fraction(0)] * n))
    for y in _heuristic_ys(A):
        tick()  # the oracle's budget (exact.budget)
        w = witness_from_y(A, eps, y)
        if w is not None:
            return w
    nodes: list[tuple[Assignment, list[tuple[Constraint, Fraction]]]] = []
    supports: list[tuple[frozenset[Constraint], list[tuple[Constraint, Fraction]]]] = []
    cache: dict[tuple[int, int, int], list[Constraint]] = {}
    counter = [0]

    def _known_refutation(cons: list[Constraint]) -> list[tuple[Constraint, Fraction]] | None:
        have = set(cons)
        for keys, sup in reversed(supports):
            if keys <= have:
                return sup
        return None

    def dfs(asg: Assignment, signs: dict[int, int],
            y_parent: tuple[Fraction, ...] | None) -> RankOneWitness | None:
        i = len(asg)
        for p in range(n):
            choices = [signs[p]] if p in signs else ([1] if i == 0 else [1, -1])
            for s in choices:
                tick()
                new = (*asg, (p, s))
                row = cache.get((i, p, s))
                if row is None:
                    row = cache[(i, p, s)] = row_constraints(A, eps, i, p, s)
                if y_parent is not None and check_point([g for g, _ in row],
                                                        [b for _, b in row], y_parent):
                    y = y_parent  # the parent's point satisfies the new row too
                else:
                    cons = assignment_system(A, eps, new, cache)
                    known = _known_refutation(cons)
                    if known is not None:  # an earlier Farkas support lies in this system
                        nodes.append((new, known))
                        continue
                    counter[0] += 1
                    ans = decide([g for g, _ in cons], [b for _, b in cons], n)
                    if ans.status == "infeasible":
                        sup = [(c, lam) for c, lam in zip(cons, ans.vector, strict=True) if lam]
                        nodes.append((new, sup))
                        supports.append((frozenset(c for c, _ in sup), sup))
                        continue
                    y = ans.vector
                    w = witness_from_y(A, eps, y)
                    if w is not None:
                        return w
                if i + 1 == m:  # a full feasible system always yields a witness
                    w = witness_from_y(A, eps, y)
                    if w is None:
                        raise RuntimeError("feasible pivot system without a rank-one witness")
                    return w
                found = dfs(new, {**signs, p: s}, y)
                if found is not None:
                    return found
        return None

    w = dfs((), {}, None)
    if w is not None:
        return w
    return RankOneRefutation(False, nodes, norm, lps_solved=counter[0])


# ---------------------------------------------------------------- independent re-check

def _full_assignments(m: int, n: int):
    for pmap in product(range(n), repeat=m):
        used = sorted(set(pmap) - {pmap[0]})
        for signs in product((1, -1), repeat=len(used)):
            sg = dict(zip(used, signs, strict=True))
            sg[pmap[0]] = 1
            yield tuple((p, sg[p]) for p in pmap)


def verify_refutation(A: Matrix, eps: Fraction, ref: RankOneRefutation) -> bool:
    """Returns True iff ``ref`` proves exactly that no admissible rank <= 1 B is within eps.

    Every Farkas support must consist of constraints regenerated here from (A, eps) for its
    node, with multipliers > 0, summing to 0 . y <= (negative number).  In the unrestricted
    mode ||A||_row1 > eps must hold (recomputed) and every canonical full (pivot map, signs)
    must extend some refuted node.
    """
    if ref.stochastic:
        if len(ref.nodes) != 1 or ref.nodes[0][0] != ():
            return False
        allowed = set(stochastic_system(A, eps))
    else:
        if row1_norm(A) <= eps:
            return False
    m, n = len(A), len(A[0])
    refuted: set[Assignment] = set()
    cache: dict[tuple[int, int, int], list[Constraint]] = {}
    for asg, sup in ref.nodes:
        if not ref.stochastic:
            if not 1 <= len(asg) <= m or any(not (0 <= p < n and s in (1, -1)) for p, s in asg):
                return False
            allowed = set(assignment_system(A, eps, asg, cache))
        if not sup or any(c not in allowed or lam <= 0 for c, lam in sup):
            return False
        if not check_farkas([g for (g, _), _ in sup], [b for (_, b), _ in sup],
                            [lam for _, lam in sup], n):
            return False
        refuted.add(asg)
    if ref.stochastic:
        return True
    return all(any(full[:k] in refuted for k in range(1, m + 1))
               for full in _full_assignments(m, n))
