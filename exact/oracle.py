"""The exact oracle: an exact bracket lower <= r_eps(A) <= upper for a small rational cell.

Upper ends are exact witnesses (rational B, exact rank, exact error, exactly row-stochastic in
the stochastic mode).  Lower ends are exact certificates:

* ``nonzero``: ||A||_row1 > eps (B = 0 excluded);
* ``not-stochastic-zero``: in the stochastic mode B = 0 is never admissible (rank >= 1);
* ``rank-one-refutation``: the complete rank-one search of :mod:`exact.rankone` (rank >= 2);
* ``decoder`` / ``submatrix``: ||(D A W)^{-1}||_inf ||D||_inf ||W||_inf eps < 1 (rank >= p);
* ``thin-refutation``: the complete rank <= 1 decision of :mod:`exact.thin` for cells with two
  rows or two columns (any length) and for every cell in the stochastic mode (rank >= 2);
* ``minor-sign``: a p x p minor whose sign is the same for every admissible B
  (:mod:`exact.minors`; rank >= p);
* ``nerve-chain``: served label sets and GF(2) chains on them (:mod:`exact.nerve`): a
  Z2-index argument (rank >= p);
* ``subspace-search``: the verified branch and bound of :mod:`exact.subspace` found no
  r-dimensional subspace within eps of every row (rank >= r + 1);
* ``empty``: stochastic mode, some row is farther than eps (in l1) from every probability
  vector, so no admissible B exists at all and r_eps = +inf.

In the stochastic mode B ranges over a subset of the unrestricted set, so unrestricted lower
certificates stay valid, while witnesses must be row-stochastic.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from softrank.certify.errors import InputError
from softrank.certify.rationals import qstr

from .bracket import (
    Certificate,
    Witness,
    base_witness,
    best_decoder,
    improve_upper,
    make_witness,
    nonzero_certificate,
)
from .budget import OutOfTime, deadline, remaining, tick
from .inputs import Matrix, rational_matrix, unit_eps
from .linalg import simplex_distance
from .minors import minor_certificate, singular_witness
from .nerve import MAX_CANDIDATES, candidates, nerve_certificate
from .nerve import to_json as nerve_json
from .rankone import RankOneRefutation, rank_one_search, searchable
from .subspace import subspace_search
from .thin import thin_applicable, thin_rank_one

#: Largest side accepted by :func:`oracle` (brackets only beyond the rank-one search limit).
MAX_SIDE = 32
MAX_CELL_BITS = 1 << 18


def cell_bits(M: Matrix) -> int:
    """Returns the total bit length of the numerators and denominators of ``M``'s entries."""
    return sum(x.numerator.bit_length() + x.denominator.bit_length() for r in M for x in r)
#: The subspace search runs for r with r (n - r) <= SEARCH_DIM (the Grassmannian's dimension).
SEARCH_DIM = 4
#: Minor-sign certificates are tried on cells with both sides at most this size.
MINOR_SIDE = 6
#: Default time budget (seconds) of the subspace search per oracle call.
DEFAULT_BUDGET = 60.0
INF = math.inf


@dataclass
class ExactResult:
    """An exact bracket ``lower <= r_eps(A) <= upper`` (``math.inf`` when no admissible B
    exists).  ``lower_certificate`` proves the lower end, ``witness`` the upper end."""

    A: Matrix
    eps: Fraction
    stochastic: bool
    lower: int | float
    upper: int | float
    lower_certificate: Certificate
    witness: Witness | None
    rank_one: Any = None  # the RankOneWitness / RankOneRefutation when the search ran
    notes: list[str] = field(default_factory=list)

    @property
    def rank(self) -> int | float | None:
        """r_eps(A) when the bracket is closed (``math.inf`` if infeasible), else None."""
        return self.lower if self.lower == self.upper else None

    @property
    def decided(self) -> bool:
        return self.lower == self.upper

    @property
    def mode(self) -> str:
        return "stochastic" if self.stochastic else "unrestricted"

    def to_json(self) -> dict[str, Any]:
        def num(x: int | float | None) -> int | str | None:
            return None if x is None else ("inf" if x == INF else int(x))

        return {
            "shape": [len(self.A), len(self.A[0])],
            "eps": qstr(self.eps),
            "mode": self.mode,
            "lower": num(self.lower),
            "upper": num(self.upper),
            "rank": num(self.rank),
            "decided": self.decided,
            "lower_certificate": self.lower_certificate.to_json(),
            "witness": self.witness.to_json() if self.witness else None,
            "rank_one_search": (self.rank_one.to_json()
                                if isinstance(self.rank_one, RankOneRefutation) else None),
            "notes": list(self.notes),
        }


