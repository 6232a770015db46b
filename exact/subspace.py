"""Verified global search: is r_eps(A) <= r?  Branch and bound over r-dimensional subspaces.

rank B <= r iff the rows of B lie in some r-dimensional subspace S of R^n, so r_eps(A) <= r iff
some S has max_i dist_1(a_i, S) <= eps (unrestricted) or max_i dist_1(a_i, S cap simplex) <= eps
(row-stochastic).  Every S is the row space of a matrix G with G[:, J] = I_r for some r columns
J (the chart) and |G_kl| <= 1 elsewhere (J of maximal |det|, Cramer's rule), so the charts times
the boxes [-1, 1]^(r x (n-r)) cover all S.  On a box of charts' free entries P, a dual point of
the distance LP gives a lower bound valid for the whole box (exact rational arithmetic); a box
whose bound exceeds eps for some row holds no admissible S and is pruned.  At box centres a
float LP proposes an exact B (vertex snapping), kept only if exactly within eps.  Floats only
propose; every prune and every witness is exact.  Proofs: ``proofs_notes/exact.md``, section
"Subspace search".
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np

from softrank.certify.rationals import qstr

from .inputs import float_view
from .linalg import Matrix, is_row_stochastic, rank, row1_error

Box = tuple[tuple[Fraction, Fraction], ...]  # per free entry (k, l) in row-major order


@dataclass
class Prune:
    """A leaf: on ``box`` of chart ``pivots`` the exact lower bound for row ``row`` exceeds eps.
    ``z`` (length n - r) and, in the stochastic mode, ``w`` (length n) are the dual point."""

    pivots: tuple[int, ...]
    box: Box
    row: int
    z: tuple[Fraction, ...]
    w: tuple[Fraction, ...] | None
    bound: Fraction
    #: combination leaves: one z per row and weights lam (row = -1, z and w unused)
    zs: tuple[tuple[Fraction, ...], ...] | None = None
    lam: tuple[Fraction, ...] | None = None

    def exact_bound(self, A: Matrix, stochastic: bool) -> Fraction:
        """Recomputes this leaf's lower bound of max_i dist_1 over its box from A alone."""
        if self.lam is not None:
            assert self.zs is not None
            return combined_bound(A, self.pivots, self.box, self.zs, self.lam)
        return box_bound(A[self.row], self.pivots, self.box, self.z, self.w, stochastic)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pivots": list(self.pivots),
                               "box": [[qstr(a), qstr(b)] for a, b in self.box],
                               "bound": qstr(self.bound)}
        if self.lam is not None:
            assert self.zs is not None
            out["lam"] = [qstr(x) for x in self.lam]
            out["zs"] = [[qstr(x) for x in z] for z in self.zs]
        else:
            out.update(row=self.row, z=[str(x) for x in self.z],
                       w=None if self.w is None else [str(x) for x in self.w])
        return out


@dataclass
class SearchResult:
    """``status``: "feasible" (``B`` exact, rank <= r, within eps), "infeasible" (``leaves``
    cover every chart's box and each prunes) or "undecided" (``reason``)."""

    status: str
    r: int
    B: Matrix | None = None
    leaves: list[Prune] = field(default_factory=list)
    reason: str = ""
    boxes: int = 0
    seconds: float = 0.0


# ------------------------------------------------------------------ exact bounds on a box

def _free_index(r: int, n: int) -> list[tuple[int, int]]:
    return [(k, l) for k in range(r) for l in range(n - r)]


def _row_extremes(box: Box, r: int, nr: int, k: int, z: Sequence[Fraction]
                  ) -> tuple[Fraction, Fraction]:
    """Returns (min, max) of P_k . z over the box (exact)."""
    lo = hi = Fraction(0)
    for l in range(nr):
        a, b = box[k * nr + l]
        u, v = a * z[l], b * z[l]
        lo += min(u, v)
        hi += max(u, v)
    return lo, hi


