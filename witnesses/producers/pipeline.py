"""Run producers on one operator and lay out brackets by the store convention.

Convention (see witnesses/FORMAT.md, "Producer layout"): one bracket per (operator, eps,
upper producer), ``producer = {"upper": name, "lower": name or None}``; the best lower
certificate found (largest claimed rank over the lower producers) is attached to the bracket
of the *anchor* upper producer (``alt_l1`` when it runs, else the first upper producer; if
the anchor gives no witness, the first bracket written); the others carry ``lower = None``.
The producers' numbers go to ``claims`` only.

Searches stop when the bracket is closed: the lower producers run after the upper ones, and
a lower producer whose ``produce`` takes ``stop_at`` gets the least rank the upper witnesses
of that eps claim (its search stops there: no valid lower end passes a valid upper end); once
a lower certificate claims that rank, the remaining lower producers are not run (claim
``lower_producers_skipped``).  A lower producer whose ``produce`` takes ``floor`` gets the
largest rank the lower producers before it claim (it may skip work that cannot beat it).
The lower searches of an operator run from its largest eps down; a producer whose ``produce``
takes ``hints`` gets a dict kept for it across those eps (a search's state at a larger eps is
a start at a smaller one: r_eps is non-increasing in eps); the upper searches run from the
smallest eps up with hints of their own (a fit within a smaller eps is within a larger one).
Claims ``upper_hints_from`` / ``lower_hints_from`` name the eps whose search left the hints a
bracket's search was given.
Claims are float64 and untrusted: if one is wrong the bracket is only less tight than it
could be, never wrong (``certify`` checks every end).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import time
import traceback
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from . import Certificate, Witness, get_producer
from ._common import budget_mode, budget_scale, fresh_count, row_l1, target, work_done
from .keyset import shared_scores
from .prices import over_budget

ANCHOR = "alt_l1"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


# ends a failure message of a search whose bracket a resumed run already stored: it ran again
# only for the hints it hands the next eps, and nothing from it is written
AGAIN = " (a search repeated for its hints; its bracket was already stored)"


def eps_tag(eps: Fraction) -> str:
    """Returns a short id-safe tag for eps: "0.25" when a short decimal is exact, else "1-3"."""
    for digits in range(1, 13):
        s = f"{float(eps):.{digits}f}".rstrip("0").rstrip(".")
        if Fraction(s) == eps:
            return s
    return f"{eps.numerator}-{eps.denominator}"


def bracket_id(op_id: str, eps: Fraction, upper: str) -> str:
    """Returns "<operator>.e<eps tag>.<producer>", or, when that passes the store's 128
    characters, its first 110 characters and ".h" with 16 hex digits of its sha256: cutting
    it alone dropped the producer (or all of a tiny eps), so two brackets got one id."""
    full = f"{op_id}.e{eps_tag(eps)}.{_SAFE.sub('_', upper)}"
    if len(full) <= 128:
        return full
    return f"{full[:110]}.h{hashlib.sha256(full.encode()).hexdigest()[:16]}"


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
    # calls not started because their price was above their budget (``prices``), once per
    # operator and producer: a run with a small budget scale, not an error
    skipped: list[str] = field(default_factory=list)
    # the numerics software of the process that produced these brackets (set by the caller
    # that ran them, ``softrank.software.numerics_environment``; None when not recorded)
    software: dict[str, Any] | None = None


def _takes(produce: Any, keyword: str) -> bool:
    """Whether a producer's ``produce`` accepts ``keyword`` (``stop_at``, ``floor``: a plug-in
    written before it existed does not, and is called without it)."""
    try:
        params = inspect.signature(produce).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _cost_key() -> str:
    """The unit of the cost claims: "work" (work units, deterministic) in work mode, else
    "seconds" (wall seconds, which differ from run to run)."""
    return "work" if budget_mode() == "work" else "seconds"


def _run(name: str, A: np.ndarray, eps: Fraction, logits: np.ndarray | None,
         stop_at: int | None = None, floor: int | None = None, hints: dict | None = None
         ) -> tuple[Witness | Certificate | None, float, str | None]:
    """Returns (output, cost, error) of one producer call; cost in the unit of
    ``_cost_key``."""
    t0 = time.perf_counter()
    spent = 0.0

    def cost() -> float:
        return spent if budget_mode() == "work" else time.perf_counter() - t0

    try:
        # each call counts work from 0, so a work-mode bracket depends on nothing else
        # produced but the hints it is given (claim ``lower_hints_from``) and the key-set
        # scores the operator's earlier searches kept; a resumed run repeats them all
        with fresh_count():
            try:
                prod = get_producer(name)
                kw: dict[str, Any] = {}
                if stop_at is not None and _takes(prod.produce, "stop_at"):
                    kw["stop_at"] = stop_at
                if floor is not None and _takes(prod.produce, "floor"):
                    kw["floor"] = floor
                if hints is not None and _takes(prod.produce, "hints"):
                    kw["hints"] = hints
                out = prod.produce(A, eps, logits=logits, **kw)
            finally:
                spent = work_done()
    except Exception as err:  # untrusted code: report, never crash the run
        tb = traceback.format_exception_only(type(err), err)[-1].strip()
        return None, cost(), f"{name}: {tb}"
    return out, cost(), None


def produce_operator(op_id: str, A: np.ndarray, eps_list: list[Fraction], uppers: list[str],
                     lowers: list[str], *, logits: np.ndarray | None = None,
                     skip: set[str] | frozenset[str] = frozenset()) -> OperatorResult:
    """Returns the brackets of one operator for every eps and upper producer not in ``skip``.

    ``skip`` holds bracket ids already stored (a resumed run); they are searched again but not
    returned: each search starts from the hints of its neighbour eps, so a bracket is the one
    an uninterrupted run writes only when every search before it ran (an operator whose
    brackets are all stored is not passed here).  The best lower certificate of an eps goes to
    the anchor bracket, or to the first bracket of that eps when the anchor producer gave
    nothing.  A producer that raises or returns a malformed result yields no bracket and a
    failure message; one that returns None (nothing found) yields no bracket.
    Key-set scores are shared by the operator's searches (``keyset.shared_scores``).
    """
    with shared_scores():
        return _produce_operator(op_id, A, eps_list, uppers, lowers, logits, skip)


def _produce_operator(op_id: str, A: np.ndarray, eps_list: list[Fraction], uppers: list[str],
                      lowers: list[str], logits: np.ndarray | None,
                      skip: set[str] | frozenset[str]) -> OperatorResult:
    res = OperatorResult()
    anchor = anchor_of(uppers)
    by_eps: dict[Fraction, list[BracketPlan]] = {}
    # the upper searches run from the smallest eps up, each producer's hints handed on: a fit
    # within a smaller eps is within this one, a start below the ranks it would begin at
    up_hints: dict[str, dict] = {}
    up_from: dict[str, Fraction] = {}
    for eps in sorted(set(eps_list)):
        plans: list[BracketPlan] = by_eps.setdefault(eps, [])
        for up in uppers:
            if _skip_priced(up, op_id, A.shape, res):
                continue
            given = up_hints.setdefault(up, {})
            seeded_from = up_from.get(up) if given else None
            before = dict(given)
            w, secs, err = _run(up, A, eps, logits, hints=given)
            if _changed(before, given):
                up_from[up] = eps
            again = AGAIN if bracket_id(op_id, eps, up) in skip else ""
            if err:
                res.failures.append(f"{op_id} eps={eps}: {err}{again}")
            if w is None:
                continue
            bad = malformed_witness(w, A.shape)
            if bad:
                res.failures.append(f"{op_id} eps={eps}: {up}: {bad}{again}")
                continue
            w = compact_witness(A, w, eps)
            claims = {**w.claims, "upper_rank": int(w.rank),
                      f"upper_{_cost_key()}": round(secs, 4)}
            if seeded_from is not None:
                claims["upper_hints_from"] = str(seeded_from)
            if budget_scale() != 1.0:
                # a resumed run with another scale mixes budgets: each bracket says its own
                claims["budget_scale"] = budget_scale()
            if budget_mode() == "work":
                claims["budget_mode"] = "work"
            plans.append(BracketPlan(id=bracket_id(op_id, eps, up), eps=eps,
                                     upper=w.to_mapping(), lower=None,
                                     producer={"upper": up, "lower": None},
                                     claims=_jsonable(claims)))
    # the lower searches run from the largest eps down, each producer's hints handed on: what a
    # search found at a larger eps is a start at a smaller one (see ``_attach_lower``)
    hints: dict[str, dict] = {}
    hints_from: dict[str, Fraction] = {}
    for eps in sorted(by_eps, reverse=True):
        plans = by_eps[eps]
        if plans:
            target_plan = next((b for b in plans if b.producer["upper"] == anchor), plans[0])
            least_upper = min(int(b.upper["rank"]) for b in plans)
            _attach_lower(target_plan, op_id, A, eps, lowers, logits, res, least_upper,
                          hints=hints, hints_from=hints_from,
                          again=AGAIN if target_plan.id in skip else "")
    for eps in eps_list:  # the store's order: as asked
        res.brackets.extend(b for b in by_eps.pop(eps, []) if b.id not in skip)
    return res


def _attach_lower(plan: BracketPlan, op_id: str, A: np.ndarray, eps: Fraction,
                  lowers: list[str], logits: np.ndarray | None, res: OperatorResult,
                  least_upper: int | None = None, *, hints: dict[str, dict] | None = None,
                  hints_from: dict[str, Fraction] | None = None, again: str = "") -> None:
    """Runs the lower producers on (A, eps) and attaches the best certificate to ``plan``.
    ``again`` ends each failure message (``AGAIN`` when ``plan`` is already stored).

    ``hints`` ({producer: dict}, kept per operator) is handed to each producer that takes it;
    ``hints_from`` ({producer: eps}) is updated to this eps for each producer whose search
    wrote to its dict.  Claim ``lower_hints_from``: the eps whose search left the hints the
    stored certificate's search started from (the bracket depends on that search too).
    """
    best: Certificate | None = None
    best_name, best_secs = None, 0.0
    seconds: dict[str, float] = {}
    skipped: list[str] = []
    over: list[str] = []  # priced above their budget (``prices``): not started
    sources: dict[str, Fraction] = {}  # producer -> the eps its hints came from
    for lo in lowers:
        if best is not None and least_upper is not None and best.rank >= least_upper:
            skipped.append(lo)  # the claimed bracket is closed: nothing left to find
            continue
        if _skip_priced(lo, op_id, A.shape, res):
            over.append(lo)
            continue
        given = None if hints is None else hints.setdefault(lo, {})
        if given and hints_from is not None and lo in hints_from:
            sources[lo] = hints_from[lo]
        before = dict(given or {})
        c, secs, err = _run(lo, A, eps, logits, least_upper,
                            None if best is None else int(best.rank), given)
        if given is not None and hints_from is not None and _changed(before, given):
            hints_from[lo] = eps
        seconds[lo] = round(secs, 4)
        if err:
            res.failures.append(f"{op_id} eps={eps}: {err}{again}")
        bad = None if c is None else malformed_certificate(c, A.shape)
        if bad:
            res.failures.append(f"{op_id} eps={eps}: {lo}: {bad}{again}")
            continue
        if c is not None and (best is None or c.rank > best.rank):
            best, best_name, best_secs = c, lo, secs
    # every lower producer's time, winner or not: what each one costs is visible in the store
    if seconds:
        plan.claims[f"lower_producer_{_cost_key()}"] = seconds
    if skipped:
        plan.claims["lower_producers_skipped"] = skipped
    if over:
        plan.claims["lower_producers_over_budget"] = over
    if best is None:
        return
    assert isinstance(best, Certificate)
    plan.lower = compact_certificate(best).to_mapping()
    plan.producer["lower"] = best_name
    claims = {f"lower_{k}" if not k.startswith("lower_") else k: v
              for k, v in best.claims.items()}
    claims.update({"lower_rank": int(best.rank), "lower_kind": best.kind,
                   f"lower_{_cost_key()}": round(best_secs, 4)})
    if best_name in sources:
        claims["lower_hints_from"] = str(sources[best_name])
    plan.claims.update(_jsonable(claims))


def _skip_priced(name: str, op_id: str, shape: tuple[int, ...], res: OperatorResult) -> bool:
    """Whether built-in producer ``name`` is priced above its budget on ``shape``
    (``prices.over_budget``); the reason goes to ``res.skipped`` once per operator."""
    why = over_budget(name, shape)
    if why is None:
        return False
    note = f"{op_id}: {why}"
    if note not in res.skipped:
        res.skipped.append(note)
    return True


def _changed(before: dict, after: dict) -> bool:
    """Whether a producer's call changed its hints dict (``before``, a shallow copy taken
    before the call, holds the old values, so an identity test cannot be fooled by a reused
    id)."""
    return before.keys() != after.keys() or any(after[k] is not before[k] for k in after)


def malformed_witness(w: object, shape: tuple[int, ...]) -> str | None:
    """Returns why an upper producer's output cannot be stored (None if well-formed).

    Only the form is checked here (types, shapes, finite values); whether it holds is for
    ``certify`` to say.
    """
    if not isinstance(w, Witness):
        return f"returned {type(w).__name__}, expected a Witness"
    m, N = shape
    U, V = np.asarray(w.U), np.asarray(w.V)
    if U.ndim != 2 or V.ndim != 2 or U.shape[0] != m or V.shape[1] != N \
            or U.shape[1] != V.shape[0] or U.shape[1] != w.rank:
        return f"witness shapes U {U.shape}, V {V.shape}, rank {w.rank} do not fit A {shape}"
    if w.rank > min(m, N):  # the store refuses it: no m x N matrix has a larger rank
        return f"witness rank {w.rank} exceeds min(m, N) = {min(m, N)} of A {shape}"
    if U.dtype.kind != "f" or V.dtype.kind != "f" or not (np.isfinite(U).all()
                                                            and np.isfinite(V).all()):
        return "witness factors must be finite float arrays"
    return None


def malformed_certificate(c: object, shape: tuple[int, ...]) -> str | None:
    """Returns why a lower producer's output cannot be stored (None if well-formed)."""
    from softrank.witnesses.store import LOWER_ARRAYS

    if not isinstance(c, Certificate):
        return f"returned {type(c).__name__}, expected a Certificate"
    if c.kind not in LOWER_ARRAYS:
        return f"unknown certificate kind {c.kind!r}"
    missing = [n for n in LOWER_ARRAYS[c.kind] if n not in c.arrays]
    if missing:
        return f"certificate arrays {missing} missing"
    if isinstance(c.rank, bool) or not isinstance(c.rank, int | np.integer) or c.rank < 0:
        return f"bad certificate rank {c.rank!r}"
    if c.rank > min(shape[0], shape[1]):  # the store refuses it (no larger rank exists)
        return f"certificate rank {c.rank} exceeds min(m, N) = {min(shape[0], shape[1])}"
    for name, X in c.arrays.items():
        X = np.asarray(X)
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            return f"certificate array {name} has NaN/Inf"
    return None


