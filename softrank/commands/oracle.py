"""``softrank-certify oracle CELL.json``: exact decision / bracket for a small rational cell."""

from __future__ import annotations

import argparse
import json
import os
import stat
from typing import Any

from softrank.certify.errors import InputError
from softrank.certify.rationals import qstr
from softrank.numfmt import sig
from softrank.witnesses import jsonexact

NAME = "oracle"
HELP = "exact rational oracle for r_eps of a small cell (JSON: matrix, eps, mode)"

_MODES = {"unrestricted": False, "stochastic": True}
MAX_CELL_BYTES = 1 << 20

EXAMPLES = (  # shown under --help
    'echo \'{"matrix": [["3/4","1/4"],["1/4","3/4"]], "eps": "1/4"}\' > cell.json',
    'softrank-certify oracle cell.json           # mode "unrestricted": B any real matrix',
    'softrank-certify oracle cell.json --json    # with "mode": "stochastic" in the file,',
    '                                             # B row-stochastic',
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cell", metavar="CELL.json",
                        help='{"matrix": [["1/2","1/2"],...], "eps": "1/4", '
                             '"mode": "unrestricted"|"stochastic"}')
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("--complete", action="store_true",
                        help="refuse (exit 2) cells too large for the complete rank-one search")
    parser.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                        help="time budget of the whole oracle run from reading the cell on "
                             "(default 60); when it runs out the bracket stays open (exit 1)")


def load_cell(path: str) -> tuple[Any, Any, bool]:
    """Returns (matrix, eps, stochastic) read from ``path``; InputError names file/field."""
    try:
        # O_NONBLOCK: a FIFO named as the cell must not block before the budget's clock runs
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", source=path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError("not a regular file (a folder, FIFO or device is not a cell)",
                         source=path)
    with os.fdopen(fd, "rb") as fh:
        try:
            raw = fh.read(MAX_CELL_BYTES + 1)
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror}", source=path) from None
    if len(raw) > MAX_CELL_BYTES:
        raise InputError(f"larger than {MAX_CELL_BYTES} bytes: not a small cell", source=path)
    try:
        # numbers are the exact decimals they spell ("eps": 0.3 is 3/10, not a binary float)
        doc = jsonexact.loads(raw)
    except ValueError as err:
        raise InputError(f"not valid JSON: {err}", source=path) from None
    if not isinstance(doc, dict):
        raise InputError("top level must be a JSON object", source=path)
    for key in ("matrix", "eps"):
        if key not in doc:
            raise InputError("missing field", field=key, source=path)
    mode = doc.get("mode", "unrestricted")
    if not isinstance(mode, str) or mode not in _MODES:
        raise InputError(f"must be 'unrestricted' or 'stochastic', got {mode!r}",
                         field="mode", source=path)
    unknown = sorted(set(doc) - {"matrix", "eps", "mode"})
    if unknown:
        raise InputError(f"unknown field(s) {unknown}", field=unknown[0], source=path)
    return doc["matrix"], doc["eps"], _MODES[mode]


def run(args: argparse.Namespace) -> int:
    from softrank.exact.budget import deadline
    from softrank.exact.inputs import rational_matrix, unit_eps
    from softrank.exact.oracle import oracle

    if not args.budget >= 0 or args.budget == float("inf"):
        raise InputError("must be a finite number of seconds >= 0", field="--budget")
    with deadline(args.budget):  # the budget counts from here: reading and parsing included
        matrix, eps, stochastic = load_cell(args.cell)
        # Parse here so errors name the file as well as the field.
        A = rational_matrix(matrix, source=args.cell)
        e = unit_eps(eps, source=args.cell)
        try:
            res = oracle(A, e, "stochastic" if stochastic else "unrestricted",
                         complete=args.complete, budget=args.budget,
                         total_budget=args.budget)
        except InputError as err:
            raise err.at(source=args.cell) from None
    if args.json:
        print(json.dumps(res.to_json(), indent=2))
    else:
        _print(res)
    return 0 if res.decided else 1


def _fmt(x: int | float) -> str:
    return "inf" if x == float("inf") else str(int(x))


def _value(q: Any) -> str:
    """Returns an exact rational as it is spelled, or, past 60 characters (a witness's error
    can run to hundreds of digits), its 12 leading significant digits with the length of the
    exact spelling, which --json prints whole."""
    text = qstr(q)
    if len(text) <= 60:
        return text
    return (f"{sig(q, 12, 'down', strip=False)} (rounded down to 12 digits; the exact value has "
            f"{len(text)} characters: --json)")


def _print(res: Any) -> None:
    m, n = len(res.A), len(res.A[0])
    print(f"cell {m} x {n}, eps = {_value(res.eps)}, mode = {res.mode}")
    verdict = f"r_eps = {_fmt(res.rank)} (decided)" if res.decided else \
        f"{_fmt(res.lower)} <= r_eps <= {_fmt(res.upper)} (bracket only)"
    print(verdict)
    c = res.lower_certificate
    print(f"  lower {_fmt(res.lower)}: certificate {c.kind}")
    if res.witness is not None:
        w = res.witness
        print(f"  upper {_fmt(res.upper)}: witness {w.kind}, exact rank {w.rank}, "
              f"exact error {_value(w.error)} <= {_value(res.eps)}")
    for note in res.notes:
        print(f"  note: {note}")
