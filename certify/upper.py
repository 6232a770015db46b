"""Upper witnesses: B = U V with ||A - U V||_row1 <= eps proves r_eps(A) <= k.

See proofs_notes/upper.md for the statement and proofs_notes/rounding.md for the bounds.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .arrays import as_matrix, require_all_finite
from .errors import InputError
from .numerics import workbound
from .numerics.fpenv import quiet_floats
from .numerics.rowl1 import decide_max_row_l1
from .rationals import parse_eps, qstr, to_rational
from .result import Check, check_tier


def witness_arrays(A: object, U: object, V: object, rank: int | None = None, *,
                   source: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns A, U, V as float64 matrices after checking 2-D shapes and the rank claim.

    Finiteness is left to the check (it costs a pass over A; the float tier detects
    non-finite values from its own results and then names the field).
    Raises InputError for wrong shapes or a claimed ``rank`` different from U's columns.
    """
    A = as_matrix(A, "A", source=source, check_finite=False)
    m, N = A.shape
    if m == 0 or N == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    U = as_matrix(U, "U", source=source, shape=(m, None), check_finite=False)
    k = U.shape[1]
    if k > min(m, N):
        # every B of this shape has rank <= min(m, N): such a claim is malformed, not false
        raise InputError(f"rank {k} exceeds min(m, N) = {min(m, N)} of the {m} x {N} matrix",
                         field="rank", source=source)
    V = as_matrix(V, "V", source=source, shape=(k, N), check_finite=False)
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 0:
            raise InputError(f"rank must be a nonnegative integer, got {rank!r}",
                             field="rank", source=source)
        if int(rank) != k:
            raise InputError(f"claimed rank {rank} disagrees with factor shapes "
                             f"U {U.shape}, V {V.shape}", field="rank", source=source)
    return A, U, V


@quiet_floats
def check_upper(A: object, U: object, V: object, eps: object, *, rank: int | None = None,
                tier: str = "auto", chi: object = 0, source: str | None = None,
                max_work: int | None = None) -> Check:
    """Decides the claim ||A - U V||_row1 <= eps - chi about the exact stored numbers.

    Returns a :class:`Check` whose ``status`` is ``"holds"`` (proved, so r_{eps}(A_record)
    <= k where ||A_record - A||_row1 <= chi), ``"fails"`` (proved false) or ``"undecided"``
    (when ``tier`` forces a single tier whose enclosure straddles the threshold, or at the
    work limit below), and whose ``error`` is an exact enclosure of max_i sum_j |A - U V|_ij
    (None at the work limit).  ``eps`` and ``chi`` are
    exact rationals (strings, Fractions, ints or floats taken at their exact value).
    Raises InputError for NaN/Inf, mismatched shapes, a rank claim that disagrees with
    U's columns, a rank above min(m, N), or eps <= 0.

    ``max_work`` (work units, ``certify.numerics.workbound``; default: the enclosing record's meter,
    else ``DEFAULT_MAX_WORK``, about 60 s) bounds the work: a phase whose estimate would
    pass it is not run, and the result is ``"undecided"`` with ``detail["reason"]``
    starting ``"work limit"``.
    """
    limit = workbound.check_max_work(max_work)
    eps_q = parse_eps(eps)
    chi_q = to_rational(chi, field="chi")
    if chi_q < 0:
        raise InputError("slack chi must be >= 0", field="chi")
    tier = check_tier(tier)
    A, U, V = witness_arrays(A, U, V, rank, source=source)
    k = U.shape[1]
    t = eps_q - chi_q
    claim = (f"||A - UV||_row1 <= {qstr(t)}" if chi_q == 0
             else f"||A - UV||_row1 <= eps - chi = {qstr(t)}")
    if t < 0:
        # no error is negative: the claim is false whatever the arrays (after validation)
        require_all_finite(source, A=A, U=U, V=V)
        return Check(status="fails", kind="factors", rank=k, eps=eps_q, threshold=t,
                     value=None, tier="exact", claim=claim, chi=chi_q, tiers_run=("exact",),
                     detail={"sense": "<=", "reason": "eps - chi < 0"})
    with workbound.metered(limit) as meter:
        start = len(meter.phases)
        try:
            d = decide_max_row_l1(A, U, V, t, tier=tier, source=source)
        except workbound.WorkLimit as err:
            run = meter.tiers_since(start)
            return Check(status="undecided", kind="factors", rank=k, eps=eps_q, threshold=t,
                         value=None, tier=run[-1] if run else "float64", claim=claim,
                         chi=chi_q, tiers_run=run, detail={"sense": "<=", "reason": str(err)})
    return Check(status=d.status, kind="factors", rank=k, eps=eps_q, threshold=t,  # type: ignore[arg-type]
                 value=d.value, tier=d.tier, claim=claim, chi=chi_q, precision=d.precision,
                 tiers_run=d.tiers_run,
                 detail={"sense": "<=", "rows_escalated": d.rows_escalated})


@quiet_floats
def exact_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> Fraction:
    """Returns max_i sum_j |A - U V|_ij exactly (a reference for tests and audits)."""
    from .numerics.rowl1 import exact_row_l1

    return max(exact_row_l1(*witness_arrays(A, U, V)))
