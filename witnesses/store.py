"""Stored-bracket format v1: read, write, validate (see witnesses/FORMAT.md).

A store is a directory::

    store.json        {"format": "softrank-brackets", "version": 1, ...}
    operators.jsonl   one operator record per line
    brackets.jsonl    one bracket record per line
    arrays/*.npz      the arrays; every record names its file and that file's sha256

Nothing here decides a verdict: the reader hands arrays and exact rationals to ``certify``.
Arrays are always loaded with ``allow_pickle=False``.  Every problem is an
:class:`certify.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import re
import stat
import time
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.certify.lower import nerve as nerve_kind
from softrank.certify.lower import polytope as polytope_kind
from softrank.certify.lower.rowset import MAX_RANK as ROWSET_MAX_RANK  # = polytope.MAX_RANK
from softrank.certify.rationals import parse_eps, to_rational

from . import jsonexact
from .atomic import open_dirs, read_regular, write_atomic, write_text_atomic
from .npzsafe import looks_like_bomb, open_array_file, read_npz

FORMAT_NAME = "softrank-brackets"
FORMAT_VERSION = 1
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")  # "$" would let a final "\n" in

# lower-certificate kinds and the arrays each one carries
LOWER_ARRAYS: dict[str, tuple[str, ...]] = {
    "nonzero": (),
    "frobenius_tail": (),
    "decoder": ("D", "W", "X"),
    "submatrix": ("rows", "cols", "X"),
    "bernstein": ("W", "P", "J"),
    "rowset": ("I", "Z"),
    "rowmix": ("D", "Z"),
    "polytope": ("Y", "I", "F", "Z", "G"),
    "nerve": ("T", "Z", "G"),
}
UPPER_ARRAYS: dict[str, tuple[str, ...]] = {"factors": ("U", "V")}
OPERATOR_SOURCES = ("logits", "block")  # optional operator-of-record data beside A
OPERATOR_FACTORS = ("Q", "K")  # optional per-head queries (m x d) and keys (N x d), together


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_npz(path: Path, expected_sha: str | None, *, field_name: str = "file",
             expect: Any = None, root: Path | None = None) -> dict[str, np.ndarray]:
    """Returns the arrays of an .npz file after checking its sha256; never unpickles.

    Raises InputError naming ``path`` for a missing file, a checksum mismatch, a file that is
    not an npz archive (a pickle, a truncated zip), an object (pickled) array inside it, or
    declared sizes, dtypes or shapes refused before allocation (``witnesses.npzsafe``;
    ``expect(name, dtype, shape)`` returns a reason to refuse a member, or None).  With
    ``root``, the file opened must lie in the store's ``arrays/`` folder, checked on the open
    descriptor (a link swapped in after ``safe_member_path`` is refused).
    """
    inside = None if root is None else root / "arrays"
    return read_npz(path, expected_sha, expect=expect, field_name=field_name, inside=inside)


def _refuse_bad_rel(rel: Any, fld: str, src: str) -> str:
    """Returns ``rel`` when, as text, it names a file inside ``arrays/``; raises InputError
    naming ``fld`` otherwise (the syntactic half of :func:`safe_member_path`)."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel or ":" in rel:
        raise InputError(f"array path {str(rel)[:80]!r} refused", field=fld, source=src)
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape names no file
        raise InputError(f"array path {rel[:80]!r} refused: not valid UTF-8", field=fld,
                         source=src) from None
    parts = rel.split("/")
    if rel.startswith("/") or parts[0] != "arrays" or len(parts) < 2 or any(
            p in ("", ".", "..") for p in parts):
        raise InputError(f"array path {rel[:80]!r} refused: it must be a relative path "
                         "inside arrays/ without '.' or '..'", field=fld, source=src)
    if any(len(p.encode("utf-8")) > 255 for p in parts) or len(rel) > 1024:
        raise InputError(f"array path {rel[:80]!r}... refused: a component over 255 bytes "
                         "or a path over 1024 characters", field=fld, source=src)
    return rel


def safe_member_path(root: Path, rel: Any, fld: str, src: str) -> Path:
    """Returns ``root / rel`` after checking that it names a file inside ``root/arrays``.

    Refused (InputError naming ``fld``), before anything is opened: a non-string, an absolute
    path, a drive or backslash, a ``.`` or ``..`` component, a path outside ``arrays/``, and a
    path whose resolved target (following symlinks) leaves ``root/arrays``.
    """
    rel = _refuse_bad_rel(rel, fld, src)
    path = root / rel
    if _no_symlink_below(root, rel):
        return path
    try:
        inside = (root.resolve() / "arrays")
        target = path.resolve()
    except (OSError, RuntimeError) as err:  # symlink loops
        raise InputError(f"array path {rel[:80]!r} refused: {err}", field=fld,
                         source=src) from None
    if not target.is_relative_to(inside) or target == inside:
        raise InputError(f"array path {rel[:80]!r} refused: it resolves outside the store's "
                         "arrays/ folder", field=fld, source=src)
    return path


def _no_symlink_below(root: Path, rel: str) -> bool:
    """True when ``rel`` (already checked as text: relative, inside ``arrays/``, no ``.`` or
    ``..``) leads from ``root`` through folders that are not symlinks to an entry that is not
    one either, or to nothing (a missing file resolves inside too; reading it fails later).

    Then the resolved target is resolve(root) / rel, inside resolve(root) / "arrays" by
    construction: the full check's verdict, for an lstat per component of ``rel`` instead of
    two full resolves (every component of the root's path, twice per file; a store of 10,000
    brackets spent a noticeable share of its load time there).  The root's own path is
    walked by the kernel on each lstat, as the full check resolves it on each call, so
    nothing is cached.  False means "ask the full check", never "refused".
    """
    at = os.fspath(root)
    last = rel.count("/")
    for i, part in enumerate(rel.split("/")):
        at = os.path.join(at, part)
        try:
            mode = os.lstat(at).st_mode
        except FileNotFoundError:
            return i == last
        except OSError:
            return False
        if stat.S_ISLNK(mode) or (i < last and not stat.S_ISDIR(mode)):
            return False
    return True


