"""Assembles report.json, report.md, the LaTeX files (report.tex, a standalone document that
\\inputs report-tables.tex, report-figures.tex and report-per-head.tex) and the per-head CSV
from the finished records.

report.json is deterministic given the store, the tier, the budgets and the package versions:
records are sorted by bracket id and everything that changes from run to run (times, command
line, number of workers, how many records came from the journal) lives under the one key
``"run"``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from softrank.witnesses import jsonexact

from ..assumptions import assumptions, assumptions_markdown
from ..words import end_reason, end_result, word
from . import loose, stats, tables, tightening
from .escape import md, md_code, tex_comment
from .provenance import methods_text, produced_by, producing_environments

REPORT_FORMAT = "softrank-audit-report"
REPORT_VERSION = 1
VOLATILE_KEY = "run"

DEFINITIONS = {
    "validated_bracket": "[L, U] with L <= r_eps(A) <= U proved about the operator of record "
                         "A (slack chi charged: L from eps + chi, U from eps - chi)",
    "grouping": "several records may share (operator, eps); the pair's bracket is "
                "[max validated L, min validated U] over its records; pair tables count "
                "(operator, eps) pairs, claim tables count records",
    "within_criterion": "a pair's bracket is within the study's criterion when U <= 2 L, or "
                        "U - L <= 2, or U - L <= min(m, N) / 10 (exact integers; the JSON "
                        "keys pairs[].resolved and summary.resolved_pairs hold it on the "
                        "per-eps brackets, as the published study counts it; "
                        "pairs[].tightened.resolved and summary.tightened.resolved on the "
                        "brackets tightened across eps)",
    "tightened": "r_eps is non-increasing in eps, so an L proved at eps' >= eps and a U "
                 "proved at eps' <= eps (same operator) bound r_eps at eps too; the "
                 "tightened bracket of a pair is [largest such L, smallest such U] over every "
                 "checked record of its operator (fallbacks included and cited as such: "
                 "nonzero L = 1, trivial U = min(m, N)), each end citing the bracket and eps "
                 "it comes from (pairs[].tightened, records[].tightened, per_head); budget "
                 "verdicts in the tables and summary.tightened are on tightened brackets, the "
                 "medians, intervals, per-layer table and figures on per-eps brackets; "
                 "tightened ends that contradict (L > U) are an internal error, never a "
                 "bracket",
    "verdict": "at budget k: feasible if k >= U, impossible if k < L, else unresolved",
    "resolved": "at budget k, a pair is resolved when its verdict is feasible or impossible "
                "(the reports use the word for nothing else)",
    "outcomes": "proved: the claim's witness or certificate is a proof; does not hold: the "
                "witness's or certificate's own inequality is proved false, which proves "
                "nothing about r_eps; undecided: its check decided neither way; refuted: the "
                "claim about r_eps itself is proved false (an upper claim below the proved "
                "lower end, or a lower claim above the proved upper end); after does not hold, "
                "undecided or refuted the end falls back to what is proved on the spot (upper: "
                "min(m, N), B = A; lower: 1 if ||A||_row1 > eps + chi is proved, else 0); "
                "absent: no claim for that end (the lower end is then that same fallback). "
                "report.json keeps the older words under the older keys (`*_outcome`, "
                "`claims`, `not_confirmed`: confirmed / weakened / refuted, where refuted "
                "meant does not hold)",
    "ratio": "U/L per pair; infinite when L = 0; medians are exact (mean of the two middle "
             "values for an even count)",
    "eps_shown": "eps is shown exactly (a terminating decimal, else a/b) when that takes at "
                 "most 24 characters; a longer one (a float's exact value: 0.3 stored as a "
                 "float is a 56-digit decimal) as ~ and 6 significant digits, then the first "
                 "16 hex digits of the sha256 of its exact a/b spelling (report tables "
                 "only: report.json and per_head.csv hold every eps exactly)",
    "margin": "enclosure of the signed distance of the checked quantity from its threshold, "
              "positive on the claim's side",
    "closed": "a pair whose validated bracket is exact, L = U (r_eps known exactly)",
    "intervals": "bootstrap 95% percentile intervals over the operators of each family and "
                 "eps (resampled with replacement); seed, resample count and random stream in "
                 "options.bootstrap",
    "likely_loose": "for an open per-eps bracket (L < U), the producers' own claims of the "
                    "best float64 values their searches found next to each end: "
                    "upper_next_ratio, the best rank-(U - 1) fit's error over eps, and "
                    "lower_next_value, the best lower-certificate value at rank L + 1 (each "
                    "below 1 would move its end), with upper_next_agree of the upper "
                    "search's upper_next_runs runs at U - 1 ending within 3% of its best fit; "
                    "likely_loose is lower where at least 3 runs agree and the best fit is "
                    "more than 3% above eps (U probably the least rank), else the end whose "
                    "value is nearer 1 (unknown when one is missing or they tie); float64 "
                    "searches, not proofs (open_brackets, summary.open_brackets)",
}


def exit_code(records: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> int:
    """0 every claim proved, 1 some claim not proved (does not hold, undecided, refuted),
    2 an input error, 3 an internal error: proved ends that contradict, per eps or tightened
    across eps (``pairs`` with ``tightened``)."""
    if any(not p.get("tightened", p)["consistent"] or not p["consistent"] for p in pairs):
        return 3
    if any(not tables.ok(r) for r in records):
        return 2
    if not tables.all_proved(records) or not all(p["consistent"] for p in pairs):
        return 1
    return 0


def attach_intrinsic(report: dict[str, Any], intrinsic: dict[str, Any] | None) -> None:
    """Adds the summary of the store's intrinsic records (None: it has none) to the report's
    summary as ``intrinsic``; their input errors raise the exit code to 2, as a bracket's do,
    so that report.json and the Result line say what the process's exit code says."""
    s = report["summary"]
    s["intrinsic"] = intrinsic
    if intrinsic is not None and intrinsic["errors"] and s["exit_code"] < 2:
        s["exit_code"] = 2


