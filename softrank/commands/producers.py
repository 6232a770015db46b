"""``softrank-certify producers STORE``: compare upper producers by the rank they need.

For every (operator, eps) the rank of each upper producer's witness is *validated* by the
same check as ``check`` (``recheck.check_record``: the operator of record, with its slack chi
when A is stored beside logits or a block; a witness that is not proved counts as full rank
min(m, N)); the table gives, per producer, the median of its validated rank divided by
the alternating-l1 validated rank, like the literature's comparison table.

The lower producers are shown side by side below it: a store keeps, per (operator, eps), the
best lower certificate found (the one with the largest claimed rank), so each row counts the
brackets a lower producer won, how many of its certificates the same check proves (one it
does not prove counts as rank 0), their median validated rank, and how many of them close the
bracket (validated L equal to the least validated upper rank of that operator and eps).  A
record with an input error is left out of the tables and named on stderr (exit 2), as by
``check``.  (The tables took the stored A as the operator before, without the slack chi or the
checks of the logits: a store whose witnesses do not hold for its operator of record was
reported with every claim proved.)

Last, the open brackets (validated L < U per operator and eps) with the best float64 values
the producers claim to have found next to each end (``softrank.audit.loose``): the least
rank-(U - 1) fit error over eps and the least lower-certificate value at rank L + 1, each of
which would have to fall below 1 to move its end, and the end whose number is nearer 1.
Search results, not proofs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from fractions import Fraction
from typing import Any

from tqdm import tqdm

from softrank.audit import loose
from softrank.audit.tables import agree_cell, fmt_eps
from softrank.numfmt import sci, sig
from softrank.runner import iter_checks
from softrank.terminal import shown
from softrank.witnesses import jsonexact, open_store

NAME = "producers"
HELP = ("compare producers: upper ones by median validated rank relative to alternating l1, "
        "lower ones side by side")
REFERENCE = "alt_l1"

EXAMPLES = (  # shown under --help
    'softrank-certify producers examples/minilm',
    'softrank-certify producers my_store --json',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory")
    p.add_argument("--reference", default=REFERENCE,
                   help=f"producer the ratios are relative to (default {REFERENCE})")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def checked_records(store: str, *, progress: bool = False) -> list[dict[str, Any]]:
    """Returns the record of checking each bracket of ``store`` exactly as ``check`` does
    (``runner.iter_checks``: the operator of record with its slack chi, input errors as
    records with an ``error``), in the store's bracket order."""
    reader = open_store(store)
    order = {b.id: i for i, b in enumerate(reader.brackets)}
    bar = tqdm(total=len(order), unit="bracket", disable=not progress, file=sys.stderr,
               desc="validate")
    out = []
    for rec in iter_checks(store, digest=reader.digest):
        out.append(rec)
        bar.update(1)
    bar.close()
    return sorted(out, key=lambda r: order[r["bracket"]])


def _status(rec: dict[str, Any], end: str) -> str:
    chk = rec.get(f"{end}_check")
    return "error" if "error" in rec or chk is None else str(chk["status"])


