"""The audit journal: one JSON line per finished bracket, so a killed run resumes.

``DIR/journal.jsonl`` starts with a header line naming what the records are about (the store's
absolute path, a sha256 of its record files, the tier and this package's version).  Finished
bracket records are appended one line each, a batch at a time (:meth:`Journal.append_many`;
the audit passes the records that arrive together: a finished chunk or task, or all that
finished at once): a batch's lines are written in order, then flushed and fsynced once, before
the run moves on (counts them, calls ``on_record``).  What a failure leaves in the file:

* a killed process loses nothing it had written (the kernel holds it), and appends land in
  order, so the file is a prefix of what was written: at most its last line is torn (no
  newline, or not JSON);
* a crash of the machine (power loss, kernel panic) loses at most the lines written since the
  last fsync, the last batch.  On a file system that keeps a prefix of appended data that too
  leaves at most a torn last line.  One that may keep a later block of the batch but not an
  earlier one (which then reads as zeros or stale bytes) can leave a corrupt line before the
  last: the journal is then refused (InputError naming the line; rerunning with
  ``--restart`` checks every bracket again), never partly used.

Reopening drops a torn last line and truncates the file to the last complete line; every
bracket without a line is checked again.  No verdict is taken from a corrupt line: a line that
is not JSON is either that torn last line or refuses the journal, and a line that parses but
carries no valid HMAC under this user's key (below) makes the whole journal untrusted.  A
journal whose header names another store (or tier, or package version) is refused, never
merged: its records are not about this input.

Trust: an output folder may come from anyone (a shipped store with a pre-filled report
folder, an edited journal, a ``journal.jsonl`` that is a link to another file).  The journal
is opened with ``O_NOFOLLOW`` and must be a regular file with no other hard link (else
InputError, field ``--out``; the link's target is never opened).  Every line carries
``"hmac"``, an HMAC-SHA256 under a key created on first use in this user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``, ``softrank-certify/journal.key``: 32 bytes, mode 0600,
in a folder of mode 0700 that nobody else can write; never in the output folder; see
:func:`load_key`); record lines are bound to their header.  A journal with any line whose
HMAC does not verify (or without a key) is *untrusted*: its records are discarded and every
bracket is checked again.  The caller also rechecks a seeded random sample of trusted records
(:meth:`Journal.sample`) and rejects the whole journal on any mismatch.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import random
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from softrank.certify.errors import InputError
from softrank.witnesses import jsonexact
from softrank.witnesses.atomic import LINK_REFUSED, open_dirs, read_regular
from softrank.witnesses.store import RECORD_FILES, records_digest

JOURNAL_NAME = "journal.jsonl"
JOURNAL_FORMAT = "softrank-audit-journal"
JOURNAL_VERSION = 1
KEY_NAME = "journal.key"
KEY_BYTES = 32
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MAC_FIELD = "hmac"


def key_path() -> Path:
    """Returns where this user's journal key lives: $XDG_CACHE_HOME (or ~/.cache) /
    softrank-certify/journal.key."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "softrank-certify" / KEY_NAME


@dataclass(frozen=True)
class KeyState:
    """This user's journal key, or None, and what the caller should tell the user.

    ``note`` is None when the key was simply read (or created on first use); otherwise it
    says why there is no key (no journal is then trusted) or that a damaged key was replaced
    (journals signed under the old one are then untrusted).
    """

    secret: bytes | None
    note: str | None = None


_NO_KEY = "until then no journal is trusted and a resume checks every bracket again"
_REPLACED = ("replaced by a fresh key; journals signed under the old key are untrusted and "
             "their records are checked again")


