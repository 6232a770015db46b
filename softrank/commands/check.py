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
from ..audit import tightening
from ..audit.tables import fmt_citation, fmt_eps, group_pairs
from ..export import check_bundle_target
from ..numfmt import sci
from ..runner import default_jobs, iter_checks
from ..terminal import shown
from ..words import LEGEND_WORDS, all_proved, end_reason, end_result, word
from ..workers import jobs_count
from . import _batch
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
    where.add_argument("--jobs", type=jobs_count, default=1, metavar="N",
                       help=f"worker processes (default 1; this machine suggests "
                            f"{default_jobs()})")
    p.add_argument("--tier", choices=["auto", "float64", "arb", "exact"], default="auto",
                   help="force one arithmetic tier (default: auto, escalating only where thin)")
    p.add_argument("--max-work", metavar="W", default=None,
                   help="work limit per record, in work units of about 1 ns (default "
                        "6e10, about 60 s); a record over it ends undecided "
                        "('work limit')")
    p.add_argument("--export", metavar="BUNDLE", default=None,
                   help="also write a replay bundle (see the export command) from this run "
                   "(refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true",
                   help="replace the --export BUNDLE if it is an existing regular file")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on a Dask cluster (extra [dask]); workers must see STORE at the "
                            "same path (start them with --nthreads 1)")
    _batch.add_argument(p)


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
    undecided end).  A record carrying ``tightened`` (``tightening.record_view``) that
    differs from its own [L, U] shows it at the end of its line, each changed end with the
    bracket and eps it comes from; tightened ends that contradict are never shown as a
    bracket (``tightened_text``)."""
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
    res = "within" if r.get("resolved") else "outside"
    tight = tightened_text(r)
    return (f"{head} {lower:<37} {upper:<37} [{r['lower']}, {r['upper']}] {res}{chi}"
            + (f" {tight}" if tight else ""))


def tightened_text(r: dict[str, Any]) -> str:
    """Returns ``tightened [4, 6] (L from b12 at eps 0.35 (submatrix))`` when the record's
    tightened bracket differs from its own [L, U] (only the changed ends are cited), the
    words of an internal error when the tightened ends contradict, else "".  Store ids are
    made visible (``shown``)."""
    t = r.get("tightened")
    if not isinstance(t, dict):
        return ""
    if not t.get("consistent", True):
        return "INTERNAL ERROR: tightened ends contradict (see the summary)"
    if not t.get("changed"):
        return ""
    own = (r.get("lower"), r.get("upper"))
    cites = [f"{name} from {fmt_citation(t[f'{end}_from'])}"
             for name, end, mine in (("L", "lower", own[0]), ("U", "upper", own[1]))
             if t[end] != mine]
    return shown(f"tightened [{t['lower']}, {t['upper']}] ({', '.join(cites)})")


def internal_error_lines(pairs: list[dict[str, Any]]) -> list[str]:
    """Returns one line per (operator, eps) whose tightened ends contradict (L > U): proved
    ends cannot, so each is an internal error (a kernel or bookkeeping bug), never a
    bracket.  Store ids are made visible."""
    return [shown(f"internal error: proved ends of operator {x['operator']} at eps "
                  f"{fmt_eps(x['eps'])} contradict: L = {x['lower']} from "
                  f"{fmt_citation(x['lower_from'])} > U = {x['upper']} from "
                  f"{fmt_citation(x['upper_from'])}")
            for x in tightening.inconsistencies(pairs)]


def tighten_records(records: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns (the records, each checked one with ``tightened``, and the pairs of
    ``group_pairs`` with ``tightened``): every validated end of an operator's records
    combined across its eps (``tightening``)."""
    pairs = tightening.attach(group_pairs(records, ()), records)
    return tightening.attach_to_records(records, pairs), pairs


def _q(s: str) -> Any:
    from fractions import Fraction

    return Fraction(s)