def box_bound(a: Sequence[Fraction], pivots: Sequence[int], box: Box, z: Sequence[Fraction],
              w: Sequence[Fraction] | None, stochastic: bool) -> Fraction:
    """Returns an exact lower bound of dist_1(a, S_P) (of dist_1(a, S_P cap simplex) in the
    stochastic mode) valid for every P in ``box``, from the dual point (z, w).

    Unrestricted: for u = (-P z on the pivots, z elsewhere) in S^perp and |u|_inf <= 1,
    ||a - b||_1 >= u . (a - b) = u . a for every b in S.  z is scaled down so that |u| <= 1 on
    the whole box.  Stochastic: for |w|_inf <= 1 and any u in S^perp, ||a - b||_1 >= w . a -
    w . b = w . a - (w - u) . b >= w . a - max_j (w - u)_j for b in S cap simplex; with
    ``w`` None the unrestricted bound is used (it is also a lower bound in that mode).
    """
    n, r = len(a), len(pivots)
    nr = n - r
    oth = [j for j in range(n) if j not in pivots]
    if w is None:  # dist_1(a, S cap simplex) >= dist_1(a, S): the unrestricted bound applies
        stochastic = False
    if not stochastic:
        const, coef = _scaled_terms(a, pivots, box, z)
        return const + sum((min(c * lo, c * hi) for c, (lo, hi) in zip(coef, box, strict=True)),
                           Fraction(0))
    assert w is not None
    w = [max(Fraction(-1), min(Fraction(1), x)) for x in w]
    worst = max(w[oth[l]] - z[l] for l in range(nr)) if nr else None
    for k in range(r):
        _, hi = _row_extremes(box, r, nr, k, z)
        cand = w[pivots[k]] + hi
        worst = cand if worst is None or cand > worst else worst
    return sum((x * y for x, y in zip(w, a, strict=True)), Fraction(0)) - worst


def _scaled_terms(a: Sequence[Fraction], pivots: Sequence[int], box: Box,
                  z: Sequence[Fraction]) -> tuple[Fraction, list[Fraction]]:
    """Returns (constant, coefficients c_kl) of the affine function of P
    g(P) = z'.a_oth - a_piv^T P z', z' = z scaled so that |u|_inf <= 1 on the whole box."""
    n, r = len(a), len(pivots)
    nr = n - r
    oth = [j for j in range(n) if j not in pivots]
    z = [max(Fraction(-1), min(Fraction(1), x)) for x in z]
    scale = Fraction(1)
    for k in range(r):
        lo, hi = _row_extremes(box, r, nr, k, z)
        scale = max(scale, -lo, hi)
    z = [x / scale for x in z]
    const = sum((z[l] * a[oth[l]] for l in range(nr)), Fraction(0))
    coef = [-a[pivots[k]] * z[l] for k in range(r) for l in range(nr)]
    return const, coef


def combined_bound(A: Matrix, pivots: Sequence[int], box: Box,
                   zs: Sequence[Sequence[Fraction]], lam: Sequence[Fraction]) -> Fraction:
    """Returns an exact lower bound of max_i dist_1(a_i, S_P) valid on the whole box: for
    weights lam >= 0 summing to 1, max_i dist_i >= sum_i lam_i dist_i >= sum_i lam_i g_i(P)
    with g_i the affine bound of row i (see :func:`box_bound`); the minimum of an affine
    function over a box is taken exactly.  Returns -1 for invalid weights.  Combining rows
    lets their gradients cancel near a minimax point, where single rows cannot prune."""
    if len(lam) != len(A) or len(zs) != len(A) or any(x < 0 for x in lam) \
            or sum(lam, Fraction(0)) != 1:
        return Fraction(-1)
    const = Fraction(0)
    coef = [Fraction(0)] * len(box)
    for a, z, w in zip(A, zs, lam, strict=True):
        if not w:
            continue
        c0, c = _scaled_terms(a, pivots, box, z)
        const += w * c0
        coef = [x + w * y for x, y in zip(coef, c, strict=True)]
    return const + sum((min(c * lo, c * hi) for c, (lo, hi) in zip(coef, box, strict=True)),
                       Fraction(0))


# ------------------------------------------------------------------ float proposals (untrusted)

