"""Tier escalation for checks of the form "value < 1": float64, arb, exact, cheapest first.

Each tier returns enclosures of the check's parts (or None when an intermediate is not
finite: no information); the value enclosures of the tiers run so far are intersected, and the
escalation stops as soon as the intersection lies wholly below 1 (``holds``) or at or above 1
(``fails``).  Intersecting is sound because every tier's enclosure contains the exact value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .result import Enclosure

Bounds = dict[str, tuple[Fraction, Fraction]]


def plan(tier: str, arb_precisions: Sequence[int]) -> list[tuple[str, int | None]]:
    """Returns the (tier, precision) steps ``tier`` asks for ("auto" = all, in order)."""
    out: list[tuple[str, int | None]] = []
    if tier in ("auto", "float64"):
        out.append(("float64", None))
    if tier in ("auto", "arb"):
        out += [("arb", prec) for prec in arb_precisions]
    if tier in ("auto", "exact"):
        out.append(("exact", None))
    return out


@dataclass
class Escalation:
    """Outcome: ``status`` holds/fails/undecided, ``value`` the intersected enclosure (None if
    no tier gave one), ``run`` the tiers run in order, ``precision`` the arb precision when arb
    was last, ``parts`` the last tier's part enclosures as strings."""

    status: str = "undecided"
    value: Enclosure | None = None
    run: list[str] = field(default_factory=list)
    precision: int | None = None
    parts: dict[str, list[str]] = field(default_factory=dict)


def escalate(steps: list[tuple[str, int | None]],
             parts_of: Callable[[str, int | None], Bounds | None],
             value_of: Callable[[Bounds], Enclosure]) -> Escalation:
    """Runs ``steps`` until the value is decided against 1; returns an :class:`Escalation`
    whose ``value`` contains the exact value whenever each tier's enclosure does."""
    out = Escalation()
    prec_used = None
    for tr, prec in steps:
        if not out.run or out.run[-1] != tr:
            out.run.append(tr)
        if tr == "arb":
            prec_used = prec
        b = parts_of(tr, prec)
        if b is None:  # a non-finite intermediate: no information from this tier
            continue
        v = value_of(b)
        out.value = v if out.value is None else Enclosure(max(v.lo, out.value.lo),
                                                          min(v.hi, out.value.hi))
        out.parts = {k: [str(x) for x in b[k]] for k in b}
        if out.value.hi < 1:
            out.status = "holds"
            break
        if out.value.lo >= 1:
            out.status = "fails"
            break
    out.precision = prec_used if out.run and out.run[-1] == "arb" else None
    return out


def decide_above(steps: list[tuple[str, int | None]],
                 enclose: Callable[[str, int | None], Enclosure | None],
                 t: Fraction) -> Escalation:
    """Runs ``steps`` until the intersected enclosure of a minimum lies wholly above ``t``
    (``holds``) or at or below it (``fails``); ``enclose(tier, precision)`` returns an
    interval containing the exact minimum, or None (no information).  The result's
    ``value`` contains the exact minimum whenever each tier's enclosure does."""
    out = Escalation()
    for tr, prec in steps:
        if not out.run or out.run[-1] != tr:
            out.run.append(tr)
        if tr == "arb":
            out.precision = prec
        enc = enclose(tr, prec)
        if enc is None:  # a non-finite intermediate: no information from this tier
            continue
        # every tier's interval contains the exact minimum, so the intersection does too
        out.value = enc if out.value is None else Enclosure(max(enc.lo, out.value.lo),
                                                            min(enc.hi, out.value.hi))
        if out.value.lo > t:
            out.status = "holds"
            break
        if out.value.hi <= t:
            out.status = "fails"
            break
    if not (out.run and out.run[-1] == "arb"):
        out.precision = None
    return out
