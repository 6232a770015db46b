"""Atomic file writes that never follow a symbolic link below the folder the user named.

An output folder (a store being appended to, an audit's report folder) may come from someone
else: any name inside it can be a symbolic link planted to make a writer overwrite another
file the user can write.  So below ``root`` (the folder the user named, which is taken as
given) every subfolder is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's
descriptor (a symlinked subfolder is refused), and every file is written to a fresh temporary
name created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, fsynced, then renamed over the target.
A rename replaces a symlink at the target name itself; it never writes through it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath
from typing import IO

from softrank.certify.errors import InputError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = os.O_NOFOLLOW
LINK_REFUSED = ("is a symbolic link; refusing to write through it (an output folder may come "
                "from someone else): remove the link, or use a new folder")
CREATE_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0))


def open_root(root: str | os.PathLike, *, field: str | None = None, create: bool = True) -> int:
    """Returns a descriptor of the folder ``root`` (created with its parents when missing).

    ``root`` is the folder the user named, so a symbolic link there is followed.  Raises
    InputError (``field``, source ``root``) when it exists and is not a folder.
    """
    root = Path(root)
    if create:
        try:
            os.makedirs(root, exist_ok=True)
        except FileExistsError:
            raise InputError("exists and is not a folder", field=field,
                             source=str(root)) from None
        except NotADirectoryError:
            raise InputError("a part of this path is not a folder", field=field,
                             source=str(root)) from None
    try:
        return os.open(root, DIR_FLAGS)
    except NotADirectoryError:
        raise InputError("exists and is not a folder", field=field, source=str(root)) from None


def open_subdir(dir_fd: int, name: str, shown: str | os.PathLike, *, field: str | None = None,
                create: bool = True) -> int | None:
    """Returns a descriptor of the real folder ``name`` inside ``dir_fd`` (created when
    missing and ``create``; None when missing and not ``create``).

    Raises InputError (``field``, source ``shown``) when ``name`` is a symbolic link or not a
    folder: nothing is ever written through a link.
    """
    _check_name(name)
    if create:
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        except FileExistsError:
            pass
    try:
        fd = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise InputError(_not_real("folder", dir_fd, name), field=field,
                             source=str(shown)) from None
        raise
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # pragma: no cover - O_DIRECTORY saw to it
        os.close(fd)
        raise InputError("is not a folder", field=field, source=str(shown))
    return fd


def _not_real(what: str, dir_fd: int, name: str) -> str:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return f"is not a real {what}"
    if stat.S_ISLNK(st.st_mode):
        return LINK_REFUSED
    return f"is not a {what}"


def open_dirs(root: str | os.PathLike, parts: Sequence[str], *, field: str | None = None,
              create: bool = True) -> int | None:
    """Returns a descriptor of ``root/parts[0]/parts[1]/...``: ``root`` opened as given (see
    :func:`open_root`), every part below it a real folder (see :func:`open_subdir`).
    Returns None when a part is missing and not ``create``."""
    fd = open_root(root, field=field, create=create) if create or os.path.isdir(root) else None
    if fd is None:
        return None
    shown = PurePath(root)
    for part in parts:
        shown = shown / part
        try:
            sub = open_subdir(fd, part, shown, field=field, create=create)
        finally:
            os.close(fd)
        if sub is None:
            return None
        fd = sub
    return fd


def split_under(path: str | os.PathLike, root: str | os.PathLike | None
                ) -> tuple[Path, list[str], str]:
    """Returns (root, folders between root and the file, file name) for ``path`` inside
    ``root`` (lexically; ``root`` None means the file's own folder)."""
    path = Path(path)
    if root is None:
        return path.parent, [], path.name
    root = Path(root)
    rel = path.relative_to(root)  # ValueError: a caller's bug, not input
    parts = list(rel.parts)
    if not parts:
        raise ValueError(f"{path} names the folder {root} itself, not a file in it")
    for p in parts:
        _check_name(p)
    return root, parts[:-1], parts[-1]


def _put_without_replacing(dir_fd: int, tmp: str, name: str) -> None:
    """Gives the file ``tmp`` the name ``name`` (both in ``dir_fd``) unless ``name`` exists
    (FileExistsError): a hard link, which fails on an existing name, then the temporary name
    removed.  Where the filesystem has no hard links (vfat, some network mounts) the name is
    looked up and the file renamed into it: a name that appears in between is replaced, the
    one window left, as for any tool on such a filesystem."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
                             errno.EXDEV):
            raise
        try:
            os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise FileExistsError(name) from None
    os.unlink(tmp, dir_fd=dir_fd)


def _only_a_file_there(dir_fd: int, name: str, field: str | None,
                       path: str | os.PathLike) -> None:
    """Raises InputError unless ``name`` in ``dir_fd`` is missing, a regular file or a link
    (which the rename replaces, never follows)."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a folder; cannot replace it by a file", field=field,
                         source=str(path))
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise InputError("exists and is not a regular file (a device, FIFO or socket): it "
                         "is never replaced", field=field, source=str(path))