def _why(r: dict[str, Any], end: str, tier: str = "auto") -> dict[str, Any]:
    c = r.get(f"{end}_check") or {}
    return {"bracket": r["bracket"], "family": r["family"], "operator": r["operator"],
            "eps": r["eps"], "end": end, "result": end_result(r, end),
            "reason": end_reason(r, end, tier), "outcome": r.get(f"{end}_outcome"),
            "claimed": r.get(f"{end}_claim"), "validated": r.get(end),
            "kind": c.get("kind") or (r.get("lower_kind") if end == "lower" else "factors"),
            "status": c.get("status"), "claim": c.get("claim"), "margin": c.get("margin"),
            "tier": c.get("tier")}


def build_report(records: list[dict[str, Any]], *, store: dict[str, Any], tier: str,
                 budgets: list[int], environment: dict[str, Any], methods: dict[str, Any],
                 figures: list[str], run: dict[str, Any],
                 bootstrap: tuple[int, int] = (stats.DEFAULT_SEED, stats.DEFAULT_RESAMPLES),
                 layers: dict[str, Any] | None = None) -> dict[str, Any]:
    """Returns the report.json document (records must be normalized, any order).

    ``bootstrap`` is (seed, resamples) of the intervals; ``layers`` maps operator ids to their
    layer (from the store's operator meta) for the per-layer table.
    """
    records = sorted(records, key=lambda r: r["bracket"])
    pairs = tightening.attach(tables.group_pairs(records, budgets), records, budgets)
    # copies: the caller's records (a journal's) stay as checked
    records = tightening.attach_to_records(records, pairs)
    groups = tables.summarize_groups(pairs, records, budgets)
    checked = [r for r in records if tables.ok(r)]
    changed = [_why(r, end, tier) for r in checked for end in ("upper", "lower")
               if end_result(r, end) not in ("proved", "absent")]
    summary = {
        "brackets": len(records), "checked": len(checked),
        "input_errors": len(records) - len(checked),
        "pairs": len(pairs), "families": sorted({r["family"] for r in records}),
        "eps": sorted({r["eps"] for r in records}, key=Fraction),
        "resolved_pairs": sum(p["resolved"] for p in pairs),
        "inconsistent_pairs": sum(not p["consistent"] for p in pairs),
        "claims_not_proved": len(changed),
        "claims_not_confirmed": len(changed),  # the older key (deprecated)
        "closed_pairs": sum(stats.is_closed(p) for p in pairs),
        "tightened": tightening.counts(pairs, budgets),
        "internal_errors": tightening.inconsistencies(pairs),
        "all_proved": tables.all_proved(records),
        "all_confirmed": tables.all_proved(records),  # the older key (deprecated)
        "exit_code": exit_code(records, pairs),
    }
    open_rows = loose.open_rows(pairs, records)
    summary["open_brackets"] = loose.counts(open_rows, len(pairs))
    seed, resamples = bootstrap
    settings = stats.bootstrap_settings(seed, resamples)
    intervals = stats.interval_rows(pairs, seed=seed, resamples=resamples)
    per_layer = stats.layer_rows(pairs, layers or {})
    per_head = stats.per_head_rows(pairs, records)
    table_set = tables.build_tables(groups, budgets, tables.summarize_producers(records))
    # the comparison of per-eps and tightened brackets after the producers' table (the
    # numbering of the earlier tables stays)
    tight_table = table_set.pop("tightened", None)
    if tight_table is not None:
        table_set["tightened"] = tight_table
    block_rows = tables.summarize_block_widths(records, budgets)
    table_set.update(tables.block_tables(block_rows, budgets))
    table_set.update(tables.interval_tables(intervals, settings))
    if per_layer:
        table_set["layers"] = tables.layer_table(per_layer)
    return {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "store": store,
        "options": {"tier": tier, "budgets": budgets, "bootstrap": settings},
        "definitions": DEFINITIONS, "assumptions": assumptions(),
        "environment": environment, "methods": methods,
        "produced_by": produced_by(store.get("header")),
        "producing_software": producing_environments(store.get("header")),
        "summary": summary,
        "tables": table_set,
        "groups": groups, "intervals": intervals, "layers": per_layer,
        "block_widths": block_rows,
        "pairs": pairs, "not_proved": changed,
        "not_confirmed": changed,  # the older key (deprecated)
        "errors": [{"bracket": r["bracket"], "error": r["error"]} for r in records
                   if not tables.ok(r)],
        "per_head": per_head, "per_head_table": tables.per_head_table(per_head),
        "open_brackets": open_rows,
        "open_brackets_table": tables.loose_table(open_rows, summary["open_brackets"]),
        "figures": figures, "figure_counts": stats.figure_counts(pairs, records),
        "records": records, VOLATILE_KEY: run,
    }


