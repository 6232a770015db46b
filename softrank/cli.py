"""``softrank-certify``: the command-line entry point.

Subcommands live in ``softrank/commands/<name>.py``; each module defines ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int`` and is discovered automatically.

Exit codes: 0 every claim proved; 1 some claim failed or stayed undecided; 2 usage or input
error (the message names the file and field); 3 internal error (a bug: "internal error" and,
with ``--debug``, the traceback), so a crash never reads as a verdict; 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM); 141 output pipe closed (``... | head``), each ending
quietly with at most one line.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__
from .terminal import shown

# Heavier imports (the kernel, numpy, flint, the command modules) happen inside the functions
# that need them, so ``--version`` answers without loading them.

EXIT_OK, EXIT_NOT_PROVED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_PIPE = 130, 143, 141


def _common_options(verbose_help: str | None = None) -> argparse.ArgumentParser:
    """Options every subcommand shares, with one meaning everywhere; ``-v`` is documented
    (with ``verbose_help``) only on commands that print more with it, and accepted
    silently on the others (scripts pass it to every command)."""
    common = argparse.ArgumentParser(add_help=False)
    level = common.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true",
                       help="print only the result lines: no progress bar, no per-item lines, "
                            "no third-party progress output")
    level.add_argument("-v", "--verbose", action="store_true",
                       help=verbose_help if verbose_help else argparse.SUPPRESS)
    return common


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its usage errors escaped: they quote the command line, which can
    carry a store's or a file's name (``gauge $'\\x1b[2J'`` repeated an ESC raw)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {shown(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    import importlib
    import pkgutil

    from . import commands

    parser = _Parser(
        prog="softrank-certify",
        description="Rigorous (verified-numerics) checks of approximation-rank brackets "
                    "for softmax attention matrices.",
        epilog="example:\n"
               "  softrank-certify check examples/minilm -v\n\n"
               "exit codes: 0 all proved; 1 some claim not proved (does not hold, undecided\n"
               "or refuted); 2 usage or input error; 3 internal error (a bug; --debug shows\n"
               "the traceback); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).\n"
               "COMMAND --help shows each command's options and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error, print the Python traceback")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        common = _common_options(getattr(mod, "VERBOSE_HELP", None))
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, parents=[common],
                           epilog=_epilog(mod),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="on an internal error, print the Python traceback")
        # the package's version: `softrank-certify check --version` answers like the top level
        p.add_argument("--version", action="version",
                       version=f"softrank-certify {__version__}")
        p.set_defaults(_run=mod.run)
    return parser


def _epilog(mod: object) -> str | None:
    """The command's examples (its EXAMPLES lines), shown under its --help."""
    examples = getattr(mod, "EXAMPLES", ())
    if not examples:
        return None
    return "examples:\n" + "\n".join(f"  {line}" for line in examples)


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    # built once per process: scanning the commands folder costs more than a small check
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command and returns its exit code (see the module doc); never raises except
    SystemExit from argparse (exit 2 for usage errors, 0 for --help)."""
    try:
        return _main(argv)
    except SystemExit:
        raise
    except KeyboardInterrupt:  # during the imports, before _main's own handler is in place
        _say("softrank-certify: interrupted")
        return EXIT_INTERRUPTED
    except BaseException as err:  # noqa: BLE001 - a crash while starting is never a verdict
        # the imports and the parser run before _main's handlers: an ImportError or a
        # MemoryError there (a process short of memory) ended in a traceback and exit 1,
        # the code of "a claim not proved"
        _say(f"softrank-certify: internal error while starting: {type(err).__name__}: "
             f"{str(err)[:300]}")
        return EXIT_INTERNAL


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "--version" in words and all(w.startswith("-") for w in words):
        # answered before the commands and the kernel are imported (they take a second)
        print(f"softrank-certify {__version__}")
        raise SystemExit(EXIT_OK)  # as argparse's own --version action does
    import traceback

    from softrank.certify.errors import InputError
    from softrank.certify.numerics.fpenv import FloatEnvironmentError
    from softrank.witnesses.npzsafe import max_bytes as max_array_bytes

    from .workers import Terminated, allow_long_integers, sigterm_as_interrupt, tune_allocator

    args = _parser().parse_args(argv)
    allow_long_integers()
    tune_allocator()
    try:
        max_array_bytes()  # a bad SOFTRANK_MAX_ARRAY_BYTES is refused up front, by name
        with sigterm_as_interrupt():
            return int(args._run(args))
    except InputError as err:
        _say(f"softrank-certify: input error: {err}")
        return EXIT_INPUT
    except Terminated:
        _say("softrank-certify: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _say("softrank-certify: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except RecursionError:
        # deep input the readers failed to refuse: still input, never a verdict
        _say("softrank-certify: input error: input nested too deeply")
        return EXIT_INPUT
    except OSError as err:
        # a file the user named cannot be read or written (an existing file where a folder
        # is needed, no permission, disk full): the input is at fault, not the checker
        # a descriptor number (os.fdopen's filename) names no file: leave it out
        named = isinstance(err.filename, str | bytes | os.PathLike) and err.filename
        where = f"{os.fsdecode(err.filename)}: " if named else ""
        _say(f"softrank-certify: input error: {where}{err.strerror or err}")
        return EXIT_INPUT
    except FloatEnvironmentError as err:
        # not a bug but the process's state: its message says what to do, so it is shown whole
        _say(f"softrank-certify: cannot check here: {err}")
        return EXIT_INTERNAL
    except Exception as err:  # noqa: BLE001 - the contract: a crash is exit 3, never a verdict
        _say(f"softrank-certify: internal error: {type(err).__name__}: {str(err)[:300]}"
             + ("" if args.debug else " (rerun with --debug for the traceback)"))
        if args.debug:
            traceback.print_exc()
        return EXIT_INTERNAL


def _say(line: str) -> None:
    from softrank.terminal import shown

    try:  # error messages quote store text: escaped (softrank.terminal), one line each
        print(shown(line), file=sys.stderr)
    except (BrokenPipeError, OSError, ValueError):  # stderr itself gone: nothing to tell
        pass


def _quiet_stdout() -> None:
    """Points stdout at /dev/null so the interpreter's final flush after a closed pipe does
    not print a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # captured stdout (tests): nothing to do
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
