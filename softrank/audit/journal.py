"""The audit journal: one JSON line per finished bracket, so a killed run resumes.

``DIR/journal.jsonl`` starts with a header line naming what the records are about (the store's
absolute path, a sha256 of its record files, the tier and this package's version).  Every
finished bracket record is appended as one line, flushed and fsynced before the run moves on,
so a record that reached the journal survives a kill.  A kill can leave at most a torn last
line (no newline, or not JSON); reopening drops it and truncates the file to the last complete
line, and that bracket is checked again.  A journal whose header names another store (or tier,
or package version) is refused, never merged: its records are not about this input.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from certify.errors import InputError
from witnesses import jsonexact

JOURNAL_NAME = "journal.jsonl"
JOURNAL_FORMAT = "softrank-audit-journal"
JOURNAL_VERSION = 1


def store_digest(store: str | os.PathLike) -> str:
    """Returns the sha256 of store.json, operators.jsonl and brackets.jsonl (length-prefixed).

    Every array file is pinned by its sha256 inside these records, so the digest pins the
    whole store.
    """
    h = hashlib.sha256()
    for name in ("store.json", "operators.jsonl", "brackets.jsonl"):
        data = (Path(store) / name).read_bytes()
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def journal_key(store: str | os.PathLike, tier: str, version: str) -> dict[str, str]:
    """Returns the identity a journal's records belong to."""
    return {"store": str(Path(store).resolve()), "store_sha256": store_digest(store),
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
                 fh: IO[bytes], dropped_tail: bool):
        self.path = path
        self.key = key
        self.records = records
        self.dropped_tail = dropped_tail
        self._fh = fh

    @classmethod
    def open(cls, out_dir: str | os.PathLike, key: dict[str, str], *, restart: bool = False,
             known_ids: Iterable[str] | None = None) -> Journal:
        """Opens (or creates) ``out_dir/journal.jsonl`` for ``key``.

        ``restart`` discards an existing journal.  Raises InputError (field "journal") for a
        journal of another store/tier/version, a corrupt line before the last one, a record
        of a bracket not in ``known_ids``, or a journal locked by another running audit.
        """
        path = Path(out_dir) / JOURNAL_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a+b")  # noqa: SIM115 - kept open for appends, closed in close()
        try:
            _lock(fh, path)
            fh.seek(0)
            data = fh.read()
            records: dict[str, dict[str, Any]] = {}
            dropped = False
            if data and not restart:
                records, good_len, dropped = _parse(data, key, path, known_ids)
                if good_len == 0:  # nothing usable, not even a header: start afresh
                    data = b""
                elif good_len < len(data):
                    fh.truncate(good_len)
                    _sync(fh)
            if not data or restart:
                fh.truncate(0)
                header = {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, **key}
                fh.write((json.dumps(header, sort_keys=True) + "\n").encode())
                _sync(fh)
                records = {}
        except BaseException:
            fh.close()
            raise
        return cls(path, key, records, fh, dropped)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Writes one finished record (flushed and fsynced) and returns its normalized form."""
        rec = normalize(record)
        self._fh.write((json.dumps(rec, sort_keys=True) + "\n").encode())
        _sync(self._fh)
        self.records.setdefault(rec["bracket"], rec)
        return rec

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()  # closing the descriptor releases the lock

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        try:
            parsed.append(json.loads(raw))
        except ValueError:
            if n == len(lines) and not torn:
                # a complete-looking last line that is not JSON is a torn write too
                good_len -= len(raw) + 1
                torn = True
                break
            raise InputError(f"corrupt line {n} (not JSON); rerun with --restart",
                             field="journal", source=src) from None
    if not parsed:
        return {}, 0, torn
    head = parsed[0]
    if not isinstance(head, dict) or head.get("format") != JOURNAL_FORMAT:
        raise InputError("not an audit journal; rerun with --restart", field="journal",
                         source=src)
    theirs = {k: head.get(k) for k in key}
    if theirs != key:
        diff = ", ".join(f"{k}: journal {theirs[k]!r} vs now {key[k]!r}" for k in key
                         if theirs[k] != key[k])
        raise InputError(f"journal belongs to another run ({diff}); use a new --out folder "
                         f"or --restart", field="journal", source=src)
    known = None if known_ids is None else set(known_ids)
    records: dict[str, dict[str, Any]] = {}
    for n, rec in enumerate(parsed[1:], start=2):
        if not isinstance(rec, dict) or not isinstance(rec.get("bracket"), str):
            raise InputError(f"line {n} is not a bracket record; rerun with --restart",
                             field="journal", source=src)
        if known is not None and rec["bracket"] not in known:
            raise InputError(f"line {n} names bracket {rec['bracket']!r}, not in the store",
                             field="journal", source=src)
        records.setdefault(rec["bracket"], rec)
    return records, good_len, torn
