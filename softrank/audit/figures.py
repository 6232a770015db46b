"""Audit figures (matplotlib, no display needed): brackets, margins and operator slack chi.

Figures are drawn with ``matplotlib.figure.Figure`` directly (no pyplot global state, no GUI
backend) and written atomically as SVG, PNG and PDF (vector, for papers); labels use
matplotlib's mathtext ($L \\leq r_\\varepsilon \\leq U$), which needs no LaTeX installation.
They are illustrations: every number they show is in report.json as an exact rational; floats
here are for drawing only.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..numfmt import clamped_float, float_up
from .escape import svg_text
from .files import write_public
from .tables import eps_key, fmt_eps, ok

RESOLVED_COLOUR = "#1f77b4"
UNRESOLVED_COLOUR = "#d62728"
STATUS_COLOURS = {"holds": "#2ca02c", "fails": "#d62728", "undecided": "#7f7f7f"}


def _int_locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _rank_axis(ax: Any) -> None:
    """Log axis labelled with plain ranks (1, 2, 5, 10, 20, ...), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # imported late: matplotlib is the plots extra

    return Figure(figsize=(width, height), layout="constrained")


def brackets_figure(pairs: list[dict[str, Any]]) -> Any:
    """Validated brackets [L, U] of every (operator, eps) pair, one panel per family and eps,
    sorted by upper end; resolved and unresolved pairs in two colours; log rank axis.
    """
    fams = sorted({p["family"] for p in pairs})
    epss = sorted({p["eps"] for p in pairs}, key=eps_key)
    fig = _figure(max(4.0, 3.6 * len(epss)), max(2.6, 2.5 * len(fams)))
    if not pairs:
        fig.text(0.5, 0.5, "no checked brackets", ha="center")
        return fig
    from matplotlib.lines import Line2D

    axes = fig.subplots(len(fams), len(epss), squeeze=False, sharey=True)
    top = max(max(p["upper"], p["lower"]) for p in pairs)
    has_zero = any(p["lower"] == 0 for p in pairs)
    bottom = 0.5 if has_zero else 0.7 * min(p["lower"] for p in pairs)
    for i, fam in enumerate(fams):
        for j, eps in enumerate(epss):
            ax = axes[i][j]
            ps = sorted((p for p in pairs if p["family"] == fam and p["eps"] == eps),
                        key=lambda p: (p["upper"], p["lower"], p["operator"]))
            ax.set_yscale("log")
            ax.set_ylim(bottom, top * 1.6)
            _rank_axis(ax)  # after set_yscale, which resets the (shared) tickers
            ax.tick_params(labelsize=7)
            ax.set_title(rf"{svg_text(fam)}, $\varepsilon = {fmt_eps(eps)}$ ({len(ps)})",
                         fontsize=9)
            if i == len(fams) - 1:
                ax.set_xlabel(r"(operator, $\varepsilon$) pairs, sorted by upper end $U$",
                              fontsize=8)
            if j == 0:
                ax.set_ylabel("rank" + (" ($L = 0$ drawn at 0.6)" if has_zero else ""),
                              fontsize=8)
            if not ps:
                ax.text(0.5, 0.5, "no brackets", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8, color="#7f7f7f")
                ax.set_xticks([])
                continue
            lw = max(0.4, min(3.0, 120 / len(ps)))
            for resolved, colour in ((True, RESOLVED_COLOUR), (False, UNRESOLVED_COLOUR)):
                sel = [(x, p) for x, p in enumerate(ps, start=1) if p["resolved"] is resolved]
                if not sel:
                    continue
                xs = [x for x, _ in sel]
                lo = [max(p["lower"], 0.6) for _, p in sel]
                hi = [p["upper"] for _, p in sel]
                ax.vlines(xs, lo, hi, colors=colour, linewidth=lw)
                # end ticks help a few segments and clutter many; a point bracket (L = U)
                # has no length, so it always gets a dot
                ticks = [(x, y) for x, a, b in zip(xs, lo, hi, strict=True)
                         for y in (a, b) if len(ps) <= 40 or a == b]
                if ticks:
                    ax.scatter(*zip(*ticks, strict=True), marker="_" if len(ps) <= 40 else ".",
                               color=colour, s=4 * lw + 6, linewidths=lw, zorder=3)
            ax.set_xlim(0, len(ps) + 1)
            ax.xaxis.set_major_locator(_int_locator())
    handles = [Line2D([], [], color=c, linewidth=3, label=lab)
               for c, lab in ((RESOLVED_COLOUR, "resolved"), (UNRESOLVED_COLOUR, "unresolved"))]
    fig.legend(handles=handles, loc="outside upper right", fontsize=8, frameon=False, ncols=2)
    fig.suptitle(r"Validated brackets $L \leq r_\varepsilon \leq U$", fontsize=10, x=0.02,
                 ha="left")
    return fig


def _margin_midpoint(check: dict[str, Any]) -> float | None:
    m = check.get("margin")
    if not m:
        return None
    v = clamped_float((Fraction(m["lo"]) + Fraction(m["hi"])) / 2)
    return v if math.isfinite(v) else None  # beyond the float range: not drawable


