"""``softrank-certify diff OLD NEW``: which (operator, eps) pairs changed between two versions of
a study.

OLD and NEW are each an audit's report.json (or the audit folder holding it) or a store (a
folder with store.json, rechecked here).  A pair changed when its validated bracket [L, U], its
verdict at some budget, or the outcome of some claim of its records (or an input error) differs,
or when it exists on one side only, or when its operator's shape or family differs (the
criterion depends on the shape).  Pairs are matched by operator id and exact
eps.
"""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from softrank.certify.errors import InputError
from softrank.certify.rationals import qstr, to_rational
from softrank.witnesses import jsonexact, open_store
from softrank.witnesses.atomic import read_regular
from softrank.witnesses.store import _ID as ID_RULE  # a report's ids are a store's

from ..audit import DEFAULT_BUDGETS, MAX_BUDGETS, parse_budgets
from ..audit.journal import normalize
from ..audit.report import REPORT_FORMAT
from ..audit.tables import fmt_eps, group_pairs, ok
from ..runner import iter_checks
from ..terminal import shown
from ..words import end_result, word
from ..workers import jobs_count
from ._intrinsic_check import refuse_intrinsic_errors

NAME = "diff"
HELP = ("name the (operator, eps) pairs whose validated brackets, verdicts or claim outcomes "
        "changed between two audit reports (report.json) or two stores (exit 0 none, 1 some, "
        "2 input errors: records that are input errors are compared, named, and exit 2)")

REPORT_NAME = "report.json"
STORE_HEADER = "store.json"
MAX_REPORT_MIB = 256  # about 60,000 records; parsing takes about ten times the file in memory
MAX_JSON_MIB = 4096  # the largest --max-json: the per-file cap of stores

