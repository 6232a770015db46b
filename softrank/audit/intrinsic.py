"""The intrinsic part of an audit: per-head table and the kappa-vs-rank figure.

Numbers flow one way: kernel results (``softrank.commands._intrinsic_check``) and the audit's
validated rank brackets (``report["pairs"]``) -> rows -> intrinsic.json, intrinsic.md and
figures/intrinsic_kappa_rank.png.  The renderers compute no statistic; every cell string that
comes from the store is escaped by the Markdown table writer.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.witnesses import open_store
from softrank.witnesses.intrinsic_store import INTRINSIC_FILE

from ..commands._intrinsic_check import iter_intrinsic_checks, summarize_intrinsic
from ..numfmt import float_down, float_up, interval
from .files import INTRINSIC_FIGURE, write_public
from .tables import markdown_table

FIGURE = INTRINSIC_FIGURE


def _iv(b: dict[str, Any] | None) -> str:
    """The proved interval ``b``, 6 significant digits rounded outward from its exact ends
    (any size: no float conversion; the exact ends are in intrinsic.json)."""
    if b is None:
        return "-"
    return interval(b["lo"], b["hi"])


def build_rows(results: list[dict[str, Any]], pairs: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """Returns one row per (rank record, eps) with its brackets and the validated [L, U]."""
    brk = {(p["operator"], Fraction(p["eps"])): (p["lower"], p["upper"]) for p in pairs}
    rows = []
    for res in results:
        if res.get("kind") != "rank" or "error" in res:
            continue
        for prof in res["profiles"] or [None]:
            eps = None if prof is None else prof["eps"]
            LU = brk.get((res["operator"], Fraction(eps))) if eps is not None else None
            rows.append({"operator": res["operator"], "r": res["rank"], "eps": eps,
                         "tau": res["tau"], "kappa": res["kappa"],
                         "profile_status": None if prof is None else prof["status"],
                         "profile": None if prof is None else prof["profile"],
                         "log_profile": None if prof is None else prof["log_profile"],
                         "rank_bracket": None if LU is None else list(LU)})
    return rows


def write_intrinsic(store: str | Path, out: str | Path, pairs: list[dict[str, Any]], *,
                    figures: bool = True, max_work: int | None = None) -> dict[str, Any] | None:
    """Checks the store's intrinsic records and writes intrinsic.json / intrinsic.md (and the
    figure); returns the summary, or None when the store has no intrinsic.jsonl."""
    path = Path(store) / INTRINSIC_FILE
    if not path.is_file() and not path.is_symlink():
        return None
    try:
        results = list(iter_intrinsic_checks(open_store(store), max_work))
    except InputError as err:
        # a file that cannot be read at all is one input error of the audit, shown in its
        # reports and exit code (not only on stderr after a clean report was written)
        results = [{"id": INTRINSIC_FILE, "operator": None, "kind": None, "rank": None,
                    "error": str(err)}]
    rows = build_rows(results, pairs)
    summary = summarize_intrinsic(results)
    native = [r for r in results if r.get("kind") == "native" and "error" not in r]
    errors = [{"id": r["id"], "error": r["error"]} for r in results if "error" in r]
    outp = Path(out)
    fig = None
    if figures and rows:
        try:
            fig = write_figure(outp, rows)
        except ImportError:
            fig = None
    doc = {"summary": summary, "rows": rows, "native": native, "errors": errors,
           "figure": fig}
    write_public(outp, "intrinsic.json", json.dumps(doc, indent=1) + "\n")
    write_public(outp, "intrinsic.md", render_markdown(doc))
    return summary


def render_markdown(doc: dict[str, Any]) -> str:
    table = {"columns": ["Operator", "r", "eps", "[tau]", "[kappa]", "[profile]",
                         "[log profile]", "[L, U]"], "left": 1,
             "rows": [[r["operator"], str(r["r"]), r["eps"] or "-", _iv(r["tau"]),
                       _iv(r["kappa"]),
                       _iv(r["profile"]) if r["profile_status"] == "applicable"
                       else (r["profile_status"] or "-"),
                       _iv(r["log_profile"]) if r["profile_status"] == "applicable" else "-",
                       "-" if r["rank_bracket"] is None
                       else f"[{r['rank_bracket'][0]}, {r['rank_bracket'][1]}]"]
                      for r in doc["rows"]]}
    lines = ["# Intrinsic geometry (validated)", "",
             "Every interval is proved by the kernel from the stored witnesses: tau = 2 tanh(q/4) "
             "of the residual C - T, kappa(T) of the rank-r part T = X Y^T, and the profile "
             "(1 + kappa/(eps - tau)^2)^(r/2) where tau < eps is proved. [L, U] is the "
             "validated rank bracket at that eps.", "", markdown_table(table, left=1)]
    if doc["native"]:
        nt = {"columns": ["Operator", "[Gamma]"], "left": 1,
              "rows": [[n["operator"], _iv(n["Gamma"])] for n in doc["native"]]}
        lines += ["", "## Native size Gamma = beta rad(Q) rad(K)", "", markdown_table(nt)]
    if doc["errors"]:
        et = {"columns": ["Record", "Input error"], "left": 2,
              "rows": [[e["id"], e["error"]] for e in doc["errors"]]}
        lines += ["", "## Input errors", "", markdown_table(et)]
    if doc["figure"]:
        lines += ["", f"![kappa brackets against validated rank brackets]({doc['figure']})"]
    return "\n".join(lines) + "\n"


def grid_family_points(eps: float) -> list[tuple[int, int, float, int]]:
    """Returns (r, L, kappa(C), r_eps) of the grid family at eps: kappa(C) = s r (L-1)^2 / 2
    with s = log(8 r / (1 - eps)) and r_eps = L^r (both proved exactly by exact/grid.py)."""
    pts = []
    for r, Ls in ((2, (3, 5, 8, 12, 20)), (3, (3,))):
        s = float(np.log(8 * r / (1 - eps)))
        pts += [(r, L, s * r * (L - 1) ** 2 / 2, L ** r) for L in Ls]
    return pts


def write_figure(out: str | Path, rows: list[dict[str, Any]]) -> str:
    """Writes ``out``/figures/intrinsic_kappa_rank.png: kappa brackets (x) against validated
    rank brackets (y), log axes, one colour per r, with the grid family overlaid; returns the
    path relative to the report folder.

    Drawn on a ``matplotlib.figure.Figure`` (no pyplot state, no backend switch) and saved to
    memory, then written by :func:`write_public`: matplotlib never opens a path in ``out``
    (a planted link there would be followed).
    """
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.6))
    ax = fig.subplots()
    # only intervals drawable on log axes: 0 < lo and hi below the float range
    pts = [r for r in rows if r["rank_bracket"] is not None and r["kappa"]["hi"] is not None
           and float_down(r["kappa"]["lo"]) > 0 and float_up(r["kappa"]["hi"]) < np.inf]
    for rk in sorted({r["r"] for r in pts}):
        sel = [r for r in pts if r["r"] == rk]
        # drawn outward too: the bar covers the proved interval (0 / inf beyond the range)
        lo = np.array([float_down(r["kappa"]["lo"]) for r in sel])
        hi = np.array([float_up(r["kappa"]["hi"]) for r in sel])
        L = np.array([max(r["rank_bracket"][0], 1) for r in sel], dtype=float)
        U = np.array([r["rank_bracket"][1] for r in sel], dtype=float)
        x, y = np.sqrt(lo) * np.sqrt(hi), np.sqrt(L * U)  # no overflow of lo * hi
        ax.errorbar(x, y, xerr=[x - lo, hi - x], yerr=[y - L, U - y], fmt="o", ms=3, lw=0.6,
                    alpha=0.7, label=f"r = {rk}")
    eps_vals = sorted({Fraction(r["eps"]) for r in pts})
    if eps_vals:
        e = eps_vals[len(eps_vals) // 2]
        g = grid_family_points(float(e))
        for r_g, mk in ((2, "k-d"), (3, "kv")):
            ax.plot([p[2] for p in g if p[0] == r_g], [p[3] for p in g if p[0] == r_g], mk,
                    ms=4, label=f"grid family r = {r_g}, eps = {e} (exact)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kappa(T_r): validated bracket")
    ax.set_ylabel("approximation rank: validated [L, U]")
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    write_public(out, FIGURE, buf.getvalue())
    return FIGURE