def validated_ranks(checked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns one row per bracket of ``checked`` (``checked_records``) without an input
    error: operator, eps, producer, claimed and validated rank (full rank min(m, N) when
    the witness is not proved for the operator of record)."""
    rows: list[dict[str, Any]] = []
    for rec in checked:
        if "error" in rec:
            continue
        full = min(rec["shape"])
        status = _status(rec, "upper")
        rows.append({"operator": rec["operator"], "eps": Fraction(rec["eps"]),
                     "producer": str(rec["producer"].get("upper", "?")),
                     "claimed": rec["upper_claim"], "status": status,
                     "validated": rec["upper_claim"] if status == "holds" else full,
                     "full": full,
                     "seconds": claimed_seconds(_claimed_cost(rec["claims"], "upper"))})
    return rows


def claimed_seconds(v: Any) -> Fraction | None:
    """Returns a producer's claimed time as an exact number, or None when the claim is not a
    finite non-negative number (claims are the producers' own words: shown, never trusted)."""
    if isinstance(v, bool) or not isinstance(v, (int, Fraction)) or v < 0:
        return None
    return Fraction(v)


def _claimed_cost(claims: dict[str, Any], name: str) -> Any:
    """Returns the claim ``<name>_seconds``, else ``<name>_work``: a store produced with
    ``--budget-mode work`` records work units instead of seconds (each about a CPU second
    on a 128 x 128 head where the units were calibrated), so that its brackets are
    byte-identical from run to run."""
    v = claims.get(f"{name}_seconds")
    return claims.get(f"{name}_work") if v is None else v


def cost_unit(store: str) -> str:
    """Returns the unit of the cost claims the store's brackets carry: "s" (CPU seconds,
    ``--budget-mode cpu``), "work" (work units, ``--budget-mode work``), "s|work" when
    brackets of both modes are mixed, "-" when none records a cost."""
    units = set()
    for br in open_store(store).brackets:
        for name in ("upper", "lower_producer"):
            if f"{name}_seconds" in br.claims:
                units.add("s")
            elif f"{name}_work" in br.claims:
                units.add("work")
    return "|".join(sorted(units)) if units else "-"


def lower_times(store: str) -> dict[str, dict[str, Any]]:
    """Returns per lower producer the sum of its claimed seconds over the brackets that record
    the lower producers' times (``lower_producer_seconds``), how many runs that sums, and how
    many claims were unreadable."""
    out: dict[str, dict[str, Any]] = {}
    for br in open_store(store).brackets:
        times = _claimed_cost(br.claims, "lower_producer")
        if not isinstance(times, dict):
            continue
        for name, v in times.items():
            t = out.setdefault(str(name), {"seconds": Fraction(0), "runs": 0, "unreadable": 0})
            sec = claimed_seconds(v)
            if sec is None:
                t["unreadable"] += 1
            else:
                t["seconds"] += sec
                t["runs"] += 1
    return out


def validated_lowers(checked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns one row per bracket of ``checked`` holding a lower certificate, without an
    input error: operator, eps, producer, kind, claimed and validated rank (0 when the
    certificate is not proved for the operator of record)."""
    rows: list[dict[str, Any]] = []
    for rec in checked:
        if "error" in rec or rec["lower_kind"] is None:
            continue
        status = _status(rec, "lower")
        rows.append({"operator": rec["operator"], "eps": Fraction(rec["eps"]),
                     "producer": str(rec["producer"].get("lower", "?")),
                     "kind": rec["lower_kind"], "claimed": rec["lower_claim"],
                     "status": status,
                     "validated": rec["lower_claim"] if status == "holds" else 0})
    return rows


def compare_lowers(lowers: list[dict[str, Any]], uppers: list[dict[str, Any]],
                   times: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Returns per lower producer: certificates (brackets won), proved, median validated rank,
    closed (validated L = least validated U of that operator and eps), kinds, and its claimed
    seconds from ``times`` (None when none are recorded).  A producer that ran (it has times)
    but won nothing has zero counts and median rank None."""
    times = times or {}
    best_u: dict[tuple[str, Any], int] = {}
    for r in uppers:
        key = (r["operator"], r["eps"])
        best_u[key] = min(best_u.get(key, r["full"]), r["validated"])
    table: dict[str, Any] = {}
    by_name = _by_producer(lowers)  # one pass: a list search per name was quadratic
    for name in sorted(set(by_name) | set(times)):
        mine = by_name.get(name, [])
        t = times.get(name)
        table[name] = {
            "certificates": len(mine),
            "proved": sum(r["status"] == "holds" for r in mine),
            "median_rank": statistics.median(r["validated"] for r in mine) if mine else None,
            "closed": sum(r["validated"] == best_u.get((r["operator"], r["eps"])) for r in mine),
            "kinds": sorted({r["kind"] for r in mine}),
            "seconds": None if t is None or not t["runs"] else t["seconds"],
        }
    return table


def pair_claims(store: str) -> dict[tuple[str, Any], list[Any]]:
    """Returns {(operator, eps): the claims of each of its brackets} (untrusted text)."""
    out: dict[tuple[str, Any], list[Any]] = defaultdict(list)
    for br in open_store(store).brackets:
        out[(br.operator, br.eps)].append(br.claims)
    return dict(out)


def open_brackets(uppers: list[dict[str, Any]], lowers: list[dict[str, Any]],
                  claims: dict[tuple[str, Any], list[Any]]) -> list[dict[str, Any]]:
    """Returns one row per open (operator, eps): its validated bracket [L, U] (L the largest
    validated lower rank, 0 without one; U the least validated upper rank) with
    ``loose.diagnose_all`` of the claims of its brackets (upper_next_ratio, lower_next_value:
    exact Fractions or None; likely_loose), in the order of ``uppers``."""
    best_u: dict[tuple[str, Any], int] = {}
    for r in uppers:
        key = (r["operator"], r["eps"])
        best_u[key] = min(best_u.get(key, r["full"]), r["validated"])
    best_l: dict[tuple[str, Any], int] = {}
    for r in lowers:
        key = (r["operator"], r["eps"])
        best_l[key] = max(best_l.get(key, 0), r["validated"])
    rows = []
    for (op, eps), U in best_u.items():
        L = best_l.get((op, eps), 0)
        d = loose.diagnose_all(claims.get((op, eps), []), L, U)
        if d is not None:
            rows.append({"operator": op, "eps": eps, "lower": L, "upper": U, **d})
    return rows


MAX_OPEN_SHOWN = 40


def format_open_table(rows: list[dict[str, Any]], pairs: int) -> str:
    """The open brackets as text: one line each (at most MAX_OPEN_SHOWN), a count line and
    what the numbers are (store ids made visible by ``shown``)."""
    def num(q: Fraction | None) -> str:
        return "-" if q is None else sig(q, 4)  # exact to 4 digits: any size of claim

    lines = ["Open brackets: which side is likely loose (float64 searches, not proofs)",
             f"{'open bracket':<28} {'eps':>8} {'[L, U]':>10} {'U-1 fit/eps':>11} "
             f"{'agree':>6} {'L+1 value':>9}  likely loose"]
    for r in rows[:MAX_OPEN_SHOWN]:
        lines.append(f"{shown(r['operator']):<28} {fmt_eps(str(r['eps'])):>8} "
                     f"{'[' + str(r['lower']) + ', ' + str(r['upper']) + ']':>10} "
                     f"{num(r['upper_next_ratio']):>11} "
                     f"{agree_cell(r.get('upper_next_agree'), r.get('upper_next_runs')):>6} "
                     f"{num(r['lower_next_value']):>9}  "
                     f"{r['likely_loose']}")
    if len(rows) > MAX_OPEN_SHOWN:
        lines.append(f"... and {len(rows) - MAX_OPEN_SHOWN} more (--json lists all)")
    n = {s: sum(r["likely_loose"] == s for r in rows) for s in loose.SIDES}
    lines.append(f"{len(rows)} of {pairs} (operator, eps) brackets open; likely loose: upper "
                 f"{n['upper']}, lower {n['lower']}, unknown {n['unknown']}")
    lines.append("U-1 fit/eps: best float64 fit found at rank U - 1, error / eps (below 1 "
                 "would lower U); agree: runs at U - 1 ending within 3% of that fit, of all "
                 "runs there; L+1 value: best float64 lower-certificate value found at "
                 "rank L + 1 (below 1 would raise L); likely loose: lower where 3 or more "
                 "runs agree and the fit is more than 3% above eps, else the end nearer 1; "
                 "the producers' own claims from incomplete searches, not a proof")
    return "\n".join(lines)


def _secs(v: Fraction | None) -> str:
    if v is None:
        return "-"
    # a hostile claim may exceed the float range: display only, never a verdict
    return f"{float(v):.0f}" if v < 10**12 else sci(v)


def format_lower_table(table: dict[str, Any], unit: str = "s") -> str:
    lines = [f"{'lower':<14} {'won':>5} {'proved':>7} {'median rank':>11} {'closed':>7} "
             f"{'claimed ' + unit:>9}  kinds"]
    order = sorted(table, key=lambda n: (-table[n]["certificates"], n))
    for n in order:
        t = table[n]
        lines.append(f"{shown(n):<14} {t['certificates']:>5} {t['proved']:>7} "
                     f"{'-' if t['median_rank'] is None else t['median_rank']:>11} "
                     f"{t['closed']:>7} {_secs(t['seconds']):>9}  "
                     f"{', '.join(shown(k) for k in t['kinds'])}")
    return "\n".join(lines)


def compare(rows: list[dict[str, Any]], reference: str = REFERENCE) -> dict[str, Any]:
    """Returns per-producer medians of validated rank / reference validated rank."""
    # a reference of rank 0 (every row within eps of 0) gives no ratio
    ref = {(r["operator"], r["eps"]): r["validated"] for r in rows
           if r["producer"] == reference and r["validated"]}
    table: dict[str, Any] = {}
    by_name = _by_producer(rows)
    for name in sorted(by_name):
        mine = by_name[name]
        ratios = [r["validated"] / ref[(r["operator"], r["eps"])] for r in mine
                  if (r["operator"], r["eps"]) in ref]
        table[name] = {
            "brackets": len(mine),
            "proved": sum(r["status"] == "holds" for r in mine),
            "confirmed": sum(r["status"] == "holds" for r in mine),  # older key (deprecated)
            "median_rank": statistics.median(r["validated"] for r in mine),
            "median_ratio": statistics.median(ratios) if ratios else None,
            "mean_ratio": statistics.fmean(ratios) if ratios else None,
            "pairs": len(ratios),
            "seconds": _sum_claimed([r["seconds"] for r in mine]),
        }
    return table


def _by_producer(rows: list[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["producer"]].append(r)
    return out


def _sum_claimed(vals: list[Fraction | None]) -> Fraction | None:
    known = [v for v in vals if v is not None]
    return sum(known, Fraction(0)) if known else None


def format_table(table: dict[str, Any], reference: str, unit: str = "s") -> str:
    lines = [f"{'producer':<12} {'witnesses':>9} {'proved':>7} {'median rank':>11} "
             f"{'median / ' + shown(reference):>16} {'mean ratio':>10} "
             f"{'claimed ' + unit:>9}"]
    order = sorted(table, key=lambda n: (table[n]["median_ratio"] is None,
                                         table[n]["median_ratio"] or 0, n))
    for n in order:
        t = table[n]
        ratio = "-" if t["median_ratio"] is None else f"{t['median_ratio']:.2f}x"
        mean = "-" if t["mean_ratio"] is None else f"{t['mean_ratio']:.2f}x"
        lines.append(f"{shown(n):<12} {t['brackets']:>9} {t['proved']:>7} "
                     f"{t['median_rank']:>11} {ratio:>16} {mean:>10} {_secs(t['seconds']):>9}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    progress = not (args.quiet or args.json) and sys.stderr.isatty()
    checked = checked_records(args.store, progress=progress)
    errors = [str(r["error"]) for r in checked if "error" in r]
    rows = validated_ranks(checked)
    table = compare(rows, args.reference)
    failed = sum(r["status"] != "holds" for r in rows)
    lowers = validated_lowers(checked)
    lower_table = compare_lowers(lowers, rows, lower_times(args.store))
    lower_failed = sum(r["status"] != "holds" for r in lowers)
    opened = open_brackets(rows, lowers, pair_claims(args.store))
    pairs = len({(r["operator"], r["eps"]) for r in rows})
    unit = cost_unit(args.store)
    if args.json:
        print(jsonexact.dumps({"store": str(args.store), "reference": args.reference,
                               "table": table, "witnesses_not_proved": failed,
                               "cost_unit": unit,
                               "lower_table": lower_table,
                               "certificates_not_proved": lower_failed,
                               "open_brackets": opened,
                               "input_errors": errors,
                               "open_brackets_note": "best float64 values the producers "
                               "claim next to each end (upper_next_ratio at rank U - 1, "
                               "lower_next_value at rank L + 1; below 1 would move the end): "
                               "float64 searches, not proofs"}, indent=1))
    else:
        if args.reference not in table:
            print(f"(no {shown(args.reference)} brackets in the store: ratios unavailable)")
        print(format_table(table, args.reference, unit))
        print(f"{len(rows)} witnesses rechecked as by check (the operator of record, its slack "
              f"chi); {failed} not proved (counted as full rank)")
        if lower_table:
            print()
            print(format_lower_table(lower_table, unit))
            print(f"{len(lowers)} certificates (the best per operator and eps) rechecked as "
                  f"by check; {lower_failed} not proved (counted as rank 0)")
        print(f"claimed {unit}: the producers' own costs summed from the store (unchecked "
              "claims; s: CPU seconds of --budget-mode cpu, work: the work units of "
              "--budget-mode work)")
        if opened:
            print()
            print(format_open_table(opened, pairs))
    for e in errors[:20]:
        print(f"softrank-certify producers: input error: {shown(e)}", file=sys.stderr)
    if errors:
        print(f"softrank-certify producers: {len(errors)} records are input errors, left out "
              "of the tables (exit 2)", file=sys.stderr)
        return 2
    # the table is the product; the exit code still says whether every claim was proved
    return 0 if not failed and not lower_failed else 1
