"""The profile (1 + kappa/(eps - tau)^2)^{r/2} and its logarithm, as validated intervals.

Both are increasing in kappa and in tau on tau < eps, so a bracket follows from the lower
ends and from the upper ends (proofs_notes/intrinsic_profile.md).  The profile applies only
when tau < eps: proved tau_hi < eps gives "applicable", proved tau_lo >= eps "not applicable",
anything else "undecided".
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from flint import arb, fmpq

from ..errors import InputError
from ..numerics.arbutil import endpoints, precision
from ..numerics.fpenv import quiet_floats
from ..rationals import parse_eps, qstr
from .result import Bracket

Applicability = Literal["applicable", "not applicable", "undecided"]


@dataclass(frozen=True)
class ProfileResult:
    """``status`` says whether tau < eps is proved; ``profile`` and ``log_profile`` are
    brackets (None unless applicable; ``hi`` None when kappa has no proved upper bound)."""

    status: Applicability
    r: int
    eps: Fraction
    profile: Bracket | None
    log_profile: Bracket | None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "r": self.r, "eps": qstr(self.eps),
                "profile": self.profile.to_json() if self.profile else None,
                "log_profile": self.log_profile.to_json() if self.log_profile else None}


def _ball(q: Fraction) -> arb:
    return arb(fmpq(q.numerator, q.denominator))


def _log_profile(kappa: Fraction, gap: Fraction, r: int) -> arb:
    return _ball(Fraction(r, 2)) * (1 + _ball(kappa) / (_ball(gap) ** 2)).log()


def _end(x: arb, side: int) -> Fraction | None:
    """Returns endpoint ``side`` (0 lower, 1 upper) of the ball x, or None past 2**EXP_LIMIT."""
    try:
        return endpoints(x)[side]
    except ValueError:
        return None


@quiet_floats
def profile(kappa: Bracket, tau: Bracket, eps: object, r: int) -> ProfileResult:
    """Returns the applicability of the profile and brackets that contain
    (1 + kappa/(eps - tau)^2)^{r/2} and (r/2) log(1 + kappa/(eps - tau)^2)."""
    e = parse_eps(eps)
    if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
        raise InputError(f"must be an integer >= 1, got {r!r}", field="r")
    r = int(r)
    if tau.lo >= e:
        return ProfileResult("not applicable", r, e, None, None)
    if tau.hi is None or tau.hi >= e:
        return ProfileResult("undecided", r, e, None, None)
    with precision(128):
        llo = _end(_log_profile(kappa.lo, e - tau.lo, r), 0)
        lhi = _end(_log_profile(kappa.hi, e - tau.hi, r), 1) if kappa.hi is not None else None
        plo = _end(_ball(llo).exp(), 0) if llo is not None else None
        phi = _end(_ball(lhi).exp(), 1) if lhi is not None else None
    # an end past 2**EXP_LIMIT has no exact form: a lower end falls back to its safe value
    # (the profile is >= 1, its logarithm >= 0), an upper end to None (none proved)
    llo = max(llo, Fraction(0)) if llo is not None else Fraction(0)
    plo = max(plo, Fraction(1)) if plo is not None else Fraction(1)
    detail = {"kappa": [qstr(kappa.lo), None if kappa.hi is None else qstr(kappa.hi)],
              "tau": [qstr(tau.lo), None if tau.hi is None else qstr(tau.hi)]}
    return ProfileResult("applicable", r, e,
                         Bracket("profile", plo, phi, "arb", detail),
                         Bracket("log_profile", llo, lhi, "arb", detail))
