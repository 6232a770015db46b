"""Which end of an open bracket is likely loose: float64 search results, never a proof.

The producers record how near their searches came to the rank next to each end they found
(``witnesses/producers/altl1.py`` and ``bernstein.py``; untrusted claims):

* ``upper_next_rank`` = k - 1 and ``upper_next_ratio``: the least max-row-l1 error of a
  rank-(k - 1) fit the upper search found, divided by eps (below 1 would lower U);
* ``lower_next_rank`` = p + 1 and ``lower_next_value``: the least Bernstein value
  eps sup ||w||_inf / ||A w||_inf of a rank-(p + 1) subspace the lower search tried (below 1
  would raise L).

The upper search also says how many of its runs ended at rank U - 1 (``upper_next_runs``) and
how many of them within 3% of the least (``upper_next_agree``).

For an open bracket [L, U] (L < U, the checked ends) ``diagnose`` reads the number at U - 1 and
the number at L + 1. Where at least AGREE_MIN runs of the upper search agree and their least
error is more than 3% above eps, it names the lower end as the one likely loose: fits from
unrelated starts end at one value above eps, so rank U - 1 is probably out of reach and U
probably the least rank (on 41 real heads, 64 more starts at U - 1 never reached eps nor moved
that value by more than 0.8%; proofs_notes/audit.md, 2b). Otherwise it names the end whose
number is nearer its threshold 1. The two numbers are not of one kind: the upper one is the
error of the best fit found, the question itself, while a lower-certificate value above 1 can
hold at a rank that is true (a certificate is sufficient, not necessary). Both are only the
best a float64 search found: a better fit or subspace may exist, and another kind of
certificate may move an end the number says is far. Nothing here enters a verdict.

Claims are adversarial input: a value that is not a finite non-negative number (a bool, NaN,
a string that is not an exact rational, a negative number), or a number claimed for another
rank than the one next to the checked end, reads as missing, never as an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .records import ok

UPPER_RANK, UPPER_VALUE = "upper_next_rank", "upper_next_ratio"
UPPER_RUNS, UPPER_AGREE = "upper_next_runs", "upper_next_agree"
# the upper search's value at U - 1 counts as settled when this many runs end within the band
# of the least (the producer's own band: alt_l1's AGREE_BAND) and the least exceeds eps by more
AGREE_MIN = 3
AGREE_ABOVE = Fraction(103, 100)
LOWER_RANK, LOWER_VALUE = "lower_next_rank", "lower_next_value"
SIDES = ("upper", "lower", "unknown")
# exact rationals as a report.json or journal round trip writes a claim ("p/q"), or a plain
# decimal; bounded so that no claim is expanded into a huge integer (a float64 needs < 700)
_RATIONAL = re.compile(r"\d{1,700}(?:/\d{1,700}|\.\d{1,700})?")


def claim_number(v: Any) -> Fraction | None:
    """Returns the exact non-negative rational a claim holds, or None when it holds none: an
    int, a finite float, a Fraction or a string "p/q" / "d.ddd" of at most 700 digits each,
    and >= 0 (a bool, NaN, an infinity, a negative number or anything else is None)."""
    if isinstance(v, bool | np.bool_):
        return None
    if isinstance(v, int | np.integer):
        q = Fraction(int(v))
    elif isinstance(v, float | np.floating):
        if not math.isfinite(float(v)):
            return None
        q = Fraction(float(v))
    elif isinstance(v, Fraction):
        q = v
    elif isinstance(v, str) and _RATIONAL.fullmatch(v):
        try:
            q = Fraction(v)
        except (ValueError, ZeroDivisionError):
            return None
    else:
        return None
    return q if q >= 0 else None


def _claim_int(v: Any) -> int | None:
    """Returns a claimed integer (a rank or a count: an int, not a bool), else None."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        return None
    return int(v)


def _least(claims_list: Iterable[Any], rank_key: str, value_key: str, rank: int
           ) -> tuple[Fraction | None, Mapping[str, Any] | None]:
    """Returns the least readable ``value_key`` over the claims whose ``rank_key`` is
    ``rank`` and the claims it was read from ((None, None) when there is none)."""
    best: Fraction | None = None
    source: Mapping[str, Any] | None = None
    for claims in claims_list:
        if not isinstance(claims, Mapping) or _claim_int(claims.get(rank_key)) != rank:
            continue
        q = claim_number(claims.get(value_key))
        if q is not None and (best is None or q < best):
            best, source = q, claims
    return best, source