def report_json(report: dict[str, Any]) -> str:
    return jsonexact.dumps(report, indent=1, sort_keys=True) + "\n"


def _fmt_margin(m: dict[str, str] | None) -> str:
    """The margin enclosure as short decimals (4 significant digits, rounded outward: the
    printed interval contains the proved one; exact in report.json)."""
    if not m:
        return "-"
    lo, hi = Fraction(m["lo"]), Fraction(m["hi"])
    return f"[{tables.fmt_short(lo, rounding='down')}, {tables.fmt_short(hi, rounding='up')}]"


_RATIONAL = re.compile(r"-?\d+/\d+|-?\d+\.\d{5,}")
LONG_NUMBER = 10


def short_claim(text: str) -> str:
    """The claim text with every rational longer than LONG_NUMBER characters shown as ~ and
    4 significant digits (display only; the exact text is in report.json)."""
    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if len(s) <= LONG_NUMBER else "~" + tables.fmt_short(Fraction(s))

    return _RATIONAL.sub(repl, text)


MAX_LISTED = 40


def report_markdown(rep: dict[str, Any]) -> str:
    """Returns report.md: summary, the three tables, what changed and why, method, provenance."""
    s, run, st = rep["summary"], rep[VOLATILE_KEY], rep["store"]
    # store text (paths, families, producers, errors) is escaped where it enters (escape.py)
    # and never starts a line; the Result line is composed last and put before all of it
    out = ["# Audit report", "", f"Store: {md_code(st['path'])}", ""]
    out += [f"{s['brackets']} stored brackets ({s['checked']} checked, {s['input_errors']} "
            f"input errors) over {s['pairs']} (operator, eps) pairs; families: "
            f"{', '.join(md(tables.family_cell(f)) for f in s['families']) or '-'}; eps: "
            f"{', '.join(md(tables.eps_cell(e)) for e in s['eps']) or '-'}.", ""]
    if s["inconsistent_pairs"]:
        out += [f"**WARNING:** {s['inconsistent_pairs']} pairs have validated L > U, which no "
                "sound check can produce; report this as a bug.", ""]
    for x in s.get("internal_errors", []):
        out += [f"**INTERNAL ERROR:** {internal_error_text(x, md)}", ""]
    for i, t in enumerate(rep["tables"].values(), start=1):
        out += [f"## Table {i}. {t['title']}", "", tables.markdown_table(t), ""]
        if t.get("note"):
            out += [t["note"], ""]
    boot = rep["options"]["bootstrap"]
    out += [f"Intervals: bootstrap 95% percentile intervals, operators resampled with "
            f"replacement within each family and eps; seed {boot['seed']}, "
            f"{boot['resamples']} resamples (random stream: {md_code(boot['stream'])}).", ""]
    out += assumptions_markdown()
    out += ["## Definitions", ""]
    out += [f"- {k.replace('_', ' ')}: {v}" for k, v in rep["definitions"].items()]
    out += [""]
    out += tightened_markdown(rep)
    out += loose_markdown(rep)
    changed = rep.get("not_proved", rep.get("not_confirmed", []))
    out += ["## Claims not proved as stated", ""]
    if not changed:
        out += ["None.", ""]
    else:
        listing = {
            "columns": ["Bracket", "Family", "Operator", "eps", "End", "Kind", "Claimed",
                        "Validated", "Result", "Why", "Margin", "Tier"],
            "rows": [[str(x) for x in (
                c["bracket"], tables.family_cell(c["family"]), c["operator"],
                tables.eps_cell(c["eps"]), c["end"],
                c["kind"], c["claimed"], c["validated"],
                word(c.get("result") or end_result({f"{c['end']}_outcome": c["outcome"]},
                                                   c["end"])),
                c.get("reason") or (f"{c['status']}: {short_claim(c['claim'])}"
                                    if c["claim"] else c["status"]),
                _fmt_margin(c["margin"]), c["tier"])] for c in changed[:MAX_LISTED]],
        }
        out.append(tables.markdown_table(listing, left=len(listing["columns"])))
        if len(changed) > MAX_LISTED:
            out.append(f"\n... and {len(changed) - MAX_LISTED} more in report.json "
                       "(`not_proved`).")
        out += [""]
    if rep["errors"]:
        out += ["## Input errors (no verdict)", ""]
        out += [f"- {md_code(e['bracket'])}: {md(e['error'])}" for e in rep["errors"][:MAX_LISTED]]
        if len(rep["errors"]) > MAX_LISTED:
            out.append(f"- ... and {len(rep['errors']) - MAX_LISTED} more in report.json "
                       "(`errors`)")
        out += [""]
    out += ["## Files", "",
            "- `report.json`: every per-bracket record, the grouped pairs, exact counts and "
            "these table cells (everything outside its `run` key is reproducible)",
            "- `report.tex`: this report as a LaTeX document (pdflatex; booktabs, graphicx, "
            "longtable); it `\\input`s `report-tables.tex` (the tables as booktabs floats, "
            "for a preamble of one's own), `report-figures.tex` (the figures with captions, "
            "one column wide) and `report-per-head.tex` (the per-head longtable, one-column "
            "layouts only); `tables/<name>.tex`: each tabular alone "
            f"({', '.join(f'`{n}`' for n in rep['tables'])})",
            f"- `{PER_HEAD_CSV}`: the validated bracket of each of the {s['pairs']} "
            "(operator, eps) pairs with the kinds of the certificates behind U and L, and "
            "its bracket tightened across eps with the bracket and eps of each end",
            *([f"- `figures/`: {', '.join(f'`{f[8:]}`' for f in rep['figures'])}"]
              if rep["figures"] else ["- no figures were drawn"]),
            "- `journal.jsonl`: one line per checked bracket; rerunning the same command "
            "resumes from it", ""]
    if rep["figures"]:
        out += ["## Figures", ""]
        captions = figure_captions(rep["figure_counts"])
        for i, (name, f) in enumerate(figure_files(rep, "png"), start=1):
            out += [f"![{f}]({f})", "", f"*Figure {i}.* {md(captions[name])}", ""]
    out += ["## Method", ""]
    out += methods_text(rep["methods"])
    out += [f"- budgets: {', '.join(str(k) for k in rep['options']['budgets'])}", ""]
    out += ["## Provenance", ""]
    out += [f"- store: {md_code(st['path'])} ({st['operators']} operators, {st['brackets']} "
            f"brackets; sha256 of its record files {md(st['sha256'])})"]
    out += [f"- {md(k)}: {md(v)}" for k, v in rep["environment"].items()]
    # the producer's own record in store.json: shown as written, never checked
    out += ["- produced (as store.json records it, not checked): "
            + ", ".join(f"{md(k)} {md(v)}" for k, v in row.items())
            for row in rep.get("produced_by") or []]
    out += producing_lines(rep.get("producing_software"))
    out += [f"- command: {md_code(run.get('command'))}",
            f"- executor: {run.get('executor')} ({run.get('workers')} workers); "
            f"{run.get('resumed_records')} records taken from the journal of an earlier run",
            f"- started {run.get('started')}, finished {run.get('finished')} "
            f"({run.get('seconds')} s)", ""]
    out[2:2] = [result_line(s, run), ""]
    if sum(line.startswith("**Result:**") for line in out) != 1:  # pragma: no cover
        raise RuntimeError("report.md would hold more than one Result line")
    return "\n".join(out) + "\n"


