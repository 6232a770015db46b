"""Brackets L <= r_eps <= U with validated ends and verdicts at a rank budget.

A claimed end that is not proved falls back to the best value proved on the spot: the lower
end to 1 when ||A||_row1 > eps + chi is proved (B = 0 is too far), else 0; the upper end to
min(m, N) (B = A itself has that rank and error 0).  See proofs_notes/lower.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from .arrays import as_matrix
from .errors import InputError
from .lower import check_lower
from .numerics import workbound
from .numerics.fpenv import quiet_floats
from .rationals import parse_eps, to_rational
from .result import Check, _short
from .upper import check_tier, check_upper

Result = Literal["proved", "does_not_hold", "undecided", "refuted", "absent"]
Outcome = Literal["confirmed", "weakened", "refuted", "absent"]  # the older words (deprecated)
Verdict = Literal["feasible", "impossible", "unresolved"]


@dataclass(frozen=True)
class BracketCheck:
    """Validated bracket ends for one operator at tolerance eps with operator slack chi.

    ``upper``/``lower`` are the validated ends: r_eps(A_record) <= upper and
    r_eps(A_record) >= lower are theorems (for ||A_record - A||_row1 <= chi).
    ``*_result`` says what is proved about each claimed end:

    * ``proved``: the claim's check holds (its witness or certificate is a proof);
    * ``does_not_hold``: the witness's or certificate's own inequality is proved false.  That
      is not a proof that the claim about r_eps is false (other factors or another
      certificate may still prove it); the end falls back;
    * ``undecided``: the check decided neither way (the end falls back);
    * ``refuted``: the claim about r_eps itself is proved false: an upper claim k below the
      proved lower end, or a lower claim L above the proved upper end (whatever its own
      check said);
    * ``absent``: no claim for that end.

    ``*_outcome`` (deprecated) keeps the older words for the check alone: ``confirmed``
    (holds), ``refuted`` (the check's inequality is false: ``fails``), ``weakened``
    (undecided), ``absent``.
    """

    eps: Fraction
    chi: Fraction
    shape: tuple[int, int]
    full_rank: int
    upper_claim: int | None
    lower_claim: int | None
    upper_check: Check | None
    lower_check: Check | None
    upper: int
    lower: int
    upper_result: Result
    lower_result: Result
    nonzero_check: Check | None = None

    def __repr__(self) -> str:
        return (f"BracketCheck({self.lower} <= r_eps <= {self.upper} at eps {_short(self.eps)}; "
                f"lower: {_shown(self.lower_result, 'certificate')}, "
                f"upper: {_shown(self.upper_result, 'witness')})")

    @property
    def upper_outcome(self) -> Outcome:
        """Deprecated (read ``upper_result``): the older word for the upper check alone."""
        return _outcome(self.upper_check)

    @property
    def lower_outcome(self) -> Outcome:
        """Deprecated (read ``lower_result``): the older word for the lower check alone."""
        return _outcome(self.lower_check)

    @property
    def resolved(self) -> bool:
        """The published study's criterion, on the validated ends."""
        U, L = self.upper, self.lower
        return U <= 2 * L or U - L <= 2 or 10 * (U - L) <= self.full_rank

    def verdict(self, k: int) -> Verdict:
        """Returns ``feasible`` (k >= upper), ``impossible`` (k < lower) or ``unresolved``."""
        if isinstance(k, bool | np.bool_) or not isinstance(k, int | np.integer) or k < 0:
            raise InputError(f"rank budget must be an integer >= 0, got {k!r}", field="k")
        if k >= self.upper:
            return "feasible"
        if k < self.lower:
            return "impossible"
        return "unresolved"

    def to_json(self) -> dict[str, Any]:
        return {
            "eps": str(self.eps),
            "chi": str(self.chi),
            "shape": list(self.shape),
            "full_rank": self.full_rank,
            "upper_claim": self.upper_claim,
            "lower_claim": self.lower_claim,
            "upper": self.upper,
            "lower": self.lower,
            "upper_result": self.upper_result,
            "lower_result": self.lower_result,
            # the older keys and words, kept for readers of earlier output (deprecated)
            "upper_outcome": self.upper_outcome,
            "lower_outcome": self.lower_outcome,
            "resolved": self.resolved,
            "upper_check": self.upper_check.to_json() if self.upper_check is not None else None,
            "lower_check": self.lower_check.to_json() if self.lower_check is not None else None,
            "nonzero_check": (self.nonzero_check.to_json() if self.nonzero_check is not None
                              else None),
        }


def work_limited_bracket(A: object, upper: Mapping | None, lower: Mapping | None,
                         eps: object, reason: str) -> BracketCheck:
    """Returns the bracket of a record whose operator slack could not be enclosed within
    the work limit (``reason``, from ``workbound.WorkLimit``): both claims ``undecided``
    (not run), the ends 0 <= r_eps <= min(m, N) that hold for every matrix, and chi the
    cheap rigorous bound 1 + N max|A_ij| >= ||A_record - A||_row1 (rows of A_record are
    probability vectors, so ||A_record||_row1 = 1, and ||A||_row1 <= N max|A_ij|).
    """
    eps_q = parse_eps(eps)
    A = as_matrix(A, "A")
    m, N = A.shape
    chi = 1 + N * Fraction(float(np.max(np.abs(A))))
    checks: list[Check | None] = []
    for end, kind, sense, t in ((upper, "factors", "<=", eps_q - chi),
                                (lower, None, ">", eps_q + chi)):
        if end is None:
            checks.append(None)
            continue
        k = str(end.get("kind", kind))
        checks.append(Check(status="undecided", kind=k, rank=int(end.get("rank", 0)),
                            eps=eps_q, threshold=t, value=None, tier="float64",
                            claim=f"{k} end of rank {end.get('rank')}", chi=chi, tiers_run=(),
                            detail={"sense": sense, "reason": reason}))
    up, lo = checks
    return BracketCheck(eps=eps_q, chi=chi, shape=(m, N), full_rank=min(m, N),
                        upper_claim=up.rank if up is not None else None,
                        lower_claim=lo.rank if lo is not None else None,
                        upper_check=up, lower_check=lo,
                        upper=min(m, N), lower=0,
                        upper_result="absent" if up is None else "undecided",
                        lower_result="absent" if lo is None else "undecided")


def _outcome(c: Check | None) -> Outcome:
    if c is None:
        return "absent"
    return {"holds": "confirmed", "fails": "refuted"}.get(c.status, "weakened")  # type: ignore[return-value]


def _shown(result: str, what: str) -> str:
    """The repr's words: what does not hold is the witness or certificate, not the claim."""
    return {"does_not_hold": f"{what} does not hold", "refuted": "claim refuted",
            "absent": "no claim"}.get(result, result)


def _result(c: Check | None, refuted: bool) -> Result:
    """The end's word: ``refuted`` only when the other proved end contradicts the claim."""
    if c is None:
        return "absent"
    if refuted:
        return "refuted"
    return {"holds": "proved", "fails": "does_not_hold"}.get(c.status, "undecided")  # type: ignore[return-value]


@quiet_floats
def check_bracket(A: object, upper: Mapping | None = None, lower: Mapping | None = None,
                  eps: object = None, *, tier: str = "auto", chi: object = 0,
                  source: str | None = None, max_work: int | None = None) -> BracketCheck:
    """Checks both ends of a claimed bracket and returns the validated ends.

    ``upper`` = {"kind": "factors", "rank": k, "U": U, "V": V} (checked with
    :func:`certify.check_upper` at eps - chi), ``lower`` = a certificate for
    :func:`certify.check_lower` (checked at eps + chi); either may be ``None``.  ``eps`` comes
    last, as in ``check_upper(A, U, V, eps)`` and ``check_lower(A, cert, eps)``, and may be
    given by keyword; the older order ``check_bracket(A, eps, upper, lower)`` is still
    accepted (recognised by a second argument that is neither a mapping nor None).
    Returns a :class:`BracketCheck` whose ``upper``/``lower`` are proved ends and whose
    ``upper_result``/``lower_result`` say what is proved about each claim.  Raises
    InputError for bad input; raises AssertionError if a proved lower end exceeds a proved
    upper end (that would be a kernel bug, never a result).

    ``max_work`` (work units, ``certify.numerics.workbound``; default: the meter the caller
    opened with ``workbound.metered``, else a new one of ``DEFAULT_MAX_WORK``, about 60 s)
    bounds the record's work: its checks share one meter, and a check whose next
    phase would pass it ends ``"undecided"`` with ``detail["reason"]`` starting
    ``"work limit"`` (its end then falls back as for any undecided check).
    """
    if not (upper is None or isinstance(upper, Mapping)):
        upper, lower, eps = lower, eps, upper  # the older order (A, eps, upper, lower)
    # without max_work: the caller's meter when it opened one (a record's checks share it),
    # else a new one of the default limit
    with workbound.metered(workbound.check_max_work(max_work)):
        return _check_bracket(A, upper, lower, eps, tier, chi, source)


def _check_bracket(A: object, upper: Mapping | None, lower: Mapping | None, eps: object,
                   tier: str, chi: object, source: str | None) -> BracketCheck:
    """The body of :func:`check_bracket` (inside the record's meter)."""
    if eps is None:
        raise InputError("eps is required", field="eps", source=source)
    eps_q = parse_eps(eps)
    chi_q = to_rational(chi, field="chi")
    if chi_q < 0:
        raise InputError("slack chi must be >= 0", field="chi", source=source)
    tier = check_tier(tier)
    A = as_matrix(A, "A", source=source)
    m, N = A.shape
    if m == 0 or N == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    full = min(m, N)

    up_check = None
    up_claim = None
    if upper is not None:
        if not isinstance(upper, Mapping):
            raise InputError("an upper witness must be a mapping", field="upper", source=source)
        if upper.get("kind") != "factors":
            raise InputError(f"unknown kind {upper.get('kind')!r}; use factors",
                             field="upper.kind", source=source)
        for name in ("rank", "U", "V"):
            if name not in upper:
                raise InputError("missing", field=f"upper.{name}", source=source)
        extra = set(upper) - {"kind", "rank", "U", "V"}
        if extra:
            raise InputError("unexpected field", field=f"upper.{sorted(extra)[0]}",
                             source=source)
        try:
            up_check = check_upper(A, upper["U"], upper["V"], eps_q, rank=upper["rank"],
                                   tier=tier, chi=chi_q, source=source)
        except InputError as err:
            if err.field in ("U", "V", "rank"):
                raise err.at(source=source, field_prefix="upper") from None
            raise
        up_claim = up_check.rank

    lo_check = None
    lo_claim = None
    if lower is not None:
        lo_check = check_lower(A, lower, eps_q, tier=tier, chi=chi_q, source=source)
        lo_claim = lo_check.rank

    U_end = up_claim if (up_check is not None and up_check.holds) else full
    U_end = min(U_end, full)  # B = A: rank <= min(m, N) at error 0
    nz_check = None
    if lo_check is not None and lo_check.holds:
        L_end = lo_claim
    elif lo_check is not None and lo_check.kind == "nonzero":
        L_end = 0  # the nonzero check itself was the fallback and it did not hold
    else:
        nz_check = check_lower(A, {"kind": "nonzero", "rank": 1}, eps_q, tier=tier,
                               chi=chi_q, source=source)
        L_end = 1 if nz_check.holds else 0
    assert L_end is not None
    if L_end > U_end:
        raise AssertionError(
            f"kernel bug: proved lower end {L_end} exceeds proved upper end {U_end} "
            f"(eps={eps_q}, chi={chi_q}); no verdict is derived from this")
    return BracketCheck(eps=eps_q, chi=chi_q, shape=(m, N), full_rank=full,
                        upper_claim=up_claim, lower_claim=lo_claim, upper_check=up_check,
                        lower_check=lo_check, upper=U_end, lower=L_end,
                        # r_eps >= L_end > k (resp. r_eps <= U_end < L) proves the claim false
                        upper_result=_result(up_check, up_claim is not None
                                             and up_claim < L_end),
                        lower_result=_result(lo_check, lo_claim is not None
                                             and lo_claim > U_end),
                        nonzero_check=nz_check)
