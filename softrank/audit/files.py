"""Report files written inside the output folder: atomically, mode 0644 (others may read
them), and never through a symbolic link planted in the folder (see ``witnesses/atomic.py``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from softrank.certify.errors import InputError
from softrank.witnesses.atomic import LINK_REFUSED, open_dirs, write_atomic

PUBLIC_MODE = 0o644
OUT_OPTION = "--out"
SUBFOLDERS = ("tables", "figures")
# the files that state a run's result: removed when a run starts, so a run killed before it
# writes them leaves none of an earlier run (over a store since changed) to be read as its own
RESULT_FILES = ("report.json", "report.md", "report.tex", "intrinsic.json", "intrinsic.md")


def write_public(out_dir: str | os.PathLike, rel: str, data: bytes | str) -> None:
    """Atomically creates or replaces ``out_dir/rel`` with ``data`` (str is UTF-8), mode 0644.

    ``out_dir`` is followed as the user named it; below it, a folder of ``rel`` that is a
    symbolic link (or not a folder) raises InputError naming ``--out``, and a link at the file
    name itself is replaced, never written through.  The mode is set on the temporary file
    before the rename, so readers never see the file with other permissions.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    write_atomic(Path(out_dir) / rel, lambda fh: fh.write(raw), root=out_dir,
                 mode=PUBLIC_MODE, field=OUT_OPTION)


def check_out_folder(out_dir: str | os.PathLike, subfolders: tuple[str, ...] = SUBFOLDERS,
                     results: tuple[str, ...] = ()) -> None:
    """Raises InputError (field ``--out``) unless ``out_dir`` is a folder or can be created,
    each of ``subfolders`` already in it is a real folder (not a symbolic link), and none of
    ``results`` is a folder (the report could not be written there).

    Run before the checks so that a planted link fails the run at once, not after hours of
    checking; every write checks again (the folder may change meanwhile).
    """
    fd = open_dirs(out_dir, [], field=OUT_OPTION)
    assert fd is not None
    try:
        for name in (*results, *subfolders):
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            why = None
            if name in results:
                why = "is a folder: the report cannot be written there" if stat.S_ISDIR(mode) \
                    else None
            elif stat.S_ISLNK(mode):
                why = LINK_REFUSED
            elif not stat.S_ISDIR(mode):
                why = "is not a folder"
            if why is not None:
                raise InputError(why, field=OUT_OPTION, source=str(Path(out_dir) / name))
    finally:
        os.close(fd)


def clear_results(out_dir: str | os.PathLike, names: tuple[str, ...] = RESULT_FILES) -> None:
    """Removes the files (or links) ``names`` from ``out_dir``: called when a run starts
    checking, so that a run killed before it writes its own leaves no earlier result behind
    (the folder's journal may already hold records of a store that has since changed)."""
    fd = open_dirs(out_dir, [], field=OUT_OPTION)
    assert fd is not None
    try:
        for name in names:
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except IsADirectoryError:
                raise InputError("is a folder: the report cannot be written there",
                                 field=OUT_OPTION, source=str(Path(out_dir) / name)) from None
    finally:
        os.close(fd)