def agreement(claims: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """Returns (agree, runs) from ``upper_next_agree`` and ``upper_next_runs`` of ``claims``
    when both are ints (not bools) with 0 <= agree <= runs and runs >= 1, else None."""
    if claims is None:
        return None
    agree, runs = _claim_int(claims.get(UPPER_AGREE)), _claim_int(claims.get(UPPER_RUNS))
    if agree is None or runs is None or not 0 <= agree <= runs or runs < 1:
        return None
    return agree, runs


def likely_loose(upper_next_ratio: Fraction | None, lower_next_value: Fraction | None,
                 upper_agree: int | None = None) -> str:
    """Returns "lower" when at least AGREE_MIN runs of the upper search agree at U - 1
    (``upper_agree``) and their least error over eps exceeds AGREE_ABOVE (rank U - 1 is
    probably out of reach); else "upper" when the best float64 fit found at U - 1 is nearer
    its threshold than the best lower value found at L + 1 (upper_next_ratio <
    lower_next_value: both pass below 1, so the smaller one is the nearer to passing),
    "lower" in the opposite case, and "unknown" when they are equal or either is missing."""
    if upper_next_ratio is not None and upper_agree is not None \
            and upper_agree >= AGREE_MIN and upper_next_ratio > AGREE_ABOVE:
        return "lower"
    if upper_next_ratio is None or lower_next_value is None:
        return "unknown"
    if upper_next_ratio < lower_next_value:
        return "upper"
    if lower_next_value < upper_next_ratio:
        return "lower"
    return "unknown"


def diagnose_all(claims_list: Iterable[Any], lower: int, upper: int) -> dict[str, Any] | None:
    """Returns, for the open bracket [lower, upper] (checked ends, lower < upper), the least
    ``upper_next_ratio`` claimed for rank upper - 1 with the ``agreement`` of the claims it
    comes from (``upper_next_agree``, ``upper_next_runs``: ints or None), the least
    ``lower_next_value`` claimed for rank lower + 1 over ``claims_list`` (the claims of the
    records of one (operator, eps); None where none is readable) and ``likely_loose`` of them.
    Returns None when the bracket is not open (lower >= upper)."""
    if not lower < upper:
        return None
    claims_list = list(claims_list)
    up, source = _least(claims_list, UPPER_RANK, UPPER_VALUE, upper - 1)
    lo, _ = _least(claims_list, LOWER_RANK, LOWER_VALUE, lower + 1)
    agree, runs = agreement(source) or (None, None)
    return {"upper_next_ratio": up, "upper_next_agree": agree, "upper_next_runs": runs,
            "lower_next_value": lo, "likely_loose": likely_loose(up, lo, agree)}


def diagnose(claims: Any, lower: int, upper: int) -> dict[str, Any] | None:
    """``diagnose_all`` on one record's claims."""
    return diagnose_all([claims], lower, upper)


def _q(x: Fraction | None) -> str | None:
    return None if x is None else str(x)


def open_rows(pairs: Sequence[dict[str, Any]], records: Iterable[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """Returns one row per open pair of ``pairs`` (``tables.group_pairs`` output on
    ``records``; consistent, per-eps L < U), in the pairs' order: operator, family, eps,
    lower, upper, upper_next_ratio and lower_next_value (exact strings or None, the least
    over the claims of the pair's records, ``diagnose_all``), upper_next_agree and
    upper_next_runs (ints or None) and likely_loose.  The per-eps
    bracket, not the one tightened across eps: the producers searched next to the ends of
    their own eps."""
    claims_of = {r["bracket"]: r.get("claims") for r in records if ok(r)}
    rows = []
    for p in pairs:
        if not p["consistent"]:
            continue
        d = diagnose_all((claims_of.get(b) for b in p["brackets"]), p["lower"], p["upper"])
        if d is None:
            continue
        rows.append({"operator": p["operator"], "family": p["family"], "eps": p["eps"],
                     "lower": p["lower"], "upper": p["upper"],
                     "upper_next_ratio": _q(d["upper_next_ratio"]),
                     "upper_next_agree": d["upper_next_agree"],
                     "upper_next_runs": d["upper_next_runs"],
                     "lower_next_value": _q(d["lower_next_value"]),
                     "likely_loose": d["likely_loose"]})
    return rows


def counts(rows: Sequence[dict[str, Any]], pairs: int) -> dict[str, int]:
    """Returns {pairs, open, upper, lower, unknown}: how many of ``pairs`` pairs are open and
    how many of those ``open_rows`` name each side."""
    return {"pairs": pairs, "open": len(rows),
            **{s: sum(r["likely_loose"] == s for r in rows) for s in SIDES}}