def producing_lines(ps: Any) -> list[str]:
    """The Provenance lines on the environments that produced the brackets (``ps`` from
    ``provenance.producing_environments``; none when the store records none)."""
    if not isinstance(ps, dict) or not ps.get("count"):
        return []
    n = ps["count"]
    out = [f"- brackets produced under {n} numerics environment{'s' if n != 1 else ''} (as "
           "store.json records them, not checked)"
           + (": a rerun rewrites them bit for bit only under each of them"
              if n > 1 or ps.get("other_than_budgets") else "")]
    out += ["  - " + ", ".join(f"{md(k)} {md(v)}" for k, v in row.items())
            for row in ps.get("shown") or []]
    if ps.get("more"):
        out += [f"  - and {ps['more']} more"]
    return out


def tightened_markdown(rep: dict[str, Any]) -> list[str]:
    """The section of report.md listing the pairs whose bracket the ends of other eps
    tighten: per-eps [L, U], tightened [L*, U*] and where each tightened end comes from (from
    the per-head rows; cells escaped by ``markdown_table``).  Contradicting ends are listed as
    internal errors above, never here."""
    rows = [r for r in rep.get("per_head", []) if "tight_lower" in r and r["tight_consistent"]
            and (r["tight_lower"], r["tight_upper"]) != (r["lower"], r["upper"])]
    out = ["## Brackets tightened across eps", "",
           tables.TIGHTENED_NOTE + " Pairs whose bracket this narrows: "
           f"{len(rows)} of {len(rep.get('per_head', []))}.", ""]
    if rows:
        listing = {"columns": ["Operator", "Family", "eps", "Per eps [L, U]", "Tightened",
                               "L* from", "U* from"],
                   "rows": [[r["operator"], tables.family_cell(r["family"]),
                             tables.eps_cell(r["eps"]),
                             f"[{r['lower']}, {r['upper']}]",
                             f"[{r['tight_lower']}, {r['tight_upper']}]",
                             tables.fmt_citation(r["tight_lower_from"]),
                             tables.fmt_citation(r["tight_upper_from"])]
                            for r in rows[:MAX_LISTED]]}
        out.append(tables.markdown_table(listing, left=len(listing["columns"])))
        if len(rows) > MAX_LISTED:
            out.append(f"\n... and {len(rows) - MAX_LISTED} more in {PER_HEAD_CSV} and "
                       "report.json (`pairs[].tightened`).")
        out.append("")
    return out