def write_atomic(path: str | os.PathLike, writer: Callable[[IO[bytes]], None], *,
                 root: str | os.PathLike | None = None, mode: int | None = None,
                 field: str | None = None, replace: bool = True) -> str:
    """Creates or replaces ``path`` so that readers see the old file or the new one, never a
    part; returns the sha256 (hex) of the bytes written.

    ``root`` is the folder the user named (default: ``path``'s own folder): it is followed as
    given and created when missing, while every folder between it and ``path`` must be a real
    folder (created when missing; a symbolic link there raises InputError naming ``field``).
    The file is written to a fresh temporary name (``O_EXCL | O_NOFOLLOW``) and renamed over
    ``path``, so a symbolic link at ``path`` is replaced, never written through.  ``writer``
    receives a binary file object positioned at the start of the temporary file.  ``mode``
    sets the file's permissions exactly (default: 0666 less the umask, as ``open()`` gives).
    With ``replace`` False nothing that exists at ``path`` when the file is put in place is
    ever replaced (a hard link from the temporary name, which fails on an existing name), and
    with it True only a regular file or a link is: InputError naming ``field`` otherwise (a
    device, FIFO or socket that appeared while a long run computed what to write).
    """
    base, folders, name = split_under(path, root)
    dir_fd = open_dirs(base, folders, field=field)
    assert dir_fd is not None
    try:
        tmp, fd = _create_temp(dir_fd, name, 0o666)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            with os.fdopen(fd, "w+b") as fh:
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
                digest = _sha256_of(fh)
            try:
                if replace:
                    _only_a_file_there(dir_fd, name, field, path)
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                else:
                    _put_without_replacing(dir_fd, tmp, name)
            except IsADirectoryError:
                raise InputError("is a folder; cannot replace it by a file", field=field,
                                 source=str(path)) from None
            except FileExistsError:
                _only_a_file_there(dir_fd, name, field, path)  # a FIFO: --force won't do
                raise InputError("exists (use --force to replace it)", field=field,
                                 source=str(path)) from None
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
        _fsync_fd(dir_fd)
    finally:
        os.close(dir_fd)
    return digest


def write_text_atomic(path: str | os.PathLike, text: str, *,
                      root: str | os.PathLike | None = None, field: str | None = None) -> str:
    """Atomically writes ``text`` (UTF-8) to ``path`` (see :func:`write_atomic`)."""
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")), root=root,
                        field=field)


