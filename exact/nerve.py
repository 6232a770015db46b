"""Nerve-chain certificates (rank >= p): a Z2-index lower bound found and checked exactly.

A *label* is a signed row (i, s), s = +-1.  A set of labels with distinct rows is *served*
when one z in the cube [-1, 1]^n has s (A z)_i > eps for each of its labels; the served sets
form a simplicial complex (the nerve of the cones {w : s (A w)_i > eps ||w||_inf}), with the
free involution nu that flips every sign.  A certificate lists served (p - 1)-simplices with
their witnesses z and GF(2) chains c_0, ..., c_(p-1) of their faces with

    boundary(c_k) = c_(k-1) + nu(c_(k-1))   (k = 1 .. p - 1),      |c_0| odd.

Then every B within eps of A has rank >= p (``proofs_notes/exact.md``, "Nerve-chain
certificates").  The search (:func:`nerve_certificate`) decides served sets exactly (a float
LP's point or dual weights checked exactly, else the exact LP of :mod:`exact.lp`) and finds
the chains by GF(2) elimination over the quotient complex;
:func:`verify_nerve` re-checks a certificate from (A, eps) alone.  Everything is exact.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from fractions import Fraction
from itertools import combinations, product
from math import comb
from typing import Any

import numpy as np
from scipy.optimize import linprog

from softrank.certify.rationals import qstr

from .budget import tick
from .inputs import float_view
from .linalg import Matrix
from .lp import decide

Label = tuple[int, int]
Simplex = tuple[Label, ...]  # labels with distinct rows, sorted by row

#: Largest number of candidate label sets (quotient representatives) examined at one rank.
MAX_CANDIDATES = 20_000


def candidates(m: int, p: int) -> int:
    """Returns the number of p-label sets with distinct rows up to the involution:
    C(m, p) 2^(p - 1) (0 for p outside 1 .. m)."""
    return comb(m, p) * 2 ** (p - 1) if 1 <= p <= m else 0


def mirror(s: Simplex) -> Simplex:
    """Returns nu(s): every sign flipped (the rows, hence the order, unchanged)."""
    return tuple((i, -g) for i, g in s)


def canonical(s: Iterable[Label]) -> Simplex:
    """Returns the labels sorted by row (the form every simplex is compared in)."""
    return tuple(sorted(s))


def _representative(s: Simplex) -> bool:
    # one simplex of each orbit {s, nu(s)}: the one whose first label has sign +1
    return s[0][1] == 1


def boundary(chain: Iterable[Simplex]) -> set[Simplex]:
    """Returns the GF(2) boundary of a chain (a simplex listed twice cancels)."""
    faces: Counter[Simplex] = Counter()
    for s in chain:
        if len(s) > 1:
            for x in range(len(s)):
                faces[s[:x] + s[x + 1:]] += 1
    return {f for f, c in faces.items() if c % 2}


def _gf2(chain: Iterable[Simplex]) -> set[Simplex]:
    counts = Counter(chain)
    return {s for s, c in counts.items() if c % 2}


def served_witness(A: Matrix, eps: Fraction, s: Simplex, Af: np.ndarray | None = None
                   ) -> tuple[Fraction, ...] | None:
    """Returns z in [-1, 1]^n with sign (A z)_row > eps for every label of ``s``, or None when
    no such z exists (both answers exact).

    With ``Af`` (A in float64) a float LP proposes first: its z (clipped to the cube, read
    exactly) is returned when it serves the labels exactly, and its dual weights lam >= 0
    prove "none" when ||sum lam_i sign_i a_i||_1 <= eps sum lam_i exactly (for z in the cube,
    min_i sign_i a_i . z <= the lam-average of them <= that norm / sum lam).  Otherwise, and
    without ``Af``, the exact LP decides: strict inequalities by homogenising, (z, tau) with
    |z_j| <= tau and sign (A z)_row - eps tau >= 1 is feasible iff some z' = z / tau in the
    cube has every value above eps (by 1 / tau); tau > 0 is forced, since tau = 0 gives
    z = 0 and 0 >= 1.
    """
    if Af is not None:
        got = _float_proposal(Af, s)
        if got is not None:
            z, lam = got
            if _serves(A, eps, s, z):
                return z
            if lam is not None and _dual_bound(A, s, lam) <= eps:
                return None
    n = len(A[0])
    one, zero = Fraction(1), Fraction(0)
    G: list[list[Fraction]] = []
    h: list[Fraction] = []
    for j in range(n):
        for sg in (one, -one):
            row = [zero] * (n + 1)
            row[j], row[n] = sg, -one
            G.append(row)
            h.append(zero)
    for i, g in s:
        G.append([-g * a for a in A[i]] + [eps])
        h.append(-one)
    ans = decide(G, h, n + 1)
    if ans.status != "feasible":
        return None
    tau = ans.vector[n]
    z = tuple(x / tau for x in ans.vector[:n])
    if not _serves(A, eps, s, z):
        raise RuntimeError("exact LP returned a point that does not serve its labels")
    return z


def _float_proposal(Af: np.ndarray, s: Simplex
                    ) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...] | None] | None:
    """A float LP's z (clipped to the cube, as exact rationals) and its dual weights (>= 0,
    exact rationals; None when they are all 0), or None when the solver gives no optimum.
    Untrusted: the caller checks both exactly."""
    n = Af.shape[1]
    rows = np.array([-g * Af[i] for i, g in s])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = linprog(np.r_[np.zeros(n), -1.0], A_ub=np.c_[rows, np.ones(len(s))],
                      b_ub=np.zeros(len(s)), bounds=[(-1.0, 1.0)] * n + [(None, None)],
                      method="highs")
    if res.status != 0 or res.x is None:
        return None
    z = tuple(Fraction(float(min(1.0, max(-1.0, x)))) for x in res.x[:n])
    duals = getattr(getattr(res, "ineqlin", None), "marginals", None)
    lam = None if duals is None else tuple(Fraction(max(0.0, -float(d))) for d in duals)
    if lam is not None and not any(lam):
        lam = None
    return z, lam


def _dual_bound(A: Matrix, s: Simplex, lam: Sequence[Fraction]) -> Fraction:
    """Returns ||sum lam_i sign_i a_i||_1 / sum lam_i (exact): an upper bound on
    min_i sign_i a_i . z over the cube, for any lam >= 0 not all 0."""
    n = len(A[0])
    comb = [sum((w * g * A[i][j] for w, (i, g) in zip(lam, s, strict=True)), Fraction(0))
            for j in range(n)]
    return sum((abs(x) for x in comb), Fraction(0)) / sum(lam, Fraction(0))


def _serves(A: Matrix, eps: Fraction, s: Simplex, z: Sequence[Fraction]) -> bool:
    if any(abs(x) > 1 for x in z):
        return False
    return all(g * sum((a * x for a, x in zip(A[i], z, strict=True)), Fraction(0)) > eps
               for i, g in s)


def _chain_down(top: set[Simplex]) -> list[set[Simplex]]:
    """Returns [c_0, ..., c_k] with c_k = top and c_(j-1) the representatives of
    boundary(c_j) (the chains of a certificate when top is a cycle of the quotient)."""
    chains = [top]
    while len(next(iter(chains[-1]), ())) > 1:
        chains.append({f for f in boundary(chains[-1]) if _representative(f)})
    return chains[::-1]


def nerve_certificate(A: Matrix, eps: Fraction, p: int,
                      served_below: dict[Simplex, tuple[Fraction, ...]] | None = None
                      ) -> tuple[dict[str, Any] | None, dict[Simplex, tuple[Fraction, ...]]]:
    """Searches the whole nerve of A at rank p.

    Returns (certificate data or None, the served p-label representatives with witnesses).
    ``served_below`` (the second value of the call at p - 1) prunes candidates: a served set's
    faces are served.  None means no chains exist over the served sets found, so no
    certificate of this kind proves rank >= p for this cell (with the complete list of
    served sets: every candidate whose faces are served is decided by the exact LP).
    Raises ValueError past :data:`MAX_CANDIDATES`.
    """
    m = len(A)
    if candidates(m, p) > MAX_CANDIDATES:
        raise ValueError(f"{candidates(m, p)} label sets at rank {p} exceed {MAX_CANDIDATES}")
    served: dict[Simplex, tuple[Fraction, ...]] = {}
    # proposals only; entries too large for them leave every set to the exact LP
    Af = float_view(A)
    for rows in combinations(range(m), p):
        for tail in product((1, -1), repeat=p - 1):
            tick()
            s = tuple(zip(rows, (1, *tail), strict=True))
            if served_below is not None and p > 1 and any(
                    _rep(s[:x] + s[x + 1:]) not in served_below for x in range(p)):
                continue
            z = served_witness(A, eps, s, Af)
            if z is not None:
                served[s] = z
    cycle = _odd_cycle(list(served), p)
    if cycle is None:
        return None, served
    chains = _chain_down(set(cycle))
    if len(chains[0]) % 2 == 0:  # the elimination guaranteed odd parity
        raise RuntimeError("nerve chain lost its parity")
    data = {"tops": sorted(cycle), "witnesses": [served[s] for s in sorted(cycle)],
            "chains": [sorted(c) for c in chains]}
    return data, served


def _rep(s: Simplex) -> Simplex:
    return s if _representative(s) else mirror(s)


def _parity(s: Simplex) -> int:
    # |c_0| mod 2 of the chains a single representative would start: a linear functional
    # on quotient chains, equal on cycles to the pairing with w^(p-1)
    return len(_chain_down({s})[0]) % 2


def _odd_cycle(served: list[Simplex], p: int) -> list[Simplex] | None:
    """Returns served representatives whose quotient boundary is 0 (mod 2) and whose
    chain-down parity is odd, or None when none exists (GF(2) elimination, exact)."""
    if p == 1:
        return [served[0]] if served else None
    rows: dict[Simplex, int] = {}
    vecs: list[int] = []
    for s in served:
        v = 0
        for x in range(p):
            f = _rep(s[:x] + s[x + 1:])
            v ^= 1 << (1 + rows.setdefault(f, len(rows)))
        vecs.append(v | _parity(s))
    basis: dict[int, tuple[int, int]] = {}  # pivot bit -> (vector, combination of columns)
    for k, v in enumerate(vecs):
        tick()
        c = 1 << k
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                basis[top] = (v, c)
                break
            bv, bc = basis[top]
            v, c = v ^ bv, c ^ bc
    target, comb_ = 1, 0  # boundary 0, parity 1
    while target:
        top = target.bit_length() - 1
        if top not in basis:
            return None
        bv, bc = basis[top]
        target, comb_ = target ^ bv, comb_ ^ bc
    return [served[k] for k in range(len(served)) if comb_ >> k & 1]


def verify_nerve(A: Matrix, eps: Fraction, p: int, data: dict[str, Any]) -> bool:
    """Returns True iff ``data`` is a valid nerve-chain certificate of rank >= p for (A, eps):
    every top simplex served by its witness (exactly), every chain simplex a face of a top
    simplex or of its mirror, boundary(c_k) = c_(k-1) + nu(c_(k-1)) over GF(2) and |c_0| odd.
    False at once beyond the search's own size (a rank with more than MAX_CANDIDATES label
    sets, or more tops than there are simplices of that size): the re-check lists 2^p faces
    per top, so its work is bounded before it starts."""
    if p < 1 or candidates(len(A), p) > MAX_CANDIDATES:
        return False
    try:
        tops = [canonical(s) for s in data["tops"]]
        wits = data["witnesses"]
        chains = [[canonical(s) for s in c] for c in data["chains"]]
    except (KeyError, TypeError):
        return False
    m, n = len(A), len(A[0])
    if len(chains) != p or len(tops) != len(wits) or not 0 < len(tops) <= 2 * candidates(m, p):
        return False
    faces: set[Simplex] = set()
    for s, z in zip(tops, wits, strict=True):
        if not _well_formed(s, p, m) or len(z) != n:
            return False
        if not all(isinstance(x, Fraction | int) for x in z):
            return False
        if not _serves(A, eps, s, [Fraction(x) for x in z]):
            return False
        for r in range(1, p + 1):
            for f in combinations(s, r):
                faces.add(f)
                faces.add(mirror(f))
    for k, c in enumerate(chains):
        if len(set(c)) != len(c):
            return False
        if any(not _well_formed(s, k + 1, m) or s not in faces for s in c):
            return False
    for k in range(1, p):
        if boundary(chains[k]) != _gf2(chains[k - 1] + [mirror(s) for s in chains[k - 1]]):
            return False
    return len(chains[0]) % 2 == 1


def _well_formed(s: Simplex, size: int, m: int) -> bool:
    if len(s) != size:
        return False
    rows = [lab[0] for lab in s]
    return (len(set(rows)) == size and all(type(i) is int and 0 <= i < m for i in rows)
            and all(lab[1] in (1, -1) and type(lab[1]) is int for lab in s))


def to_json(data: dict[str, Any]) -> dict[str, Any]:
    """Returns the certificate's data with exact numbers as strings."""
    return {"tops": [[list(lab) for lab in s] for s in data["tops"]],
            "witnesses": [[qstr(x) for x in z] for z in data["witnesses"]],
            "chains": [[[list(lab) for lab in s] for s in c] for c in data["chains"]]}
