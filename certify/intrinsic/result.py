"""Proved two-sided bounds on an intrinsic quantity (tau, kappa, radii, the profile)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..rationals import qstr
from ..result import Status


@dataclass(frozen=True)
class Bracket:
    """Proved bounds lo <= quantity <= hi on one real quantity of the exact stored numbers.

    ``lo`` is always a proved lower bound (0 when nothing better is proved for a nonnegative
    quantity); ``hi`` is a proved upper bound or ``None`` when no upper bound was proved.
    ``tier`` names the arithmetic that produced the bounds; ``detail`` records which witness
    gave each side and what was charged (exact strings, for audit).
    """

    quantity: str
    lo: Fraction
    hi: Fraction | None
    tier: str
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.hi is not None and self.lo > self.hi:
            # a proved lower bound above a proved upper bound means a kernel bug, never data
            raise AssertionError(f"{self.quantity}: empty bracket [{self.lo}, {self.hi}]")

    @property
    def ratio(self) -> Fraction | None:
        """Returns hi / lo, or None when lo <= 0 or no upper bound is proved."""
        if self.hi is None or self.lo <= 0:
            return None
        return self.hi / self.lo

    def contains(self, x: object) -> bool:
        """Returns whether the real number ``x`` (a Fraction, int or float) lies in [lo, hi]."""
        q = Fraction(x)  # type: ignore[arg-type]
        return self.lo <= q and (self.hi is None or q <= self.hi)

    def claim_status(self, lo: Fraction | None = None, hi: Fraction | None = None) -> Status:
        """Three-valued verdict on the claim "lo <= quantity <= hi" (either side optional).

        ``holds`` when the proved bracket lies inside the claim, ``fails`` when it is disjoint
        from it, ``undecided`` otherwise.
        """
        if (hi is not None and self.lo > hi) or (
                lo is not None and self.hi is not None and self.hi < lo):
            return "fails"
        ok_hi = hi is None or (self.hi is not None and self.hi <= hi)
        ok_lo = lo is None or self.lo >= lo
        return "holds" if ok_hi and ok_lo else "undecided"

    def to_json(self) -> dict[str, Any]:
        r = self.ratio
        return {"quantity": self.quantity, "lo": qstr(self.lo),
                "hi": None if self.hi is None else qstr(self.hi), "tier": self.tier,
                "ratio": None if r is None else _ratio_float(r),
                "detail": _jsonable(self.detail)}


_FMAX = Fraction(sys.float_info.max)


def _ratio_float(r: Fraction) -> float:
    # a display figure: float(r) raises OverflowError past ~1.8e308 (a kappa bracket of
    # [1e-620, 1e-300] has ratio 1e320), and JSON has no infinity, so it is capped there
    return float(r) if r <= _FMAX else sys.float_info.max


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, bool | int | str) or x is None:
        return x
    return qstr(x) if isinstance(x, Fraction) else str(x)


def combine(quantity: str, lower: Bracket | None, upper: Bracket | None) -> Bracket:
    """Returns the bracket [lower.lo, upper.hi] with both details kept."""
    lo = lower.lo if lower is not None else Fraction(0)
    hi = upper.hi if upper is not None else None
    tiers = sorted({b.tier for b in (lower, upper) if b is not None}) or ["exact"]
    detail: dict[str, Any] = {}
    if lower is not None:
        detail["lower"] = lower.detail
    if upper is not None:
        detail["upper"] = upper.detail
    return Bracket(quantity, lo, hi, "+".join(tiers), detail)
