"""``softrank-certify check STORE``: rigorously recheck every bracket of a store."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from tqdm import tqdm

from softrank.certify.numerics import workbound
from softrank.witnesses import jsonexact, open_store

from ..assumptions import assumptions
from ..audit.tables import group_pairs
from ..export import check_bundle_target
from ..numfmt import sci
from ..runner import default_jobs, iter_checks
from ..terminal import shown
from ..words import LEGEND_WORDS, all_proved, end_reason, end_result, word
from ._intrinsic_check import format_result, iter_intrinsic_checks, summarize_intrinsic

NAME = "check"
HELP = "recheck every stored bracket: upper witnesses and lower certificates, rigorously"

EXAMPLES = (  # shown under --help
    'softrank-certify check examples/minilm',
    'softrank-certify check examples/minilm -v          # one line per record, reasons',
    'softrank-certify check my_store --json > result.json',
    'softrank-certify check my_store --jobs 4 --export bundle.zip',
)
VERBOSE_HELP = ("print the legend, then one line per record and, under it, one "
                "line per end not proved: the enclosure against the threshold, the "
                "tier, and why")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory (format softrank-brackets v1)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    where = p.add_mutually_exclusive_group()  # local processes or a cluster, not both
    where.add_argument("--jobs", type=int, default=1, metavar="N",
                       help=f"worker processes (default 1; this machine suggests "
                            f"{default_jobs()})")
    p.add_argument("--tier", choices=["auto", "float64", "arb", "exact"], default="auto",
                   help="force one arithmetic tier (default: auto, escalating only where thin)")
    p.add_argument("--max-work", metavar="W", default=None,
                   help="work limit per record, in work units of about 1 ns (default "
                        "6e10, about 60 s); a record over it ends undecided "
                        "('work limit')")
    p.add_argument("--export", metavar="BUNDLE", default=None,
                   help="also write a replay bundle (see the export command) from this run")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on a Dask cluster (extra [dask]); workers must see STORE at the "
                            "same path (start them with --nthreads 1)")


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns counts of results per end (``<end>_results``: proved, does_not_hold,
    undecided, refuted, absent), input errors and chi-affected verdicts.  The keys ``upper``
    and ``lower`` keep the older words (confirmed, weakened, refuted, absent) for readers of
    earlier output (deprecated)."""
    out: dict[str, Any] = {"brackets": len(records), "errors": 0}
    for end in ("upper", "lower"):
        out[f"{end}_results"] = dict(Counter(end_result(r, end) for r in records
                                             if "error" not in r))
        out[end] = dict(Counter(r.get(f"{end}_outcome", "error") for r in records
                                if "error" not in r))
    out["errors"] = sum("error" in r for r in records)
    out["resolved"] = sum(bool(r.get("resolved")) for r in records if "error" not in r)
    out["chi_positive"] = sum(r.get("chi", "0") != "0" for r in records if "error" not in r)
    out["chi_changed"] = sum(bool(r.get("chi_changed")) for r in records)
    out["work_limited"] = sum(work_limited(r) for r in records)
    return out


def format_line(r: dict[str, Any], tier: str | None = None) -> str:
    """Returns the record's line and, under it, one indented reason line per claimed end
    that is not proved (``tier``: the tier the run forced, named as the cause of an
    undecided end)."""
    line = _record_line(r)
    if "error" in r:
        return line
    reasons = [f"    {end}: {shown(why)}" for end in ("lower", "upper")
               if (why := end_reason(r, end, tier))]
    return "\n".join([line, *reasons])


def work_limited(r: dict[str, Any]) -> bool:
    """True when a check of the record stopped at the work limit (certify.numerics.workbound)."""
    return any(str((r.get(c) or {}).get("reason", "")).startswith(workbound.WORK_LIMIT)
               for c in ("upper_check", "lower_check", "nonzero_check"))


def _record_line(r: dict[str, Any]) -> str:
    head = f"{shown(r['bracket']):<12} {shown(r['operator']):<14} eps={shown(r['eps']):<8}"
    if "error" in r:
        return f"{head} INPUT ERROR: {shown(r['error'])}"
    if work_limited(r):
        head = f"{head} [work limit]"
    up = r.get("upper_check") or {}
    lo = r.get("lower_check") or {}
    claim = "none" if r["lower_claim"] is None else r["lower_claim"]
    lower = (f"lower {claim}->{r['lower']} {word(end_result(r, 'lower'))}"
             + (f" [{lo.get('tier')}]" if lo else ""))
    upper = (f"upper {r['upper_claim']}->{r['upper']} {word(end_result(r, 'upper'))} "
             f"[{up.get('tier')}]")
    chi = "" if r.get("chi") in (None, "0") else f" chi<={sci(_q(r['chi']), rounding='up')}"
    res = "resolved" if r.get("resolved") else "unresolved"
    return f"{head} {lower:<37} {upper:<37} [{r['lower']}, {r['upper']}] {res}{chi}"