def loose_markdown(rep: dict[str, Any]) -> list[str]:
    """The section of report.md on open brackets: which side is likely loose, from the
    table ``open_brackets_table`` (cells escaped by ``markdown_table``; at most MAX_LISTED
    rows, all of them in report.json).  Empty for a report without it (an older one)."""
    t = rep.get("open_brackets_table")
    if t is None:
        return []
    out = [f"## {t['title']}", "", t["count"], ""]
    if t["rows"]:
        out.append(tables.markdown_table({**t, "rows": t["rows"][:MAX_LISTED]}))
        if len(t["rows"]) > MAX_LISTED:
            out.append(f"\n... and {len(t['rows']) - MAX_LISTED} more in report.json "
                       "(`open_brackets`).")
        out += ["", t["note"], ""]
    return out


def open_brackets_tex(rep: dict[str, Any]) -> list[str]:
    """The section of report.tex on open brackets: the table ``open_brackets_table`` as a
    longtable (every cell escaped; all rows, as in report.json), its count line and what its
    numbers are in the caption.  Empty for a report without open brackets or without the table
    (an older one)."""
    t = rep.get("open_brackets_table")
    if t is None or not t["rows"]:
        return []
    return [r"\clearpage", r"\section*{Open brackets: which side is likely loose}",
            f"\\noindent {tables.tex_escape(t['count'])}", "",
            tables.latex_longtable(t, "tab:audit-open-brackets")]