@dataclass(frozen=True)
class AtMost:
    """A dimension of an expected shape that the record leaves to the file, up to ``n``."""

    n: int

    def __repr__(self) -> str:
        return f"<= {self.n}"


Dim = int | AtMost | None  # None: any extent (the file-size cap still applies)


def _fits(shape: tuple[int, ...], want: tuple[Dim, ...]) -> bool:
    return len(shape) == len(want) and all(
        w is None or (d <= w.n if isinstance(w, AtMost) else d == w)
        for d, w in zip(shape, want, strict=True))


def _expect_shapes(table: Mapping[str, tuple[Dim, ...] | None], kinds: str) -> Any:
    """Returns an ``expect`` for load_npz: names in ``table`` only, each of the given shape
    (None: any shape within the caller's size cap; a dimension AtMost(n): at most n, None: any)
    and a dtype kind in ``kinds``.  It runs on each member's header, before its data is
    allocated, so a bound here bounds memory."""
    def expect(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
        if name not in table:
            return f"unexpected array {name!r}"
        want = table[name]
        if dtype.kind not in kinds:
            return f"dtype {dtype.str} refused here"
        if want is not None and not _fits(tuple(shape), want):
            return f"shape {tuple(shape)} differs from the record's {want}"
        return None
    return expect


def _require(rec: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str,
             src: str) -> Any:
    if key not in rec:
        raise InputError("missing field", field=f"{where}.{key}", source=src)
    val = rec[key]
    if not isinstance(val, typ) or isinstance(val, bool) and typ is not bool:
        raise InputError(f"has type {type(val).__name__}", field=f"{where}.{key}", source=src)
    return val


def _rank(val: Any, fld: str, src: str) -> int:
    if isinstance(val, bool) or not isinstance(val, int) or val < 0:
        raise InputError(f"rank must be a nonnegative integer, got {val!r}", field=fld, source=src)
    return val


@dataclass(frozen=True)
class OperatorRecord:
    """One operator: the stored matrix A (m x N) and optional operator-of-record data."""

    id: str
    family: str
    shape: tuple[int, int]
    file: str
    sha256: str
    arrays: tuple[str, ...]
    beta: Fraction | None
    meta: dict[str, Any]
    root: Path = field(repr=False, compare=False)

    @property
    def path(self) -> Path:
        return self.root / self.file

    @property
    def record_kind(self) -> str:
        """``"logits"``, ``"block"`` or ``"A"``: what defines the operator of record."""
        for k in OPERATOR_SOURCES:
            if k in self.arrays:
                return k
        return "A"

    def load(self) -> dict[str, np.ndarray]:
        """Returns {"A": ..., and "logits" or "block", "Q" and "K" if present}, shapes checked."""
        path = safe_member_path(self.root, self.file, "operator.file", str(self.root))
        m, N = self.shape
        shapes: dict[str, tuple[int | None, ...]] = {name: self.shape for name in self.arrays}
        if "Q" in shapes:  # m x d and N x d: d is not in the record, only capped
            shapes["Q"], shapes["K"] = (m, None), (N, None)
        arrs = load_npz(path, self.sha256, expect=_operator_expect(shapes), root=self.root)
        src = str(self.path)
        for name in self.arrays:
            if name not in arrs:
                raise InputError("array missing from file", field=f"operator.{name}", source=src)
        for name in ("A", *OPERATOR_SOURCES):
            if name in arrs and tuple(arrs[name].shape) != self.shape:
                raise InputError(f"shape {arrs[name].shape} differs from record shape "
                                 f"{self.shape}", field=f"operator.{name}", source=src)
        if "Q" in self.arrays:
            _check_factors(arrs["Q"], arrs["K"], self.shape, src)
        return {k: arrs[k] for k in self.arrays}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "family": self.family, "shape": list(self.shape),
                               "file": self.file, "sha256": self.sha256,
                               "arrays": list(self.arrays)}
        if self.beta is not None:
            out["beta"] = str(self.beta)
        if self.meta:
            out["meta"] = self.meta
        return out


@dataclass(frozen=True)
class EndRecord:
    """A claimed end of a bracket: kind and rank (arrays live in the bracket's file)."""

    kind: str
    rank: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "rank": self.rank}