def _q(s: str) -> Any:
    from fractions import Fraction

    return Fraction(s)


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise SystemExit(_usage("--jobs must be >= 1"))
    if args.export:
        check_bundle_target(args.export, "--export")  # before the run, not after it
    max_work = None if args.max_work is None else workbound.parse_max_work(args.max_work)
    reader = open_store(args.store)  # validates records before any work starts
    total = len(reader.brackets)
    records: list[dict[str, Any]] = []
    bar = tqdm(total=total, unit="bracket", disable=args.json or args.quiet or total < 20
               or not sys.stderr.isatty(), file=sys.stderr)
    if args.verbose and not args.json:
        print(LEGEND)
    for rec in iter_checks(args.store, jobs=args.jobs, tier=args.tier,
                           scheduler=args.scheduler, max_work=max_work):
        records.append(rec)
        bar.update(1)
        if args.verbose and not args.json:
            tqdm.write(format_line(rec, args.tier), file=sys.stdout)
    bar.close()
    records.sort(key=lambda r: r["bracket"])
    summary = summarize(records)
    # intrinsic witnesses (intrinsic.jsonl), when the store has them
    intrinsic = list(iter_intrinsic_checks(reader, max_work))
    for res in intrinsic:
        if not args.json and not args.quiet:
            print(format_result(res))
    isum = summarize_intrinsic(intrinsic) if intrinsic else None
    if args.json:
        doc = {"store": str(args.store), "summary": summary, "assumptions": assumptions(),
               "records": records}
        if isum is not None:
            doc.update(intrinsic_summary=isum, intrinsic=intrinsic)
        print(jsonexact.dumps(doc, indent=1))
    else:
        print(_summary_text(summary, records, isum["errors"] if isum else 0))
        if isum is not None:
            print(f"{isum['records']} intrinsic records checked; input errors {isum['errors']}")
    if args.export:
        from .export import export_records

        export_records(args.store, records, args.export, as_json=False)
    if isum is not None and isum["errors"]:
        for res in intrinsic:
            if "error" in res:
                print(f"softrank-certify: input error: {shown(res['error'])}", file=sys.stderr)
        if not summary["errors"]:
            return 2
    if summary["errors"]:
        for r in records:
            if "error" in r:
                print(f"softrank-certify: input error: {shown(r['error'])}", file=sys.stderr)
        return 2
    return 0 if all_proved(records) else 1


LEGEND = (
    "Each line: BRACKET OPERATOR eps=EPS  lower CLAIM->PROVED OUTCOME [TIER]  "
    "upper CLAIM->PROVED OUTCOME [TIER]  [L, U] of this record, resolved or not, "
    "chi<=SLACK charged.\n"
    "A pair is resolved when U <= 2L, U - L <= 2 or U - L <= min(m, N)/10.\n"
    f"OUTCOME: {LEGEND_WORDS}. [TIER]: the arithmetic that decided.\n"
    "Under a line, one indented line per end that is not proved: the enclosure of the "
    "checked quantity (rounded outward to 4 digits) against its threshold, the tier, and "
    "for undecided the cause."
)


def _summary_text(s: dict[str, Any], records: list[dict[str, Any]],
                  intrinsic_errors: int = 0) -> str:
    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{v} {word(k)}" for k, v in sorted(d.items())) or "none"

    pairs = group_pairs(records, ())
    resolved = sum(p["resolved"] for p in pairs)
    closed = sum(p["lower"] == p["upper"] for p in pairs)
    errors = s["errors"] + intrinsic_errors
    proved = all_proved(records) and not errors
    lines = [
        f"checked {s['brackets']} stored brackets (records) of {len(pairs)} (operator, eps) "
        "pairs",
        f"  upper claims (r_eps <= k by factors U V): {counts(s['upper_results'])}",
        f"  lower claims (r_eps >= L by a certificate): {counts(s['lower_results'])}",
        f"  validated pairs L <= r_eps <= U: {resolved} of {len(pairs)} resolved, "
        f"{closed} closed (L = U)",
        f"  operator slack chi > 0 on {s['chi_positive']} records, changing "
        f"{s['chi_changed']} outcomes; input errors: {s['errors']}",
        *([f"  {s['work_limited']} records stopped at the work limit (undecided; raise it "
           "with --max-work)"] if s.get("work_limited") else []),
        "result: " + ("every claim proved (exit 0)" if proved else
                      "some claim not proved or unreadable (exit "
                      f"{2 if errors else 1}); rerun with -v for one line per record "
                      "and the reason of each end not proved"),
    ]
    if any(k == "does_not_hold" for end in ("upper", "lower") for k in s[f"{end}_results"]):
        lines.insert(-1, "  does not hold: the witness's or certificate's own inequality is "
                         "false; that alone proves nothing about r_eps")
    return "\n".join(lines)


def _usage(msg: str) -> int:
    print(f"softrank-certify check: error: {msg}", file=sys.stderr)
    return 2