def internal_error_text(x: dict[str, Any], esc: Any) -> str:
    """The words of one internal error of ``tightening.inconsistencies``, store text passed
    through ``esc`` (the target format's escaping): never rendered as a bracket."""
    return (f"proved ends of operator {esc(x['operator'])} at eps "
            f"{esc(tables.eps_cell(x['eps']))} contradict after tightening across eps: L = "
            f"{x['lower']} from {esc(tables.fmt_citation(x['lower_from']))} exceeds U = "
            f"{x['upper']} from {esc(tables.fmt_citation(x['upper_from']))}; no sound check "
            "can produce this (exit 3), report it as a bug")


def result_line(s: dict[str, Any], run: dict[str, Any]) -> str:
    """Returns the report's one Result line, from the summary counts and the run's journal
    use alone (no store text)."""
    verdict = ("the store holds no brackets" if not s["brackets"] else
               "every float64 claim was proved" if s.get("all_proved", s.get("all_confirmed"))
               else f"{s.get('claims_not_proved', s.get('claims_not_confirmed'))} float64 "
               "claims were not proved as stated (listed below)")
    resumed = int(run.get("resumed_records") or 0)
    journal = ""
    if resumed:
        sampled = int(run.get("journal_rechecked") or 0)
        journal = (f" {resumed} of {s['brackets']} records were taken from this user's "
                   f"signed journal of an earlier run, not checked again in this run "
                   f"({sampled} of them rechecked as a random sample, all agreeing; "
                   "`--recheck` checks everything).")
    unread = int(s.get("input_errors") or 0)
    if unread:
        verdict += (f"; {unread} stored bracket{'s' if unread != 1 else ''} could not be "
                    "checked (input errors, listed below)")
    bad = (s.get("intrinsic") or {}).get("errors")
    if bad:
        verdict += (f"; {bad} intrinsic record{'s' if bad != 1 else ''} could not be checked "
                    "(input errors, listed in intrinsic.md)")
    t = s.get("tightened")
    within = (f" ({t['resolved']} after tightening across eps)" if t else "")
    closed = (f" per eps, {t['closed']} after tightening across eps" if t else "")
    if t and t.get("inconsistent"):
        verdict = (f"INTERNAL ERROR, {t['inconsistent']} pairs with proved ends that "
                   f"contradict (report.json: summary.internal_errors); {verdict}")
    return (f"**Result:** {verdict}; {s['resolved_pairs']} of {s['pairs']} pairs have a "
            f"bracket within the study's criterion{within}."
            f"{journal} Every L and U below is a theorem about the exact stored numbers and "
            "the operator of record (rounding errors, residuals and the slack chi charged), "
            "under the assumptions stated below; no other float64 qualifier applies. "
            f"{s['closed_pairs']} pairs are closed exactly (L = U){closed}.")


PER_HEAD_CSV = "per_head.csv"
TABLES_TEX = "report-tables.tex"
FIGURES_TEX = "report-figures.tex"
PER_HEAD_TEX = "report-per-head.tex"
# the width of every figure in LaTeX: the figures are drawn this wide (figures.WIDTH_IN) with
# 8 pt text, so they print at natural size; a narrower column scales them to its width
FIGURE_WIDTH = "3.3in"


def figure_files(rep: dict[str, Any], ext: str) -> list[tuple[str, str]]:
    """Returns (figure name, path) of the written figures with extension ``ext``, in the
    report's order."""
    return [(f[len("figures/"):-len(ext) - 1], f) for f in rep["figures"]
            if f.startswith("figures/") and f.endswith("." + ext)]


