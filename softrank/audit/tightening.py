"""Validated brackets tightened across tolerances: the numbers, from check records.

r_eps is non-increasing in eps, so a lower end proved at eps' >= eps and an upper end proved
at eps' <= eps are theorems about r_eps too (proofs_notes/tighten.md).  For each operator this
module hands every validated end of its checked records to the kernel's ``certify.tighten``
and attaches the result, with the record each end comes from, to the grouped pairs of
``tables.group_pairs``.  It proves nothing itself and renders nothing: the ends it combines
are the records' validated ``lower`` / ``upper`` (including the fallbacks proved on the spot,
L = 1 by the nonzero check and the trivial U = min(m, N), cited as such), and every rendering
of its output escapes the store ids it cites.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from softrank.certify import ProvedEnd, tighten

from ..words import end_result
from .records import _validated_ends, end_kind, is_resolved, ok, verdict

# the budget "verdict" of a pair whose tightened ends contradict: never a verdict about r_eps
INCONSISTENT = "inconsistent"


def operator_ends(records: Iterable[dict[str, Any]]) -> dict[str, list[ProvedEnd]]:
    """Returns {operator id: its proved ends}, two per checked record (its validated L as a
    lower end and its validated U as an upper end, at the record's own eps, ``source`` = the
    bracket id), in bracket-id order so that ties cite the first bracket id.

    Each end is a theorem about r_eps(operator of record) at that eps: the validated ends of
    a checked record are (``certify.check_bracket``; an absent L is the always-true L = 0 and
    an absent U the trivial min(m, N)).  Input-error records give no end.
    """
    ends: dict[str, list[ProvedEnd]] = defaultdict(list)
    for r in sorted((r for r in records if ok(r)), key=lambda r: r["bracket"]):
        L, U = _validated_ends(r)
        eps = Fraction(r["eps"])
        ends[r["operator"]] += [ProvedEnd(eps, "lower", L, r["bracket"]),
                                ProvedEnd(eps, "upper", U, r["bracket"])]
    return dict(ends)


def _citation(end: ProvedEnd | None, by_id: dict[str, dict[str, Any]], side: str
              ) -> dict[str, Any] | None:
    """Returns where a tightened end comes from: the bracket id, its eps (exact string), the
    kind of certificate behind it and whether that is a fallback proved on the spot (the
    nonzero L = 1, L = 0, or the trivial U = min(m, N)) rather than the record's claim."""
    if end is None:
        return None
    r = by_id[end.source]
    return {"bracket": end.source, "eps": str(end.eps), "kind": end_kind(r, side),
            "fallback": end_result(r, side) != "proved"}


def tightened_brackets(pairs: Sequence[dict[str, Any]], records: Iterable[dict[str, Any]],
                       budgets: Sequence[int] = ()) -> dict[tuple[str, str], dict[str, Any]]:
    """Returns {(operator, eps): tightened bracket} for every pair of ``pairs`` (the output
    of ``tables.group_pairs`` on the same records).

    A tightened bracket holds ``lower`` / ``upper`` (the largest L proved at some eps' >= eps,
    the smallest U proved at some eps' <= eps, over every checked record of the operator),
    ``lower_from`` / ``upper_from`` (``_citation``), ``consistent`` (lower <= upper; False only
    for a kernel or bookkeeping bug), ``changed`` (it differs from the pair's per-eps
    bracket), and, when consistent, ``closed`` (L = U), ``resolved`` (the study's criterion on
    the tightened ends), ``ratio`` (exact U/L, None when L = 0) and the verdict at each budget.
    An inconsistent one has ``closed`` and ``resolved`` False, ratio None and every verdict
    INCONSISTENT: it is never a bracket.
    """
    records = list(records)
    by_id = {r["bracket"]: r for r in records if ok(r)}
    ends = operator_ends(records)
    at: dict[str, set[Fraction]] = defaultdict(set)
    for p in pairs:
        at[p["operator"]].add(Fraction(p["eps"]))
    out: dict[tuple[str, str], dict[str, Any]] = {}
    tight = {op: tighten(ends.get(op, []), at=sorted(epss)) for op, epss in at.items()}
    for p in pairs:
        t = tight[p["operator"]][Fraction(p["eps"])]
        if t.lower is None or t.upper is None:  # pragma: no cover - the pair's own records
            raise RuntimeError(f"no proved end for pair {p['operator']!r} at {p['eps']}")
        L, U = t.lower, t.upper
        row: dict[str, Any] = {
            "lower": L, "upper": U,
            "lower_from": _citation(t.lower_from, by_id, "lower"),
            "upper_from": _citation(t.upper_from, by_id, "upper"),
            "consistent": t.consistent,
            "changed": (L, U) != (p["lower"], p["upper"]),
        }
        if t.consistent:
            row.update(closed=t.closed, resolved=is_resolved(U, L, p["full_rank"]),
                       ratio=None if L == 0 else str(Fraction(U, L)),
                       budgets={str(k): verdict(k, U, L) for k in budgets})
        else:
            row.update(closed=False, resolved=False, ratio=None,
                       budgets={str(k): INCONSISTENT for k in budgets})
        out[(p["operator"], p["eps"])] = row
    return out


