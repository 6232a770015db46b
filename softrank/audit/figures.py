"""Audit figures (matplotlib, no display needed): brackets, margins and operator slack chi.

Figures are drawn with ``matplotlib.figure.Figure`` directly (no pyplot global state, no GUI
backend) and written atomically as SVG, PNG and PDF (vector, for papers); labels use
matplotlib's mathtext ($L \\leq r_\\varepsilon \\leq U$), which needs no LaTeX installation.
They are illustrations: every number they show is in report.json as an exact rational; floats
here are for drawing only.  Each is sized for one column of a paper (WIDTH_IN wide, all text at
FONT points), several panels as small multiples in a grid (``grid_shape``); no figure has an
overall title: the captions (report.md, report-figures.tex) say what is plotted.  The data
of each figure come from the statistics layer (``stats.margin_panels``, ``stats.chi_values``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..numfmt import clamped_float, float_up
from .escape import svg_text
from .files import FIGURE_FORMATS, write_public
from .stats import chi_groups, chi_values, margin_panels
from .tables import eps_key, fmt_eps, fmt_short

WITHIN_COLOUR = "#1f77b4"
OUTSIDE_COLOUR = "#d62728"
STATUS_COLOURS = {"holds": "#2ca02c", "fails": "#d62728", "undecided": "#7f7f7f"}

# one column of a two-column paper: every figure is this wide at its natural size, with all
# its text at FONT points, so \includegraphics at this width prints 8 pt labels
WIDTH_IN = 3.3
FONT = 8
PNG_DPI = 300


def _int_locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True, nbins=4)


def _rank_axis(ax: Any) -> None:
    """Log axis labelled with plain ranks (1, 2, 5, 10, 20, ...), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _log_x(ax: Any) -> None:
    """Log x axis with at most about four labelled decades (a narrow panel holds no more)."""
    from matplotlib.ticker import LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=4))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _figure(height: float) -> Any:
    from matplotlib.figure import Figure  # imported late: matplotlib is the plots extra

    return Figure(figsize=(WIDTH_IN, height), layout="constrained")


