"""Slack chi between a stored A-hat and its operator of record (see proofs_notes/slack.md).

An operator record is ``{"A": A_hat}`` (the stored matrix is the operator of record),
``{"A": A_hat, "logits": L, "beta": b}`` (the exact row softmax of b * L; entries -inf mean
probability exactly 0) or ``{"A": A_hat, "block": P}`` (the exact row renormalisation
P_ij / sum_j P_ij of a nonnegative block).  :func:`operator_slack` returns a rigorous upper
bound chi on ||A_record - A_hat||_row1; the checks charge it by shifting eps
(upper claims at eps - chi, lower claims at eps + chi).

Two tiers.  :func:`operator_slack` computes every exp, sum and quotient as a python-flint arb
ball; the precision starts at 128 bits and doubles until the ball of chi is narrow (relative
2**-30, or absolutely below 2**-100).  :func:`charged_slack` first tries the float64 tier
(vectorised numpy with a-priori rounding bounds, :mod:`certify.numerics.expbound`) and keeps its
enclosure when that proves chi <= 2 chi_true or chi <= 2^-36 (negligible: float64-stored A);
otherwise it returns the arb enclosure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from flint import arb

from .arrays import as_matrix
from .errors import InputError
from .numerics import arbutil, workbound
from .numerics.blocks import row_blocks
from .numerics.expbound import ALPHA0, ALPHA1, TINY, FloatTierError, U, exp_nonpos, gamma
from .numerics.fpenv import quiet_floats
from .rationals import float_down, float_up, to_rational

Kind = Literal["logits", "block", "A"]

PRECISIONS = (128, 256, 512, 1024)
RECORD_KEYS = frozenset({"A", "logits", "block", "beta"})
_REL_TIGHT = Fraction(1, 2**30)  # accept a ball of chi once its width is this small relative
_ABS_TIGHT = Fraction(1, 2**100)  # ... or absolutely this small (far below any eps)
_TINY_EXP = -1200  # balls below 2**-1200 are clamped so no huge-exponent Fraction is formed


@dataclass(frozen=True)
class Slack:
    """A rigorous enclosure [chi_lo, chi] of chi_true = ||A_record - A_hat||_row1.

    ``chi`` is the upper bound the checks charge; ``chi_lo`` is a lower bound for reports and
    tests.  ``kind`` says what defines the operator of record; ``precision`` is the arb
    precision (bits) of the final computation (0 when nothing was computed).
    """

    chi: Fraction
    chi_lo: Fraction
    kind: Kind
    precision: int
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def width(self) -> Fraction:
        return self.chi - self.chi_lo

    def to_json(self) -> dict[str, Any]:
        return {"chi": str(self.chi), "chi_lo": str(self.chi_lo), "kind": self.kind,
                "precision": self.precision, "detail": dict(self.detail)}


@quiet_floats
def operator_slack(record: Mapping[str, Any], *, source: str | None = None) -> Slack:
    """Returns an enclosure [chi_lo, chi] of max_i sum_j |A_record_ij - A_hat_ij|.

    ``record`` holds ``"A"`` (A_hat, m x N) and at most one of ``"logits"`` (operator of
    record: the exact row softmax of beta * logits, beta an exact positive rational from
    ``"beta"``, default 1) or ``"block"`` (operator of record: the exact row renormalisation
    of the block).  With ``"A"`` alone the stored matrix is the operator of record and chi = 0.
    Arrays may be float16/32/64 or integer; every stored number is taken at its exact value.

    Raises InputError naming the field for: a missing A, unknown keys, non-2-D or mismatched
    shapes, NaN/Inf in A, NaN or +inf logits, a logits row that is all -inf, non-finite or
    negative block entries, a block row summing to 0, both logits and block, and a beta that is
    not a positive exact rational (or is given without logits).  Raises
    ``workbound.WorkLimit`` (before the work) when an arb precision's estimate would pass the
    current meter (``certify.numerics.workbound``).
    """
    A, kind, X, beta = _validate(record, source)
    if kind == "A":
        return Slack(chi=Fraction(0), chi_lo=Fraction(0), kind="A", precision=0,
                     detail={"rows": A.shape[0]})
    return _arb_slack(A, kind, X, beta)


MAX_RATIO = 2  # charged_slack keeps the float64 enclosure when chi <= MAX_RATIO chi_lo ...
NEGLIGIBLE = Fraction(1, 2**36)  # ... or when chi <= NEGLIGIBLE (about 1.5e-11)


@quiet_floats
def charged_slack(record: Mapping[str, Any], *, source: str | None = None) -> Slack:
    """Returns an enclosure [chi_lo, chi] of chi_true = ||A_record - A_hat||_row1 with
    chi <= max(2 chi_true, NEGLIGIBLE) (chi = 0 when A alone is the record; see below for
    the work limit).

    Same records, same contract and same errors as :func:`operator_slack`.  The float64
    tier (``detail["tier"] == "float64"``, ``precision`` 53) is kept when its own enclosure
    has chi <= 2 chi_lo or chi <= NEGLIGIBLE (2^-36): float64-stored A, whose chi_true is of
    the order of float64 rounding itself, is charged the float bound (about 1e-13 at
    N = 256), still an upper bound of chi_true; a caller that finds this chi changes an
    outcome recomputes with :func:`operator_slack` (``softrank.recheck`` does).  Otherwise
    (inputs the float tier refuses, or a wide enclosure above NEGLIGIBLE) the result is the
    arb enclosure of :func:`operator_slack`.  When that arb tier would pass the work
    limit (``certify.numerics.workbound``), the float64 enclosure is returned as it is (still
    rigorous, chi possibly above 2 chi_true; ``detail["reason"]`` says so) or, without one,
    ``workbound.WorkLimit`` is raised.
    """
    A, kind, X, beta = _validate(record, source)
    if kind == "A":
        return Slack(chi=Fraction(0), chi_lo=Fraction(0), kind="A", precision=0,
                     detail={"rows": A.shape[0]})
    workbound.charge(60 * A.size, "the float64 tier of the operator slack")
    try:
        lo, hi, arg = _float_bounds(A, kind, X, beta)
    except FloatTierError:
        lo = hi = None
    if lo is not None and hi is not None and ((lo > 0 and hi <= MAX_RATIO * lo)
                                              or hi <= NEGLIGIBLE):
        detail: dict[str, Any] = {"rows": A.shape[0], "tier": "float64", "argmax_row": arg}
        if kind == "logits":
            detail["beta"] = str(beta)
            detail["masked_entries"] = int(np.isneginf(X).sum())
        return Slack(chi=_round_up(hi), chi_lo=_round_down(lo), kind=kind, precision=53,
                     detail=detail)
    try:
        return _arb_slack(A, kind, X, beta)
    except workbound.WorkLimit as err:
        if lo is None or hi is None:
            raise
        # the float64 enclosure is rigorous, only wider than MAX_RATIO: charged as it is
        return Slack(chi=_round_up(hi), chi_lo=_round_down(lo), kind=kind, precision=53,
                     detail={"rows": A.shape[0], "tier": "float64", "argmax_row": arg,
                             "reason": str(err)})


_BIG = 2.0**1000  # entries beyond this could overflow; the float tier refuses them


def _float_bounds(A: np.ndarray, kind: Kind, X: np.ndarray, beta: Fraction
                  ) -> tuple[Fraction, Fraction, int]:
    """Returns (lo, hi, row) with lo <= chi_true <= hi, from float64 arithmetic whose every
    rounding is charged (proofs_notes/slack.md, "float64 tier"); ``row`` maximises the
    computed row sums.  Raises FloatTierError for inputs outside the tier's proof.
    """
    m, N = A.shape
    if N >= 2**20:
        raise FloatTierError("outside the float tier's range")
    bf = None
    if kind == "logits" and beta != 1:
        if not Fraction(1, 2**1000) < beta < 2**1000:
            raise FloatTierError("beta outside the float tier's range")
        bf = float(beta)  # correctly rounded: relative error <= 2^-53
        if abs(Fraction(bf) - beta) > U * beta:
            raise FloatTierError("beta rounding")
    t = np.empty(m)
    # every step below is per row, so blocks of rows change no value; they bound the
    # temporaries (six m x N arrays at once held six times the stored matrix)
    for b in row_blocks(m, N, floats=True):
        t[b] = _float_row_sums(A[b], kind, X[b], bf)
    if kind == "logits":
        extra = 2 * ((ALPHA0 + ALPHA1 * Fraction(368, 1000) * N)
                     / (1 - ALPHA0 - ALPHA1 * 700) + N * TINY)
    else:
        extra = Fraction(0)
    if not np.isfinite(t).all():
        raise FloatTierError("non-finite row sum")
    g = gamma(N - 1)
    err = extra + (U + g) / (1 - g) + N * Fraction(1, 2**1074)
    arg = int(np.argmax(t))
    tmax = Fraction(float(t[arg]))
    gN = gamma(N)
    hi = tmax / (1 - gN) + err
    lo = max(Fraction(0), tmax / (1 + gN) - err)
    return lo, hi, arg


def _float_row_sums(A: np.ndarray, kind: Kind, X: np.ndarray, bf: float | None) -> np.ndarray:
    """Returns fl(sum_j |fl(e_ij / S_i) - A_ij|) for rows of A (a block), the computation
    :func:`_float_bounds` charges; raises FloatTierError where its proof does not apply."""
    if np.abs(A).max() > _BIG:
        raise FloatTierError("outside the float tier's range")
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if kind == "logits":
            # an overflowing L - M or beta (L - M) rounds to -inf or -MAX in every rounding
            # mode, which exp_nonpos classes as small, correctly: the exact value is below -MAX
            x = X - X.max(axis=1, keepdims=True)  # exact max; rounding charged via T1
            if bf is not None:
                x *= bf
            e, _small = exp_nonpos(x)
            S = e.sum(axis=1, keepdims=True)
        else:
            if X.max() > _BIG:
                raise FloatTierError("block outside the float tier's range")
            e = X
            S = X.sum(axis=1, keepdims=True)
            if not (S > 0).all():
                raise FloatTierError("block row sum not positive")
        e = e / S
        e -= A
        np.abs(e, out=e)
        return e.sum(axis=1)


def _arb_slack(A: np.ndarray, kind: Kind, X: np.ndarray | None, beta: Fraction) -> Slack:
    """The arb tier of :func:`operator_slack` on validated input."""
    tried: list[int] = []
    lo = hi = None
    arg = 0
    for prec in PRECISIONS:
        # per entry: an arb exp, a division, a subtraction, an abs and two sums
        workbound.charge(10_000 * max(1, prec // 128) * A.size,
                         f"the arb tier of the operator slack at {prec} bits")
        tried.append(prec)
        with arbutil.precision(prec):
            sums = (_logits_row_sums(A, X, beta) if kind == "logits"
                    else _block_row_sums(A, X))
            bounds = [_safe_endpoints(s) for s in sums]
        if any(b is None for b in bounds):
            continue
        his = [b[1] for b in bounds]  # type: ignore[index]
        arg = max(range(len(his)), key=his.__getitem__)
        hi = his[arg]
        lo = max(b[0] for b in bounds)  # type: ignore[index]
        if hi - lo <= max(hi * _REL_TIGHT, _ABS_TIGHT):
            break
    detail: dict[str, Any] = {"rows": A.shape[0], "precisions_tried": tried}
    if kind == "logits":
        detail["beta"] = str(beta)
        detail["masked_entries"] = int(np.isneginf(X).sum())
    if hi is None or lo is None:
        # never seen in practice; still rigorous: A_record rows are probability vectors
        hi = 1 + max(sum((Fraction(abs(v)) for v in row), Fraction(0)) for row in A.tolist())
        lo = Fraction(0)
        detail["fallback"] = "non-finite balls; chi <= 1 + ||A_hat||_row1"
    else:
        detail["argmax_row"] = arg
    # round outward to floats: a relative loss of 2**-52, and short exact strings in reports
    return Slack(chi=_round_up(hi), chi_lo=_round_down(max(lo, Fraction(0))),
                 kind=kind, precision=tried[-1], detail=detail)


_FLOAT_RANGE = Fraction(2**1000)


def _round_up(q: Fraction) -> Fraction:
    """Returns the least binary64 >= q (q itself beyond binary64 range)."""
    return Fraction(float_up(q)) if q < _FLOAT_RANGE else q


def _round_down(q: Fraction) -> Fraction:
    """Returns the greatest binary64 <= q (q itself beyond binary64 range)."""
    return Fraction(float_down(q)) if q < _FLOAT_RANGE else q


def _validate(record: Mapping[str, Any], source: str | None
              ) -> tuple[np.ndarray, Kind, np.ndarray | None, Fraction]:
    if not isinstance(record, Mapping):
        raise InputError(f"operator record must be a mapping, got {type(record).__name__}",
                         field="record", source=source)
    unknown = sorted(str(k) for k in record if k not in RECORD_KEYS)
    if unknown:
        # a misspelt "logits" must not silently make A_hat the operator of record
        raise InputError(f"unknown keys {unknown}; expected A and optionally logits or block "
                         "(with beta for logits)", field=unknown[0], source=source)
    if "A" not in record or record["A"] is None:
        raise InputError("missing the stored matrix", field="A", source=source)
    A = as_matrix(record["A"], "A", source=source)
    m, N = A.shape
    if m == 0 or N == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    has_l = record.get("logits") is not None
    has_b = record.get("block") is not None
    if has_l and has_b:
        raise InputError("record has both logits and block; give at most one",
                         field="logits", source=source)
    beta_raw = record.get("beta")
    if beta_raw is not None and not has_l:
        raise InputError("beta needs logits", field="beta", source=source)
    beta = Fraction(1)
    if beta_raw is not None:
        beta = to_rational(beta_raw, field="beta")
        if beta <= 0:
            raise InputError(f"must be a positive rational, got {beta}", field="beta",
                             source=source)
    if has_l:
        L = as_matrix(record["logits"], "logits", source=source, shape=(m, N),
                      check_finite=False)
        bad = np.isnan(L) | np.isposinf(L)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InputError(f"entry {L[idx]!r} at index {idx} (only finite values and -inf "
                             "are allowed)", field="logits", source=source)
        dead = np.isneginf(L).all(axis=1)
        if dead.any():
            raise InputError(f"row {int(np.flatnonzero(dead)[0])} is all -inf (no softmax)",
                             field="logits", source=source)
        return A, "logits", L, beta
    if has_b:
        P = as_matrix(record["block"], "block", source=source, shape=(m, N))
        neg = P < 0
        if neg.any():
            idx = tuple(int(i) for i in np.argwhere(neg)[0])
            raise InputError(f"negative entry {P[idx]!r} at index {idx}", field="block",
                             source=source)
        zero = ~(P > 0).any(axis=1)
        if zero.any():
            raise InputError(f"row {int(np.flatnonzero(zero)[0])} sums to 0 (cannot "
                             "renormalise)", field="block", source=source)
        return A, "block", P, beta
    return A, "A", None, beta


def _logits_row_sums(A: np.ndarray, L: np.ndarray, beta: Fraction) -> list[arb]:
    """Balls containing sum_j |softmax(beta L_i)_j - A_ij| per row, at the current precision.

    Shifting by the row max changes no exact softmax; the shift and the product with beta
    are formed in arb, so the ball contains the exact beta (L_ij - max_j L_ij).
    """
    b = None if beta == 1 else arbutil.from_fraction(beta)
    masked = np.isneginf(L)
    out: list[arb] = []
    for i in range(L.shape[0]):
        keep = ~masked[i]
        row = L[i, keep]
        top = arb(float(row.max()))
        if b is None:
            es = [(arb(x) - top).exp() for x in row.tolist()]
        else:
            es = [((arb(x) - top) * b).exp() for x in row.tolist()]
        S = sum(es, arb(0))
        a = A[i, keep].tolist()
        total = sum((abs(e / S - aj) for e, aj in zip(es, a, strict=True)), arb(0))
        if not keep.all():
            # masked keys have probability exactly 0: they cost |A_ij|
            total += sum((arb(abs(v)) for v in A[i, masked[i]].tolist()), arb(0))
        out.append(total)
    return out


def _block_row_sums(A: np.ndarray, P: np.ndarray) -> list[arb]:
    """Balls containing sum_j |P_ij / sum_k P_ik - A_ij| per row, at the current precision."""
    out: list[arb] = []
    for i in range(P.shape[0]):
        ps = [arb(x) for x in P[i].tolist()]
        S = sum(ps, arb(0))
        if not S > 0:  # cannot happen for validated rows; the caller sees a non-finite ball
            out.append(arb.nan())
            continue
        a = A[i].tolist()
        out.append(sum((abs(p / S - aj) for p, aj in zip(ps, a, strict=True)), arb(0)))
    return out


def _safe_endpoints(x: arb) -> tuple[Fraction, Fraction] | None:
    """Returns exact (lo, hi) containing the ball ``x``, or None if it is not finite.

    Midpoints and radii below 2**_TINY_EXP are replaced by outward bounds
    (``arbutil.endpoints``), so a ball such as exp(-1e300) never turns into a Fraction with a
    10**300-bit denominator.
    """
    try:
        return arbutil.endpoints(x, floor_exp=-_TINY_EXP)
    except ValueError:
        return None


__all__ = ["Slack", "charged_slack", "operator_slack"]
