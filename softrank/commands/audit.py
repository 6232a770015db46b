"""``softrank-certify audit STORE --out DIR``: tables, figures and provenance for a paper."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from softrank.certify.errors import InputError
from softrank.certify.numerics import workbound
from softrank.witnesses import jsonexact
from softrank.witnesses.atomic import read_regular

from ..audit import DEFAULT_RESAMPLES, DEFAULT_SEED, parse_budgets, run_audit
from ..audit.report import internal_error_text
from ..runner import default_jobs
from ..terminal import shown
from ..workers import jobs_count
from . import _batch

NAME = "audit"
HELP = ("check every bracket of a store (resumable, parallel) and write report.md, report.tex, "
        "report.json and figures for a paper")

EXAMPLES = (  # shown under --help
    'softrank-certify audit examples/minilm --out audit_out',
    'softrank-certify audit my_store --out audit_out --budgets 4,8,16 --no-figures',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory (format softrank-brackets v1)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder; its journal.jsonl lets an interrupted audit resume")
    where = p.add_mutually_exclusive_group()  # local processes or a cluster, not both
    where.add_argument("--jobs", type=jobs_count, default=1, metavar="N",
                       help=f"worker processes (default 1; this machine suggests "
                            f"{default_jobs()})")
    p.add_argument("--budgets", default="8,16,32", metavar="K,K,...",
                   help="rank budgets for the feasible / impossible / unresolved table "
                        "(default 8,16,32)")
    p.add_argument("--tier", choices=["auto", "float64", "arb", "exact"], default="auto",
                   help="force one arithmetic tier (default: auto, escalating only where thin)")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on a Dask cluster (extra [dask]); workers must see STORE at the "
                            "same path and run one check at a time per process (start them with "
                            "--nthreads 1 and several --nworkers)")
    _batch.add_argument(p)
    p.add_argument("--max-work", metavar="W", default=None,
                   help="work limit per record, in work units of about 1 ns (default "
                        "6e10, about 60 s); a record over it ends undecided "
                        "('work limit')")
    p.add_argument("--restart", action="store_true",
                   help="discard DIR's journal instead of resuming from it")
    p.add_argument("--recheck", action="store_true",
                   help="ignore DIR's journal and check every bracket again (a resume "
                        "otherwise reuses this user's signed journal, rechecking a sample)")
    p.add_argument("--no-figures", action="store_true",
                   help="skip the matplotlib figures (without this flag an audit refuses to "
                        "start when matplotlib is missing)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S",
                   help=f"seed of the bootstrap intervals (default {DEFAULT_SEED})")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, metavar="R",
                   help=f"bootstrap resamples per family and eps (default {DEFAULT_RESAMPLES}, "
                        "at most 100000)")
    p.add_argument("--no-progress", action="store_true",
                   help=argparse.SUPPRESS)  # older spelling of --quiet, kept working
    p.add_argument("--json", action="store_true",
                   help="print the report's summary as JSON instead of text")


SHOWN_ERRORS = 20  # intrinsic input errors printed on stderr; intrinsic.md lists them all


def _intrinsic_errors(out: str) -> list[str]:
    """Returns the error texts of ``out``/intrinsic.json, just written by this run (the
    stderr lines name the file and field, as intrinsic.md does); [] when it cannot be read."""
    try:
        # floats in it are the report's own medians: plain json, only the texts are used
        doc = json.loads(read_regular(Path(out) / "intrinsic.json").decode("utf-8"))
        return [f"{e['id']}: {e['error']}" for e in doc["errors"]]
    except (InputError, ValueError, KeyError, TypeError):
        return []


def _command_line(args: argparse.Namespace, budgets: list[int]) -> str:
    """Returns the canonical command line of this run (every option spelled out)."""
    argv = ["softrank-certify", "audit", str(args.store), "--out", str(args.out)]
    # --jobs and --scheduler exclude each other: the line names the one this run used
    argv += ["--scheduler", args.scheduler] if args.scheduler else ["--jobs", str(args.jobs)]
    batch = _batch.value(args)
    if batch is not None:
        argv += ["--batch", str(batch)]
    argv += ["--budgets", ",".join(map(str, budgets)), "--tier", args.tier]
    if args.no_figures:
        argv.append("--no-figures")
    argv += ["--seed", str(args.seed), "--resamples", str(args.resamples)]
    if args.max_work is not None:
        argv += ["--max-work", str(workbound.parse_max_work(args.max_work))]
    return " ".join(shlex.quote(a) for a in argv)


def run(args: argparse.Namespace) -> int:
    budgets = parse_budgets(args.budgets)
    max_work = None if args.max_work is None else workbound.parse_max_work(args.max_work)
    batch = _batch.value(args)
    command = _command_line(args, budgets)
    report = run_audit(args.store, args.out, jobs=args.jobs, budgets=budgets, tier=args.tier,
                       scheduler=args.scheduler, restart=args.restart,
                       recheck=args.recheck,
                       progress=not (args.no_progress or args.quiet or args.json)
                       and sys.stderr.isatty(),
                       figures=not args.no_figures, command=command,
                       bootstrap_seed=args.seed, bootstrap_resamples=args.resamples,
                       max_work=max_work, batch=batch)
    s = report["summary"]
    intrinsic = s.get("intrinsic")
    if args.json:
        print(jsonexact.dumps({"out": str(args.out), "summary": s,
                               "assumptions": report["assumptions"], "run": report["run"]},
                              indent=1))
    else:
        t = s["tightened"]
        print(f"{s['brackets']} brackets, {s['pairs']} (operator, eps) pairs, "
              f"{s['resolved_pairs']} within the study's criterion ({t['resolved']} after "
              f"tightening across eps); closed (L = U): {t['closed_per_eps']} per eps, "
              f"{t['closed']} after tightening across eps; claims not proved: "
              f"{s['claims_not_proved']}; input errors: {s['input_errors']}")
        also = "report.tex, report.json" + (", figures/" if report["figures"] else "")
        print(shown(f"report written to {args.out}/report.md (also {also})"))
        if intrinsic is not None:
            print(shown(f"{intrinsic['records']} intrinsic records checked "
                        f"({intrinsic['errors']} input errors): {args.out}/intrinsic.md"))
    for e in report["errors"]:
        print(f"softrank-certify: input error: {shown(e['error'])}", file=sys.stderr)
    if intrinsic is not None and intrinsic.get("errors"):
        for e in _intrinsic_errors(args.out)[:SHOWN_ERRORS]:
            print(f"softrank-certify: intrinsic input error: {shown(e)}", file=sys.stderr)
    for x in s["internal_errors"]:
        print(shown(f"softrank-certify: internal error: {internal_error_text(x, str)}"),
              file=sys.stderr)
    return int(s["exit_code"])