MODES = ("unrestricted", "stochastic")


def _mode_flag(mode: object, stochastic: object) -> bool:
    """Returns True for the stochastic mode; ``mode`` is the one spelling (as in the CLI's
    cell files), ``stochastic`` (or a bool in ``mode``'s place) the deprecated one."""
    if isinstance(mode, bool):  # oracle(A, eps, True): the older positional flag
        warnings.warn("oracle(A, eps, <bool>) is deprecated; pass mode='stochastic' or "
                      "mode='unrestricted'", DeprecationWarning, stacklevel=3)
        mode = MODES[int(mode)]
    if not isinstance(mode, str) or mode not in MODES:
        raise InputError(f"must be 'unrestricted' or 'stochastic', got {mode!r}", field="mode")
    if stochastic is None:
        return mode == "stochastic"
    warnings.warn("oracle(..., stochastic=...) is deprecated; pass mode='stochastic' or "
                  "mode='unrestricted'", DeprecationWarning, stacklevel=3)
    if not isinstance(stochastic, bool):
        raise InputError(f"must be True or False, got {stochastic!r}", field="stochastic")
    if stochastic != (mode == "stochastic") and mode != "unrestricted":
        raise InputError(f"stochastic={stochastic} contradicts mode={mode!r}", field="mode")
    return stochastic


def oracle(A: object, eps: object, mode: str = "unrestricted", *,
           complete: bool = False, budget: float = DEFAULT_BUDGET,
           stochastic: bool | None = None, total_budget: float | None = None) -> ExactResult:
    """Returns an exact bracket for r_eps(A).

    ``mode`` is ``"unrestricted"`` (B any real matrix: the r_eps of the checker) or
    ``"stochastic"`` (B row-stochastic: nonnegative entries, unit row sums; its rank can be
    larger).  ``stochastic=True/False`` is a deprecated spelling of the same choice; an
    unknown mode raises InputError (field ``mode``).

    Contract: lower <= r_eps(A) <= upper, where the lower end is proved by an exact
    certificate and the upper end by an exact witness; both are re-checkable with
    :mod:`exact.verify`.  Decided completely: the rank <= 1 question for every cell with
    n**m * 2**(n-1) <= 2048 (all cells up to 4 x 4), for every cell with two rows or two
    columns, and for every cell in the stochastic mode; the full-rank question of square cells
    up to 6 x 6 (determinant range over vertex products); within ``budget`` seconds, every
    rank that a nerve-chain certificate can prove, for ranks p with C(m, p) 2^(p - 1) <=
    20,000 label sets (every served set decided exactly); and, within ``budget`` seconds, the
    question r_eps <= r whenever r (n - r) <= 4 (subspace search), which closes every 3 x 3
    cell and, unless the time budget runs out or eps is an exact tie, every 4 x 4 cell.
    What stays open is reported in ``notes``.  With ``complete=True`` a cell outside the
    rank-one limits raises :class:`InputError` instead of returning a bracket.  Entries may be
    ints, Fractions, sympy Rationals or strings; 0 < eps < 1.

    ``budget`` (seconds) bounds the nerve-chain search and, separately, the subspace search.
    ``total_budget`` (seconds; the CLI's ``--budget``; default ``2 * budget + 60``: the two
    searches and a minute for the rest, so that no call is unbounded) bounds every step after
    the mandatory ends (the nonzero certificate and the base witness B = A or its simplex
    projection): the rank-one search, decoders, heuristic witnesses, nerve chains, minor signs
    and the subspace search stop when it runs out, also inside their loops
    (:mod:`exact.budget`; an enclosing ``budget.deadline``, such as the CLI's started before
    the cell was read, ends it earlier).  A step cut short proves nothing and changes
    nothing; the result then notes that the time budget was used up.
    """
    stochastic = _mode_flag(mode, stochastic)
    for name, v in (("budget", budget), ("total_budget", total_budget)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not v >= 0):  # NaN too
            raise InputError(f"must be a number of seconds >= 0, got {v!r}", field=name)
    if total_budget is None:
        total_budget = 2 * budget + DEFAULT_BUDGET
    with deadline(total_budget):
        return _oracle(A, eps, stochastic, complete, min(budget, total_budget))