def attach(pairs: list[dict[str, Any]], records: Iterable[dict[str, Any]],
           budgets: Sequence[int] = ()) -> list[dict[str, Any]]:
    """Sets ``pair["tightened"]`` (``tightened_brackets``) on every pair; returns ``pairs``."""
    tight = tightened_brackets(pairs, records, budgets)
    for p in pairs:
        p["tightened"] = tight[(p["operator"], p["eps"])]
    return pairs


def record_view(record: dict[str, Any], pair: dict[str, Any]) -> dict[str, Any]:
    """Returns the tightened bracket of ``record``'s pair as stored on the record: the pair's
    tightened ends and citations, with ``changed`` now meaning "differs from this record's own
    validated [L, U]" (the record's line shows it only then)."""
    t = {k: v for k, v in pair["tightened"].items() if k != "budgets"}
    t["changed"] = (t["lower"], t["upper"]) != _validated_ends(record)
    return t


def attach_to_records(records: Iterable[dict[str, Any]], pairs: Sequence[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Returns copies of ``records``, each checked one with its key ``tightened``
    (``record_view``); input-error records are returned unchanged.  ``pairs`` must carry
    ``tightened`` (``attach``)."""
    by_key = {(p["operator"], p["eps"]): p for p in pairs}
    out = []
    for r in records:
        if ok(r) and (r["operator"], r["eps"]) in by_key:
            out.append({**r, "tightened": record_view(r, by_key[(r["operator"], r["eps"])])})
        else:
            out.append(r)
    return out


def inconsistencies(pairs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the pairs whose tightened ends contradict (L > U), as {operator, eps, lower,
    upper, lower_from, upper_from}: proved ends cannot, so each is an internal error."""
    return [{"operator": p["operator"], "eps": p["eps"], **{
        k: p["tightened"][k] for k in ("lower", "upper", "lower_from", "upper_from")}}
            for p in pairs if not p["tightened"]["consistent"]]


def counts(pairs: Sequence[dict[str, Any]], budgets: Sequence[int] = ()) -> dict[str, Any]:
    """Returns the counts over ``pairs`` (with ``tightened``): closed per eps and tightened,
    within the study's criterion per eps and tightened, pairs changed by tightening,
    inconsistent tightened pairs, and the tightened verdicts per budget."""
    t = [p["tightened"] for p in pairs]
    return {
        "pairs": len(pairs),
        "closed_per_eps": sum(p["lower"] == p["upper"] for p in pairs),
        "closed": sum(bool(x["closed"]) for x in t),
        "resolved_per_eps": sum(bool(p["resolved"]) for p in pairs),
        "resolved": sum(bool(x["resolved"]) for x in t),
        "changed": sum(bool(x["changed"]) for x in t),
        "inconsistent": sum(not x["consistent"] for x in t),
        "budgets": {str(k): {v: sum(x["budgets"].get(str(k)) == v for x in t)
                             for v in ("feasible", "impossible", "unresolved", INCONSISTENT)}
                    for k in budgets},
    }
