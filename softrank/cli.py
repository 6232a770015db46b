"""``softrank-certify``: the command-line entry point.

Subcommands live in ``softrank/commands/<name>.py``; each module defines ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int`` and is discovered automatically.

Exit codes: 0 every claim proved; 1 some claim failed or stayed undecided; 2 usage or input
error (the message names the file and field).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from certify.errors import InputError

from . import __version__, commands

EXIT_OK, EXIT_NOT_PROVED, EXIT_INPUT = 0, 1, 2


def _common_options() -> argparse.ArgumentParser:
    """Options every subcommand shares, with one meaning everywhere."""
    common = argparse.ArgumentParser(add_help=False)
    level = common.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true",
                       help="print only the result lines: no progress bar, no per-item lines, "
                            "no third-party progress output")
    level.add_argument("-v", "--verbose", action="store_true",
                       help="also print one detail line per item (bracket, operator, ...)")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="softrank-certify",
        description="Rigorous (verified-numerics) checks of approximation-rank brackets "
                    "for softmax attention matrices.",
        epilog="exit codes: 0 all proved, 1 something failed or undecided, 2 usage/input error",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = _common_options()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, parents=[common])
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except InputError as err:
        print(f"softrank-certify: input error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("softrank-certify: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