def _oracle(A: object, eps: object, stochastic: bool, complete: bool, budget: float
            ) -> ExactResult:
    M = rational_matrix(A)
    e = unit_eps(eps)
    m, n = len(M), len(M[0])
    if m > MAX_SIDE or n > MAX_SIDE:
        raise InputError(f"{m} x {n} cell exceeds the exact oracle's limit of "
                         f"{MAX_SIDE} x {MAX_SIDE}", field="matrix")
    size = cell_bits(M) + e.numerator.bit_length() + e.denominator.bit_length()
    if size > MAX_CELL_BITS:
        # one exact step (a 16 x 16 rational inverse of 1,600-bit entries: 85 s) runs
        # between two budget checks, so the budget bounds the work only for cells this small
        raise InputError(f"{size} bits of numerators and denominators in all (at most "
                         f"{MAX_CELL_BITS}: a 32 x 32 cell of 40-digit entries fits)",
                         field="matrix")
    if complete and not (searchable(m, n, stochastic) or thin_applicable(m, n, stochastic)):
        rank_one_search(M, e, stochastic)  # raises the size InputError
    res = _stochastic(M, e) if stochastic else _unrestricted(M, e)
    try:
        return _close_exactly(res, budget)
    except OutOfTime:
        res.notes.append(f"time budget of {budget:g} s used up")
        return res


def _unrestricted(A: Matrix, eps: Fraction) -> ExactResult:
    m, n = len(A), len(A[0])
    nz = nonzero_certificate(A, eps)
    if nz is None:
        zero = [[Fraction(0)] * n for _ in range(m)]
        w = make_witness(A, eps, zero, "zero", False)
        return ExactResult(A, eps, False, 0, 0, Certificate("trivial", 0), w)
    lower, cert = 1, nz
    upper_w = base_witness(A, eps, False)
    assert upper_w is not None
    res = ExactResult(A, eps, False, lower, upper_w.rank, cert, upper_w)
    return _optional_steps(res, A, eps, False)


def _stochastic(A: Matrix, eps: Fraction) -> ExactResult:
    m = len(A)
    dists = [simplex_distance(row)[0] for row in A]
    worst = max(range(m), key=lambda i: dists[i])
    if dists[worst] > eps:
        cert = Certificate("empty", INF, {"row": worst, "distance": dists[worst]},
                           {"row": worst, "distance_to_simplex": qstr(dists[worst])})
        return ExactResult(A, eps, True, INF, INF, cert, None,
                           notes=["no row-stochastic B lies within eps of A"])
    cert = Certificate("not-stochastic-zero", 1)
    nz = nonzero_certificate(A, eps)
    upper_w = base_witness(A, eps, True)
    assert upper_w is not None  # every row is within eps of the simplex
    res = ExactResult(A, eps, True, 1, upper_w.rank, cert, upper_w)
    if nz is None:
        res.notes.append("B = 0 is within eps but is not row-stochastic")
    return _optional_steps(res, A, eps, True)


def _optional_steps(res: ExactResult, A: Matrix, eps: Fraction, stochastic: bool
                    ) -> ExactResult:
    """The rank-one step and the closing steps, each within the budget: a step cut short
    (OutOfTime) leaves ``res`` as it was before that step."""
    try:
        tick()
        _rank_one_step(res, A, eps, stochastic)
        tick()
        return _close(res)
    except OutOfTime:
        return res


def _rank_one_step(res: ExactResult, A: Matrix, eps: Fraction, stochastic: bool) -> None:
    """Runs the complete rank-one search where the cell is small enough and records its
    outcome: a refutation raises the lower end to 2, a witness lowers the upper end."""
    m, n = len(A), len(A[0])
    if thin_applicable(m, n, stochastic) and not searchable(m, n, stochastic):
        outcome, data = thin_rank_one(A, eps, stochastic)
        if outcome == "refutation":
            res.lower = 2
            res.lower_certificate = Certificate("thin-refutation", 2, data,
                                                {"method": data["kind"]})
        else:
            w = make_witness(A, eps, data, "thin-rank-one", stochastic)
            assert w is not None and w.rank <= 1, "thin rank-one witness failed its re-check"
            res.upper, res.witness = w.rank, w
        return
    if not searchable(m, n, stochastic):
        res.notes.append(f"{m} x {n} is beyond the complete rank-one search")
        return
    r1 = rank_one_search(A, eps, stochastic)
    res.rank_one = r1
    if isinstance(r1, RankOneRefutation):
        res.lower, res.lower_certificate = 2, _refutation_cert(r1)
    else:
        res.upper = r1.rank
        res.witness = Witness("rank-one", r1.B, r1.rank, r1.error, stochastic)


