"""``softrank-certify check STORE``: rigorously recheck every bracket of a store."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from tqdm import tqdm

from witnesses import jsonexact, open_store

from ..intrinsic_check import format_result, iter_intrinsic_checks, summarize_intrinsic
from ..runner import default_jobs, iter_checks

NAME = "check"
HELP = "recheck every stored bracket: upper witnesses and lower certificates, rigorously"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory (format softrank-brackets v1)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help=f"worker processes (default 1; this machine suggests {default_jobs()})")
    p.add_argument("--tier", choices=["auto", "float64", "arb", "exact"], default="auto",
                   help="force one arithmetic tier (default: auto, escalating only where thin)")
    p.add_argument("--quiet", action="store_true", help="no per-bracket lines, summary only")


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns counts of outcomes per end, input errors and chi-affected verdicts."""
    out: dict[str, Any] = {"brackets": len(records), "errors": 0}
    for end in ("upper", "lower"):
        out[end] = dict(Counter(r.get(f"{end}_outcome", "error") for r in records
                                if "error" not in r))
    out["errors"] = sum("error" in r for r in records)
    out["resolved"] = sum(bool(r.get("resolved")) for r in records if "error" not in r)
    out["chi_positive"] = sum(r.get("chi", "0") != "0" for r in records if "error" not in r)
    out["chi_changed"] = sum(bool(r.get("chi_changed")) for r in records)
    return out


def all_proved(records: list[dict[str, Any]]) -> bool:
    """True when every claim of every bracket was confirmed (absent ends do not count)."""
    return all("error" not in r and r.get("upper_outcome") == "confirmed"
               and r.get("lower_outcome") in ("confirmed", "absent") for r in records)


def format_line(r: dict[str, Any]) -> str:
    head = f"{r['bracket']:<12} {r['operator']:<14} eps={r['eps']:<8}"
    if "error" in r:
        return f"{head} INPUT ERROR: {r['error']}"
    up = r.get("upper_check") or {}
    lo = r.get("lower_check") or {}
    lower = (f"lower {r['lower_claim']}->{r['lower']} {r['lower_outcome']}"
             + (f" [{lo.get('tier')}]" if lo else ""))
    upper = f"upper {r['upper_claim']}->{r['upper']} {r['upper_outcome']} [{up.get('tier')}]"
    chi = "" if r.get("chi") in (None, "0") else f" chi<={float(_q(r['chi'])):.2e}"
    res = "resolved" if r.get("resolved") else "unresolved"
    return f"{head} {lower:<34} {upper:<34} [{r['lower']}, {r['upper']}] {res}{chi}"


def _q(s: str) -> Any:
    from fractions import Fraction

    return Fraction(s)


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise SystemExit(_usage("--jobs must be >= 1"))
    reader = open_store(args.store)  # validates records before any work starts
    total = len(reader.brackets)
    records: list[dict[str, Any]] = []
    bar = tqdm(total=total, unit="bracket", disable=args.json or total < 20 or not
               sys.stderr.isatty(), file=sys.stderr)
    for rec in iter_checks(args.store, jobs=args.jobs, tier=args.tier):
        records.append(rec)
        bar.update(1)
        if not args.json and not args.quiet:
            tqdm.write(format_line(rec), file=sys.stdout)
    bar.close()
    records.sort(key=lambda r: r["bracket"])
    summary = summarize(records)
    # intrinsic witnesses (intrinsic.jsonl), when the store has them
    intrinsic = list(iter_intrinsic_checks(reader))
    for res in intrinsic:
        if not args.json and not args.quiet:
            print(format_result(res))
    isum = summarize_intrinsic(intrinsic) if intrinsic else None
    if args.json:
        doc = {"store": str(args.store), "summary": summary, "records": records}
        if isum is not None:
            doc.update(intrinsic_summary=isum, intrinsic=intrinsic)
        print(jsonexact.dumps(doc, indent=1))
    else:
        print(_summary_text(summary))
        if isum is not None:
            print(f"{isum['records']} intrinsic records checked; input errors {isum['errors']}")
    if isum is not None and isum["errors"]:
        for res in intrinsic:
            if "error" in res:
                print(f"softrank-certify: input error: {res['error']}", file=sys.stderr)
        if not summary["errors"]:
            return 2
    if summary["errors"]:
        for r in records:
            if "error" in r:
                print(f"softrank-certify: input error: {r['error']}", file=sys.stderr)
        return 2
    return 0 if all_proved(records) else 1


def _summary_text(s: dict[str, Any]) -> str:
    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"

    return (f"{s['brackets']} brackets: upper claims {counts(s['upper'])}; lower claims "
            f"{counts(s['lower'])}; resolved {s['resolved']}; slack chi > 0 on "
            f"{s['chi_positive']}, changing {s['chi_changed']} outcomes; input errors "
            f"{s['errors']}")


def _usage(msg: str) -> int:
    print(f"softrank-certify check: error: {msg}", file=sys.stderr)
    return 2
