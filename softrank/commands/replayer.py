"""``softrank-certify replayer --out FILE``: write the independent replayer out for a referee.

The file written is replay/replay.py byte for byte (installed as ``softrank_replay/replay.py``):
one standard-library-only program, run as ``python FILE BUNDLE.zip``, that imports nothing of
softrank-certify.  Its sha256 is printed so that a referee can compare it with the
repository's copy.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from importlib import resources
from pathlib import Path

from softrank.certify.errors import InputError
from softrank.witnesses.atomic import write_atomic

from ..terminal import shown

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
    p.add_argument("--force", action="store_true",
                   help="overwrite FILE if it exists as a regular file (never a device or FIFO)")


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
        raise InputError(f"{args.out} is a directory", field="--out")
    if os.path.lexists(out) and not args.force:  # a dangling link exists too
        raise InputError(f"{args.out} exists (use --force)", field="--out")
    try:
        data = replayer_source()
    except OSError as err:
        print(f"softrank-certify replayer: error: the replayer is not installed: "
              f"{shown(str(err))}", file=sys.stderr)
        return 3
    # a fresh temporary name renamed over the target: a link there is replaced, never
    # written through
    write_atomic(out, lambda fh: fh.write(data), field="--out")
    if not args.quiet:
        print(shown(f"wrote {out} ({len(data)} bytes, sha256 "
                    f"{hashlib.sha256(data).hexdigest()}); run: python {out} BUNDLE.zip"))
    return 0