def margins_figure(records: list[dict[str, Any]]) -> Any:
    """Distribution of |margin| (distance of the checked quantity from its threshold, midpoint
    of the enclosure) per end and certificate kind, coloured by status, log axis.
    """
    panels: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for r in records:
        if not ok(r):
            continue
        for end in ("upper", "lower"):
            c = r.get(f"{end}_check")
            if not isinstance(c, dict):
                continue
            mid = _margin_midpoint(c)
            if mid is not None:
                panels[f"{end}: {svg_text(c.get('kind'))}"].append((mid, str(c.get("status"))))
    names = sorted(panels, key=lambda n: (not n.startswith("upper"), n))
    fig = _figure(max(4.0, 3.6 * len(names)), 3.0)
    if not names:
        fig.text(0.5, 0.5, "no margins recorded", ha="center")
        return fig
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        vals = panels[name]
        mags = [abs(v) for v, _ in vals if v != 0]
        zero = sum(v == 0 for v, _ in vals)
        ax.set_xscale("log")
        if mags:
            lo, hi = math.floor(math.log10(min(mags))), math.ceil(math.log10(max(mags)))
            hi = max(hi, lo + 1)
            bins = [10 ** (lo + t * (hi - lo) / 30) for t in range(31)]
            for status, colour in STATUS_COLOURS.items():
                xs = [abs(v) for v, s in vals if s == status and v != 0]
                if xs:
                    ax.hist(xs, bins=bins, color=colour, alpha=0.7,
                            label=f"{status} ({len(xs)})")
        title = svg_text(name) + (f"  [{zero} at 0]" if zero else "")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("|margin| (threshold distance)", fontsize=8)
        ax.set_ylabel("checks", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_locator(_int_locator())
        ax.legend(fontsize=7, frameon=False)
    fig.suptitle("Margins of the rigorous checks (positive = the claim's side)", fontsize=10)
    return fig


def chi_figure(records: list[dict[str, Any]]) -> Any:
    """Distribution of the operator slack chi = ||A_record - A_stored||_row1 per family (one
    value per operator; chi = 0 when the stored A is the operator of record).
    """
    chis: dict[str, dict[str, Fraction]] = defaultdict(dict)
    for r in records:
        if ok(r) and r.get("chi") is not None:
            chis[r["family"]][r["operator"]] = Fraction(r["chi"])
    fams = sorted(chis)
    fig = _figure(6.0, 3.2)
    ax = fig.subplots()
    # chi is an upper bound: drawn rounded up (a chi below the float range stays > 0)
    pos = [float_up(v) for f in fams for v in chis[f].values() if v > 0]
    pos = [v for v in pos if math.isfinite(v)]
    ax.set_title(r"Operator slack $\chi = \Vert A_{\mathrm{record}} - A_{\mathrm{stored}}"
                 r"\Vert_{\mathrm{row}1}$", fontsize=10)
    if not pos:
        n = sum(len(v) for v in chis.values())
        ax.text(0.5, 0.5, rf"$\chi = 0$ for all {n} operators" + "\n(stored $A$ is the "
                "operator of record)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    lo, hi = math.floor(math.log10(min(pos))), math.ceil(math.log10(max(pos)))
    hi = max(hi, lo + 1)
    bins = [10 ** (lo + t * (hi - lo) / 30) for t in range(31)]
    ax.set_xscale("log")
    for f in fams:
        xs = [x for x in (float_up(v) for v in chis[f].values() if v > 0)
              if math.isfinite(x)]
        zero = sum(v == 0 for v in chis[f].values())
        if xs:
            ax.hist(xs, bins=bins, alpha=0.6, label=f"{svg_text(f)} ({len(xs)}" +
                    (rf"; {zero} with $\chi = 0$)" if zero else ")"))
    ax.set_xlabel(r"$\chi$ (upper end of its enclosure)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_ylabel("operators", fontsize=8)
    ax.yaxis.set_major_locator(_int_locator())
    ax.legend(fontsize=7, frameon=False)
    return fig


FORMATS = ("svg", "png", "pdf")

FIGURES: dict[str, Callable[..., Any]] = {
    "brackets": lambda pairs, records: brackets_figure(pairs),
    "margins": lambda pairs, records: margins_figure(records),
    "chi": lambda pairs, records: chi_figure(records),
}


def write_figures(out_dir: str | Path, pairs: list[dict[str, Any]],
                  records: list[dict[str, Any]]) -> list[str]:
    """Writes figures/<name>.svg, .png and .pdf for every figure; returns the relative paths
    (only files that were written).

    Raises ImportError when matplotlib (the ``plots`` extra) is missing.
    """
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "softrank-audit"  # stable ids across runs
    written = []
    for name, make in FIGURES.items():
        fig = make(pairs, records)
        for fmt in FORMATS:
            buf = io.BytesIO()
            meta = {"svg": {"Date": None}, "png": {"Software": None},
                    "pdf": {"CreationDate": None, "ModDate": None}}[fmt]
            fig.savefig(buf, format=fmt, dpi=130, metadata=meta)
            rel = f"figures/{name}.{fmt}"
            write_public(Path(out_dir) / rel, buf.getvalue())
            written.append(rel)
    return written