@dataclass(frozen=True)
class BracketRecord:
    """One bracket: operator id, exact eps, upper witness, optional lower certificate."""

    id: str
    operator: str
    eps: Fraction
    file: str
    sha256: str
    upper: EndRecord
    lower: EndRecord | None
    producer: dict[str, Any]
    claims: dict[str, Any]
    root: Path = field(repr=False, compare=False)
    shape: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def path(self) -> Path:
        return self.root / self.file

    def load(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Returns (upper, lower) certificate mappings ready for ``certify``.

        upper = {"kind": "factors", "rank": k, "U": U, "V": V}; lower likewise with its arrays.
        Checks that the file holds exactly the arrays the kinds need.
        """
        path = safe_member_path(self.root, self.file, "bracket.file", str(self.root))
        arrs = load_npz(path, self.sha256, expect=_expect_shapes(self.expected_shapes(), "fiu"),
                        root=self.root)
        src = str(self.path)
        ends: list[dict[str, Any] | None] = []
        for prefix, end, table in (("upper", self.upper, UPPER_ARRAYS),
                                   ("lower", self.lower, LOWER_ARRAYS)):
            if end is None:
                ends.append(None)
                continue
            cert: dict[str, Any] = {"kind": end.kind, "rank": end.rank}
            for name in table[end.kind]:
                key = f"{prefix}.{name}"
                if key not in arrs:
                    raise InputError("array missing from file", field=key, source=src)
                cert[name] = arrs[key]
            ends.append(cert)
        expected = {f"upper.{n}" for n in UPPER_ARRAYS[self.upper.kind]}
        if self.lower is not None:
            expected |= {f"lower.{n}" for n in LOWER_ARRAYS[self.lower.kind]}
        extra = sorted(set(arrs) - expected)
        if extra:
            raise InputError(f"unexpected arrays {extra}", field="file", source=src)
        return ends[0], ends[1]  # type: ignore[return-value]

    def expected_shapes(self) -> dict[str, tuple[Dim, ...] | None]:
        """Returns {"upper.U": shape, ...}: the arrays the ends' kinds need, with the shapes
        their ranks and the operator's shape imply (checked before allocation).  The counts
        a polytope or nerve certificate leaves to its file (points, facets, tops, witnesses)
        are bounded by the kernel's limits, so no array past them is allocated."""
        m, n = self.shape if self.shape is not None else (None, None)
        out: dict[str, tuple[Dim, ...] | None] = {}
        for prefix, end, table in (("upper", self.upper, UPPER_ARRAYS),
                                   ("lower", self.lower, LOWER_ARRAYS)):
            if end is None:
                continue
            r = end.rank
            dims = {"U": (m, r), "V": (r, n), "D": (r, m), "W": (n, r), "X": (r, r),
                    "rows": (r,), "cols": (r,), "P": (n, m), "J": (r,), "I": (r,)}
            if end.kind in ("rowset", "rowmix"):  # rank within 1 .. 12 (_parse_end)
                dims["Z"] = (1 << (r - 1), n)
            if end.kind == "polytope":  # point, facet and witness counts: the file's
                k, f = AtMost(polytope_kind.MAX_POINTS), AtMost(polytope_kind.MAX_FACETS)
                shapes = {"Y": (k, r), "I": (k,), "F": (f, r), "Z": (f, n), "G": (f,)}
                out.update({f"{prefix}.{a}": v for a, v in shapes.items()})
                continue
            if end.kind == "nerve":  # top and witness counts: the file's
                q = AtMost(nerve_kind.MAX_TOPS)
                shapes = {"T": (q, r), "Z": (q, n), "G": (q,)}
                out.update({f"{prefix}.{a}": v for a, v in shapes.items()})
                continue
            for name in table[end.kind]:
                shape = dims.get(name)
                out[f"{prefix}.{name}"] = None if shape is None or None in shape else shape
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "operator": self.operator, "eps": str(self.eps),
                               "file": self.file, "sha256": self.sha256,
                               "upper": self.upper.to_json(),
                               "lower": self.lower.to_json() if self.lower else None}
        if self.producer:
            out["producer"] = self.producer
        if self.claims:
            out["claims"] = self.claims
        return out


def _record_head(rec: Any, src: str, line: int) -> tuple[str, str]:
    """Returns (where, id) for a JSONL record after checking it is an object with a valid id."""
    where = f"line {line}"
    if not isinstance(rec, dict):
        raise InputError("record is not a JSON object", field=where, source=src)
    rid = _require(rec, "id", str, where, src)
    if not _ID.match(rid):
        raise InputError(f"invalid id {rid!r}", field=f"{where}.id", source=src)
    return where, rid


def _parse_operator(rec: Any, src: str, line: int, root: Path) -> OperatorRecord:
    where, oid = _record_head(rec, src, line)
    shape = _require(rec, "shape", list, where, src)
    if len(shape) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                  for s in shape):
        raise InputError(f"shape must be two positive integers, got {shape!r}",
                         field=f"{where}.shape", source=src)
    arrays_raw = rec.get("arrays", ["A"])
    if not isinstance(arrays_raw, list) or not all(isinstance(a, str) for a in arrays_raw) \
            or len(set(arrays_raw)) != len(arrays_raw):
        raise InputError("arrays must be a list of distinct names", field=f"{where}.arrays",
                         source=src)
    arrays = tuple(arrays_raw)
    if "A" not in arrays or not set(arrays) <= {"A", *OPERATOR_SOURCES, *OPERATOR_FACTORS}:
        raise InputError(f"arrays must contain A and optionally one of {OPERATOR_SOURCES} "
                         f"and {OPERATOR_FACTORS}", field=f"{where}.arrays", source=src)
    if ("Q" in arrays) != ("K" in arrays):
        raise InputError("Q and K come together", field=f"{where}.arrays", source=src)
    if sum(a in arrays for a in OPERATOR_SOURCES) > 1:
        raise InputError("at most one of logits / block", field=f"{where}.arrays", source=src)
    beta = rec.get("beta")
    if beta is not None:
        try:
            beta = to_rational(beta, field=f"{where}.beta")
        except InputError as err:
            raise err.at(source=src) from None
        if "logits" not in arrays:
            raise InputError("beta needs logits", field=f"{where}.beta", source=src)
        if beta <= 0:  # refused here, naming the record, not later against its array file
            raise InputError(f"must be a positive rational, got {beta}", field=f"{where}.beta",
                             source=src)
    meta = rec.get("meta", {})
    if not isinstance(meta, dict):
        raise InputError("meta must be an object", field=f"{where}.meta", source=src)
    file = _require(rec, "file", str, where, src)
    safe_member_path(root, file, f"{where}.file", src)
    return OperatorRecord(
        id=oid, family=str(_require(rec, "family", str, where, src)),
        shape=(shape[0], shape[1]), file=file,
        sha256=_require(rec, "sha256", str, where, src), arrays=arrays, beta=beta,
        meta=meta, root=root)


def _parse_end(val: Any, fld: str, src: str, table: Mapping[str, tuple[str, ...]]) -> EndRecord:
    if not isinstance(val, dict):
        raise InputError("must be an object with kind and rank", field=fld, source=src)
    kind = val.get("kind")
    if not isinstance(kind, str) or kind not in table:
        raise InputError(f"unknown kind {kind!r}; known: {sorted(table)}",
                         field=f"{fld}.kind", source=src)
    rank = _rank(val.get("rank"), f"{fld}.rank", src)
    if kind == "nonzero" and rank != 1:
        # the claim is in this record, not in an array file: name the record
        raise InputError(f"a nonzero certificate proves rank 1, got rank {rank}",
                         field=f"{fld}.rank", source=src)
    if kind in ("rowset", "rowmix", "polytope", "nerve") and not 1 <= rank <= ROWSET_MAX_RANK:
        # checked here, before 2^(rank-1) enters an expected array shape
        raise InputError(f"a {kind} certificate has rank 1 .. {ROWSET_MAX_RANK}, got {rank}",
                         field=f"{fld}.rank", source=src)
    return EndRecord(kind=kind, rank=rank)