def _basis(pivots: Sequence[int], P: np.ndarray, n: int) -> np.ndarray:
    r = len(pivots)
    oth = [j for j in range(n) if j not in pivots]
    G = np.zeros((r, n))
    G[:, list(pivots)] = np.eye(r)
    if oth:
        G[:, oth] = P
    return G


def _dual_point(a: np.ndarray, pivots: Sequence[int], P: np.ndarray, stochastic: bool
                ) -> tuple[float, np.ndarray, np.ndarray | None]:
    """Float dual of the distance LP at P: (value, z, w)."""
    from scipy.optimize import linprog

    n, r = len(a), len(pivots)
    nr = n - r
    oth = [j for j in range(n) if j not in pivots]
    piv_a = a[list(pivots)]
    if not stochastic:
        if nr == 0:
            return 0.0, np.zeros(0), None
        c = a[oth] - P.T @ piv_a
        z = _small_lp_max(c, np.vstack([P, -P, np.eye(nr), -np.eye(nr)]))
        return float(c @ z), z, None
    # variables (w: n, z: nr, m: 1); maximise w.a - m
    cvec = np.concatenate([-a, np.zeros(nr), [1.0]])
    rows = []
    for k, j in enumerate(pivots):  # w_j + (P z)_k - m <= 0
        row = np.zeros(n + nr + 1)
        row[j] = 1
        row[n:n + nr] = P[k]
        row[-1] = -1
        rows.append(row)
    for l, j in enumerate(oth):  # w_j - z_l - m <= 0
        row = np.zeros(n + nr + 1)
        row[j] = 1
        row[n + l] = -1
        row[-1] = -1
        rows.append(row)
    bounds = [(-1, 1)] * n + [(-100, 100)] * nr + [(None, None)]
    res = linprog(cvec, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), bounds=bounds,
                  method="highs")
    if res.status != 0:
        return 0.0, np.zeros(nr), np.zeros(n)
    return float(-res.fun), res.x[n:n + nr], res.x[:n]


