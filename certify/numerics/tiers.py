"""Tier escalation for checks of the form "value < 1": float64, arb, exact, cheapest first.

Each tier returns enclosures of the check's parts (or None when an intermediate is not
finite: no information); the value enclosures of the tiers run so far are intersected, and the
escalation stops as soon as the intersection lies wholly below 1 (``holds``) or at or above 1
(``fails``).  Intersecting is sound because every tier's enclosure contains the exact value.

The float reductions at the end of this module (:func:`safe_max_upper` and its three
siblings, :func:`may_attain_max`) are the one place where a float tier turns per-item bounds
into a bound on a maximum or a minimum: NaN (an unknown bound) and the empty set each get
their safe value, never the value that numpy or Python's ``max`` would return
(proofs_notes/rounding.md, "NaN, infinities and empty sets").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..rationals import qstr
from ..result import Enclosure

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
        out.parts = {k: [qstr(x) for x in b[k]] for k in b}
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


# --- NaN- and empty-safe float reductions ------------------------------------------------
#
# Every value passed in is a float64 bound on one item (an upper bound, or a lower bound),
# possibly NaN (the item's bound is unknown: an overflow met inf - inf or 0 * inf) or +-inf.
# Each reduction returns a float64 bound on the maximum or minimum over all items that is
# valid whatever the NaNs stand for.  numpy's max/min propagate NaN, Python's max/min drop or
# keep it depending on argument order, and both fail on (or invent a value for) an empty set;
# these four never do.


def _flat(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).ravel()


def safe_max_upper(values: object) -> float:
    """Returns a float64 >= max_i x_i given upper bounds ``values`` (x_i <= values_i).

    +inf when ``values`` is empty (nothing bounds a maximum over items not looked at) or when
    any value is NaN (that item is unbounded above); otherwise the largest value.
    """
    v = _flat(values)
    if v.size == 0:
        return math.inf
    top = float(np.max(v))  # NaN propagates through np.max
    return math.inf if math.isnan(top) else top


def safe_min_lower(values: object) -> float:
    """Returns a float64 <= min_i x_i given lower bounds ``values`` (x_i >= values_i).

    -inf when ``values`` is empty or any value is NaN; otherwise the smallest value.
    """
    v = _flat(values)
    if v.size == 0:
        return -math.inf
    low = float(np.min(v))
    return -math.inf if math.isnan(low) else low


def safe_max_lower(values: object) -> float:
    """Returns a float64 <= max_i x_i given lower bounds ``values`` (x_i >= values_i).

    An item whose lower bound is NaN contributes nothing (its x_i is still >= -inf), so the
    result is the largest non-NaN value, or -inf when there is none (the trivial bound).
    """
    v = _flat(values)
    v = v[~np.isnan(v)]
    return float(np.max(v)) if v.size else -math.inf


def safe_min_upper(values: object) -> float:
    """Returns a float64 >= min_i x_i given upper bounds ``values`` (x_i <= values_i).

    The smallest non-NaN value (min_i x_i <= x_j <= values_j for every j), or +inf when there
    is none.  Only meaningful over a non-empty set of items; the caller knows it is non-empty.
    """
    v = _flat(values)
    v = v[~np.isnan(v)]
    return float(np.min(v)) if v.size else math.inf


def may_attain_max(hi: object, lo: object) -> np.ndarray:
    """Returns the indices i that may attain max_j x_j, given hi_i >= x_i >= lo_i.

    An item is left out only when hi_i < max_j lo_j is proved (then x_i < max_j x_j); an item
    with a NaN upper bound, or every item when no lower bound is known, stays in.  The
    maximum over the returned items therefore equals the maximum over all items.
    """
    h = _flat(hi)
    threshold = safe_max_lower(lo)
    # ~(h < threshold): a NaN comparison is False, so a NaN upper bound keeps its item
    return np.flatnonzero(~(h < threshold))