def _check_rank_fits(end: EndRecord | None, shape: tuple[int, int], fld: str, src: str | None
                     ) -> None:
    """Raises InputError naming ``fld`` when a claimed rank exceeds min(m, N): every matrix
    of that shape has rank at most min(m, N), so such a claim is malformed input."""
    if end is not None and end.rank > min(shape):
        raise InputError(f"rank {end.rank} exceeds min(m, N) = {min(shape)} of the operator's "
                         f"{shape[0]} x {shape[1]} matrix (its shape as operators.jsonl "
                         "declares it)", field=fld, source=src)


def _parse_bracket(rec: Any, src: str, line: int, root: Path) -> BracketRecord:
    where, bid = _record_head(rec, src, line)
    if "eps" not in rec:
        raise InputError("missing field", field=f"{where}.eps", source=src)
    try:
        eps = parse_eps(rec["eps"], field=f"{where}.eps")
    except InputError as err:
        raise err.at(source=src) from None
    upper = _parse_end(rec.get("upper"), f"{where}.upper", src, UPPER_ARRAYS)
    lower = rec.get("lower")
    lower_end = None if lower is None else _parse_end(lower, f"{where}.lower", src, LOWER_ARRAYS)
    producer = rec.get("producer", {}) or {}
    claims = rec.get("claims", {}) or {}
    if not isinstance(producer, dict) or not isinstance(claims, dict):
        raise InputError("producer and claims must be objects", field=where, source=src)
    for end in ("upper", "lower"):  # names group reports: 7 and "7" must not read as one
        if not isinstance(producer.get(end, ""), str | None):
            raise InputError(f"must be a producer name (a string) or null, got "
                             f"{type(producer[end]).__name__}", field=f"{where}.producer.{end}",
                             source=src)
    file = _require(rec, "file", str, where, src)
    safe_member_path(root, file, f"{where}.file", src)
    return BracketRecord(
        id=bid, operator=_require(rec, "operator", str, where, src), eps=eps,
        file=file,
        sha256=_require(rec, "sha256", str, where, src), upper=upper, lower=lower_end,
        producer=producer, claims=claims, root=root)


RECORD_FILES = ("store.json", "operators.jsonl", "brackets.jsonl")


def records_digest(parts: Mapping[str, bytes]) -> str:
    """Returns the sha256 of a store's record files (``RECORD_FILES``, length-prefixed).

    Every array file is pinned by its sha256 inside these records, so the digest pins the
    whole store."""
    h = hashlib.sha256()
    for name in RECORD_FILES:
        data = parts[name]
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def _read_jsonl(path: Path, raw: bytes | None = None) -> Iterator[tuple[int, Any]]:
    """Yields (line number, value) of a JSON-lines file: of ``raw`` when given (the bytes
    already read from ``path``), else of the file read now."""
    src = str(path)
    try:
        text = (read_regular(path) if raw is None else raw).decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text: {err}", field="file", source=src) from None
    for n, line in enumerate(jsonexact.split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            yield n, jsonexact.loads(line)
        except ValueError as err:
            raise InputError(f"invalid JSON: {err}", field=f"line {n}", source=src) from None


class StoreReader:
    """A validated, read-only view of a store; arrays load lazily per record."""

    def __init__(self, root: Path, header: dict[str, Any], operators: list[OperatorRecord],
                 brackets: list[BracketRecord], digest: str | None = None):
        self.root = root
        # records_digest of the very bytes parsed: a check and a bundle of one run compare
        # it, since the files may change between two reads
        self.digest = digest
        self.header = header
        self.operators = operators
        self.brackets = brackets
        self._ops = {op.id: op for op in operators}

    def operator(self, op_id: str) -> OperatorRecord:
        return self._ops[op_id]

    def __repr__(self) -> str:
        return (f"StoreReader({str(self.root)!r}, {len(self.operators)} operators, "
                f"{len(self.brackets)} brackets)")


def stale_brackets(reader: StoreReader, brackets: list[BracketRecord]) -> list[str]:
    """Returns the ids of those ``brackets`` (records of ``reader``) whose array file, or
    whose operator's, no longer has the sha256 its record states (or is refused or
    unreadable), in the order given.

    The record files pin every array by its digest, but a result kept from an earlier run
    (an audit's journal) was computed from the bytes read then: whoever reuses one must
    first show the bytes are still those.  Each file is hashed once.
    """
    # keyed by file and digest: two records may name one file with different digests
    seen: dict[tuple[str, str], bool] = {}

    def same(rel: str, sha: str, fld: str) -> bool:
        if (rel, sha) not in seen:
            try:
                path = safe_member_path(reader.root, rel, fld, str(reader.root))
                # opened as the loads open it: a link inside arrays/ is the format's, not a change
                fd, _ = open_array_file(path, fld, reader.root / "arrays")
                with os.fdopen(fd, "rb") as fh:
                    h = hashlib.sha256()
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                seen[rel, sha] = h.hexdigest() == sha
            except (OSError, InputError):
                seen[rel, sha] = False
        return seen[rel, sha]

    out = []
    for b in brackets:
        op = reader.operator(b.operator)
        if not (same(b.file, b.sha256, f"{b.id}.file") and same(op.file, op.sha256,
                                                                  f"{op.id}.file")):
            out.append(b.id)
    return out


def open_store(path: str | Path) -> StoreReader:
    """Opens and validates a store's records (not yet its arrays).

    Raises InputError naming the file and field for a missing or foreign header, an unknown
    version, malformed or duplicate records, or brackets naming unknown operators.
    """
    root = Path(path)
    head_path = root / "store.json"
    if not root.is_dir():
        raise InputError("not a store directory", field="path", source=str(root))
    raw = read_regular(head_path)
    try:
        header = jsonexact.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"invalid JSON: {err}", field="file", source=str(head_path)) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise InputError(f"format must be {FORMAT_NAME!r}", field="format", source=str(head_path))
    if type(header.get("version")) is not int or header.get("version") != FORMAT_VERSION:
        raise InputError(f"unsupported version {header.get('version')!r} (this reader: "
                         f"{FORMAT_VERSION})", field="version", source=str(head_path))
    ops_path, br_path = root / "operators.jsonl", root / "brackets.jsonl"
    raw_ops, raw_br = read_regular(ops_path), read_regular(br_path)
    op_cap = _cap("SOFTRANK_MAX_OPERATORS", MAX_OPERATORS)
    br_cap = _cap("SOFTRANK_MAX_BRACKETS", MAX_BRACKETS)
    operators = [_parse_operator(r, str(ops_path), n, root)
                 for n, r in _capped(_read_jsonl(ops_path, raw_ops), op_cap, str(ops_path),
                                     "SOFTRANK_MAX_OPERATORS")]
    brackets = [_parse_bracket(r, str(br_path), n, root)
                for n, r in _capped(_read_jsonl(br_path, raw_br), br_cap, str(br_path),
                                    "SOFTRANK_MAX_BRACKETS")]
    _unique([o.id for o in operators], str(ops_path))
    _unique([b.id for b in brackets], str(br_path))
    shapes = {o.id: o.shape for o in operators}
    for i, b in enumerate(brackets):
        if b.operator not in shapes:
            raise InputError(f"unknown operator {b.operator!r}", field=f"{b.id}.operator",
                             source=str(br_path))
        object.__setattr__(b, "shape", shapes[b.operator])
        for prefix, end in (("upper", b.upper), ("lower", b.lower)):
            _check_rank_fits(end, shapes[b.operator], f"{b.id}.{prefix}.rank", str(br_path))
        brackets[i] = b
    _check_declared_work(brackets, str(br_path))
    digest = records_digest({"store.json": raw, "operators.jsonl": raw_ops,
                             "brackets.jsonl": raw_br})
    return StoreReader(root, header, operators, brackets, digest)


