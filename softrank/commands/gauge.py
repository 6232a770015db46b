"""``softrank-certify gauge``: the gauge example table (Gamma(t) vs kappa(C))."""

from __future__ import annotations

import argparse
import json

from softrank.certify.errors import InputError
from softrank.certify.rationals import to_rational

MAX_T = 64
NAME = "gauge"
HELP = "exact gauge example: A unchanged by the shear, Gamma(t) = beta(1+t^2), kappa(C) = beta"

EXAMPLES = (  # shown under --help
    'softrank-certify gauge --beta 1 --t 0 2 5 10',
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beta", default="1",
                        help="beta > 0: a rational (e.g. 1, 3/2) or a symbol name (e.g. beta)")
    parser.add_argument("--t", nargs="+", default=["0", "2", "5", "10"],
                        help="shear parameters (rationals)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")


def check_beta(beta: str) -> None:
    """Raises InputError (field --beta) unless ``beta`` is a positive finite rational or a
    plain ASCII symbol name.  Names that sympy reads as a number or a non-finite value (nan, oo,
    zoo, I, E, pi, ...), and inf / infinity in any case, are refused: as a symbol they would
    print as if beta were that value."""
    import keyword

    import sympy

    if beta.isidentifier():
        if not beta.isascii():  # full-width or look-alike letters print as the names refused below
            # the code points, not the look-alike glyphs (a message is escaped once, when
            # printed: ascii()'s backslashes would show doubled)
            points = " ".join(f"U+{ord(c):04X}" for c in beta[:40])
            raise InputError(f"symbol name {beta[:40]!s} ({points}) is not ASCII: give a "
                             "positive rational or an ASCII symbol name (e.g. beta)",
                             field="--beta")
        low = beta.lower()
        val = getattr(sympy, beta, None)  # sympy's own name for it, looked up (no eval)
        # a sympy object's name (EmptySet, true) or a Python constant (None, True) prints in
        # the table as if beta were that object ("kappa(C) None")
        if low in ("nan", "inf", "infinity", "oo", "zoo") or keyword.iskeyword(beta) or (
                isinstance(val, sympy.Basic)):
            raise InputError(f"{beta!r} names a number, a non-finite value, a sympy constant or "
                             "a Python keyword, not a free symbol: give a positive rational "
                             "(e.g. 3/2) or another symbol name", field="--beta")
        return
    b = to_rational(beta, field="--beta")
    if b <= 0:
        raise InputError(f"must be > 0, got {b}", field="--beta")


def run(args: argparse.Namespace) -> int:
    from softrank.exact.gauge import gauge_example

    if len(args.t) > MAX_T:
        raise InputError(f"{len(args.t)} values, at most {MAX_T} (each takes seconds)",
                         field="--t")
    check_beta(args.beta)
    for t in args.t:
        to_rational(t, field="--t")  # finite rationals only (nan, inf, oo, I refused)
    try:
        rows = [gauge_example(args.beta, t) for t in args.t]
    except InputError as err:  # gauge_example names its parameters; the user typed options
        raise err.as_options(("t", "beta")) from None
    ok = all(g.logits_equal for g in rows)
    if args.json:
        print(json.dumps([g.to_json() for g in rows], indent=2))
    else:
        print(f"gauge example, beta = {rows[0].beta}: queries/keys +-e1, +-e2, shear S_t")
        print(f"{'t':>6} {'A = A(t=0)':>11} {'rho_Q':>12} {'rho_K':>12} {'Gamma(t)':>12} "
              f"{'kappa(C)':>10} {'rectangle/4':>12}")
        for g in rows:
            print(f"{str(g.t):>6} {str(g.logits_equal):>11} {str(g.rho_Q):>12} "
                  f"{str(g.rho_K):>12} {str(g.gamma):>12} {str(g.kappa):>10} "
                  f"{str(g.dual['value']):>12}")
        print("Gamma = beta rho_Q rho_K (exact enclosing radii); kappa(C): factorization "
              "value = rectangle (C11-C12-C21+C22)/4")
    return 0 if ok else 1
