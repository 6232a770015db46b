"""Console-script entry of the installed replayer: ``softrank-replay BUNDLE.zip ...``.

The wheel installs replay/replay.py unchanged as ``softrank_replay.replay``; this wrapper only
gives it the exit behaviour ``python replay/replay.py`` has: a reader that closes the pipe
(``softrank-replay B.zip | head``) ends it with 141, as SIGPIPE would, not with a traceback.
Like replay.py it imports nothing but the standard library and that file.
"""

from __future__ import annotations

import os
import sys

if __package__:
    from .replay import main as _replay_main
else:  # run as a file (python replay/cli.py): its sibling, not an installed copy
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from replay import main as _replay_main  # type: ignore[no-redef]


def _package_version() -> str | None:
    """The installed softrank-certify's version (None when this file runs uninstalled)."""
    from importlib import metadata

    try:
        return metadata.version("softrank-certify")
    except metadata.PackageNotFoundError:
        return None


def main() -> int:
    """Runs replay.py's ``main`` on ``sys.argv[1:]`` and returns its exit code (141 when
    standard output's reader went away)."""
    try:
        if __package__:  # the installed console script
            code = _replay_main(prog="softrank-replay", package=_package_version())
        else:  # this file run from a checkout: no installed copy's version applies
            code = _replay_main(prog="python replay/cli.py")
        sys.stdout.flush()  # a closed pipe shows here, while the handler below can see it
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())