#: Reader caps (generous; a store beyond one is refused, exit 2, naming the file and field).
#: Each can be raised with the environment variable of the same name prefixed SOFTRANK_.
MAX_OPERATORS = 1_000_000
MAX_BRACKETS = 1_000_000
#: Cap on the work a store declares before any array is read: the sum over its brackets of
#: the float64 pass of each claimed end (``certify.numerics.workbound.float_product`` of
#: m x rank x N), a lower bound on what checking it costs; 10^15 work units is about 12 days.
MAX_DECLARED_WORK = 10**15


def _cap(env: str, default: int) -> int:
    """Returns the positive integer in the environment variable ``env``, else ``default``."""
    try:
        v = int(os.environ.get(env, ""))
    except ValueError:
        return default
    return v if v > 0 else default


def _capped(records: Iterator[tuple[int, Any]], cap: int, src: str, env: str
            ) -> Iterator[tuple[int, Any]]:
    """Yields ``records`` and raises InputError at the first one beyond ``cap``."""
    for count, (n, rec) in enumerate(records, start=1):
        if count > cap:
            raise InputError(f"more than {cap} records (raise the cap with {env})",
                             field=f"line {n}", source=src)
        yield n, rec


def _check_declared_work(brackets: list[BracketRecord], src: str) -> None:
    """Raises InputError naming the bracket at which the store's declared work passes
    SOFTRANK_MAX_DECLARED_WORK (default MAX_DECLARED_WORK)."""
    from softrank.certify.numerics.workbound import float_product

    cap = _cap("SOFTRANK_MAX_DECLARED_WORK", MAX_DECLARED_WORK)
    total = 0
    for b in brackets:
        m, n = b.shape or (1, 1)
        for end in (b.upper, b.lower):
            if end is not None:
                total += float_product(m, end.rank, n)
        if total > cap:
            raise InputError(f"the store declares more than {cap} work units by this "
                             "bracket (m x rank x N of its ends; raise the cap with "
                             "SOFTRANK_MAX_DECLARED_WORK)", field=f"{b.id}.upper.rank",
                             source=src)


#: Largest width d accepted for the Q (m x d) and K (N x d) operator arrays.
MAX_FACTOR_WIDTH = 16384


