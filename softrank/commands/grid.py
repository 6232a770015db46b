"""``softrank-certify grid``: the exact grid family table (rank C, kappa(C), r_eps(A))."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
from pathlib import Path

from softrank.certify.errors import InputError
from softrank.terminal import shown
from softrank.witnesses.atomic import write_atomic

NAME = "grid"
HELP = "exact grid family: rank C, kappa(C) and r_eps(A) = L^r for each L (optional plot)"

EXAMPLES = (  # shown under --help
    'softrank-certify grid --r 2 --eps 1/4 --L 3 5 8 12 20',
    'softrank-certify grid --r 1 --eps 1/4 --L 2 4 8 --plot grid.png',
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--r", type=int, required=True, help="grid dimension r >= 1")
    parser.add_argument("--eps", required=True, help="tolerance, 0 < eps < 1 (e.g. 1/4)")
    parser.add_argument("--L", type=int, nargs="+", required=True, help="grid sides L >= 2")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="save the log-log plot of r_eps against kappa(C) (matplotlib; "
                             "the suffix picks the format, none means FILE.png)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")


MAX_SIDES = 64


def _sides(args: argparse.Namespace) -> list[int]:
    """Returns the distinct --L values in order; InputError (--L) for more than MAX_SIDES or
    when together they cost more than one family may (each is held until the table prints:
    --L 126 repeated took a gigabyte per copy)."""
    from softrank.exact.grid import MAX_ROW_WORK, MAX_WEIGHT_BITS, grid_cost
    from softrank.exact.inputs import unit_eps

    sides = list(dict.fromkeys(args.L))
    if len(sides) > MAX_SIDES:
        raise InputError(f"{len(sides)} distinct sides (at most {MAX_SIDES})", field="--L")
    if len(sides) == 1 or args.r < 1 or min(sides) < 2 or args.r >= 11:
        return sides  # grid_family prices one family, and names these errors
    e = unit_eps(args.eps, field="--eps")
    q = (1 - e) / (8 * args.r)
    costs = [grid_cost(args.r, L, q) for L in sides if L <= 1600]
    if sum(c[0] for c in costs) > MAX_WEIGHT_BITS or sum(c[1] for c in costs) > MAX_ROW_WORK:
        raise InputError(f"the {len(sides)} families together need more than one may "
                         f"({MAX_WEIGHT_BITS:.0e} bits of weights, {MAX_ROW_WORK:.0e} bit "
                         "operations): ask for fewer or smaller sides", field="--L")
    return sides


def run(args: argparse.Namespace) -> int:
    from softrank.exact.grid import grid_family

    plt = _pyplot() if args.plot else None  # fail early, before the computation
    plot = _plot_path(plt, args.plot) if plt is not None else None
    try:
        fams = [grid_family(args.r, L, args.eps) for L in _sides(args)]
    except InputError as err:  # grid_family names its parameters; the user typed options
        raise err.as_options(("r", "L", "eps")) from None
    if args.json:
        print(json.dumps([g.to_json() for g in fams], indent=2))
    else:
        g0 = fams[0]
        print(f"grid family r = {g0.r}, eps = {g0.eps}, s = {g0.s} = {float(g0.s):.6f}")
        print(f"{'L':>4} {'n=L^r':>7} {'rank C':>7} {'kappa(C)':>22} {'value':>11} "
              f"{'||A-I||_row1':>13} {'< 1-eps':>8} {'r_eps':>6}")
        for g in fams:
            print(f"{g.L:>4} {g.n:>7} {g.rank_C:>7} {str(g.kappa):>22} "
                  f"{float(g.kappa.evalf(30)):>11.4f} {float(g.row1_A_minus_I):>13.6f} "
                  f"{str(g.row1_A_minus_I < 1 - g.eps):>8} {g.r_eps:>6}")
        print("kappa(C): factorization value = rectangle value (exact); "
              "r_eps = L^r: ||A - I||_row1 < 1 - eps (exact rationals)")
    if plt is not None and plot is not None:
        _plot(plt, fams, plot)
        if not args.json:
            print(shown(f"plot saved to {plot}"))
    return 0


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("matplotlib is required for --plot (pip install "
                         "'softrank-certify[plots]')", field="--plot") from None
    return plt


def _plot_path(plt, path: str) -> str:  # noqa: ANN001
    """Returns the file the plot is written to: ``path`` itself when its suffix is an image
    format matplotlib writes, ``path`` + ".png" when it has no suffix (what matplotlib would
    write, now named in the message).  Raises InputError (--plot) for an existing folder or
    an unknown format, before any computation."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path} is a folder: give a file name such as "
                         f"{p / 'grid.png'}", field="--plot", source=path)
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    ext = p.suffix[1:].lower()
    if not ext:
        out = p.with_name(p.name + ".png")
        if out.is_dir():
            raise InputError(f"{out} is a folder", field="--plot", source=path)
        return str(out)
    if ext not in formats:
        raise InputError(f"unknown image format {p.suffix!r} (one of "
                         f"{', '.join(sorted(formats))})", field="--plot", source=path)
    return path


def _plot(plt, fams, path: str) -> None:
    ks = [float(g.kappa.evalf(30)) for g in fams]
    rs = [g.r_eps for g in fams]
    slope = fams[0].r / 2
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(ks, rs, "o-", label=r"$r_\varepsilon(A)$ (exact)")
    # guide of slope r/2 through the largest point (the exponent is asymptotic in L)
    guide = [rs[-1] * (k / ks[-1]) ** slope for k in ks]
    ax.loglog(ks, guide, "--", color="gray", label=f"slope r/2 = {slope:g}")
    ax.set_xlabel(r"$\kappa(C)$")
    ax.set_ylabel(r"$r_\varepsilon(A)$")
    ax.set_title(f"grid family, r = {fams[0].r}, eps = {fams[0].eps}")
    ax.legend()
    fig.tight_layout()
    # rendered in memory and written atomically: a link at FILE is replaced, not written
    # through, and a failed run leaves no half-written plot
    buf = io.BytesIO()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    try:
        fig.savefig(buf, format=suffix or None)
        write_atomic(path, lambda fh: fh.write(buf.getvalue()), field="--plot")
    except OSError as err:
        raise InputError(f"cannot write plot: {err.strerror}", field="--plot",
                         source=path) from None
    finally:
        plt.close(fig)
    if not all(math.isfinite(k) for k in ks):  # pragma: no cover - defensive
        raise RuntimeError("non-finite kappa")