def load_key(out_dir: str | os.PathLike | None = None) -> KeyState:
    """Returns this user's journal key, creating it on first use: 32 random bytes, mode 0600,
    in a folder created 0700.

    No key (``secret`` None, with the reason in ``note``) when the key folder lies inside
    ``out_dir``, is not a folder owned by this user, is group- or world-writable, or sits in a
    world-writable folder without the sticky bit (others could swap it); or when the key is a
    symbolic link, not a regular file, owned by someone else or readable by others.  The key
    is opened with ``O_NOFOLLOW`` and checked on its descriptor (``fstat``), not by path.  An
    empty or short key (any size but 32 bytes: an interrupted write, a truncation) is
    replaced by a fresh one, and ``note`` says so.
    """
    path = key_path()
    folder = path.parent
    try:
        if out_dir is not None and path.resolve().is_relative_to(Path(out_dir).resolve()):
            return KeyState(None, f"the journal key {path} would lie inside the output folder; "
                                  f"{_NO_KEY}")
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        why = _unsafe_parent(folder.parent)
        if why is not None:
            return KeyState(None, f"journal key folder {folder}: {why}; {_NO_KEY}")
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as err:
        return KeyState(None, f"journal key folder {folder}: {err.strerror or err}; {_NO_KEY}")
    try:
        st = os.fstat(dir_fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != _uid():
            return KeyState(None, f"journal key folder {folder} is not owned by this user; "
                                  f"{_NO_KEY}")
        if st.st_mode & 0o022:
            return KeyState(None, f"journal key folder {folder} is group- or world-writable "
                                  f"(mode {stat.S_IMODE(st.st_mode):o}; fix: chmod 700 "
                                  f"{folder}); {_NO_KEY}")
        return _read_key(dir_fd, path)
    except OSError as err:
        return KeyState(None, f"journal key {path}: {err.strerror or err}; {_NO_KEY}")
    finally:
        os.close(dir_fd)


def journal_secret(out_dir: str | os.PathLike | None = None) -> bytes | None:
    """Returns this user's journal key (see :func:`load_key`), or None when there is none."""
    return load_key(out_dir).secret


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _unsafe_parent(parent: Path) -> str | None:
    """Returns why others could replace a folder inside ``parent``, or None."""
    st = os.stat(parent)
    if st.st_uid not in (_uid(), 0):
        return f"its folder {parent} belongs to another user"
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        return f"its folder {parent} is world-writable without the sticky bit"
    return None


def _read_key(dir_fd: int, path: Path) -> KeyState:
    """Reads (or creates, or replaces when damaged) the key ``path`` in the folder ``dir_fd``."""
    try:
        fd = os.open(KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return _new_key(dir_fd, path, replace=False)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return KeyState(None, f"journal key {path} is a symbolic link, refused (delete it; "
                                  f"a fresh key is made on the next run); {_NO_KEY}")
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return KeyState(None, f"journal key {path} is not a regular file; {_NO_KEY}")
        if st.st_uid != _uid():
            return KeyState(None, f"journal key {path} belongs to another user; {_NO_KEY}")
        if st.st_mode & 0o077:
            return KeyState(None, f"journal key {path} is readable or writable by others (mode "
                                  f"{stat.S_IMODE(st.st_mode):o}): it is no secret; delete it "
                                  f"(a fresh key is made on the next run); {_NO_KEY}")
        key = b""
        if st.st_size == KEY_BYTES:
            key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) == KEY_BYTES:
        return KeyState(key)
    size = "was empty" if st.st_size == 0 else f"had {st.st_size} bytes, not {KEY_BYTES}"
    state = _new_key(dir_fd, path, replace=True)
    if state.secret is None:
        return state
    return KeyState(state.secret, f"journal key {path} {size}: {_REPLACED}")


def _new_key(dir_fd: int, path: Path, *, replace: bool) -> KeyState:
    """Writes a fresh key to a new temporary name (``O_EXCL``, mode 0600), fsynced, then puts
    it at ``path``: by a hard link when creating (a key another run created meanwhile wins
    and is read), by a rename when replacing a damaged key."""
    tmp = f".{KEY_NAME}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600,
                 dir_fd=dir_fd)
    try:
        key = secrets.token_bytes(KEY_BYTES)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, KEY_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            try:
                os.link(tmp, KEY_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd,
                        follow_symlinks=False)
            except FileExistsError:  # another run made the key first: use theirs
                return _read_key(dir_fd, path)
    finally:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    return KeyState(key)


def _canon(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True).encode()