def run(args: argparse.Namespace) -> int:
    if args.export:
        # before the run, not after it
        check_bundle_target(args.export, "--export", args.force)
    max_work = None if args.max_work is None else workbound.parse_max_work(args.max_work)
    batch = _batch.value(args)
    reader = open_store(args.store)  # validates records before any work starts
    total = len(reader.brackets)
    records: list[dict[str, Any]] = []
    bar = tqdm(total=total, unit="bracket", disable=args.json or args.quiet or total < 20
               or not sys.stderr.isatty(), file=sys.stderr)
    if args.verbose and not args.json:
        print(LEGEND)
    # a record's line shows its bracket tightened across eps, which needs every record of
    # its operator: lines are held until the operator's last record has arrived
    left = Counter(b.operator for b in reader.brackets)
    held: dict[str, list[dict[str, Any]]] = {}
    for rec in iter_checks(args.store, jobs=args.jobs, tier=args.tier,
                           scheduler=args.scheduler, max_work=max_work, batch=batch,
                           digest=reader.digest):
        records.append(rec)
        bar.update(1)
        if args.verbose and not args.json:
            held.setdefault(rec["operator"], []).append(rec)
            left[rec["operator"]] -= 1
            if left[rec["operator"]] <= 0:
                done, _ = tighten_records(sorted(held.pop(rec["operator"]),
                                                 key=lambda r: r["bracket"]))
                for r in done:
                    tqdm.write(format_line(r, args.tier), file=sys.stdout)
    bar.close()
    for rest in held.values():  # pragma: no cover - every operator's records arrive
        for r in tighten_records(rest)[0]:
            tqdm.write(format_line(r, args.tier), file=sys.stdout)
    records.sort(key=lambda r: r["bracket"])
    records, pairs = tighten_records(records)
    summary = summarize(records)
    summary["tightened"] = tightening.counts(pairs)
    internal = internal_error_lines(pairs)
    # intrinsic witnesses (intrinsic.jsonl), when the store has them
    intrinsic = list(iter_intrinsic_checks(reader, max_work))
    if args.verbose and not args.json:  # one line per record, as for brackets
        for res in intrinsic:
            print(format_result(res))
    isum = summarize_intrinsic(intrinsic) if intrinsic else None
    # the bundle before the result line: an export that fails (exit 2) prints no verdict;
    # without brackets none is written, which is not "every claim proved" (exit 0)
    no_bundle = bool(args.export) and not records
    bad_intrinsic = isum["errors"] if isum else 0
    if args.export and (summary["errors"] or bad_intrinsic):
        # a bundle without them would replay as complete; the errors are named below
        print(f"softrank-certify: no bundle written to {shown(args.export)}: "
              f"{summary['errors']} brackets and {bad_intrinsic} intrinsic records are input "
              "errors", file=sys.stderr)
    elif args.export:
        from .export import export_records

        export_records(args.store, records, args.export, as_json=False,
                       digest=reader.digest, max_work=max_work, force=args.force,
                       field="--export")
    if args.json:
        doc = {"store": str(args.store), "summary": summary, "assumptions": assumptions(),
               "records": records, "internal_errors": tightening.inconsistencies(pairs)}
        if isum is not None:
            doc.update(intrinsic_summary=isum, intrinsic=intrinsic)
        print(jsonexact.dumps(doc, indent=1))
    else:
        print(_summary_text(summary, records, isum["errors"] if isum else 0, internal,
                            nothing=not records and not intrinsic,
                            no_bundle=no_bundle,
                            intrinsic_records=isum["records"] if isum else 0))
    if isum is not None and isum["errors"]:
        for res in intrinsic:
            if "error" in res:
                print(f"softrank-certify: input error: {shown(res['error'])}", file=sys.stderr)
        if not summary["errors"] and not internal:
            return 2
    if internal:  # proved ends cannot contradict: a bug, whatever else went wrong
        for line in internal:
            print(f"softrank-certify: {line}", file=sys.stderr)  # already shown()
        return 3
    if summary["errors"]:
        for r in records:
            if "error" in r:
                print(f"softrank-certify: input error: {shown(r['error'])}", file=sys.stderr)
        return 2
    if not records and not intrinsic:  # 0 says every claim was proved: there must be one
        print("softrank-certify: the store holds no brackets and no intrinsic records: "
              "nothing was checked", file=sys.stderr)
        return 1
    return 0 if all_proved(records) and not no_bundle else 1


