"""Run producers on one operator and lay out brackets by the store convention.

Convention (see witnesses/FORMAT.md, "Producer layout"): one bracket per (operator, eps,
upper producer), ``producer = {"upper": name, "lower": name or None}``; the best lower
certificate found (largest claimed rank over the lower producers) is attached to the bracket
of the *anchor* upper producer (``alt_l1`` when it runs, else the first upper producer);
the other brackets carry ``lower = None``.  The producers' numbers go to ``claims`` only.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from . import Certificate, Witness, get_producer

ANCHOR = "alt_l1"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def eps_tag(eps: Fraction) -> str:
    """Returns a short id-safe tag for eps: "0.25" when a short decimal is exact, else "1-3"."""
    for digits in range(1, 13):
        s = f"{float(eps):.{digits}f}".rstrip("0").rstrip(".")
        if Fraction(s) == eps:
            return s
    return f"{eps.numerator}-{eps.denominator}"


def bracket_id(op_id: str, eps: Fraction, upper: str) -> str:
    return f"{op_id}.e{eps_tag(eps)}.{_SAFE.sub('_', upper)}"[:128]


def anchor_of(uppers: list[str]) -> str:
    return ANCHOR if ANCHOR in uppers else uppers[0]


@dataclass
class BracketPlan:
    """A bracket ready for ``Store.add_bracket``."""

    id: str
    eps: Fraction
    upper: dict[str, Any]
    lower: dict[str, Any] | None
    producer: dict[str, Any]
    claims: dict[str, Any]


@dataclass
class OperatorResult:
    brackets: list[BracketPlan] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # producer errors (messages)


def _run(name: str, A: np.ndarray, eps: Fraction, logits: np.ndarray | None
         ) -> tuple[Witness | Certificate | None, float, str | None]:
    t0 = time.perf_counter()
    try:
        out = get_producer(name).produce(A, eps, logits=logits)
    except Exception as err:  # untrusted code: report, never crash the run
        tb = traceback.format_exception_only(type(err), err)[-1].strip()
        return None, time.perf_counter() - t0, f"{name}: {tb}"
    return out, time.perf_counter() - t0, None


def produce_operator(op_id: str, A: np.ndarray, eps_list: list[Fraction], uppers: list[str],
                     lowers: list[str], *, logits: np.ndarray | None = None,
                     skip: set[str] | frozenset[str] = frozenset()) -> OperatorResult:
    """Returns the brackets of one operator for every eps and upper producer not in ``skip``.

    ``skip`` holds bracket ids already stored (a resumed run).  Lower producers run only for
    the anchor bracket.  A producer that raises or returns nothing of its role yields no
    bracket (and a failure message when it raised).
    """
    res = OperatorResult()
    anchor = anchor_of(uppers)
    for eps in eps_list:
        for up in uppers:
            bid = bracket_id(op_id, eps, up)
            if bid in skip:
                continue
            w, secs, err = _run(up, A, eps, logits)
            if err:
                res.failures.append(f"{op_id} eps={eps}: {err}")
            if not isinstance(w, Witness):
                continue
            claims: dict[str, Any] = {**w.claims, "upper_rank": int(w.rank),
                                      "upper_seconds": round(secs, 4)}
            lower = None
            lower_name = None
            if up == anchor:
                best: Certificate | None = None
                for lo in lowers:
                    c, secs_l, err_l = _run(lo, A, eps, logits)
                    if err_l:
                        res.failures.append(f"{op_id} eps={eps}: {err_l}")
                    if isinstance(c, Certificate) and (best is None or c.rank > best.rank):
                        best, lower_name = c, lo
                        claims["lower_seconds"] = round(secs_l, 4)
                if best is not None:
                    lower = best.to_mapping()
                    claims.update({f"lower_{k}" if not k.startswith("lower_") else k: v
                                   for k, v in best.claims.items()})
                    claims["lower_rank"] = int(best.rank)
                    claims["lower_kind"] = best.kind
            res.brackets.append(BracketPlan(
                id=bid, eps=eps, upper=w.to_mapping(), lower=lower,
                producer={"upper": up, "lower": lower_name}, claims=_jsonable(claims)))
    return res


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, np.integer | int) and not isinstance(v, bool):
            out[k] = int(v)
        elif isinstance(v, np.floating | float):
            fv = float(v)
            out[k] = fv if np.isfinite(fv) else str(fv)
        elif isinstance(v, str | bool) or v is None:
            out[k] = v
        else:
            out[k] = str(v)
    return out
