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
# every other file a run writes, by name (tests keep these lists equal to what the report and
# the figures modules write): a run killed after clearing RESULT_FILES left per_head.csv and
# tables/brackets.tex of the earlier run, stating L and U of brackets the store no longer has.
# Only these names are removed: a user's own files in the folder stay.
TABLE_NAMES = ("brackets", "claims", "budgets", "tightened", "producers", "block_widths",
               "intervals", "medians", "layers")
FIGURE_NAMES = ("brackets", "chi", "margins")
FIGURE_FORMATS = ("svg", "png", "pdf")
INTRINSIC_FIGURE = "figures/intrinsic_kappa_rank.png"
STALE_FILES = (
    "per_head.csv", "report-tables.tex", "report-figures.tex", "report-per-head.tex",
    *(f"tables/{t}.tex" for t in TABLE_NAMES),
    *(f"figures/{f}.{x}" for f in FIGURE_NAMES for x in FIGURE_FORMATS),
    INTRINSIC_FIGURE)


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


def clear_results(out_dir: str | os.PathLike,
                  names: tuple[str, ...] = (*RESULT_FILES, *STALE_FILES)) -> None:
    """Removes the files (or links) ``names`` from ``out_dir``: called when a run starts
    checking, so that a run killed before it writes its own leaves no earlier result behind
    (the folder's journal may already hold records of a store that has since changed).  A
    name in a subfolder is removed only when that subfolder is a real folder (a link there
    is never followed; ``check_out_folder`` refuses it)."""
    fd = open_dirs(out_dir, [], field=OUT_OPTION)
    assert fd is not None
    subs: dict[str, int | None] = {}
    try:
        for name in names:
            folder, _, base = name.rpartition("/")
            where = fd
            if folder:
                if folder not in subs:
                    try:
                        subs[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY
                                               | os.O_NOFOLLOW, dir_fd=fd)
                    except OSError:  # missing, not a folder, or a link: nothing of ours
                        subs[folder] = None
                if subs[folder] is None:
                    continue
                where = subs[folder]
            try:
                os.unlink(base, dir_fd=where)
            except FileNotFoundError:
                continue
            except IsADirectoryError:
                if folder:  # a folder of that name in tables/ or figures/ is not ours
                    continue
                raise InputError("is a folder: the report cannot be written there",
                                 field=OUT_OPTION, source=str(Path(out_dir) / name)) from None
    finally:
        for sub in subs.values():
            if sub is not None:
                os.close(sub)
        os.close(fd)