def _small_lp_max(c: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Float maximiser of c . z subject to M z <= 1 (bounded, 0 feasible), by enumerating
    the vertices (every nr-subset of constraints); for the few variables of a chart."""
    nr = len(c)
    K = len(M)
    subsets = np.array(list(combinations(range(K), nr)))
    mats = M[subsets]  # (S, nr, nr)
    ok = np.abs(np.linalg.det(mats)) > 1e-12
    if not ok.any():
        return np.zeros(nr)
    zs = np.linalg.solve(mats[ok], np.ones((int(ok.sum()), nr, 1)))[..., 0]
    feas = (zs @ M.T <= 1 + 1e-9).all(axis=1)
    if not feas.any():
        return np.zeros(nr)
    zs = zs[feas]
    return zs[int(np.argmax(zs @ c))]


def _primal_row(a: np.ndarray, G: np.ndarray, stochastic: bool) -> np.ndarray | None:
    """Float minimiser x of ||a - x G||_1 (with x G in the simplex when stochastic)."""
    from scipy.optimize import linprog

    r, n = G.shape
    # variables (x: r, t: n): min sum t, t >= +-(a - x G)
    c = np.concatenate([np.zeros(r), np.ones(n)])
    A_ub = np.block([[-G.T, -np.eye(n)], [G.T, -np.eye(n)]])
    b_ub = np.concatenate([-a, a])
    A_eq = b_eq = None
    if stochastic:
        A_ub = np.vstack([A_ub, np.hstack([-G.T, np.zeros((n, n))])])
        b_ub = np.concatenate([b_ub, np.zeros(n)])
        A_eq = np.hstack([G.sum(axis=1), np.zeros(n)])[None]
        b_eq = np.ones(1)
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq,
                  bounds=[(None, None)] * r + [(0, None)] * n, method="highs")
    return res.x[:r] if res.status == 0 else None


def _snap_row(a: Sequence[Fraction], Gq: Matrix, x: np.ndarray, stochastic: bool
              ) -> list[Fraction] | None:
    """Exact admissible row b in the row space of Gq near the float solution x (best of a few
    vertex guesses), or None."""
    r, n = len(Gq), len(Gq[0])
    bf = x @ np.array([[float(v) for v in row] for row in Gq])
    af = np.array([float(v) for v in a])
    # active-constraint guesses: b_j = a_j (interpolation) or b_j = 0 (stochastic)
    cand: list[tuple[float, tuple[str, int]]] = [(abs(bf[j] - af[j]), ("a", j)) for j in range(n)]
    if stochastic:
        cand += [(abs(bf[j]), ("0", j)) for j in range(n)]
    cand.sort(key=lambda t: t[0])
    need = r - 1 if stochastic else r
    best, best_err = None, None
    options = [c[1] for c in cand[:need + 3]]
    for combo in itertools.islice(combinations(options, need), 30):
        if len({j for _, j in combo}) < need:
            continue
        rows_, rhs = [], []
        for typ, j in combo:
            rows_.append([Gq[k][j] for k in range(r)])
            rhs.append(a[j] if typ == "a" else Fraction(0))
        if stochastic:
            rows_.append([sum(Gq[k], Fraction(0)) for k in range(r)])
            rhs.append(Fraction(1))
        xs = _solve(rows_, rhs)
        if xs is None:
            continue
        b = [sum((xs[k] * Gq[k][j] for k in range(r)), Fraction(0)) for j in range(n)]
        if stochastic and (any(v < 0 for v in b) or sum(b, Fraction(0)) != 1):
            continue
        err = sum((abs(u - v) for u, v in zip(a, b, strict=True)), Fraction(0))
        if best_err is None or err < best_err:
            best, best_err = b, err
    return best


def _solve(M: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    from .linalg import inverse

    inv = inverse(M)
    if inv is None:
        return None
    return [sum((inv[i][j] * rhs[j] for j in range(len(rhs))), Fraction(0))
            for i in range(len(rhs))]


# ------------------------------------------------------------------ the search


def _q(x: float) -> Fraction:
    return Fraction(x).limit_denominator(1 << 20)


def subspace_search(A: Matrix, eps: Fraction, r: int, stochastic: bool, *,
                    budget: float = 60.0, min_width: Fraction = Fraction(1, 1 << 24)
                    ) -> SearchResult:
    """Decides r_eps(A) <= r by the verified branch and bound of the module doc, within
    ``budget`` seconds.  Returns "feasible" with an exact B (re-checked: rank <= r, within
    eps, row-stochastic if asked), "infeasible" with the pruned leaves (checked by
    :func:`verify_search`), or "undecided" with the reason (time budget, or boxes narrower
    than ``min_width`` that neither prune nor yield a witness: an exact tie is likely)."""
    t0 = time.monotonic()
    n = len(A[0])
    res = SearchResult("undecided", r)
    if not 1 <= r < n:
        res.reason = "r must satisfy 1 <= r < n"
        return res
    Af = float_view(A)
    if Af is None:
        res.reason = ("entries of 2^500 or more (the search's boxes are ordered by float LPs, "
                      "which need headroom)")
        return res
    nfree = r * (n - r)
    heap: list[tuple[float, int, tuple[int, ...], Box, tuple]] = []
    counter = itertools.count()
    root: Box = tuple((Fraction(-1), Fraction(1)) for _ in range(nfree))
    for pivots in combinations(range(n), r):
        heapq.heappush(heap, (0.0, next(counter), pivots, root, ()))
    while heap:
        if time.monotonic() - t0 > budget:
            res.reason = f"time budget of {budget:g} s reached with {len(heap)} open boxes"
            break
        _, _, pivots, box, hints = heapq.heappop(heap)
        res.boxes += 1
        leaf, score, new_hints = _process(A, Af, eps, pivots, box, hints, stochastic, res)
        if res.status == "feasible":
            break
        if leaf is not None:
            res.leaves.append(leaf)
            continue
        widths = [b - a for a, b in box]
        axis = max(range(nfree), key=lambda i: widths[i])
        if widths[axis] < min_width:
            res.reason = ("a box narrower than 2^-24 neither prunes nor yields a witness "
                          "(an exact tie with eps is likely)")
            break
        a, b = box[axis]
        mid = (a + b) / 2
        for half in ((a, mid), (mid, b)):
            child = box[:axis] + (half,) + box[axis + 1:]
            heapq.heappush(heap, (score, next(counter), pivots, child, new_hints))
    else:
        res.status = "infeasible"
    res.seconds = time.monotonic() - t0
    return res


def _process(A: Matrix, Af: np.ndarray, eps: Fraction, pivots: tuple[int, ...], box: Box,
             hints: tuple, stochastic: bool, res: SearchResult
             ) -> tuple[Prune | None, float, tuple]:
    """Tries to prune the box (parent's dual points first, then the centre's); at the centre
    tries an exact witness.  Returns (leaf or None, priority score, dual points for children)."""
    m, n = len(A), len(A[0])
    r = len(pivots)
    for i, z, w in hints:  # the parent's best dual points: exact check on the smaller box
        bound = box_bound(A[i], pivots, box, z, w, stochastic)
        if bound > eps:
            return Prune(pivots, box, i, z, w, bound), 0.0, ()
    if n > r:
        leaf = _combination_leaf(A, Af, eps, pivots, box)
        if leaf is not None:
            return leaf, 0.0, ()
    centre = [(a + b) / 2 for a, b in box]
    P = np.array([float(c) for c in centre]).reshape(r, n - r)
    duals = []
    first = [i for i, _, _ in hints]
    for i in first + [i for i in range(m) if i not in first]:
        if stochastic:  # dist to S cap simplex >= dist to S: try the cheap bound first
            val, z, _ = _dual_point(Af[i], pivots, P, False)
            zq = tuple(_q(float(x)) for x in z)
            bound = box_bound(A[i], pivots, box, zq, None, False)
            if bound > eps:
                return Prune(pivots, box, i, zq, None, bound), 0.0, ()
        val, z, w = _dual_point(Af[i], pivots, P, stochastic)
        zq = tuple(_q(float(x)) for x in z)
        wq = None if w is None else tuple(_q(float(x)) for x in w)
        duals.append((val, i, zq, wq))
        bound = box_bound(A[i], pivots, box, zq, wq, stochastic)
        if bound > eps:
            return Prune(pivots, box, i, zq, wq, bound), 0.0, ()
    duals.sort(key=lambda d: -d[0])
    worst = duals[0][0]
    if worst <= float(eps) * (1 + 1e-12) + 1e-15:
        B = _witness_at(A, Af, eps, pivots, centre, stochastic)
        if B is not None:
            res.status, res.B = "feasible", B
    return None, worst, tuple((i, zq, wq) for _, i, zq, wq in duals[:2])


def _combination_leaf(A: Matrix, Af: np.ndarray, eps: Fraction, pivots: tuple[int, ...],
                      box: Box) -> Prune | None:
    """The best combined bound of the form of :func:`combined_bound` for the box, found by a
    float LP in y_i = lam_i z_i (robust constraints |y_i| <= lam_i, |P y_i| <= lam_i for
    every P in the box), then evaluated exactly; a leaf when it exceeds eps."""
    from scipy.optimize import linprog

    m, n = Af.shape
    r = len(pivots)
    nr = n - r
    oth = [j for j in range(n) if j not in pivots]
    piv = list(pivots)
    rad = np.array([float(b - a) / 2 for a, b in box]).reshape(r, nr)
    mid = np.array([float(b + a) / 2 for a, b in box]).reshape(r, nr)
    # variable layout: lam (m), y (m nr), ay (m nr), s (r nr)
    nl, ny = m, m * nr
    nv = nl + 2 * ny + r * nr
    Y = lambda i, l: nl + i * nr + l  # noqa: E731
    AY = lambda i, l: nl + ny + i * nr + l  # noqa: E731
    S = lambda k, l: nl + 2 * ny + k * nr + l  # noqa: E731
    cost = np.zeros(nv)
    for i in range(m):
        g = Af[i, oth] - mid.T @ Af[i, piv]
        for l in range(nr):
            cost[Y(i, l)] = -g[l]
    for k in range(r):
        for l in range(nr):
            cost[S(k, l)] = rad[k, l]
    rows, rhs = [], []

    def add(entries: dict[int, float]) -> None:
        row = np.zeros(nv)
        for j, v in entries.items():
            row[j] += v
        rows.append(row)
        rhs.append(0.0)

    for i in range(m):
        for l in range(nr):
            add({Y(i, l): 1, AY(i, l): -1})
            add({Y(i, l): -1, AY(i, l): -1})
            add({AY(i, l): 1, i: -1})
        for k in range(r):
            for sgn in (1, -1):
                e = {Y(i, l): sgn * mid[k, l] for l in range(nr)}
                for l in range(nr):
                    e[AY(i, l)] = rad[k, l]
                e[i] = -1
                add(e)
    for k in range(r):
        for l in range(nr):
            for sgn in (1, -1):
                e = {Y(i, l): sgn * Af[i, piv[k]] for i in range(m)}
                e[S(k, l)] = -1
                add(e)
    eq = np.zeros(nv)
    eq[:m] = 1
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=eq[None], b_eq=[1.0],
                  bounds=[(0, None)] * nl + [(None, None)] * ny + [(0, None)] * (ny + r * nr),
                  method="highs")
    if res.status != 0 or -res.fun <= float(eps):
        return None
    lamf = res.x[:m]
    lam = [max(Fraction(0), _q(float(x))) for x in lamf]
    total = sum(lam, Fraction(0))
    if total <= 0:
        return None
    lam_t = tuple(x / total for x in lam)
    zs = tuple(tuple(_q(float(res.x[Y(i, l)] / lamf[i])) if lamf[i] > 1e-12 else Fraction(0)
                     for l in range(nr)) for i in range(m))
    bound = combined_bound(A, pivots, box, zs, lam_t)
    if bound <= eps:
        return None
    return Prune(pivots, box, -1, (), None, bound, zs=zs, lam=lam_t)


def _witness_at(A: Matrix, Af: np.ndarray, eps: Fraction, pivots: tuple[int, ...],
                centre: list[Fraction], stochastic: bool) -> Matrix | None:
    m, n = len(A), len(A[0])
    r = len(pivots)
    oth = [j for j in range(n) if j not in pivots]
    Gq = [[Fraction(int(j == pivots[k])) for j in range(n)] for k in range(r)]
    for k in range(r):
        for l, j in enumerate(oth):
            Gq[k][j] = centre[k * (n - r) + l]
    G = np.array([[float(v) for v in row] for row in Gq])
    B = []
    for i in range(m):
        x = _primal_row(Af[i], G, stochastic)
        if x is None:
            return None
        b = _snap_row(A[i], Gq, x, stochastic)
        if b is None:
            return None
        B.append(b)
    if row1_error(A, B) > eps or rank(B) > r or (stochastic and not is_row_stochastic(B)):
        return None
    return B


def verify_search(A: Matrix, eps: Fraction, r: int, stochastic: bool,
                  leaves: Sequence[Prune]) -> bool:
    """Re-checks an "infeasible" search exactly: every leaf's bound is recomputed from (A, eps)
    and exceeds eps, and for every chart the leaves' boxes tile [-1, 1]^(r (n - r)) (checked
    by recursive halving: a box is covered when it is a leaf or both halves of its split along
    its widest side, lowest index first, are covered)."""
    n = len(A[0])
    nfree = r * (n - r)
    by_chart: dict[tuple[int, ...], set[Box]] = {}
    for leaf in leaves:
        if len(leaf.pivots) != r or len(leaf.box) != nfree:
            return False
        if leaf.exact_bound(A, stochastic) <= eps:
            return False
        by_chart.setdefault(tuple(leaf.pivots), set()).add(tuple(leaf.box))
    root: Box = tuple((Fraction(-1), Fraction(1)) for _ in range(nfree))
    for pivots in combinations(range(n), r):
        if not _covered(root, by_chart.get(pivots, set()), 0):
            return False
    return True


def _covered(box: Box, leaves: set[Box], depth: int) -> bool:
    if box in leaves:
        return True
    if depth > 200:
        return False
    widths = [b - a for a, b in box]
    axis = max(range(len(box)), key=lambda i: widths[i])
    a, b = box[axis]
    mid = (a + b) / 2
    return all(_covered(box[:axis] + (half,) + box[axis + 1:], leaves, depth + 1)
               for half in ((a, mid), (mid, b)))
