"""Predicates on checked records (``softrank.recheck.check_record`` output): validated ends,
the study's criterion, verdicts at a budget, and the kind behind each end.  Pure functions
shared by the tables, the statistics and the tightening across eps; they render nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def is_resolved(upper: int, lower: int, full_rank: int) -> bool:
    """True when [lower, upper] is within the study's criterion: U <= 2L, or U - L <= 2, or
    10 (U - L) <= full rank (the JSON calls it ``resolved``; reports say "within criterion")."""
    gap = upper - lower
    return upper <= 2 * lower or gap <= 2 or 10 * gap <= full_rank


def verdict(k: int, upper: int, lower: int) -> str:
    """Returns "feasible" (k >= U), "impossible" (k < L) or "unresolved" for budget k."""
    if k >= upper:
        return "feasible"
    if k < lower:
        return "impossible"
    return "unresolved"


def ok(record: dict[str, Any]) -> bool:
    """True when the record carries validated ends (it is not an input-error record)."""
    return "error" not in record


def _full_rank(shape: Sequence[int]) -> int:
    return min(int(shape[0]), int(shape[1]))


def _validated_ends(r: dict[str, Any]) -> tuple[int, int]:
    """Returns (L, U) of a checked record.

    A missing validated lower end means no lower bound was proved (L = 0); a missing upper end
    falls back to the trivial r_eps <= min(m, N) (B = A itself), which holds for any operator.
    """
    lo = r.get("lower")
    up = r.get("upper")
    L = 0 if lo is None else int(lo)
    U = _full_rank(r["shape"]) if up is None else int(up)
    return L, U


UPPER_FALLBACK_KIND = "trivial"  # U = min(m, N): B = A
LOWER_NONZERO_KIND = "nonzero"   # L = 1: ||A||_row1 > eps + chi proved
LOWER_NONE_KIND = "none"         # L = 0: nothing proved


def end_kind(record: dict[str, Any], end: str) -> str:
    """Returns the certificate kind behind ``record``'s validated ``end``: its check's kind
    when the claim was confirmed, else the fallback's (UPPER_FALLBACK_KIND, LOWER_NONZERO_KIND
    or LOWER_NONE_KIND).  Store-derived text: renderers escape it."""
    check = record.get(f"{end}_check")
    kind = check.get("kind") if isinstance(check, dict) else None
    if record.get(f"{end}_outcome") == "confirmed":
        if kind is None and end == "lower":
            kind = record.get("lower_kind")
        if kind is not None:
            return str(kind)
    if end == "upper":
        return UPPER_FALLBACK_KIND
    return LOWER_NONZERO_KIND if int(record.get("lower") or 0) >= 1 else LOWER_NONE_KIND