def _refutation_cert(r1: RankOneRefutation) -> Certificate:
    return Certificate("rank-one-refutation", 2, {"refutation": r1},
                       {"farkas_nodes": len(r1.nodes), "lps_solved": r1.lps_solved})


def _close(res: ExactResult) -> ExactResult:
    """Tightens the bracket with decoder certificates and cheaper witnesses."""
    if res.lower >= res.upper:
        return res
    dec = best_decoder(res.A, res.eps, int(res.lower), int(res.upper))
    if dec is not None and dec.bound > res.lower:
        res.lower, res.lower_certificate = dec.bound, dec
    tick()
    if res.lower < res.upper and res.witness is not None:
        w = improve_upper(res.A, res.eps, res.stochastic, int(res.lower), res.witness)
        res.witness, res.upper = w, w.rank
    return res


def _nerve_step(res: ExactResult) -> None:
    """Raises the lower end by nerve-chain certificates, rank 1, 2, ... (each rank's served
    sets prune the next rank's candidates) up to the upper end, stopping at the first rank
    without one: the search at a rank is complete, and a nerve whose (p - 1)-th power of w
    vanishes has a vanishing p-th power, so no larger rank has one either."""
    served = None
    for p in range(1, int(res.upper) + 1):
        if candidates(len(res.A), p) > MAX_CANDIDATES:
            res.notes.append(f"nerve-chain search stops before rank {p}: "
                             f"{candidates(len(res.A), p)} label sets > {MAX_CANDIDATES}")
            return
        data, served = nerve_certificate(res.A, res.eps, p, served)
        if p <= res.lower:
            continue
        if data is None:
            return
        res.lower = p
        res.lower_certificate = Certificate("nerve-chain", p, {"nerve": data},
                                            nerve_json(data))


def _close_exactly(res: ExactResult, budget: float) -> ExactResult:
    """Closes what the cheaper steps left open: nerve-chain and minor-sign certificates (lower
    end), a singular admissible B for square cells (upper end n - 1), then the subspace search
    on r = lower."""
    A, eps, st = res.A, res.eps, res.stochastic
    m, n = len(A), len(A[0])
    if res.upper == INF or res.lower >= res.upper:
        return res
    # first: complete and cheap on small cells, and every rank it proves shortens the
    # minor-sign loop below (vertex products, minutes on a 6 x 6 cell)
    try:
        with deadline(min(budget, remaining())):
            _nerve_step(res)
    except OutOfTime:  # the ranks proved before it ran out stand
        res.notes.append(f"nerve-chain search stopped after {budget:g} s")
    tick()
    if res.lower < res.upper and max(m, n) <= MINOR_SIDE:
        for p in range(int(res.upper), int(res.lower), -1):
            mr = minor_certificate(A, eps, st, p)
            if mr is not None:
                res.lower = p
                res.lower_certificate = Certificate("minor-sign", p, {"minor": mr},
                                                    {"minor": mr.to_json()})
                break
    tick()
    if res.lower < res.upper and m == n <= MINOR_SIDE and res.upper == n:
        B = singular_witness(A, eps, st)
        if B is not None:
            w = make_witness(A, eps, B, "singular", st)
            assert w is not None and w.rank < n, "singular witness failed its re-check"
            res.upper, res.witness = w.rank, w
    left = min(budget, remaining())  # remaining(): what the steps above left of a deadline
    while res.lower < res.upper and left > 0:
        r = int(res.lower)
        if not 1 <= r < n or r * (n - r) > SEARCH_DIM:
            res.notes.append(f"r_eps <= {r}? is beyond the subspace search "
                             f"(r (n - r) = {r * (n - r)} > {SEARCH_DIM})")
            break
        found = subspace_search(A, eps, r, st, budget=left)
        left -= found.seconds
        if found.status == "feasible":
            w = make_witness(A, eps, found.B, "subspace", st)
            assert w is not None and w.rank <= r, "subspace witness failed its re-check"
            res.upper, res.witness = w.rank, w
        elif found.status == "infeasible":
            res.lower = r + 1
            res.lower_certificate = Certificate(
                "subspace-search", r + 1, {"r": r, "leaves": found.leaves},
                {"r": r, "boxes": found.boxes, "leaves": [x.to_json() for x in found.leaves]})
        else:
            res.notes.append(f"subspace search for r_eps <= {r} stopped: {found.reason}")
            break
    if res.lower < res.upper and left <= 0:
        res.notes.append(f"time budget of {budget:g} s used up")
    return res