def _create_temp(dir_fd: int, name: str, perm: int) -> tuple[str, int]:
    """Returns (name, descriptor) of a new file ``.<name>.<random>.tmp`` in ``dir_fd``,
    created exclusively: an existing name (a planted link included) is never opened."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return tmp, os.open(tmp, CREATE_FLAGS, perm, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)  # pragma: no cover


def _sha256_of(fh: IO[bytes]) -> str:
    h = hashlib.sha256()
    fh.seek(0)
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single file or folder name: {name!r}")


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


def open_regular(path: str | os.PathLike, *, field: str = "file",
                 follow_links: bool = False) -> IO[bytes]:
    """Returns ``path`` opened for binary reading when it is a regular file and (unless
    ``follow_links``, for a file the user named) not a symbolic link.

    A store comes from someone else: a record file linked to another store's, or to
    ``/proc/self/environ``, would otherwise be read (and its header copied into a report) as
    if it were the store's own.  The file is opened with ``O_NOFOLLOW`` (and ``O_NONBLOCK``,
    so a FIFO cannot stall the open) and checked on its descriptor, so nothing swapped in
    between is read either.  Raises InputError (``field``, source ``path``) for a link, a
    folder, a FIFO or device, or a missing file.
    """
    src = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | (0 if follow_links else NOFOLLOW)
                     | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError("file is missing", field=field, source=src) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError("is a symbolic link; the store's record files must be regular "
                             "files inside it", field=field, source=src) from None
        raise InputError(f"cannot be read: {err.strerror}", field=field, source=src) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:  # checked on the descriptor: fdopen itself refuses a folder with errno only
        os.close(fd)
        raise InputError("is not a regular file (a folder, FIFO or device)", field=field,
                         source=src)
    return os.fdopen(fd, "rb")


# record files (store.json, operators.jsonl, brackets.jsonl, intrinsic.jsonl) are read whole,
# and parsing takes about three times their size in memory: 1 GiB holds some 500,000 bracket
# records of a few claims each (a sparse 1 GB brackets.jsonl, 44 KB on disk, took 3.2 GB)
MAX_RECORD_FILE = 1 << 30
MAX_RECORD_ENV = "SOFTRANK_MAX_RECORD_BYTES"


def byte_cap_from_env(name: str, default: int, what: str) -> int:
    """Returns the environment variable ``name`` as a positive integer (every ``_`` ignored,
    as a digit separator), or ``default`` when it is unset or blank.  Raises InputError
    naming the variable when it is set to anything else (a typo must not fall back to the
    default silently); ``what`` says what it counts."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip().replace("_", "")
    v = int(text) if text.isascii() and text.isdigit() and len(text) <= 30 else 0
    if v <= 0:
        raise InputError(f"environment variable {name}={raw[:40]!r} is not a positive "
                         f"integer ({what})", field=name)
    return v


def max_record_bytes() -> int:
    """Returns the cap on the size of one record file: ``SOFTRANK_MAX_RECORD_BYTES`` if set
    (a positive integer), else 1 GiB (``byte_cap_from_env``)."""
    return byte_cap_from_env(MAX_RECORD_ENV, MAX_RECORD_FILE, "bytes of one record file")


def read_regular(path: str | os.PathLike, *, field: str = "file",
                 max_bytes: int | None = None,
                 limit: str = f"for a record file ({MAX_RECORD_ENV})",
                 follow_links: bool = False) -> bytes:
    """Returns the bytes of ``path`` opened by :func:`open_regular` (same refusals).  Raises
    InputError, before reading, when the file is larger than ``max_bytes`` (default
    :func:`max_record_bytes`; the message ends with ``limit``, what sets it; a sparse file of
    100 GB was read into memory: MemoryError, exit 3), and when it grew past it while read."""
    if max_bytes is None:
        max_bytes = max_record_bytes()
    with open_regular(path, field=field, follow_links=follow_links) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise InputError(f"{size} bytes, above the limit of {max_bytes} {limit}",
                             field=field, source=str(path))
        raw = fh.read(size + 1)
    if len(raw) > size:  # grew since fstat: what was read is not the file that was sized
        raise InputError("the file grew while it was read", field=field, source=str(path))
    return raw