def _operator_expect(shapes: Mapping[str, tuple[int | None, ...]]) -> Any:
    """``None`` in an expected shape is a dimension the record does not fix (the width d of Q
    and K), accepted up to MAX_FACTOR_WIDTH."""
    def expect(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
        if name not in shapes:
            return f"unexpected array {name!r} (the record lists {sorted(shapes)})"
        if dtype.kind != "f" or dtype.itemsize not in (4, 8):
            return f"dtype {dtype.str} refused: operator arrays are float64 or float32"
        want = shapes[name]
        if len(shape) != len(want) or any(
                w is not None and s != w for s, w in zip(shape, want, strict=True)):
            return f"shape {tuple(shape)} differs from record shape {want}"
        if any(w is None and s > MAX_FACTOR_WIDTH for s, w in zip(shape, want, strict=True)):
            return f"width {tuple(shape)} exceeds {MAX_FACTOR_WIDTH}"
        return None
    return expect


def _unique(ids: list[str], src: str) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise InputError(f"duplicate id {i!r}", field="id", source=src)
        seen.add(i)


class Store:
    """Writer for a v1 store.  Use ``Store.create(path)`` (new) or ``Store.open(path)`` (append).

    Arrays are written atomically before their records; record files are rewritten atomically
    on ``flush()`` (after ``flush_every`` additions, after an addition that comes
    ``flush_seconds`` or more after the last flush, and on ``close()``), so an interrupted
    writer leaves a readable store holding every record flushed so far.
    """

    def __init__(self, root: Path, header: dict[str, Any], operators: list[dict[str, Any]],
                 brackets: list[dict[str, Any]], flush_every: int = 64,
                 flush_seconds: float = 30.0):
        self.root = root
        self.header = header
        self._operators = operators
        self._brackets = brackets
        self._op_shapes = {o["id"]: tuple(o["shape"]) for o in operators}
        self._bracket_ids = {b["id"] for b in brackets}
        self._dirty = 0
        self.flush_every = flush_every
        # a count alone left a slow run's records (one operator's searches can take minutes)
        # unwritten for many minutes; a rewrite costs one pass over the records, so at most one per
        # flush_seconds keeps that cost a small share of any run
        self.flush_seconds = flush_seconds
        self._flushed_at = time.monotonic()
        self._held = 0
        self._lock: int | None = None  # descriptor of the root holding this writer's flock
        self._added: list[str] = []  # operator ids this writer added (``withdraw_added``)

    @classmethod
    def create(cls, path: str | Path, *, description: str = "", **header: Any) -> Store:
        """Creates an empty store at ``path`` (which must not exist or be an empty folder)."""
        root = Path(path)
        if root.is_symlink() and not root.exists():
            # mkdir met the link and said only "File exists"
            raise InputError(f"is a symbolic link to {os.readlink(root)!r}, which does not "
                             "exist: create that folder, or name another path", field="path",
                             source=str(root))
        if root.exists() and not root.is_dir():
            raise InputError("exists and is not a folder", field="path", source=str(root))
        if root.exists() and any(root.iterdir()):
            raise InputError("refusing to create a store in a non-empty folder", field="path",
                             source=str(root))
        (root / "arrays").mkdir(parents=True, exist_ok=True)
        lock = _lock_writer(root)
        head = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "description": description,
                **header}
        try:
            write_text_atomic(root / "store.json", jsonexact.dumps(head, indent=2) + "\n",
                              root=root, field="store")
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        store = cls(root, head, [], [])
        store._lock = lock
        store.flush()
        return store

    @classmethod
    def open(cls, path: str | Path) -> Store:
        """Opens an existing store to add records (to resume an interrupted producer run).

        Raises InputError naming the folder while another writer has it open: two writers
        would each rewrite the record files from their own records, and the later rewrite
        would drop the other's.  Temporary files an interrupted writer left (``.*.tmp`` of
        :func:`~witnesses.atomic.write_atomic`'s naming) are removed once the lock is held.
        """
        root = Path(path)
        if not root.is_dir():
            raise InputError("not a store directory", field="path", source=str(root))
        lock = _lock_writer(root)
        try:
            reader = open_store(root)
            ops = [o.to_json() for o in reader.operators]
            brs = [b.to_json() for b in reader.brackets]
            # meta and claims are the producers' own numbers (never a verdict): keep them as
            # the file spells them, so that appending to a store rewrites its earlier records
            # unchanged (the exact reader turns 0.25 into Fraction(1, 4), written as "1/4")
            _keep_as_written(reader.root / "operators.jsonl", ops, "meta")
            _keep_as_written(reader.root / "brackets.jsonl", brs, "claims")
            if lock is not None:  # without it the temporaries may be another writer's
                _remove_stale_temps(root)
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        store = cls(reader.root, reader.header, ops, brs)
        store._lock = lock
        return store

    def add_provenance(self, provenance: Mapping[str, Any]) -> None:
        """Merges ``provenance`` (lists under keys such as "models" and "inputs") into the
        header's "provenance" object, entries not yet present appended, and rewrites
        store.json atomically (a resumed run keeps what earlier runs recorded)."""
        have = self.header.get("provenance")
        merged: dict[str, Any] = dict(have) if isinstance(have, dict) else {}
        for key, entries in provenance.items():
            old = merged.get(key)
            out = list(old) if isinstance(old, list) else []
            out += [e for e in entries if e not in out]
            merged[key] = out
        self.header = {**self.header, "provenance": merged}
        write_text_atomic(self.root / "store.json", jsonexact.dumps(self.header, indent=2)
                          + "\n")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def operator_ids(self) -> list[str]:
        return [o["id"] for o in self._operators]

    @property
    def bracket_ids(self) -> set[str]:
        return set(self._bracket_ids)

    def _write_arrays(self, name: str, arrays: Mapping[str, np.ndarray]) -> tuple[str, str]:
        rel = f"arrays/{name}.npz"

        def writer(fh: Any) -> None:
            np.savez_compressed(fh, **arrays)

        # written below the store's folder without following links; the digest is of the
        # bytes written, not of whatever the name points at afterwards
        sha = write_atomic(self.root / rel, writer, root=self.root, field="store")
        if _inflates_like_a_bomb(self.root / rel):
            # a constant 12,000 x 12,000 float32 deflates about 1000:1, which the reader
            # refuses as a bomb: stored uncompressed, the store stays readable
            sha = write_atomic(self.root / rel, lambda fh: np.savez(fh, **arrays),
                               root=self.root, field="store")
        return rel, sha

    def add_operator(self, A: np.ndarray, *, family: str, id: str | None = None,
                     logits: np.ndarray | None = None, block: np.ndarray | None = None,
                     beta: object = None, meta: Mapping[str, Any] | None = None,
                     Q: np.ndarray | None = None, K: np.ndarray | None = None) -> str:
        """Stores operator A (m x N; float64 or float32 kept as given) and returns its id.

        ``logits`` (operator of record = exact row softmax of beta * logits) or ``block``
        (operator of record = exact row renormalisation) may accompany A, and so may the
        head's queries ``Q`` (m x d) and keys ``K`` (N x d) with the scale folded in
        (logits ~= Q K^T; data for the reports, never the operator of record).
        """
        oid = id or f"op{len(self._operators):05d}"
        if not _ID.match(oid) or oid in self._op_shapes:
            raise InputError(f"invalid or duplicate operator id {oid!r}", field="id")
        A = _stored_float(A, "A")
        arrays = {"A": A}
        for name, X in (("logits", logits), ("block", block)):
            if X is not None:
                X = _stored_float(X, name, allow_neg_inf=(name == "logits"))
                if X.shape != A.shape:
                    raise InputError(f"shape {X.shape} differs from A {A.shape}", field=name)
                arrays[name] = X
        if logits is not None and block is not None:
            raise InputError("give logits or block, not both", field="block")
        if (Q is None) != (K is None):
            raise InputError("give Q and K together", field="Q")
        if Q is not None:
            arrays["Q"], arrays["K"] = _stored_float(Q, "Q"), _stored_float(K, "K")
            _check_factors(arrays["Q"], arrays["K"], A.shape, None)
        if beta is not None and logits is None:
            raise InputError("beta needs logits", field="beta")
        if beta is not None and not to_rational(beta, field="beta") > 0:
            raise InputError(f"must be a positive rational, got {beta}", field="beta")
        rel, sha = self._write_arrays(oid, arrays)
        rec: dict[str, Any] = {"id": oid, "family": family, "shape": list(A.shape), "file": rel,
                               "sha256": sha, "arrays": list(arrays)}
        if beta is not None:
            rec["beta"] = str(to_rational(beta, field="beta"))
        if meta:
            rec["meta"] = dict(meta)
        self._operators.append(rec)
        self._op_shapes[oid] = A.shape
        self._added.append(oid)
        self._touch()
        return oid

    def withdraw_added(self) -> list[str]:
        """Removes every operator this writer added that no bracket names yet (its record,
        then its array file) and returns their ids.  Why: a run whose later input is bad
        stops before producing, and must not leave the earlier inputs stored without
        brackets in an existing store (a store it created is removed whole).  The records
        are rewritten first: a record flushed earlier never outlives its array file."""
        named = {b["operator"] for b in self._brackets}
        gone = [o for o in self._added if o not in named]
        files = {o["id"]: o["file"] for o in self._operators if o["id"] in gone}
        # the writer's own state first, whole: a failed flush below leaves it consistent
        self._operators = [o for o in self._operators if o["id"] not in files]
        for oid in gone:
            self._op_shapes.pop(oid, None)
        self._added = [o for o in self._added if o not in files]
        if not gone:
            return gone
        self.flush()
        fd = open_dirs(self.root, ["arrays"], field="store", create=False)
        if fd is None:
            return gone
        try:
            for oid in gone:  # through the folder: a link in a path is never followed
                try:
                    os.unlink(files[oid].rpartition("/")[2], dir_fd=fd)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)
        return gone

    def add_bracket(self, operator: str, eps: object, upper: Mapping[str, Any],
                    lower: Mapping[str, Any] | None = None, *, producer: Mapping[str, Any] | None
                    = None, claims: Mapping[str, Any] | None = None, id: str | None = None) -> str:
        """Stores a bracket for ``operator`` at exact ``eps`` and returns its id.

        ``upper`` = {"kind": "factors", "rank": k, "U": U, "V": V}; ``lower`` = {"kind": ...,
        "rank": L, <arrays of that kind>} or None.  ``claims`` holds the producer's own float64
        numbers, kept for reports (never used for a verdict).
        """
        bid = id or f"br{len(self._brackets):06d}"
        if not _ID.match(bid) or bid in self._bracket_ids:
            raise InputError(f"invalid or duplicate bracket id {bid!r}", field="id")
        self._brackets.append(self._bracket_record(bid, operator, eps, upper, lower,
                                                   producer, claims))
        self._bracket_ids.add(bid)
        self._touch()
        return bid

    def bracket_record(self, id: str) -> dict[str, Any]:
        """Returns a copy of bracket ``id``'s record as it will be written (claims as the file
        spells them)."""
        for b in self._brackets:
            if b["id"] == id:
                return dict(b)
        raise InputError(f"unknown bracket {id!r}", field="id")

    def replace_bracket(self, id: str, operator: str, eps: object, upper: Mapping[str, Any],
                        lower: Mapping[str, Any] | None = None, *,
                        producer: Mapping[str, Any] | None = None,
                        claims: Mapping[str, Any] | None = None) -> str:
        """Rewrites bracket ``id`` (its file and its record, in place in the record order);
        arguments as for :meth:`add_bracket`.  The file is rewritten before the record, so
        run it on a copy: an interruption in between leaves one checksum mismatch."""
        pos = next((i for i, b in enumerate(self._brackets) if b["id"] == id), None)
        if pos is None:
            raise InputError(f"unknown bracket {id!r}", field="id")
        self._brackets[pos] = self._bracket_record(id, operator, eps, upper, lower, producer,
                                                   claims)
        self._touch()
        return id

    def _bracket_record(self, bid: str, operator: str, eps: object, upper: Mapping[str, Any],
                        lower: Mapping[str, Any] | None, producer: Mapping[str, Any] | None,
                        claims: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validates the ends, writes the bracket's arrays and returns its record."""
        if operator not in self._op_shapes:
            raise InputError(f"unknown operator {operator!r}", field="operator")
        eps_q = parse_eps(eps)
        arrays: dict[str, np.ndarray] = {}
        ends: dict[str, Any] = {}
        for prefix, end, table in (("upper", upper, UPPER_ARRAYS), ("lower", lower, LOWER_ARRAYS)):
            if end is None:
                ends[prefix] = None
                continue
            kind = end.get("kind")
            if kind not in table:
                raise InputError(f"unknown kind {kind!r}", field=f"{prefix}.kind")
            ends[prefix] = {"kind": kind, "rank": _rank(end.get("rank"), f"{prefix}.rank", "")}
            if kind in ("rowset", "rowmix", "polytope", "nerve") \
                    and not 1 <= ends[prefix]["rank"] <= ROWSET_MAX_RANK:
                raise InputError(f"a {kind} certificate has rank 1 .. {ROWSET_MAX_RANK}",
                                 field=f"{prefix}.rank")
            _check_rank_fits(EndRecord(kind=kind, rank=ends[prefix]["rank"]),
                             self._op_shapes[operator], f"{prefix}.rank", None)
            for name in table[kind]:
                if name not in end:
                    raise InputError("array missing", field=f"{prefix}.{name}")
                X = np.asarray(end[name])
                if X.dtype.kind == "f":
                    X = _stored_float(X, f"{prefix}.{name}", ndim=None)
                arrays[f"{prefix}.{name}"] = X
        if ends["upper"] is None:
            raise InputError("a bracket needs an upper witness", field="upper")
        rel, sha = self._write_arrays(bid, arrays)
        rec: dict[str, Any] = {"id": bid, "operator": operator, "eps": str(eps_q), "file": rel,
                               "sha256": sha, "upper": ends["upper"], "lower": ends["lower"]}
        if producer:
            rec["producer"] = dict(producer)
        if claims:
            rec["claims"] = dict(claims)
        return rec

    def _touch(self) -> None:
        self._dirty += 1
        if not self._held:
            self.flush_due()

    def flush_due(self) -> None:
        """Flushes when records are pending and ``flush_every`` of them have been added, or
        ``flush_seconds`` have passed since the last flush."""
        if self._dirty and (self._dirty >= self.flush_every
                            or time.monotonic() - self._flushed_at >= self.flush_seconds):
            self.flush()

    @contextmanager
    def batch(self) -> Iterator[Store]:
        """Adds inside the block trigger no flush until it ends (then ``flush_due``), so a
        count- or time-triggered flush does not split them (one operator's brackets)."""
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1
            if not self._held:
                self.flush_due()

    def flush(self) -> None:
        """Atomically rewrites operators.jsonl and brackets.jsonl with every record so far."""
        for name, recs in (("operators.jsonl", self._operators),
                           ("brackets.jsonl", self._brackets)):
            write_text_atomic(self.root / name,
                              "".join(jsonexact.dumps(r, sort_keys=True) + "\n" for r in recs),
                              root=self.root, field="store")
        self._dirty = 0
        self._flushed_at = time.monotonic()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._lock is not None:
                os.close(self._lock)  # releases the flock
                self._lock = None


def _inflates_like_a_bomb(path: Path) -> bool:
    """True when a member of the npz just written at ``path`` would be refused by the reader
    as a decompression bomb (``npzsafe.looks_like_bomb``)."""
    with zipfile.ZipFile(path) as z:
        return any(looks_like_bomb(i) for i in z.infolist())


#: Names ``witnesses.atomic.write_atomic`` gives its temporary files.
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp\Z")


def _lock_writer(root: Path) -> int | None:
    """Returns a descriptor of the folder ``root`` holding an exclusive flock on it; raises
    InputError naming ``root`` when another writer holds it (the lock goes with the
    descriptor, so a killed writer leaves none behind, and no file is added to the store).
    Returns None where the file system takes no lock on a folder (NFS emulates flock with
    byte-range locks, which need a file open for writing): the store is then written as
    before, unlocked."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError("another writer has this store open (a produce run still going?); "
                         "wait for it, or write to another store", field="path",
                         source=str(root)) from None
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_stale_temps(root: Path) -> None:
    """Removes the temporary files an interrupted writer left in ``root`` and ``root/arrays``
    (names only of :data:`_TEMP_NAME`'s form, never followed; the writer's lock is held)."""
    for folder in (root, root / "arrays"):
        if folder.is_symlink() or not folder.is_dir():
            continue
        with os.scandir(folder) as it:
            for entry in it:
                if _TEMP_NAME.match(entry.name) and not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)


def _as_written(native: Any, exact: Any) -> Any:
    """The plain-JSON reading of a value, except where it overflowed to a non-finite float:
    there the exact reading (a Fraction, written back as an exact string)."""
    if isinstance(native, float) and not math.isfinite(native):
        return exact
    if isinstance(native, dict) and isinstance(exact, dict):
        return {k: _as_written(v, exact.get(k)) for k, v in native.items()}
    if isinstance(native, list) and isinstance(exact, list) and len(native) == len(exact):
        return [_as_written(a, b) for a, b in zip(native, exact, strict=True)]
    return native


def _keep_as_written(path: Path, records: list[dict[str, Any]], key: str) -> None:
    """Replaces ``records[i][key]`` by its plain-JSON reading (Python floats, see
    :func:`_as_written`); the records were validated from the same file, in the same order."""
    lines = [ln for ln in jsonexact.split_lines(read_regular(path).decode("utf-8"))
             if ln.strip()]
    if len(lines) != len(records):  # pragma: no cover - the file changed under us
        return
    for rec, line in zip(records, lines, strict=True):
        if key in rec:
            rec[key] = _as_written(jsonexact.loads_native(line).get(key), rec[key])


def _check_factors(Q: np.ndarray, K: np.ndarray, shape: tuple[int, ...], src: str | None
                   ) -> None:
    """Checks Q (m x d) and K (N x d) against an operator of shape (m, N): float, finite."""
    for name, X, rows in (("Q", Q, shape[0]), ("K", K, shape[1])):
        if X.ndim != 2 or X.shape[0] != rows or X.dtype not in (np.float64, np.float32):
            raise InputError(f"must be a float {rows} x d array, got {X.dtype} {X.shape}",
                             field=f"operator.{name}", source=src)
        if not np.isfinite(X).all():
            raise InputError("NaN or Inf entries", field=f"operator.{name}", source=src)
    if Q.shape[1] != K.shape[1]:
        raise InputError(f"Q {Q.shape} and K {K.shape} differ in their column count d",
                         field="operator.K", source=src)


def _stored_float(X: Any, name: str, *, allow_neg_inf: bool = False, ndim: int | None = 2
                  ) -> np.ndarray:
    X = np.asarray(X)
    if X.dtype not in (np.float64, np.float32):
        raise InputError(f"must be float64 or float32, got {X.dtype}", field=name)
    if ndim is not None and X.ndim != ndim:
        raise InputError(f"must be {ndim}-D, got shape {X.shape}", field=name)
    bad = np.isnan(X) | (np.isinf(X) & ~(allow_neg_inf & (X < 0)))
    if bad.any():
        raise InputError("NaN or Inf entries", field=name)
    return X