def _mac(secret: bytes, header: dict[str, Any], line: dict[str, Any] | None) -> str:
    msg = _canon(header) if line is None else _canon(header) + b"\n" + _canon(line)
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def store_digest(store: str | os.PathLike) -> str:
    """Returns ``witnesses.store.records_digest`` of the store's record files as they are now
    (a reader's ``digest`` is the same function of the bytes it parsed)."""
    return records_digest({name: read_regular(Path(store) / name) for name in RECORD_FILES})


def journal_key(store: str | os.PathLike, tier: str, version: str,
                digest: str | None = None) -> dict[str, str]:
    """Returns the identity a journal's records belong to; ``digest`` is the records digest
    of the store as parsed (``StoreReader.digest``; default: the files read now)."""
    return {"store": str(Path(store).resolve()),
            "store_sha256": store_digest(store) if digest is None else digest,
            "tier": tier, "softrank_certify": version}


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    """Returns the record as it reads back from the journal (JSON types only, exact strings).

    Fresh records and journaled ones go through the same round trip, so a resumed report is
    byte-identical to an uninterrupted one.
    """
    return json.loads(jsonexact.dumps(record, sort_keys=True))


class Journal:
    """An append-only, fsynced record of finished brackets for one (store, tier) key.

    Use :meth:`open`; ``records`` maps bracket id -> record for everything already finished.
    Holds an exclusive lock on the file while open so two audits cannot interleave lines.
    """

    def __init__(self, path: Path, key: dict[str, str], records: dict[str, dict[str, Any]],
                 fh: IO[bytes], dropped_tail: bool, secret: bytes | None = None,
                 header: dict[str, Any] | None = None, trust: str = "new"):
        self.path = path
        self.key = key
        self.records = records
        self.dropped_tail = dropped_tail
        self._fh = fh
        self._secret = secret
        self._header = header if header is not None else _header(key)
        # "new" (no earlier records), "trusted" (every line's HMAC verified), or
        # "untrusted: <why>" (records discarded, everything is checked again)
        self.trust = trust
        # what happened to this user's journal key, for the run's output (None: nothing to
        # say); see load_key
        self.key_note: str | None = None

    def sample(self, seed: int, size: int) -> list[str]:
        """Returns ``size`` (at most all) bracket ids of the journaled records, drawn with
        ``random.Random(seed)`` from the sorted ids, for the caller to recheck."""
        ids = sorted(self.records)
        return sorted(random.Random(seed).sample(ids, min(size, len(ids))))

    def reset(self, why: str) -> None:
        """Discards every record (the journal was rejected) and starts a fresh journal."""
        self._fh.seek(0)
        self._fh.truncate(0)
        self._write_header()
        self.records = {}
        self.trust = f"rejected: {why}"

    def _write_header(self) -> None:
        head = dict(self._header)
        if self._secret is not None:
            head[MAC_FIELD] = _mac(self._secret, self._header, None)
        self._fh.write((json.dumps(head, sort_keys=True) + "\n").encode())
        _sync(self._fh)

    @classmethod
    def open(cls, out_dir: str | os.PathLike, key: dict[str, str], *, restart: bool = False,
             known_ids: Iterable[str] | None = None) -> Journal:
        """Opens (or creates) ``out_dir/journal.jsonl`` for ``key``.

        ``restart`` discards an existing journal.  Raises InputError (field "journal") for a
        journal of another store/tier/version, a corrupt line before the last one, a record
        of a bracket not in ``known_ids``, or a journal locked by another running audit.
        """
        path = Path(out_dir) / JOURNAL_NAME
        fh = _open_journal(out_dir, path)
        try:
            _lock(fh, path)
            data = b"" if restart else _read_capped(fh, path, known_ids)
            records: dict[str, dict[str, Any]] = {}
            dropped = False
            key_state = load_key(out_dir)
            secret = key_state.secret
            trust = "new"
            if data and not restart:
                records, good_len, dropped = _parse(data, key, path, known_ids)
                why = _untrusted(data[:good_len], secret)
                if good_len == 0:  # nothing usable, not even a header: start afresh
                    data = b""
                elif why is not None:
                    if records:
                        trust = f"untrusted: {why}"
                    data = b""  # rechecked in full: none of its records is used
                elif good_len < len(data):
                    fh.truncate(good_len)
                    _sync(fh)
                if data and records:
                    trust = "trusted"
            journal = cls(path, key, records, fh, dropped, secret=secret, trust=trust)
            journal.key_note = key_state.note
            if not data or restart:
                fh.seek(0)
                fh.truncate(0)
                journal._write_header()
                journal.records = {}
        except BaseException:
            fh.close()
            raise
        return journal

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Writes one finished record (flushed and fsynced) and returns its normalized form."""
        return self.append_many([record])[0]

    def append_many(self, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Writes finished records as one signed line each, in order, with one flush and one
        fsync after the last line (a group commit); returns their normalized forms.

        Every line is built (normalized, signed) before the first byte is written, so a
        record that cannot be serialized writes none of the batch.  When this returns, every
        line of the batch is on disk; a crash before that loses at most this batch (its
        records are checked again on resume; see the module docstring for what a crash can
        leave in the file).  No records: nothing is written and nothing synced.
        """
        recs = [normalize(r) for r in records]
        if not recs:
            return []
        ids = [rec["bracket"] for rec in recs]  # a record without an id fails before writing
        self._fh.write(b"".join(self._line(rec) for rec in recs))
        _sync(self._fh)
        for i, rec in zip(ids, recs, strict=True):
            self.records.setdefault(i, rec)
        return recs

    def _line(self, rec: dict[str, Any]) -> bytes:
        """Returns the journal line of the normalized record ``rec``: its JSON with its HMAC
        (when there is a key), newline-terminated."""
        line = dict(rec)
        if self._secret is not None:
            line[MAC_FIELD] = _mac(self._secret, self._header, rec)
        return (json.dumps(line, sort_keys=True) + "\n").encode()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()  # closing the descriptor releases the lock

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _header(key: dict[str, str]) -> dict[str, Any]:
    return {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, **key}


