"""From per-bracket check records to the audit's grouped rows and table cells.

Pure functions on JSON-safe records (``softrank.recheck.check_record`` output); no files.

Conventions (stated in every report; see proofs_notes/audit.md):

* A store may hold several brackets per (operator, eps), one per producer.  The validated
  bracket of a pair is [max validated L over its records, min validated U over its records]:
  each validated end is a theorem about r_eps(operator of record), so both combinations are.
* Tables of operators, within-criterion shares, medians and budgets count (operator, eps) pairs;
  claim-outcome counts count records (one float64 claim per end per record).
* A pair's bracket is within the study's criterion (key ``resolved`` in the JSON, for
  compatibility) when U <= 2 L, or U - L <= 2, or U - L <= full_rank / 10 with
  full_rank = min(m, N); every comparison is exact integer arithmetic.
* Verdict at budget k: feasible when k >= U, impossible when k < L (either way the pair is
  resolved at k), unresolved otherwise.  Rendered text uses "resolved" for this verdict only,
  "within criterion" for the study's criterion and "closed" for L = U.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from .. import numfmt
from ..numfmt import Rounding
from ..words import RESULTS, all_proved, end_result, word
from . import escape
from .records import _full_rank, _validated_ends, is_resolved, ok, verdict

# the older words, kept under the older keys of report.json (deprecated): there "refuted"
# meant only that a check's inequality is false; RESULTS (softrank/words.py) says what is proved
OUTCOMES = ("confirmed", "weakened", "refuted", "absent")
VERDICTS = ("feasible", "impossible", "unresolved")
# The aggregate row of each eps has family None: no store string equals it, so a family
# named "all" is a family like any other.  A table lists the indices of its aggregate rows
# under "aggregate_rows"; renderers show their first cell as ALL_LABEL in italics, which
# escaped store text cannot produce.
ALL_FAMILIES = None
ALL_LABEL = "all families"


def family_cell(family: str | None) -> str:
    """Returns the table cell of a row's family (ALL_LABEL for the aggregate row), cut as
    figure text is (``escape.cut``; the renderers still escape it)."""
    return ALL_LABEL if family is ALL_FAMILIES else escape.cut(family)


def aggregate_rows(groups: Sequence[dict[str, Any]]) -> list[int]:
    """Returns the indices of the aggregate rows (family ALL_FAMILIES) among ``groups``."""
    return [i for i, g in enumerate(groups) if g["family"] is ALL_FAMILIES]


# ---------------------------------------------------------------------------- predicates


all_confirmed = all_proved  # the older name


# ---------------------------------------------------------------------------- grouping


def eps_key(eps: str) -> Fraction:
    return Fraction(eps)


def group_pairs(records: Iterable[dict[str, Any]], budgets: Sequence[int]
                ) -> list[dict[str, Any]]:
    """Returns one row per (operator, eps) pair that has at least one checked record.

    Each row holds the validated bracket [L, U] (max L, min U over the pair's records), the
    records that gave each end, ``resolved``, the exact ratio U/L (None when L = 0: no finite
    ratio), ``consistent`` (L <= U; a False here would expose an unsound check) and the
    verdict at each budget.  Rows are sorted by (family, eps, operator).
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if ok(r):
            groups[(r["operator"], r["eps"])].append(r)
    rows = []
    for (op, eps), recs in groups.items():
        recs = sorted(recs, key=lambda r: r["bracket"])
        ends = [(*_validated_ends(r), r["bracket"]) for r in recs]
        # records are in bracket-id order and max/min keep the first of equal keys, so ties
        # go to the first bracket id whatever order the records arrived in
        L, _, L_from = max(ends, key=lambda e: e[0])
        _, U, U_from = min(ends, key=lambda e: e[1])
        shape = [int(s) for s in recs[0]["shape"]]
        full = _full_rank(shape)
        rows.append({
            "operator": op, "family": recs[0]["family"], "eps": eps, "shape": shape,
            "full_rank": full,
            "brackets": [e[2] for e in ends],
            "lower": L, "lower_from": L_from, "upper": U, "upper_from": U_from,
            "resolved": is_resolved(U, L, full),
            "ratio": None if L == 0 else str(Fraction(U, L)),
            "consistent": L <= U,
            "budgets": {str(k): verdict(k, U, L) for k in budgets},
        })
    rows.sort(key=lambda p: (p["family"], eps_key(p["eps"]), p["operator"]))
    return rows


# ---------------------------------------------------------------------------- statistics


def median(values: Sequence[Fraction | None]) -> Fraction | None:
    """Returns the exact median (mean of the two middle values for an even count).

    ``None`` stands for +infinity (a ratio U/L with L = 0) and sorts last; a median that
    involves it is None.  Raises ValueError for an empty sequence.
    """
    if not values:
        raise ValueError("median of nothing")
    finite = sorted(v for v in values if v is not None)
    ordered: list[Fraction | None] = [*finite, *([None] * (len(values) - len(finite)))]
    n = len(ordered)
    mid = [ordered[(n - 1) // 2], ordered[n // 2]]
    if any(v is None for v in mid):
        return None
    return (mid[0] + mid[1]) / 2  # type: ignore[operator]


def _q(x: Fraction | None) -> str | None:
    return None if x is None else str(x)


def _family_eps_keys(pairs: list[dict[str, Any]], records: list[dict[str, Any]]
                     ) -> list[tuple[str | None, str]]:
    """Row keys: for each eps ascending, each family by name, then the aggregate (family
    ALL_FAMILIES) when > 1 family."""
    by_eps: dict[str, set[str]] = defaultdict(set)
    for r in records:
        by_eps[r["eps"]].add(r["family"])
    keys: list[tuple[str, str]] = []
    for eps in sorted(by_eps, key=eps_key):
        fams = sorted(by_eps[eps])
        keys.extend((f, eps) for f in fams)
        if len(fams) > 1:
            keys.append((ALL_FAMILIES, eps))
    return keys


def _grouped(items: list[dict[str, Any]]
             ) -> Callable[[str | None, str], list[dict[str, Any]]]:
    """Returns select(family, eps): the items of that family (every family for ALL_FAMILIES)
    and eps, in their order. One pass builds the groups: scanning every item for every key
    took 193 s on a store of 20,000 brackets each at its own eps."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_eps: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for x in items:
        by_key[(x["family"], x["eps"])].append(x)
        by_eps[x["eps"]].append(x)

    def select(family: str | None, eps: str) -> list[dict[str, Any]]:
        if family is ALL_FAMILIES:
            return by_eps.get(eps, [])
        return by_key.get((family, eps), [])  # type: ignore[arg-type]
    return select


def summarize_groups(pairs: list[dict[str, Any]], records: list[dict[str, Any]],
                     budgets: Sequence[int]) -> list[dict[str, Any]]:
    """Returns one exact summary per (family, eps) (plus an "all" family per eps).

    Keys: family, eps, shapes, operators (pairs), resolved (count), resolved_share, median_lower,
    median_upper, median_ratio (exact strings; ratio None = infinite or no pairs), records,
    errors, claims {upper: {outcome: count}, lower: {...}}, budgets {k: {verdict: count}},
    inconsistent (pairs with L > U), and ``tightened``: the counts of ``tightening.counts``
    on the brackets tightened across eps (the pairs' ``tightened``, computed here when absent)
    with the exact medians of the tightened L and U (None when some tightened bracket is
    inconsistent: it is no bracket).
    """
    from .tightening import counts as tight_counts
    from .tightening import tightened_brackets

    if any("tightened" not in p for p in pairs):  # without changing the caller's pairs
        tight = tightened_brackets(pairs, records, budgets)
        pairs = [{**p, "tightened": tight[(p["operator"], p["eps"])]} for p in pairs]
    out = []
    pairs_of, records_of = _grouped(pairs), _grouped(records)
    for fam, eps in _family_eps_keys(pairs, records):
        ps = pairs_of(fam, eps)
        rs = records_of(fam, eps)
        checked = [r for r in rs if ok(r)]
        n = len(ps)
        row: dict[str, Any] = {
            "family": fam, "eps": eps,
            "shapes": sorted({tuple(p["shape"]) for p in ps} | {tuple(r["shape"]) for r in rs}),
            "operators": n,
            "resolved": sum(p["resolved"] for p in ps),
            "records": len(rs), "errors": len(rs) - len(checked),
            "inconsistent": sum(not p["consistent"] for p in ps),
        }
        row["shapes"] = [list(s) for s in row["shapes"]]
        row["resolved_share"] = _q(Fraction(row["resolved"], n)) if n else None
        if n:
            row["median_lower"] = _q(median([Fraction(p["lower"]) for p in ps]))
            row["median_upper"] = _q(median([Fraction(p["upper"]) for p in ps]))
            ratio = median([None if p["ratio"] is None else Fraction(p["ratio"]) for p in ps])
            row["median_ratio"] = _q(ratio)
            row["median_ratio_infinite"] = ratio is None
        else:
            row.update(median_lower=None, median_upper=None, median_ratio=None,
                       median_ratio_infinite=False)
        row["ends"] = {}
        for end in ("upper", "lower"):
            c = Counter(end_result(r, end) for r in checked)
            row["ends"][end] = {o: c.get(o, 0) for o in RESULTS}
            for o, v in c.items():  # a word the kernel may add later is still counted
                if o not in RESULTS:
                    row["ends"][end][str(o)] = v
        row["claims"] = {}  # the older words under the older key (deprecated)
        for end in ("upper", "lower"):
            c = Counter(r.get(f"{end}_outcome") for r in checked)
            row["claims"][end] = {o: c.get(o, 0) for o in OUTCOMES}
            for o, v in c.items():  # an outcome name the kernel may add later is still counted
                if o not in OUTCOMES:
                    row["claims"][end][str(o)] = v
        row["budgets"] = {}
        for k in budgets:
            c = Counter(p["budgets"][str(k)] for p in ps)
            row["budgets"][str(k)] = {v: c.get(v, 0) for v in VERDICTS}
        t = tight_counts(ps, budgets)
        ts = [p["tightened"] for p in ps]
        sound = bool(ts) and all(x["consistent"] for x in ts)
        t["median_lower"] = _q(median([Fraction(x["lower"]) for x in ts])) if sound else None
        t["median_upper"] = _q(median([Fraction(x["upper"]) for x in ts])) if sound else None
        row["tightened"] = t
        out.append(row)
    return out


def producer_label(producer: Any, end: str) -> str:
    """Returns the name of the producer of ``end``: producer[end] when it is a name (the
    producer layout {"upper": ..., "lower": ...}), else producer["method"] or ["name"].
    """
    if isinstance(producer, dict):
        for key in (end, "method", "name"):
            if isinstance(producer.get(key), str) and producer[key]:
                return producer[key]
    return "unnamed"


def summarize_producers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns claim-outcome counts per (end, producer) over every checked record with a
    claim at that end (all families and eps), sorted by end (upper first) and producer.
    """
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    old: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in records:
        if not ok(r):
            continue
        for end in ("upper", "lower"):
            res = end_result(r, end)
            if res == "absent" or r.get(f"{end}_claim") is None:
                continue
            key = (end, producer_label(r.get("producer"), end))
            counts[key][res] += 1
            old[key][str(r.get(f"{end}_outcome"))] += 1
    rows = []
    for (end, name), c in sorted(counts.items(), key=lambda kv: (kv[0][0] != "upper", kv[0])):
        row: dict[str, Any] = {"end": end, "producer": name, "claims": sum(c.values())}
        row["results"] = {o: c.get(o, 0) for o in RESULTS[:4]}
        row["results"].update({o: v for o, v in c.items() if o not in RESULTS})
        # the older words as flat keys (deprecated)
        row.update({o: old[(end, name)].get(o, 0) for o in OUTCOMES[:3]})
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------- display


def fmt_decimal(q: Fraction, places: int, rounding: Rounding = "nearest") -> str:
    """Returns q with ``places`` decimals, rounded half away from zero (``"nearest"``) or
    toward -inf / +inf (``"down"`` / ``"up"``, for the ends of an interval); display only."""
    return numfmt.fixed(q, places, rounding)


def fmt_eps(eps: str) -> str:
    """Returns eps exactly: as a decimal when it terminates, else as the fraction a/b (for
    data files and terminal lines; report tables use :func:`eps_cell`)."""
    return _exact_eps(Fraction(eps))


#: the longest exact eps a report table shows; a float's exact value (0.3 is a 56-digit
#: decimal) or a long fraction would fill every cell, and past 3,000 characters stopped
#: pdflatex
EPS_SHOWN_MAX = 24


def eps_cell(eps: str) -> str:
    """Returns eps for a report table (Markdown, LaTeX; the renderer escapes it): exact as
    :func:`fmt_eps` spells it when that takes at most EPS_SHOWN_MAX characters, else ``~``,
    6 significant digits and, in brackets, the first 16 hex digits of the sha256 of its a/b
    spelling, so two long eps look alike only when those 64 bits collide (display only:
    report.json and per_head.csv keep eps exact)."""
    q = Fraction(eps)
    exact = _exact_eps(q)
    if len(exact) <= EPS_SHOWN_MAX:
        return exact
    tag = hashlib.sha256(f"{q.numerator}/{q.denominator}".encode()).hexdigest()[:16]
    return f"~{numfmt.sig(q, 6)} [{tag}]"


def _exact_eps(q: Fraction) -> str:
    d = q.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return str(q)
    places = max(twos, fives, 1)
    return fmt_decimal(q, places).rstrip("0").rstrip(".") if places > 1 else fmt_decimal(q, 1)


def fmt_citation(cite: dict[str, Any] | None) -> str:
    """Returns where a tightened end comes from as text, ``b12 at eps 0.35 (submatrix)``, a
    fallback named as such (``nonzero fallback``); store text, so every renderer escapes it
    (display only: the exact eps and the kind are in report.json)."""
    if cite is None:
        return "-"
    kind = f"{cite['kind']} fallback" if cite.get("fallback") else cite["kind"]
    return f"{cite['bracket']} at eps {fmt_eps(cite['eps'])} ({kind})"


def fmt_median(q: str | None) -> str:
    if q is None:
        return "-"
    v = Fraction(q)
    return str(v.numerator) if v.denominator == 1 else fmt_decimal(v, 1)


def fmt_share(q: str | None) -> str:
    return "-" if q is None else fmt_decimal(Fraction(q) * 100, 1) + "%"


def fmt_shape(shapes: list[list[int]]) -> str:
    return ", ".join(f"{m} x {n}" for m, n in shapes) or "-"


INF = "inf"
# what the words of the tables mean, stated under each table that uses them (one word per
# meaning: "resolved" is only ever a verdict at a budget)
CRITERION_NOTE = ("Within criterion: the pair's bracket meets the study's criterion U <= 2L, "
                  "or U - L <= 2, or U - L <= min(m, N)/10. Closed: L = U.")
VERDICT_NOTE = ("Verdict at budget k: feasible (k >= U), impossible (k < L), unresolved "
                "(L <= k < U); a pair is resolved at k when feasible or impossible.")


TIGHTENED_NOTE = ("Tightened across eps: the approximation rank is non-increasing in eps, so "
                  "the largest L "
                  "proved at any eps' >= eps and the smallest U proved at any eps' <= eps "
                  "(same operator) bound r_eps too.")


def tightened_table(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the table comparing the per-eps brackets with the brackets tightened across
    eps, per family and eps, from ``summarize_groups`` output (display only; the medians of
    the tightened ends are in report.json, ``groups[].tightened``)."""
    return {
        "title": "Brackets tightened across eps per family and eps ((operator, eps) pairs): "
                 "within criterion and closed, per eps and tightened",
        "note": TIGHTENED_NOTE + " " + CRITERION_NOTE + " Narrowed: pairs whose bracket "
                "the ends proved at other eps narrow.",
        "columns": ["Family", "eps", "Operators", "Narrowed", "Within criterion per eps",
                    "Within criterion tightened", "Closed per eps", "Closed tightened"],
        "left": 2,
        # LaTeX only: grouped, abbreviated headers so the table fits one column
        "tex_columns": ["Family", "eps", "Operators", "Narrowed", "per eps", "tightened",
                        "per eps", "tightened"],
        "column_groups": [["Within criterion", 4, 6], ["Closed", 6, 8]],
        "rows": [[family_cell(g["family"]), eps_cell(g["eps"]), str(g["operators"]),
                  str(g["tightened"]["changed"]), str(g["tightened"]["resolved_per_eps"]),
                  str(g["tightened"]["resolved"]), str(g["tightened"]["closed_per_eps"]),
                  str(g["tightened"]["closed"])] for g in groups],
        "aggregate_rows": aggregate_rows(groups),
    }


def _ratio_cell(row: dict[str, Any]) -> str:
    if row["operators"] == 0:
        return "-"
    if row["median_ratio_infinite"]:
        return INF
    return fmt_decimal(Fraction(row["median_ratio"]), 2)


def build_tables(groups: list[dict[str, Any]], budgets: Sequence[int],
                 producers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Returns the report tables as {name: {"title", "columns", "rows"}} of strings.

    The same cells feed report.md and report.tex and are stored in report.json.
    """
    brackets = {
        "title": "Validated brackets per family and eps ((operator, eps) pairs)",
        "note": CRITERION_NOTE,
        "columns": ["Family", "eps", "Shape", "Operators", "Within criterion", "Median L",
                    "Median U",
                    "Median U/L"], "left": 3,
        "rows": [[family_cell(g["family"]), eps_cell(g["eps"]), fmt_shape(g["shapes"]),
                  str(g["operators"]),
                  fmt_share(g["resolved_share"]), fmt_median(g["median_lower"]),
                  fmt_median(g["median_upper"]), _ratio_cell(g)] for g in groups],
        "aggregate_rows": aggregate_rows(groups),
    }
    claims = {
        "title": "Float64 claims per end (records): proved / does not hold (the witness's or "
                 "certificate's own inequality is false) / undecided / refuted (the claim "
                 "about r_eps is false)",
        "columns": ["Family", "eps", "Brackets",
                    *(f"U {word(o)}" for o in RESULTS[:4]),
                    *(f"L {word(o)}" for o in RESULTS), "Input errors"],
        "left": 2,
        "rows": [[family_cell(g["family"]), eps_cell(g["eps"]), str(g["records"]),
                  *(str(_ends(g)["upper"].get(o, 0)) for o in RESULTS[:4]),
                  *(str(_ends(g)["lower"].get(o, 0)) for o in RESULTS),
                  str(g["errors"])] for g in groups],
        "aggregate_rows": aggregate_rows(groups),
        # LaTeX only: grouped, abbreviated headers so the table fits one column
        "tex_columns": ["Family", "eps", "Brackets", "pr.", "n.h.", "und.", "ref.", "pr.",
                        "n.h.", "und.", "ref.", "abs.", "Input errors"],
        "column_groups": [["Upper claims", 3, 7], ["Lower claims", 7, 12]],
    }
    budget_rows: list[list[str]] = []
    budget_aggregates: list[int] = []
    for g in groups:
        for k in budgets:
            if g["family"] is ALL_FAMILIES:
                budget_aggregates.append(len(budget_rows))
            # verdicts on the brackets tightened across eps (per-eps ones: groups[].budgets)
            c = (g.get("tightened") or g)["budgets"][str(k)]
            n = g["operators"]
            budget_rows.append([family_cell(g["family"]), eps_cell(g["eps"]), str(k), str(n),
                                *(fmt_share(_q(Fraction(c[v], n)) if n else None)
                                  for v in VERDICTS)])
    budget = {
        "title": "Rank budgets on the brackets tightened across eps: share of (operator, eps) "
                 "pairs feasible / impossible / unresolved",
        "note": VERDICT_NOTE + " " + TIGHTENED_NOTE,
        "columns": ["Family", "eps", "Budget k", "Operators", "Feasible", "Impossible",
                    "Unresolved"], "left": 2,
        "rows": budget_rows, "aggregate_rows": budget_aggregates,
    }
    out = {"brackets": brackets, "claims": claims, "budgets": budget}
    if all("tightened" in g for g in groups):
        out["tightened"] = tightened_table(groups)
    if producers is not None:
        out["producers"] = {
            "title": "Float64 claims per producer (records, all families and eps)",
            "columns": ["End", "Producer", "Claims", "Proved", "Does not hold", "Undecided",
                        "Refuted"],
            "left": 2, "group_column": 0,
            "rows": [[p["end"], escape.cut(p["producer"]), str(p["claims"]),
                      *(str(p.get("results", {}).get(o, 0)) for o in RESULTS[:4])]
                     for p in producers],
        }
    return out


def markdown_table(table: dict[str, Any], left: int | None = None) -> str:
    """Returns a GitHub-flavoured Markdown table (cells escaped: escape.md); the first ``left``
    columns (default: the table's "left", else 2) are left-aligned, the others right-aligned.
    """
    if left is None:
        left = int(table.get("left", 2))
    def cells(xs: Sequence[str], aggregate: bool = False) -> str:
        shown = [escape.md(x) for x in xs]
        if aggregate:
            shown[0] = f"*{ALL_LABEL}*"
        return "| " + " | ".join(shown) + " |"

    lines = [cells(table["columns"]),
             "|" + "|".join("---" if i < left else "---:" for i in range(len(table["columns"])))
             + "|"]
    agg = set(table.get("aggregate_rows") or [])
    lines += [cells(r, i in agg) for i, r in enumerate(table["rows"])]
    return "\n".join(lines)


def tex_escape(s: str) -> str:
    return escape.tex(s)


def _tex_cell(s: str, col: str, numeric: bool = True) -> str:
    # only a number we formatted is typeset as infinity: a store string "inf" (a family,
    # producer or layer name) stays the text it is, as in Markdown
    if numeric and s == INF:
        return r"$\infty$"
    if col == "Shape":
        return tex_escape(s).replace(" x ", r"$\times$")
    return tex_escape(s)


def _eps_math(s: str) -> str:
    """Our own header or caption text as LaTeX: escaped, then eps and the comparison signs
    typeset as math (never applied to store text, whose 'eps' or '<=' stays literal)."""
    out = tex_escape(s).replace("eps", r"$\varepsilon$")
    for text, sign in (("\\textless{}=", r"$\leq$"), ("\\textgreater{}=", r"$\geq$"),
                       ("\\textless{}", "$<$")):
        out = out.replace(text, sign)
    return out


def latex_tabular(table: dict[str, Any]) -> str:
    """Returns the booktabs ``tabular`` alone (needs \\usepackage{booktabs}), for \\input
    inside a table environment of one's own.
    """
    cols = table["columns"]
    left = int(table.get("left", 2))
    spec = "l" * left + "r" * (len(cols) - left)
    group = int(table.get("group_column", 1))
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines += _tex_group_header(table.get("column_groups") or [], len(cols))
    lines += [" & ".join(_tex_header_cell(c) for c in table.get("tex_columns") or cols)
              + r" \\", r"\midrule"]
    prev = None
    agg = set(table.get("aggregate_rows") or [])
    text = set(table.get("text_columns") or range(left))
    for i, row in enumerate(table["rows"]):
        if prev is not None and row[group] != prev:
            lines.append(r"\addlinespace")
        prev = row[group]
        shown = [_tex_cell(c, col, j not in text)
                 for j, (c, col) in enumerate(zip(row, cols, strict=True))]
        if i in agg:
            shown[0] = rf"\textit{{{ALL_LABEL}}}"
        lines.append(" & ".join(shown) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def caption_tex(table: dict[str, Any]) -> str:
    """The table's caption in LaTeX: its title, then its note (what its words mean)."""
    title = _eps_math(table["title"])
    return title + (". " + _eps_math(table["note"]) if table.get("note") else "")


def latex_table(table: dict[str, Any], label: str) -> str:
    """Returns a booktabs ``table`` float (needs \\usepackage{booktabs} and {graphicx}) ready
    to \\input: small type, narrow column gaps, stacked headers, and scaled to the line width
    only if still wider (``latex_fit``).
    """
    return "\n".join([r"\begin{table}[htbp]", r"\centering", r"\small",
                      r"\setlength{\tabcolsep}{4pt}",
                      rf"\caption{{{caption_tex(table)}}}", rf"\label{{{label}}}",
                      latex_fit(latex_tabular(table)), r"\end{table}"])


# ---------------------------------------------------------------------------- interval tables


def fmt_short(q: Fraction, digits: int = 4, rounding: Rounding = "nearest") -> str:
    """Returns q with ``digits`` significant digits (rounded half away from zero, or toward
    -inf / +inf for ``"down"`` / ``"up"``), in plain decimal notation for 1e-4 <= |q| < 1e6,
    else as m.mmme[+-]XX (display only; the exact value stays in report.json).  Any size of
    rational: the exponent comes from integer arithmetic, never a float.
    """
    if q == 0:
        return "0"
    _, e = numfmt.mantissa(q, digits, rounding)  # the exponent after rounding's carry
    if -4 <= e < 6:
        return fmt_decimal(q, max(digits - 1 - e, 0), rounding)
    return numfmt.sci(q, digits, rounding)


def _share_ci(ci: list[str | None]) -> str:
    # an interval: its ends rounded outward
    lo, hi = (fmt_decimal(Fraction(x) * 100, 1, r) for x, r in zip(ci, ("down", "up"),
                                                                     strict=True))
    return f"[{lo}, {hi}]"


def _median_value(q: str | None, places: int, rounding: Rounding = "nearest") -> str:
    if q is None:
        return INF
    v = Fraction(q)
    if places == 1 and v.denominator == 1:
        return str(v.numerator)
    return fmt_decimal(v, places, rounding)


def _median_ci(ci: list[str | None], places: int) -> str:
    # an interval: its ends rounded outward
    return "[" + ", ".join(_median_value(x, places, r)
                           for x, r in zip(ci, ("down", "up"), strict=True)) + "]"


def interval_tables(rows: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Returns the tables "intervals" (within-criterion and closed shares) and "medians"
    (median L, U, U/L), each with its bootstrap 95% interval, from ``stats.interval_rows``
    output; the titles state the seed and the resample count.  Display only.
    """
    how = (f"bootstrap 95% intervals, operators resampled, seed {settings['seed']}, "
           f"{settings['resamples']} resamples")
    shares = {
        "title": f"Pairs within the study's criterion and closed pairs per family and eps; "
                 f"{how}",
        "note": CRITERION_NOTE,
        "columns": ["Family", "eps", "Operators", "Within criterion", "95% CI", "Closed",
                    "Closed share",
                    "95% CI"], "left": 2,
        "rows": [[family_cell(r["family"]), eps_cell(r["eps"]), str(r["operators"]),
                  fmt_share(r["resolved_share"]), _share_ci(r["intervals"]["resolved_share"]),
                  str(r["closed"]), fmt_share(r["closed_share"]),
                  _share_ci(r["intervals"]["closed_share"])] for r in rows],
        "aggregate_rows": aggregate_rows(rows),
    }
    medians = {
        "title": f"Medians of validated L, U and U/L per family and eps; {how}",
        "columns": ["Family", "eps", "Median L", "95% CI", "Median U", "95% CI",
                    "Median U/L", "95% CI"], "left": 2,
        "rows": [[family_cell(r["family"]), eps_cell(r["eps"]),
                  _median_value(r["median_lower"], 1),
                  _median_ci(r["intervals"]["median_lower"], 1),
                  _median_value(r["median_upper"], 1),
                  _median_ci(r["intervals"]["median_upper"], 1),
                  _median_value(r["median_ratio"], 2),
                  _median_ci(r["intervals"]["median_ratio"], 2)] for r in rows],
        "aggregate_rows": aggregate_rows(rows),
    }
    return {"intervals": shares, "medians": medians}


def layer_cell(layer: object) -> str:
    """Returns a layer as a cell: an integer as itself, a string that reads as one (or starts
    with a quote) in JSON quotes (layer 1 and layer "1" are two groups and must not look
    alike), other text as it is; cut as families are."""
    if isinstance(layer, str):
        # quoted (JSON) when it reads as an integer or starts with a quote, so no string
        # shows as an integer or as another string's quoted form
        plain = not (layer.strip().lstrip("+-").isdigit() or layer.startswith('"'))
        return escape.cut(layer if plain else json.dumps(layer))
    return str(layer)


def layer_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the per-layer table from ``stats.layer_rows`` output (display only)."""
    return {
        "title": "Validated brackets per layer and eps ((operator, eps) pairs)",
        "note": CRITERION_NOTE,
        "columns": ["Family", "Layer", "eps", "Operators", "Within criterion", "Closed",
                    "Median L", "Median U"], "left": 3, "group_column": 1,
        "rows": [[family_cell(r["family"]), layer_cell(r["layer"]), eps_cell(r["eps"]),
                  str(r["operators"]),
                  fmt_share(r["resolved_share"]), fmt_share(r["closed_share"]),
                  fmt_median(r["median_lower"]), fmt_median(r["median_upper"])]
                 for r in rows],
    }


def _tex_header_cell(name: str) -> str:
    """A header of several words stacked on lines of at most about 9 characters (a nested
    one-column tabular, plain LaTeX), so columns are as narrow as their numbers."""
    words = name.split(" ")
    lines: list[str] = []
    for w in words:
        if lines and len(lines[-1]) + 1 + len(w) <= 9:
            lines[-1] += " " + w
        else:
            lines.append(w)
    cells = [_eps_math(x) for x in lines]
    if len(cells) == 1:
        return cells[0]
    return r"\begin{tabular}[b]{@{}c@{}}" + r"\\".join(cells) + r"\end{tabular}"


def _tex_group_header(groups: list[list[Any]], ncols: int) -> list[str]:
    """The header row of column groups [label, first, stop) with a booktabs \\cmidrule under
    each (none when there are no groups)."""
    if not groups:
        return []
    cells: list[str] = []
    rules = []
    col = 0
    for label, first, stop in sorted(groups, key=lambda g: g[1]):
        cells += [""] * (first - col)
        cells.append(rf"\multicolumn{{{stop - first}}}{{c}}{{{_eps_math(str(label))}}}")
        rules.append(rf"\cmidrule(lr){{{first + 1}-{stop}}}")
        col = stop
    cells += [""] * (ncols - col)
    return [" & ".join(cells) + r" \\", "".join(rules)]


FIT_BOX = "softrankfitbox"


def latex_fit(body: str) -> str:
    """Wraps ``body`` (a tabular) so that it is typeset at its natural size when it fits the
    line width and scaled down to the line width otherwise (needs \\usepackage{graphicx});
    the box register is allocated once however many reports are \\input."""
    return "\n".join([
        rf"\ifdefined\{FIT_BOX}\else\newsavebox{{\{FIT_BOX}}}\fi",
        rf"\sbox{{\{FIT_BOX}}}{{%", body + "%", "}",
        rf"\ifdim\wd\{FIT_BOX}>\linewidth\resizebox{{\linewidth}}{{!}}{{\usebox{{\{FIT_BOX}}}}}%",
        rf"\else\usebox{{\{FIT_BOX}}}\fi"])


# ---------------------------------------------------------------------------- block widths


def summarize_block_widths(records: list[dict[str, Any]], budgets: Sequence[int]
                           ) -> list[dict[str, Any]]:
    """Returns one exact row per (family, eps, block width N) over the (operator, eps) pairs
    of ``block`` records (common-prefix blocks of causal heads; N = the block's key count).

    Keys: family, eps, width, shapes, operators (pairs), budgets {k: {verdict: count}} (on the
    brackets tightened across eps; an operator's records are all block records) and shares
    {k: {verdict: exact share as a fraction string, ``_q``}}.  Rows are sorted by (family,
    eps, width).
    """
    from .tightening import attach

    blocks = [r for r in records if r.get("record_kind") == "block"]
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for p in attach(group_pairs(blocks, budgets), blocks, budgets):
        groups[(p["family"], p["eps"], int(p["shape"][1]))].append(p)
    rows = []
    for (fam, eps, width), ps in sorted(groups.items(),
                                        key=lambda kv: (kv[0][0], eps_key(kv[0][1]), kv[0][2])):
        row: dict[str, Any] = {"family": fam, "eps": eps, "width": width, "operators": len(ps),
                               "shapes": [list(s) for s in sorted({tuple(p["shape"])
                                                                   for p in ps})],
                               "budgets": {}, "shares": {}}
        for k in budgets:  # verdicts on the brackets tightened across eps
            c = Counter(p["tightened"]["budgets"][str(k)] for p in ps)
            row["budgets"][str(k)] = {v: c.get(v, 0) for v in VERDICTS}
            row["shares"][str(k)] = {v: _q(Fraction(c.get(v, 0), len(ps))) for v in VERDICTS}
        rows.append(row)
    return rows


def block_tables(rows: list[dict[str, Any]], budgets: Sequence[int]) -> dict[str, Any]:
    """Returns {"block_widths": table} (budget shares by block width N) from the rows of
    :func:`summarize_block_widths` (none: {}); same table layout as ``build_tables``.
    Display only: the shares are the rows' exact ones, formatted."""
    if not rows:
        return {}
    cells = []
    for g in rows:
        for k in budgets:
            sh = g["shares"][str(k)]
            cells.append([family_cell(g["family"]), eps_cell(g["eps"]), str(g["width"]),
                          fmt_shape(g["shapes"]),
                          str(k), str(g["operators"]), *(fmt_share(sh[v]) for v in VERDICTS)])
    return {"block_widths": {
        "title": "Common-prefix blocks by width N: share of (operator, eps) pairs feasible / "
                 "impossible / unresolved at each budget (brackets tightened across eps)",
        "note": VERDICT_NOTE + " " + TIGHTENED_NOTE,
        "columns": ["Family", "eps", "Width N", "Shape", "Budget k", "Operators", "Feasible",
                    "Impossible", "Unresolved"], "left": 2,
        "rows": cells,
    }}


# ---------------------------------------------------------------------------- per head


def per_head_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the per-head table (one row per (operator, eps) pair) from
    ``stats.per_head_rows`` output; ``text_columns`` lists the columns holding store text
    (escaped by every renderer, CSV included).  Display only."""
    return {
        "title": "Validated bracket of every (operator, eps) pair, with the kinds of the "
                 "certificates that gave U and L",
        "note": "Gap: U - L (0: closed). A kind 'trivial' is U = min(m, N) (B = A), "
                "'nonzero' is L = 1 (A is not within eps of 0), 'none' is L = 0 (a fallback "
                "proved on the spot is named as such). L* and U*: the bracket tightened "
                "across eps, each end with the bracket and eps it comes from. "
                + TIGHTENED_NOTE,
        "columns": ["Operator", "Family", "eps", "L", "U", "Gap", "U kind", "L kind",
                    "L*", "U*", "L* from", "U* from"],
        "csv_columns": ["operator", "family", "eps", "L", "U", "gap", "upper_kind",
                        "lower_kind", "tight_L", "tight_U", "tight_L_from", "tight_U_from"],
        "left": 3, "align": "lllrrrllrrll", "text_columns": [0, 1, 6, 7, 10, 11],
        "rows": [[r["operator"], family_cell(r["family"]), fmt_eps(r["eps"]), str(r["lower"]),
                  str(r["upper"]), str(r["gap"]), r["upper_kind"], r["lower_kind"],
                  *_tight_cells(r)] for r in rows],
        # the longtable must fit one page width: it names the eps each tightened end comes
        # from (same operator), the bracket ids and kinds stay in the CSV and report.json
        "tex_columns": ["Operator", "Family", "eps", "L", "U", "Gap", "U kind", "L kind",
                        "L*", "U*", "L* at eps", "U* at eps"],
        "tex_rows": [[r["operator"], family_cell(r["family"]), eps_cell(r["eps"]), str(r["lower"]),
                      str(r["upper"]), str(r["gap"]), r["upper_kind"], r["lower_kind"],
                      *_tight_cells(r, short=True)] for r in rows],
    }


LOOSE_TITLE = "Open brackets: which side is likely loose (float64 searches, not proofs)"
LOOSE_NOTE = ("U-1 fit/eps: the best float64 fit the upper producer found at rank U - 1, its "
              "max-row-l1 error divided by eps (below 1 would lower U). L+1 value: the best "
              "float64 lower-certificate value the lower producer found at rank L + 1 (a "
              "Bernstein value eps sup ||w|| / ||Aw||; below 1 would raise L). U-1 runs within "
              "3%: how many of the upper search's runs at rank U - 1 ended within 3% of its "
              "best fit. Likely loose: lower where at least 3 runs agree and the best fit is "
              "more than 3% above eps (U is probably the least rank), else the end whose "
              "number is nearer 1; unknown when a number is missing or they tie. Best float64 "
              "values found by incomplete searches, not a proof: a better search or another "
              "certificate may move either end. Per-eps brackets.")


def agree_cell(agree: int | None, runs: int | None) -> str:
    """Returns "agree/runs" for the upper search's runs at U - 1, "-" when either is
    missing."""
    return "-" if agree is None or runs is None else f"{int(agree)}/{int(runs)}"


def loose_table(rows: list[dict[str, Any]], n: dict[str, int]) -> dict[str, Any]:
    """Returns the table of open brackets and the side likely loose from ``loose.open_rows``
    and ``loose.counts`` output (display only: numbers to 4 significant digits, exact in
    report.json ``open_brackets``); ``text_columns`` lists the store-text columns (escaped by
    every renderer); ``count`` is the count line."""
    def num(q: str | None) -> str:
        return "-" if q is None else numfmt.sig(Fraction(q), 4)

    return {
        "title": LOOSE_TITLE,
        "note": LOOSE_NOTE,
        "count": (f"{n['open']} of {n['pairs']} (operator, eps) pairs are open; likely loose "
                  f"(float64 searches, not proofs): upper {n['upper']}, lower {n['lower']}, "
                  f"unknown {n['unknown']}."),
        "columns": ["Operator", "eps", "[L, U]", "U-1 fit/eps", "U-1 runs within 3%",
                    "L+1 value", "Likely loose"],
        "left": 3, "text_columns": [0],
        "rows": [[r["operator"], eps_cell(r["eps"]),
                  f"[{r['lower']}, {r['upper']}]", num(r["upper_next_ratio"]),
                  agree_cell(r.get("upper_next_agree"), r.get("upper_next_runs")),
                  num(r["lower_next_value"]), r["likely_loose"]] for r in rows],
    }


def _tight_cells(r: dict[str, Any], short: bool = False) -> list[str]:
    """The per-head cells of the tightened bracket: L*, U*, and where each comes from (the
    citation, or with ``short`` only its eps); ends that contradict are shown as an internal
    error, never as a bracket."""
    if "tight_lower" not in r:
        return ["-", "-", "-", "-"]

    def cite(c: dict[str, Any] | None) -> str:
        return ("-" if c is None else eps_cell(c["eps"])) if short else fmt_citation(c)

    ends = ([str(r["tight_lower"]), str(r["tight_upper"])] if r["tight_consistent"] else
            ["internal error", "internal error"])
    return [*ends, cite(r["tight_lower_from"]), cite(r["tight_upper_from"])]


def csv_text(table: dict[str, Any]) -> str:
    """Returns the table as CSV (RFC 4180 quoting, "\\n" line ends): the ``csv_columns``
    header, then the rows, every cell of a ``text_columns`` column passed through
    escape.csv_cell (no spreadsheet formula, no line break, from store text)."""
    import csv
    import io

    text_cols = set(table.get("text_columns") or range(len(table["columns"])))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.get("csv_columns") or table["columns"])
    for row in table["rows"]:
        writer.writerow([escape.csv_cell(c) if i in text_cols else c
                         for i, c in enumerate(row)])
    return buf.getvalue()


def latex_longtable(table: dict[str, Any], label: str) -> str:
    """Returns the table as a booktabs ``longtable`` (needs \\usepackage{booktabs,longtable};
    one-column layouts only, as longtable itself) breaking across pages with its header
    repeated, every cell escaped (escape.tex); ``tex_columns`` / ``tex_rows``, when present,
    replace the columns and rows (a narrower layout of the same table)."""
    cols = table.get("tex_columns") or table["columns"]
    left = int(table.get("left", 2))
    spec = table.get("align") or "l" * left + "r" * (len(cols) - left)
    header = " & ".join(_tex_header_cell(c) for c in cols) + r" \\"
    lines = [r"\begingroup\small\setlength{\tabcolsep}{4pt}",
             rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{caption_tex(table)}}}\label{{{label}}}\\",
             r"\toprule", header, r"\midrule", r"\endfirsthead",
             rf"\multicolumn{{{len(cols)}}}{{l}}{{\emph{{(continued)}}}}\\",
             r"\toprule", header, r"\midrule", r"\endhead",
             r"\bottomrule", r"\endlastfoot"]
    group = int(table.get("group_column", 0))
    prev = None
    for row in table.get("tex_rows") or table["rows"]:
        if prev is not None and row[group] != prev:
            lines.append(r"\addlinespace[2pt]")
        prev = row[group]
        lines.append(" & ".join(tex_escape(c) for c in row) + r" \\")
    lines += [r"\end{longtable}", r"\endgroup"]
    return "\n".join(lines)


def _ends(group: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Returns a group row's counts per end in the newer words (``ends``), or, for a row
    built before that key existed, its older ``claims`` counts translated."""
    if "ends" in group:
        return group["ends"]
    out: dict[str, dict[str, int]] = {}
    for end, counts in group.get("claims", {}).items():
        out[end] = {}
        for o, v in counts.items():
            res = end_result({f"{end}_outcome": o}, end)
            out[end][res] = out[end].get(res, 0) + v
    return out