def figure_captions(counts: dict[str, dict[str, int]]) -> dict[str, str]:
    """Returns {figure name: caption} (plain text) stating what is plotted and from how many
    brackets; the numbers are those of ``stats.figure_counts`` (report.json
    ``figure_counts``).  No store text enters a caption."""
    b, m, c = counts["brackets"], counts["margins"], counts["chi"]
    return {
        "brackets": (
            f"Validated brackets L <= r_eps <= U of the {b['pairs']} (operator, eps) pairs "
            f"from the {b['brackets']} checked brackets (for each pair the largest proved L "
            f"and the smallest proved U over its brackets), one panel per family and eps "
            f"({b['panels']} panels; pairs in the panel title), pairs sorted by U, log rank "
            f"axis. Blue: the {b['within_criterion']} pairs whose bracket is within the "
            f"study's criterion; red: the others. A single mark is a closed pair (L = U; "
            f"{b['closed']} pairs)."),
        "margins": (
            f"Distribution of |margin|, the distance of the checked quantity from its "
            f"threshold (midpoint of its enclosure), of the {m['checks']} rigorous checks "
            f"that recorded a margin, from the {m['brackets']} checked brackets, one panel per "
            f"end and certificate kind ({m['panels']} panels; checks in the panel title), "
            f"coloured by the check's status; log axis."),
        "chi": (
            f"Operator slack chi = ||A_record - A_stored||_row1 of the {c['operators']} "
            f"operators, from the {c['brackets']} checked brackets ({c['positive']} with "
            f"chi > 0; one histogram per family, {c['families']} "
            f"{'family' if c['families'] == 1 else 'families'}); chi = 0 when "
            f"the stored A is the operator of record."),
    }


# phrases of the captions typeset as math in LaTeX (longest first: each is replaced in the
# escaped caption, so the rest stays escaped text)
_TEX_MATH = [("chi = ||A_record - A_stored||_row1",
              r"$\chi = \Vert A_{\mathrm{record}} - A_{\mathrm{stored}}\Vert_{\mathrm{row}1}$"),
             ("L <= r_eps <= U", r"$L \leq r_\varepsilon \leq U$"),
             ("|margin|", r"$|\mathrm{margin}|$"), ("chi > 0", r"$\chi > 0$"),
             ("chi = 0", r"$\chi = 0$"), ("L = U", "$L = U$"), ("eps", r"$\varepsilon$")]


def tex_caption(text: str) -> str:
    """A caption of ``figure_captions`` in LaTeX: escaped (escape.tex), its formulas as math
    (one pass, so no replacement is applied to the math of another)."""
    math = {tables.tex_escape(plain): tex for plain, tex in _TEX_MATH}
    pattern = re.compile("|".join(re.escape(k) for k in math))
    return pattern.sub(lambda m: math[m.group(0)], tables.tex_escape(text))


def _tex_head(rep: dict[str, Any], what: str) -> list[str]:
    """The comment lines that open every LaTeX file: what it is and where it came from."""
    env = rep["environment"]
    return [f"% softrank-certify audit: {what}",
            f"% store: {tex_comment(rep['store']['path'])} (sha256 "
            f"{tex_comment(rep['store']['sha256'])})",
            f"% tier: {tex_comment(rep['options']['tier'])}; "
            + "; ".join(f"{tex_comment(k)} {tex_comment(v)}" for k, v in env.items()),
            f"% command: {tex_comment(rep[VOLATILE_KEY].get('command'))}"]


def report_latex_tables(rep: dict[str, Any]) -> str:
    """Returns report-tables.tex: the booktabs table floats (``\\usepackage{booktabs,
    graphicx,textcomp}``), provenance and assumptions in comments, the assumptions also as the macro
    ``\\softrankassumptions`` (an itemize), ready to ``\\input`` in a preamble of one's own
    (one or two columns).
    """
    head = [*_tex_head(rep, "tables; needs \\usepackage{booktabs,graphicx,textcomp}"),
            "% Assumptions:", *(f"%  - {a}" for a in rep["assumptions"]["items"]),
            "\\providecommand{\\softrankassumptions}{\\begin{itemize}"
            + "".join(f"\\item {tables.tex_escape(a)}" for a in rep["assumptions"]["items"])
            + "\\end{itemize}}", ""]
    parts = [tables.latex_table(t, f"tab:audit-{name}") for name, t in rep["tables"].items()]
    return "\n".join(head) + "\n\n".join(parts) + "\n"


def report_latex_figures(rep: dict[str, Any]) -> str:
    """Returns report-figures.tex: one ``figure`` float per written figure (its PDF), each
    ``\\softrankfigwidth`` wide (default FIGURE_WIDTH, one column; scaled down to the line
    width when narrower) with a caption from ``figure_captions``; needs graphicx.  Empty of
    floats when no figures were drawn."""
    lines = [*_tex_head(rep, "figures; needs \\usepackage{graphicx}"),
             f"\\providecommand{{\\softrankfigwidth}}{{{FIGURE_WIDTH}}}"]
    captions = figure_captions(rep["figure_counts"])
    for name, path in figure_files(rep, "pdf"):
        body = f"\\includegraphics[width=\\softrankfigwidth]{{{path}}}"
        lines += ["", r"\begin{figure}[htbp]", r"\centering", tables.latex_fit(body),
                  f"\\caption{{{tex_caption(captions[name])}}}",
                  f"\\label{{fig:audit-{name}}}", r"\end{figure}"]
    return "\n".join(lines) + "\n"