def compact_witness(A: np.ndarray, w: Witness, eps: Fraction) -> Witness:
    """Returns ``w`` with U, V rounded to float32 when the rounded witness still meets the
    float64 budget (halves the store; the kernel checks whatever values are stored)."""
    if w.U.dtype == np.float32 and w.V.dtype == np.float32:
        return w
    with np.errstate(over="ignore"):  # a factor past float32's range stays float64 (below)
        U32, V32 = w.U.astype(np.float32), w.V.astype(np.float32)
    if not (np.all(np.isfinite(U32)) and np.all(np.isfinite(V32))):
        return w
    err = float(row_l1(A, U32.astype(np.float64), V32.astype(np.float64)).max())
    if not err <= target(eps):
        return w
    return Witness(rank=w.rank, U=U32, V=V32, kind=w.kind,
                   claims={**w.claims, "upper_error": err, "stored_as": "float32"})


def compact_certificate(c: Certificate) -> Certificate:
    """Stores 0/1-valued D and W (key-set decoders) as float32: exact, smaller, same claim."""
    arrays = dict(c.arrays)
    for name in ("D", "W"):
        X = arrays.get(name)
        if X is not None and X.dtype == np.float64 and np.array_equal(X, X.astype(np.float32)):
            arrays[name] = X.astype(np.float32)
    return Certificate(kind=c.kind, rank=c.rank, arrays=arrays, claims=c.claims)


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
