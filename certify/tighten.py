"""Brackets of one operator tightened across tolerances (r_eps is non-increasing in eps).

For eps1 <= eps2 every B within eps1 of A is within eps2 of A, so the minimum rank over the
larger ball is at most the one over the smaller: r_eps2(A) <= r_eps1(A).  Hence a lower end
proved at eps' proves the same rank at every eps <= eps', and an upper end proved at eps'
proves the same rank at every eps >= eps'.  See proofs_notes/tighten.md.

This module only combines ends that the other checks have already proved; it proves nothing
new about A and reads no arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from .errors import InputError
from .rationals import parse_eps

Side = Literal["lower", "upper"]


@dataclass(frozen=True)
class ProvedEnd:
    """One proved end about one operator of record: ``r_eps(A) >= rank`` (lower) or
    ``r_eps(A) <= rank`` (upper), proved at tolerance ``eps`` by the record ``source``."""

    eps: Fraction
    side: Side
    rank: int
    source: str


@dataclass(frozen=True)
class TightBracket:
    """The bracket implied at ``eps`` by every proved end of the same operator.

    ``lower`` is the largest rank proved below at some eps' >= eps (``lower_from`` is that
    end), ``upper`` the smallest rank proved above at some eps' <= eps (``upper_from``).  An
    end is ``None`` when no proved end applies (no claim about r_eps at eps follows).
    """

    eps: Fraction
    lower: int | None
    upper: int | None
    lower_from: ProvedEnd | None
    upper_from: ProvedEnd | None

    @property
    def closed(self) -> bool:
        """True when the implied ends meet: r_eps(A) is then known exactly."""
        return self.lower is not None and self.upper is not None and self.lower == self.upper

    @property
    def consistent(self) -> bool:
        """False only when the implied lower end exceeds the implied upper end, which proved
        ends about one operator of record cannot do (a kernel or bookkeeping error)."""
        return self.lower is None or self.upper is None or self.lower <= self.upper


def tighten(ends: Iterable[ProvedEnd], at: Iterable[Fraction | str] | None = None
            ) -> dict[Fraction, TightBracket]:
    """Returns, for each tolerance in ``at`` (default: every eps of ``ends``), the bracket
    implied by all of ``ends``.

    Contract: every ``ProvedEnd`` must be a proved statement about the same operator of
    record; the result's ends are then theorems about it.  Ties prefer the end proved at the
    tolerance itself, then the nearest tolerance, then the first given (so a per-eps end is
    cited when it is already the best).  Raises InputError on a side other than "lower" /
    "upper", a negative rank or an eps <= 0.
    """
    items = list(ends)
    for e in items:
        if e.side not in ("lower", "upper"):
            raise InputError(f"side must be 'lower' or 'upper', not {e.side!r}",
                             field="side")
        if not isinstance(e.rank, int) or isinstance(e.rank, bool) or e.rank < 0:
            raise InputError(f"rank must be a non-negative integer, not {e.rank!r}",
                             field="rank")
    # every comparison is on the exact value an end's eps denotes ("1/4", 0.25 and
    # Fraction(1, 4) alike), never on the spelling it was given in
    qs = [parse_eps(e.eps) for e in items]
    points = sorted({parse_eps(x) for x in at} if at is not None else set(qs))
    # Among the ends that apply at eps, the preference (rank, then nearest tolerance, then
    # first given) does not depend on eps, so one sweep per side finds every choice: upper
    # ends in increasing eps, lower ends in decreasing eps (a scan of every end per tolerance
    # was quadratic: 8,000 tolerances of one operator took minutes).
    ups = sorted(((q, e.rank, i, e) for i, (e, q) in enumerate(zip(items, qs, strict=True))
                  if e.side == "upper"), key=lambda x: x[:3])
    lows = sorted(((-q, -e.rank, i, e) for i, (e, q) in enumerate(zip(items, qs, strict=True))
                   if e.side == "lower"), key=lambda x: x[:3])
    up_at = _sweep(points, ups, lambda x: (x[1], -x[0], x[2]), lambda eps, x: x[0] <= eps)
    low_at = _sweep(points[::-1], lows, lambda x: (x[1], -x[0], x[2]),
                    lambda eps, x: -x[0] >= eps)
    return {eps: TightBracket(eps=eps, lower=None if low_at[eps] is None else low_at[eps].rank,
                              upper=None if up_at[eps] is None else up_at[eps].rank,
                              lower_from=low_at[eps], upper_from=up_at[eps])
            for eps in points}


def _sweep(points: list[Fraction], ends: list[tuple], key, applies
           ) -> dict[Fraction, ProvedEnd | None]:
    """Returns {eps: the end of least ``key`` among those that apply at eps}, for ``points``
    in the order in which the applying ends only grow (``ends`` sorted in that order)."""
    out: dict[Fraction, ProvedEnd | None] = {}
    best = None
    j = 0
    for eps in points:
        while j < len(ends) and applies(eps, ends[j]):
            if best is None or key(ends[j]) < key(best):
                best = ends[j]
            j += 1
        out[eps] = None if best is None else best[3]
    return out