def report_latex_per_head(rep: dict[str, Any]) -> str:
    """Returns report-per-head.tex: the per-head longtable (``\\usepackage{booktabs,
    longtable,textcomp}``; one-column layouts only)."""
    needs = "per-head table; needs \\usepackage{booktabs,longtable,textcomp}"
    return ("\n".join(_tex_head(rep, needs))
            + "\n" + tables.latex_longtable(rep["per_head_table"], "tab:audit-per-head") + "\n")


def report_latex(rep: dict[str, Any]) -> str:
    """Returns report.tex: a standalone article (pdflatex; booktabs, graphicx, longtable) that
    ``\\input``s report-tables.tex, report-figures.tex and report-per-head.tex from its own
    directory, with the summary, definitions and assumptions around them.  Store text enters
    escaped (escape.tex) or in comments (escape.tex_comment).
    """
    s, st = rep["summary"], rep["store"]
    defs = "".join(f"\\item[{tables.tex_escape(k.replace('_', ' '))}] "
                   f"{tables.tex_escape(v)}\n" for k, v in rep["definitions"].items())
    result = (result_line(s, rep[VOLATILE_KEY]).replace("**Result:**", "").strip()
              .replace("(listed below)", "(listed in report.md and in report.json, key "
                       "not_confirmed)"))
    env = "".join(f"\\item {tables.tex_escape(k)}: {tables.tex_escape(v)}\n"
                  for k, v in rep["environment"].items())
    lines = [
        *_tex_head(rep, "report (pdflatex report.tex in the output directory)"),
        r"\documentclass[10pt]{article}",
        r"\usepackage{graphicx}",
        r"\usepackage{booktabs}",
        r"\usepackage{longtable}",
        # \textquotesingle and \textasciigrave (store text): in the kernel since 2020, a
        # package before
        r"\usepackage{textcomp}",
        r"\setlength{\textwidth}{6.5in}\setlength{\oddsidemargin}{0in}",
        r"\setlength{\evensidemargin}{0in}\setlength{\textheight}{9in}",
        r"\setlength{\topmargin}{-0.5in}",
        r"\begin{document}",
        r"\section*{Audit report}",
        f"\\noindent\\textbf{{Result:}} {tables.tex_escape(result)}",
        "",
        *(f"\\noindent\\textbf{{Internal error:}} "
          f"{internal_error_text(x, tables.tex_escape)}\n"
          for x in s.get("internal_errors", [])),
        f"\\noindent Store: \\texttt{{{tables.tex_escape(st['path'])}}}; {s['brackets']} "
        f"stored brackets ({s['checked']} checked, {s['input_errors']} input errors) over "
        f"{s['pairs']} (operator, $\\varepsilon$) pairs; families: "
        f"{tables.tex_escape(', '.join(map(tables.family_cell, s['families']))) or '-'}; "
        f"$\\varepsilon$: "
        f"{tables.tex_escape(', '.join(tables.eps_cell(x) for x in s['eps'])) or '-'}.",
        "",
        f"\\input{{{TABLES_TEX}}}",
        f"\\input{{{FIGURES_TEX}}}",
        r"\clearpage",
        r"\section*{Definitions}",
        r"\begin{description}\small", defs + r"\end{description}",
        r"\section*{Assumptions}",
        r"\softrankassumptions",
        r"\section*{Provenance}",
        f"Store \\texttt{{{tables.tex_escape(st['path'])}}}: {st['operators']} operators, "
        f"{st['brackets']} brackets; tier "
        f"{tables.tex_escape(rep['options']['tier'])}; budgets "
        f"{', '.join(str(k) for k in rep['options']['budgets'])}; sha256 of the store's "
        f"record files:\\\\ \\texttt{{{tables.tex_escape(st['sha256'])}}}",
        r"\begin{itemize}\small", env + r"\end{itemize}",
        r"\clearpage",
        r"\section*{Per-head brackets}",
        f"\\input{{{PER_HEAD_TEX}}}",
        *open_brackets_tex(rep),
        r"\end{document}",
    ]
    return "\n".join(lines) + "\n"