def grid_shape(n: int) -> tuple[int, int]:
    """Returns (rows, columns) of the small multiples for ``n`` panels in one column: up to 3
    panels stacked, up to 8 in two columns, more in three."""
    cols = 1 if n <= 3 else 2 if n <= 8 else 3
    return max(1, -(-n // cols)), cols


def _panel_grid(fig: Any, n: int, **kw: Any) -> list[Any]:
    """The first ``n`` axes of a grid_shape(n) grid (the unused cells switched off)."""
    rows, cols = grid_shape(n)
    axes = [ax for row in fig.subplots(rows, cols, squeeze=False, **kw) for ax in row]
    for ax in axes[n:]:
        ax.set_axis_off()
    return axes[:n]


def _height(n: int, per_row: float, extra: float) -> float:
    return extra + per_row * grid_shape(n)[0]


MAX_PANELS = 24  # small multiples drawn; the tables list every group
MAX_LEGEND = 12  # families drawn apart in the chi histogram; the rest as one


def _eps_title(eps: str) -> str:
    """"= 0.25" for an eps whose exact decimal is short, else "\\approx" and four digits (an
    eps of 2^-12000 wrote 12,000 digits into a mathtext title: 39 s)."""
    exact = fmt_eps(eps)
    return f"= {exact}" if len(exact) <= 16 else rf"\approx {fmt_short(Fraction(eps))}"


def brackets_figure(pairs: list[dict[str, Any]]) -> Any:
    """Validated brackets [L, U] of every (operator, eps) pair, small multiples (one panel per
    family and eps with pairs, in a grid), pairs sorted by upper end; pairs within the study's
    criterion and outside it in two colours; log rank axis.
    """
    keys = sorted({(p["family"], p["eps"]) for p in pairs}, key=lambda k: (k[0], eps_key(k[1])))
    left_out = max(0, len(keys) - MAX_PANELS)
    keys = keys[:MAX_PANELS]  # a panel each costs seconds: 480 took 16 minutes
    n = len(keys)
    fig = _figure(_height(n, 1.3 if grid_shape(n)[1] == 1 else 1.45, 0.55))
    if not pairs:
        fig.text(0.5, 0.5, "no checked brackets", ha="center", fontsize=FONT)
        return fig
    from matplotlib.lines import Line2D

    if left_out:
        fig.text(0.5, 0.0, f"the first {n} (family, eps) groups; {left_out} more are in the "
                 "tables", ha="center", va="bottom", fontsize=FONT)

    axes = _panel_grid(fig, n, sharey=True)
    top = max(max(p["upper"], p["lower"]) for p in pairs)
    has_zero = any(p["lower"] == 0 for p in pairs)
    bottom = 0.5 if has_zero else 0.7 * min(p["lower"] for p in pairs)
    for ax, (fam, eps) in zip(axes, keys, strict=True):
        ps = sorted((p for p in pairs if p["family"] == fam and p["eps"] == eps),
                    key=lambda p: (p["upper"], p["lower"], p["operator"]))
        ax.set_yscale("log")
        ax.set_ylim(bottom, top * 1.6)
        _rank_axis(ax)  # after set_yscale, which resets the (shared) tickers
        ax.tick_params(labelsize=FONT, pad=2)
        ax.set_title(rf"{svg_text(fam)}, $\varepsilon {_eps_title(eps)}$ ({len(ps)})",
                     fontsize=FONT, pad=3)
        lw = max(0.4, min(2.0, 60 / len(ps)))
        for within, colour in ((True, WITHIN_COLOUR), (False, OUTSIDE_COLOUR)):
            sel = [(x, p) for x, p in enumerate(ps, start=1) if bool(p["resolved"]) is within]
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
                           color=colour, s=3 * lw + 3, linewidths=lw, zorder=3)
        ax.set_xlim(0, len(ps) + 1)
        ax.xaxis.set_major_locator(_int_locator())
    fig.supxlabel(r"(operator, $\varepsilon$) pairs, sorted by $U$", fontsize=FONT)
    fig.supylabel(r"rank: $L \leq r_\varepsilon \leq U$"
                  + (" ($L = 0$ at 0.6)" if has_zero else ""), fontsize=FONT)
    handles = [Line2D([], [], color=c, linewidth=2.5, label=lab)
               for c, lab in ((WITHIN_COLOUR, "within criterion"),
                              (OUTSIDE_COLOUR, "outside criterion"))]
    fig.legend(handles=handles, loc="outside upper center", fontsize=FONT, frameon=False,
               ncols=2, handlelength=1.5, columnspacing=1.2)
    return fig


def _drawable(v: Fraction) -> float | None:
    f = clamped_float(v)
    return f if math.isfinite(f) else None  # beyond the float range: not drawable


def _drawable_up(v: Fraction) -> float | None:
    f = float_up(v)
    return f if math.isfinite(f) else None  # beyond the float range: not drawable


def _log_bins(values: list[float]) -> list[float]:
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = max(hi, lo + 1)
    return [10 ** (lo + t * (hi - lo) / 30) for t in range(31)]


def margins_figure(records: list[dict[str, Any]]) -> Any:
    """Distribution of |margin| (distance of the checked quantity from its threshold, midpoint
    of the enclosure) per end and certificate kind, small multiples in a grid, coloured by
    status, log axis.
    """
    panels = margin_panels(records)
    n = len(panels)
    fig = _figure(_height(n, 1.15 if grid_shape(n)[1] > 1 else 1.3, 0.6))
    if not panels:
        fig.text(0.5, 0.5, "no margins recorded", ha="center", fontsize=FONT)
        return fig
    from matplotlib.patches import Patch

    seen: set[str] = set()
    for ax, ((end, kind), vals) in zip(_panel_grid(fig, n), panels.items(), strict=True):
        drawn = [(abs(f), s) for f, s in ((_drawable(v), s) for v, s in vals)
                 if f is not None and f != 0]
        zero = sum(v == 0 for v, _ in vals)
        _log_x(ax)
        if drawn:
            bins = _log_bins([m for m, _ in drawn])
            for status, colour in STATUS_COLOURS.items():
                xs = [m for m, s in drawn if s == status]
                if xs:
                    seen.add(status)
                    ax.hist(xs, bins=bins, color=colour, alpha=0.75)
        title = f"{end}: {svg_text(kind)} ({len(vals)})" + (f", {zero} at 0" if zero else "")
        ax.set_title(title, fontsize=FONT, pad=3)
        ax.tick_params(labelsize=FONT, pad=2)
        ax.yaxis.set_major_locator(_int_locator())
    fig.supxlabel("|margin| (distance from the threshold)", fontsize=FONT)
    fig.supylabel("checks", fontsize=FONT)
    handles = [Patch(color=STATUS_COLOURS[s], alpha=0.75, label=s)
               for s in STATUS_COLOURS if s in seen]
    if handles:
        fig.legend(handles=handles, loc="outside upper center", fontsize=FONT, frameon=False,
                   ncols=len(handles), handlelength=1.2)
    return fig


def chi_figure(records: list[dict[str, Any]]) -> Any:
    """Distribution of the operator slack chi = ||A_record - A_stored||_row1 per family (one
    value per operator; chi = 0 when the stored A is the operator of record).
    """
    chis = chi_values(records)
    fig = _figure(2.1)
    ax = fig.subplots()
    # chi is an upper bound: drawn rounded up (a chi below the float range stays > 0)
    pos = [x for x in (_drawable_up(v) for c in chis.values() for v in c.values() if v > 0)
           if x is not None]
    if not pos:
        n = sum(len(v) for v in chis.values())
        ax.text(0.5, 0.5, rf"$\chi = 0$ for all {n} operators" + "\n(stored $A$ is the "
                "operator of record)", ha="center", va="center", transform=ax.transAxes,
                fontsize=FONT)
        ax.set_axis_off()
        return fig
    bins = _log_bins(pos)
    _log_x(ax)
    groups = chi_groups(chis, MAX_LEGEND)  # one histogram and legend entry each
    merged = len(chis) > MAX_LEGEND  # then the last group is chi_groups' merged one
    for i, (f, values) in enumerate(groups):
        xs = [x for x in (_drawable_up(v) for v in values.values() if v > 0) if x is not None]
        zero = sum(v == 0 for v in values.values())
        # a family's name is quoted: matplotlib drops a legend label that starts with "_",
        # and a family named "9 other families" must not read as the merged group
        name = f if merged and i == len(groups) - 1 else f"\u2018{svg_text(f)}\u2019"
        if xs:
            ax.hist(xs, bins=bins, alpha=0.6, label=f"{name} ({len(xs)}" +
                    (rf"; {zero} with $\chi = 0$)" if zero else ")"))
    ax.set_xlabel(r"$\chi = \Vert A_{\mathrm{record}} - A_{\mathrm{stored}}"
                  r"\Vert_{\mathrm{row}1}$ (upper end of its enclosure)", fontsize=FONT)
    ax.tick_params(labelsize=FONT, pad=2)
    ax.set_ylabel("operators", fontsize=FONT)
    ax.yaxis.set_major_locator(_int_locator())
    ax.legend(fontsize=FONT, frameon=False)
    return fig


FORMATS = FIGURE_FORMATS  # files.py clears these names when a run starts

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
            fig.savefig(buf, format=fmt, dpi=PNG_DPI, metadata=meta)
            rel = f"figures/{name}.{fmt}"
            write_public(out_dir, rel, buf.getvalue())
            written.append(rel)
    return written