LEGEND = (
    "Each line: BRACKET OPERATOR eps=EPS  lower CLAIM->PROVED OUTCOME [TIER]  "
    "upper CLAIM->PROVED OUTCOME [TIER]  [L, U] of this record, within or outside the "
    "criterion, chi<=SLACK charged.\n"
    "A pair is within the published study's criterion when U <= 2L, U - L <= 2 or "
    "U - L <= min(m, N)/10.\n"
    f"OUTCOME: {LEGEND_WORDS}. [TIER]: the arithmetic that decided.\n"
    "Under a line, one indented line per end that is not proved: the enclosure of the "
    "checked quantity (rounded outward to 4 digits) against its threshold, the tier, and "
    "for undecided the cause.\n"
    "At the end of a line, where it differs from [L, U]: the bracket of the record's "
    "OPERATOR and EPS tightened across eps (r_eps is non-increasing in eps: an L valid at "
    "eps' >= eps and a U valid at eps' <= eps hold at eps), each changed end with the "
    "BRACKET and EPS it comes from and its kind (a fallback named as such)."
)


def _summary_text(s: dict[str, Any], records: list[dict[str, Any]],
                  intrinsic_errors: int = 0, internal: list[str] | None = None,
                  nothing: bool = False, no_bundle: bool = False,
                  intrinsic_records: int = 0) -> str:
    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{v} {word(k)}" for k, v in sorted(d.items())) or "none"

    t = s.get("tightened") or tightening.counts(
        tightening.attach(group_pairs(records, ()), records))
    internal = list(internal or [])
    errors = s["errors"] + intrinsic_errors
    proved = all_proved(records) and not errors and not internal
    lines = [
        f"checked {s['brackets']} stored brackets (records) of {t['pairs']} (operator, eps) "
        "pairs",
        f"  upper claims (r_eps <= k by factors U V): {counts(s['upper_results'])}",
        f"  lower claims (r_eps >= L by a certificate): {counts(s['lower_results'])}",
        f"  validated pairs L <= r_eps <= U: {t['resolved_per_eps']} of {t['pairs']} "
        f"within the study's criterion per eps, {t['resolved']} after tightening across eps",
        f"  closed (L = U): {t['closed_per_eps']} per eps, {t['closed']} after tightening "
        f"across eps ({t['changed']} pairs narrowed by ends proved at other eps)",
        f"  operator slack chi > 0 on {s['chi_positive']} records, changing "
        f"{s['chi_changed']} outcomes; input errors: {s['errors']}",
        *([f"  {s['work_limited']} records stopped at the work limit (undecided; raise it "
           "with --max-work)"] if s.get("work_limited") else []),
        *([f"  intrinsic records: {intrinsic_records} checked, input errors "
           f"{intrinsic_errors} (-v: one line each)"] if intrinsic_records else []),
        *(f"  INTERNAL ERROR: {line}" for line in internal),
        "result: " + ("nothing was checked: no brackets and no intrinsic records (exit 1)"
                      if nothing and not errors else
                      "no bracket claims; every intrinsic record enclosed (its float "
                      "claims are the producer's, not checked)" + (
                          "; no bundle written: --export needs brackets (exit 1)" if no_bundle
                          else " (exit 0)") if proved and not records else
                      "every claim proved (exit 0)" if proved else
                      f"internal error: {len(internal)} pairs with proved ends that contradict "
                      "(exit 3); report this as a bug" if internal else
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