EXAMPLES = (  # shown under --help
    'softrank-certify diff old_audit/report.json new_audit/report.json',
    'softrank-certify diff old_store new_store --json',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", help="report.json of an audit, its folder, or a store folder")
    p.add_argument("new", help="the same for the newer version")
    p.add_argument("--budgets", default=None, metavar="K,K,...",
                   help="budgets whose verdicts are compared (default: those of the reports, "
                        f"else {','.join(map(str, DEFAULT_BUDGETS))})")
    p.add_argument("--tier", choices=["auto", "float64", "arb", "exact"], default="auto",
                   help="arithmetic tier when a side is a store (default auto)")
    p.add_argument("--jobs", type=jobs_count, default=1, metavar="N",
                   help="worker processes when a side is a store (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-json", type=int, default=MAX_REPORT_MIB, metavar="MIB",
                   help="largest report.json read, in MiB, checked before it is read "
                        f"(default {MAX_REPORT_MIB}, at most {MAX_JSON_MIB})")


# ---------------------------------------------------------------------------- loading


def load_side(path: str | Path, *, tier: str = "auto", jobs: int = 1,
              max_bytes: int = MAX_REPORT_MIB << 20
              ) -> tuple[str, list[dict[str, Any]], list[int] | None]:
    """Returns (kind, records, budgets) of one side: kind "report" (records of report.json,
    budgets from its options) or "store" (records checked now, budgets None).  A report's
    eps are rewritten in the one spelling an audit writes ("0.15" -> "3/20"), so that one
    pair cannot be split into two rows that hide each other.

    Raises InputError for a path that is neither; for a report.json that is a symbolic link,
    not a regular file, larger than ``max_bytes`` (checked before reading), of another
    format, with a record of the wrong shape, an id outside the store's id rule, a bracket
    id twice, or more than MAX_BUDGETS budgets.
    """
    p = Path(path)
    if p.is_dir() and os.path.lexists(p / REPORT_NAME):
        if os.path.lexists(p / STORE_HEADER):
            # read as a report, a store's own planted report.json would stand in for the
            # recheck of its brackets
            raise InputError(f"the folder holds both {REPORT_NAME} and {STORE_HEADER}: name "
                             f"{p / REPORT_NAME} to compare the report, or a folder with "
                             "the store alone to check it", source=str(p))
        p = p / REPORT_NAME
    if not p.is_dir():
        return "report", *_load_report(p, max_bytes)
    if (p / STORE_HEADER).is_file():
        # its intrinsic records are not compared, but a store check refuses is refused here
        refuse_intrinsic_errors(open_store(p))
        recs = [normalize(r) for r in iter_checks(p, jobs=jobs, tier=tier)]
        return "store", sorted(recs, key=lambda r: r["bracket"]), None
    raise InputError("neither an audit report (report.json or its folder) nor a store "
                     "(a folder with store.json)", source=str(p))


def _load_report(p: Path, max_bytes: int) -> tuple[list[dict[str, Any]], list[int] | None]:
    raw = read_regular(p, field="report.json", max_bytes=max_bytes, limit="(--max-json)")
    try:
        doc = jsonexact.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(f"not a readable JSON report ({err})", source=str(p)) from None
    if not isinstance(doc, dict) or doc.get("format") != REPORT_FORMAT:
        raise InputError(f"not a {REPORT_FORMAT} document", field="format",
                         source=str(p)) from None
    recs = doc.get("records")
    if not isinstance(recs, list) or not all(_record_shape_ok(r) for r in recs):
        raise InputError("records must be a list of audit records", field="records",
                         source=str(p))
    seen: set[str] = set()
    for i, r in enumerate(recs):
        for k in ("bracket", "operator"):
            if not ID_RULE.match(r[k]):
                raise InputError(f"{r[k][:140]} is not a store id ([A-Za-z0-9] then "
                                 "up to 127 of [A-Za-z0-9._-])", field=f"records[{i}].{k}",
                                 source=str(p))
        if r["bracket"] in seen:
            raise InputError(f"bracket id {r['bracket']} appears twice",
                             field=f"records[{i}].bracket", source=str(p))
        seen.add(r["bracket"])
        r["eps"] = qstr(to_rational(r["eps"], field="eps"))
    opts = doc.get("options") if isinstance(doc.get("options"), dict) else {}
    budgets = opts.get("budgets")
    if not (isinstance(budgets, list) and all(type(k) is int and k > 0 for k in budgets)):
        budgets = None
    elif len(budgets) > MAX_BUDGETS:
        raise InputError(f"{len(budgets)} budgets (at most {MAX_BUDGETS})",
                         field="options.budgets", source=str(p))
    return [normalize(r) for r in recs], budgets


def _record_shape_ok(r: Any) -> bool:
    if not isinstance(r, dict):
        return False
    if not all(isinstance(r.get(k), str) for k in ("bracket", "operator", "eps")):
        return False
    try:
        # bounded: "1e999999999" is 11 characters and would expand to a billion digits
        to_rational(r["eps"], field="eps")
    except InputError:
        return False
    if not ok(r):
        return True
    shape = r.get("shape")
    return (isinstance(r.get("family"), str) and isinstance(shape, list) and len(shape) == 2
            and all(type(s) is int and s > 0 for s in shape)
            and all(r.get(k) is None or type(r.get(k)) is int for k in ("lower", "upper")))


# ---------------------------------------------------------------------------- comparing


def _key(op: str, eps: str) -> tuple[str, Fraction]:
    return op, to_rational(eps, field="eps")


def _outcomes(records: list[dict[str, Any]]) -> dict[tuple[str, Fraction], dict[str, Any]]:
    """(operator, eps) -> {bracket id: {"upper": outcome, "lower": outcome} or "error"}."""
    out: dict[tuple[str, Fraction], dict[str, Any]] = {}
    for r in records:
        d = out.setdefault(_key(r["operator"], r["eps"]), {})
        d[r["bracket"]] = ("error" if not ok(r) else
                           {"upper": _outcome(r, "upper"), "lower": _outcome(r, "lower")})
    return out


def _outcome(r: dict[str, Any], end: str) -> str:
    """The result word of an end and what it claimed: a rank that moved is a change even
    when both claims are proved."""
    res = end_result(r, end)
    chk = r.get(f"{end}_check")
    if not isinstance(chk, dict) or chk.get("rank") is None:
        return res
    return f"{res} ({chk.get('kind')} rank {chk.get('rank')})"


def _claim_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    changes = []
    for bid in sorted(set(old) | set(new)):
        a, b = old.get(bid, "absent record"), new.get(bid, "absent record")
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for end in ("upper", "lower"):
                if a[end] != b[end]:
                    changes.append({"bracket": bid, "end": end, "old": a[end], "new": b[end]})
        else:
            changes.append({"bracket": bid, "end": None, "old": _word(a), "new": _word(b)})
    return changes


def _word(x: Any) -> str:
    if isinstance(x, dict):
        return f"upper {x['upper']}, lower {x['lower']}"
    return str(x)


def compare(old: list[dict[str, Any]], new: list[dict[str, Any]], budgets: list[int]
            ) -> dict[str, Any]:
    """Returns the differences between two record lists: ``changed`` (one entry per
    (operator, eps) pair whose bracket, verdicts or claim outcomes differ, or that exists on
    one side only; sorted by operator and eps) and counts.  Pure; the pairs are regrouped
    from the records (``tables.group_pairs``), so a report's stored tables are not trusted.
    """
    pairs_old = {_key(p["operator"], p["eps"]): p for p in group_pairs(old, budgets)}
    pairs_new = {_key(p["operator"], p["eps"]): p for p in group_pairs(new, budgets)}
    out_old, out_new = _outcomes(old), _outcomes(new)
    keys = sorted(set(out_old) | set(out_new))
    changed = []
    for key in keys:
        po, pn = pairs_old.get(key), pairs_new.get(key)
        what = []
        entry: dict[str, Any] = {"operator": key[0], "eps": str(key[1]),
                                 "family": (po or pn or {}).get("family")}
        if key not in out_old or key not in out_new:
            what.append("added" if key not in out_old else "removed")
        side = {"old": po, "new": pn}
        for name, p in side.items():
            entry[name] = None if p is None else {
                "lower": p["lower"], "upper": p["upper"], "lower_from": p["lower_from"],
                "upper_from": p["upper_from"], "resolved": p["resolved"],
                "shape": p["shape"], "family": p["family"], "budgets": p["budgets"]}
        if po is not None and pn is not None:
            if (po["lower"], po["upper"]) != (pn["lower"], pn["upper"]):
                what.append("bracket")
            # the same id on another operator (whether a bracket is within the study's
            # criterion depends on its shape, and on nothing else but the bracket)
            if (po["shape"], po["family"]) != (pn["shape"], pn["family"]):
                what.append("operator")
            if po["budgets"] != pn["budgets"]:
                what.append("verdicts")
                entry["verdicts"] = {k: [po["budgets"][k], pn["budgets"][k]]
                                     for k in po["budgets"] if po["budgets"][k] !=
                                     pn["budgets"].get(k)}
        elif (po is None) != (pn is None) and not what:
            what.append("bracket")  # every record of the pair became (or stopped being) an error
        claims = _claim_changes(out_old.get(key, {}), out_new.get(key, {}))
        if claims:
            what.append("claims")
            entry["claims"] = claims
        if what:
            entry["changes"] = what
            changed.append(entry)
    return {"pairs_old": len(out_old), "pairs_new": len(out_new), "pairs_compared": len(keys),
            "budgets": budgets,
            "changed_pairs": len(changed), "changed": changed}


# ---------------------------------------------------------------------------- output


def _bracket(b: dict[str, Any] | None) -> str:
    return "-" if b is None else f"[{b['lower']}, {b['upper']}]"


def format_text(result: dict[str, Any]) -> list[str]:
    """Returns the text lines: one per changed pair, then a summary line.  Every string from
    a report (ids, outcomes, verdict words) is escaped (softrank.terminal.shown), so a hostile
    report.json can neither forge a line nor drive the terminal."""
    lines = []
    for c in result["changed"]:
        parts = [f"{shown(c['operator'])} eps={fmt_eps(c['eps'])}:",
                 f"bracket {shown(_bracket(c['old']))} -> {shown(_bracket(c['new']))}"]
        for k, (a, b) in (c.get("verdicts") or {}).items():
            parts.append(shown(f"k={k} {a} -> {b}"))
        for ch in c.get("claims") or []:
            end = f" {ch['end']}" if ch["end"] else ""
            parts.append(shown(f"{ch['bracket']}{end} {word(ch['old'])} -> {word(ch['new'])}"))
        lines.append(" ".join(parts[:2]) + ("; " + "; ".join(parts[2:]) if parts[2:] else "")
                     + f"  ({', '.join(c['changes'])})")
    lines.append(f"{result['changed_pairs']} of {result['pairs_compared']} (operator, eps) "
                 "pairs changed")
    return lines


def _side_words(kind: str) -> str:
    return ("a report (its records as written, not checked again)" if kind == "report"
            else "a store (its brackets checked now)")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.max_json <= MAX_JSON_MIB:
        raise InputError(f"must be from 1 to {MAX_JSON_MIB} (MiB)", field="--max-json")
    cap = args.max_json << 20
    kind_old, old, b_old = load_side(args.old, tier=args.tier, jobs=args.jobs, max_bytes=cap)
    kind_new, new, b_new = load_side(args.new, tier=args.tier, jobs=args.jobs, max_bytes=cap)
    if args.budgets is not None:
        budgets = parse_budgets(args.budgets)
    else:
        budgets = sorted(set(b_old or []) | set(b_new or [])) or list(DEFAULT_BUDGETS)
    result = compare(old, new, budgets)
    result = {"old": {"path": str(args.old), "kind": kind_old},
              "new": {"path": str(args.new), "kind": kind_new}, **result}
    if not args.json:
        print(f"softrank-certify diff: old is {_side_words(kind_old)}, new is "
              f"{_side_words(kind_new)}", file=sys.stderr)
    if args.json:
        print(jsonexact.dumps(result, indent=1))
    else:
        for line in format_text(result):
            print(line)
    errors = [r for r in (*old, *new) if not ok(r)]
    for r in errors[:20]:
        print(f"softrank-certify diff: input error: {shown(str(r.get('error')))}",
              file=sys.stderr)
    if errors:
        # an unchanged error is still an error: no "0 changed" verdict on unreadable records
        print(f"softrank-certify diff: {len(errors)} records are input errors (compared as "
              "outcome 'error'; exit 2)", file=sys.stderr)
        return 2
    return 1 if result["changed"] else 0
