"""Three-valued check results and exact enclosures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from .rationals import qstr

Status = Literal["holds", "fails", "undecided"]
Tier = Literal["float64", "arb", "exact"]
TIERS: tuple[str, ...] = ("float64", "arb", "exact")


def check_tier(tier: str) -> str:
    """Returns ``tier`` if it names a tier or ``"auto"``; raises InputError otherwise."""
    if tier != "auto" and tier not in TIERS:
        from .errors import InputError

        raise InputError(f"unknown tier {tier!r}; use auto, float64, arb or exact", field="tier")
    return tier


@dataclass(frozen=True)
class Enclosure:
    """A closed interval [lo, hi] of exact rationals known to contain a real quantity."""

    lo: Fraction
    hi: Fraction

    def __post_init__(self) -> None:
        if self.lo > self.hi:
            raise ValueError(f"empty enclosure [{self.lo}, {self.hi}]")

    @property
    def width(self) -> Fraction:
        return self.hi - self.lo

    def __contains__(self, x: object) -> bool:
        return self.lo <= Fraction(x) <= self.hi  # type: ignore[arg-type]

    def as_floats(self) -> tuple[float, float]:
        """Returns (lo, hi) rounded to the nearest floats (for display only)."""
        return float(self.lo), float(self.hi)

    def to_json(self) -> dict[str, str]:
        return {"lo": qstr(self.lo), "hi": qstr(self.hi)}


@dataclass(frozen=True)
class Check:
    """The outcome of one rigorous check.

    ``status`` is ``"holds"`` when the claim is proved, ``"fails"`` when the witness's or
    certificate's own inequality is proved false (this proves nothing about r_eps: other
    factors or another certificate may still prove the same rank), ``"undecided"``
    otherwise.  ``value`` encloses the exact quantity the claim compares with ``threshold``
    (for an upper witness: the max-row-l1 error of A - UV, and the claim is value <=
    threshold).  ``tier`` is the tier that decided (the last one run).
    ``chi`` is the operator slack charged (0 when the stored A is the operator of record).
    ``bool(check)`` raises TypeError (read ``.status`` or ``.holds``): a three-valued result
    has no safe truth value.
    """

    status: Status
    kind: str
    rank: int
    eps: Fraction
    threshold: Fraction
    value: Enclosure | None
    tier: str
    claim: str
    chi: Fraction = Fraction(0)
    precision: int | None = None
    tiers_run: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.status == "holds"

    def __bool__(self) -> bool:
        """Refused: a Check has three outcomes, and the default truth of an object (always
        True) would let ``assert check_upper(...)`` pass on a claim proved false.  Raises
        TypeError; test ``check.holds`` or ``check.status == "holds"`` instead."""
        raise TypeError("a Check has no truth value (it may hold, fail or stay undecided); "
                        "read .status or .holds")

    @property
    def error(self) -> Enclosure | None:
        """For upper witnesses: an enclosure of max_i sum_j |A - UV|_ij."""
        return self.value

    @property
    def margin(self) -> Enclosure | None:
        """Enclosure of the signed distance from the decision threshold (positive = holds side).

        For ``<=`` and ``<`` claims this is threshold - value; for ``>`` claims
        value - threshold.  (For strict senses a margin of exactly 0 is not a proof.)
        """
        if self.value is None:
            return None
        if self.detail.get("sense", "<=") in ("<=", "<"):
            return Enclosure(self.threshold - self.value.hi, self.threshold - self.value.lo)
        return Enclosure(self.value.lo - self.threshold, self.value.hi - self.threshold)

    def __repr__(self) -> str:
        """A one-line summary: status, kind, rank, margin as a short decimal, tier.

        The exact numbers stay available as attributes and in :meth:`to_json`.
        """
        m = self.margin
        margin = "n/a" if m is None else f"[{_short(m.lo)}, {_short(m.hi)}]"
        status = {"holds": "holds, proved", "fails": "fails, its inequality is false"}.get(
            self.status, self.status)
        return (f"Check({status}: {self.kind} rank {self.rank} at eps {_short(self.eps)}, "
                f"margin {margin}, tier {self.tier})")

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": self.status,
            "kind": self.kind,
            "rank": self.rank,
            "eps": qstr(self.eps),
            "threshold": qstr(self.threshold),
            "value": self.value.to_json() if self.value else None,
            "margin": self.margin.to_json() if self.margin else None,
            "tier": self.tier,
            "tiers_run": list(self.tiers_run),
            "precision": self.precision,
            "chi": qstr(self.chi),
            "claim": self.claim,
            "sense": self.detail.get("sense", "<="),
            **({"reason": str(self.detail["reason"])} if "reason" in self.detail else {}),
        }
        if self.detail.get("reason"):  # e.g. "work limit: ..." (certify.numerics.workbound)
            out["reason"] = str(self.detail["reason"])
        return out


def _short(q: Fraction) -> str:
    """Returns q as a short decimal for display (4 significant digits; exact if shorter)."""
    if q.denominator == 1 and abs(q.numerator) < 10**6:
        return str(q.numerator)
    try:
        f = float(q)
    except OverflowError:
        f = math.inf
    if 1e-300 < abs(f) < 1e300:
        return f"{f:.4g}"
    # past the float range (an eps of 1e-3900 printed as "0" before): scale by a power of ten
    e = int((abs(q.numerator).bit_length() - q.denominator.bit_length()) * 0.30103)
    mant = abs(q) / Fraction(10) ** e
    while mant >= 10:
        mant, e = mant / 10, e + 1
    while mant < 1:
        mant, e = mant * 10, e - 1
    return f"{'-' if q < 0 else ''}{float(mant):.4g}e{e:+d}"