def _untrusted(data: bytes, secret: bytes | None) -> str | None:
    """Returns why the complete lines ``data`` of a journal are not trusted, or None when
    every line carries a valid HMAC under ``secret``."""
    if secret is None:
        return "no usable journal key in this user's cache folder"
    lines = [ln for ln in data.split(b"\n") if ln]
    if not lines:
        return "empty"
    header: dict[str, Any] | None = None
    for n, raw in enumerate(lines, start=1):
        try:
            obj = jsonexact.loads_native(raw)
        except ValueError:
            return f"line {n} is not JSON"
        if not isinstance(obj, dict) or not isinstance(obj.get(MAC_FIELD), str):
            return f"line {n} carries no HMAC (written elsewhere or by an older version)"
        mac = obj.pop(MAC_FIELD)
        want = _mac(secret, obj, None) if header is None else _mac(secret, header, obj)
        if not hmac.compare_digest(mac, want):
            return (f"line {n}: HMAC does not verify (edited, or written by another user or "
                    "on another machine)")
        if header is None:
            header = obj
    return None


def _open_journal(out_dir: str | os.PathLike, path: Path) -> IO[bytes]:
    """Opens (creating) ``out_dir/journal.jsonl`` for reading and appending, never through a
    symbolic link: ``O_NOFOLLOW`` relative to the folder's descriptor, then ``fstat`` checks
    that it is a regular file with no other hard link (both would let a planted journal
    make the audit truncate or append to another file).  Raises InputError (``--out``)."""
    dir_fd = open_dirs(out_dir, [], field="--out")
    assert dir_fd is not None
    try:
        try:
            fd = os.open(JOURNAL_NAME, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                         | os.O_NONBLOCK | _CLOEXEC, 0o666, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise InputError(LINK_REFUSED, field="--out", source=str(path)) from None
            if err.errno == errno.EISDIR:
                raise InputError("is a folder, not a journal", field="--out",
                                 source=str(path)) from None
            raise
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("is not a regular file; refusing to use it as the journal",
                             field="--out", source=str(path))
        if st.st_nlink > 1:
            raise InputError(f"has {st.st_nlink - 1} other hard link(s); refusing to write a "
                             "file that also lives elsewhere (remove it, or use a new folder)",
                             field="--out", source=str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a+b")
    except BaseException:
        os.close(fd)
        raise


def _sync(fh: IO[bytes]) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def _lock(fh: IO[bytes], path: Path) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no advisory locks on this platform
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise InputError("another audit is writing this output folder", field="journal",
                         source=str(path)) from None


def _check_head(head: Any, key: dict[str, str], src: str) -> None:
    if not isinstance(head, dict) or head.get("format") != JOURNAL_FORMAT:
        raise InputError("not an audit journal; rerun with --restart", field="journal",
                         source=src)
    theirs = {k: head.get(k) for k in key}
    if theirs != key:
        diff = ", ".join(f"{k}: journal {theirs[k]!r} vs now {key[k]!r}" for k in key
                         if theirs[k] != key[k])
        raise InputError(f"journal belongs to another run ({diff}); use a new --out folder "
                         f"or --restart", field="journal", source=src)


MAX_BYTES_FLOOR = 64 << 20  # a journal may hold this much whatever the store's size ...
MAX_BYTES_PER_BRACKET = 256 << 10  # ... plus this much per bracket (records are ~2 KB)


def _read_capped(fh: IO[bytes], path: Path, known_ids: Iterable[str] | None) -> bytes:
    """Returns the journal's bytes; InputError (field "journal") before reading when the
    file is larger than any journal of this store can be (a sparse file of 40 GB in the
    output folder was read whole and ended in a MemoryError)."""
    n = None if known_ids is None else len(set(known_ids))
    cap = MAX_BYTES_FLOOR + (MAX_BYTES_PER_BRACKET * n if n is not None else 1 << 30)
    size = os.fstat(fh.fileno()).st_size
    if size > cap:
        raise InputError(f"{size} bytes, more than a journal of this store can hold "
                         f"({cap}); rerun with --restart (every bracket is checked again)",
                         field="journal", source=str(path))
    fh.seek(0)
    return fh.read(cap + 1)[:cap]


def _parse(data: bytes, key: dict[str, str], path: Path, known_ids: Iterable[str] | None
           ) -> tuple[dict[str, dict[str, Any]], int, bool]:
    """Returns (records, length of the good prefix, whether a torn last line was dropped)."""
    src = str(path)
    lines = data.split(b"\n")
    # the piece after the last newline is either empty or a line the writer never finished
    torn = lines.pop() != b""
    good_len = data.rfind(b"\n") + 1
    if not lines:
        return {}, 0, torn
    parsed: list[Any] = []
    for n, raw in enumerate(lines, start=1):
        if n == 2:  # the header decides before the records are parsed
            _check_head(parsed[0], key, src)
        try:
            parsed.append(jsonexact.loads_native(raw))
        except ValueError:
            if n == len(lines) and not torn:
                # a complete-looking last line that is not JSON is a torn write too
                good_len -= len(raw) + 1
                torn = True
                break
            # not the last line: a torn write is only ever last, so this is an edit or a
            # machine crash during a batch on a file system that does not keep a prefix of
            # appended data.  Refused, not repaired, so that the user sees it
            raise InputError(f"corrupt line {n} (not JSON) before the last line: the journal "
                             "was edited, or the machine crashed while a batch of lines was "
                             "written; rerun with --restart (every bracket is checked again)",
                             field="journal", source=src) from None
    if not parsed:
        return {}, 0, torn
    if len(parsed) == 1:  # a header alone (with more lines it was checked in the loop)
        _check_head(parsed[0], key, src)
    known = None if known_ids is None else set(known_ids)
    records: dict[str, dict[str, Any]] = {}
    for n, rec in enumerate(parsed[1:], start=2):
        if not isinstance(rec, dict) or not isinstance(rec.get("bracket"), str):
            raise InputError(f"line {n} is not a bracket record; rerun with --restart",
                             field="journal", source=src)
        if known is not None and rec["bracket"] not in known:
            raise InputError(f"line {n} names bracket {rec['bracket']!r}, not in the store",
                             field="journal", source=src)
        rec = {k: v for k, v in rec.items() if k != MAC_FIELD}
        prev = records.get(rec["bracket"])
        # the first record of a bracket stands, except an input error, which a resume checks
        # again and appends the new record after (the error standing made every resume
        # check it again and the journal grow)
        if prev is None or ("error" in prev and "error" not in rec):
            records[rec["bracket"]] = rec
    return records, good_len, torn
