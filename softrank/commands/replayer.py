"""``softrank-certify replayer --out FILE``: write the independent replayer out for a referee.

The file written is replay/replay.py byte for byte (installed as ``softrank_replay/replay.py``):
one standard-library-only program, run as ``python FILE BUNDLE.zip``, that imports nothing of
softrank-certify.  Its sha256 is printed so that a referee can compare it with the
repository's copy.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from importlib import resources
from pathlib import Path

NAME = "replayer"
HELP = ("write the standalone standard-library replayer (replay/replay.py) to a file, for "
        "a referee to run on an exported bundle: python FILE BUNDLE.zip")

EXAMPLES = (  # shown under --help
    "softrank-certify replayer --out replay.py     # hand this file to a referee",
    "python replay.py bundle.zip                    # it imports nothing from this package",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="FILE",
                   help="file to write (refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def replayer_source() -> bytes:
    """Returns the bytes of the installed replayer (package ``softrank_replay``); in a source
    tree without that install, the repository's replay/replay.py."""
    try:
        return resources.files("softrank_replay").joinpath("replay.py").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[2] / "replay" / "replay.py").read_bytes()


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.is_dir():
        print(f"softrank-certify replayer: error: {out}: --out is a directory", file=sys.stderr)
        return 2
    if out.exists() and not args.force:
        print(f"softrank-certify replayer: error: {out}: --out exists (use --force)",
              file=sys.stderr)
        return 2
    try:
        data = replayer_source()
    except OSError as err:
        print(f"softrank-certify replayer: error: the replayer is not installed: {err}",
              file=sys.stderr)
        return 3
    try:
        out.write_bytes(data)
    except OSError as err:
        print(f"softrank-certify replayer: error: {out}: --out cannot be written: "
              f"{err.strerror or err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"wrote {out} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}); "
              f"run: python {out} BUNDLE.zip")
    return 0
