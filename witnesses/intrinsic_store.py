"""Intrinsic-geometry witnesses beside a v1 store: ``intrinsic.jsonl`` + ``arrays/*.npz``.

A backward-compatible extension (see witnesses/FORMAT.md, "Intrinsic witnesses"): stores
without ``intrinsic.jsonl`` stay valid and ``brackets.jsonl`` is never touched.  Two record
kinds:

* ``rank`` (one per operator and rank r): the factors X (m x r), Y (N x r) of T = X Y^T and
  the optional witnesses for tau(T) and kappa(T);
* ``native`` (one per operator with stored Q and K): ball centres / weights for rad(Q), rad(K).

Nothing here decides anything: the reader hands arrays to ``certify``.  Writes are atomic
and every array is validated (names, dtypes, shapes, finiteness) before any byte is written,
so a refused record leaves nothing behind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.certify.rationals import parse_eps

from . import jsonexact
from .atomic import write_atomic, write_text_atomic
from .store import (
    StoreReader,
    _read_jsonl,
    _record_head,
    _require,
    load_npz,
    safe_member_path,
)

INTRINSIC_FILE = "intrinsic.jsonl"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")  # "$" would let a final "\n" in

# name -> (dtype kind "f" float / "i" integer, shape spec); spec letters: m, n (operator
# shape), r (rank), k (cycle length), s (number of rectangles), d (Q/K width), ints literal
RANK_ARRAYS: dict[str, tuple[str, tuple[str | int, ...]]] = {
    "X": ("f", ("m", "r")), "Y": ("f", ("n", "r")),
    "b": ("f", ("n",)), "cycle": ("i", ("k",)), "cycle_rows": ("i", ("k",)),
    "G": ("f", ("r", "r")), "a": ("f", ("r",)), "c": ("f", ("r",)),
    "rects": ("i", ("s", 4)), "lam": ("f", ("m",)), "mu": ("f", ("n",)),
    "M": ("f", ("m", "n")), "D1": ("f", ("m",)), "D2": ("f", ("n",)),
}
RANK_REQUIRED = ("X", "Y")
NATIVE_ARRAYS: dict[str, tuple[str, tuple[str | int, ...]]] = {
    "centre_q": ("f", ("d",)), "weights_q": ("f", ("m",)),
    "centre_k": ("f", ("d",)), "weights_k": ("f", ("n",)),
}
KINDS = {"rank": RANK_ARRAYS, "native": NATIVE_ARRAYS}


@dataclass(frozen=True)
class IntrinsicRecord:
    """One intrinsic record (kind ``rank`` or ``native``) of a store."""

    id: str
    operator: str
    kind: str
    rank: int | None
    eps: tuple[Fraction, ...]
    file: str
    sha256: str
    arrays: tuple[str, ...]
    producer: dict[str, Any]
    claims: dict[str, Any]
    shape: tuple[int, int]
    root: Path = field(repr=False, compare=False)

    @property
    def path(self) -> Path:
        return self.root / self.file

    def load(self, d: int | None = None) -> dict[str, np.ndarray]:
        """Returns the record's arrays after checking checksum, names, dtypes, shapes and
        finiteness; errors name the file and the field ``<id>.<array>``."""
        arrs = load_npz(self.path, self.sha256, expect=self._expect(d), root=self.root)
        src = str(self.path)
        if set(arrs) != set(self.arrays):
            raise InputError(f"file holds arrays {sorted(arrs)}, record lists "
                             f"{sorted(self.arrays)}", field=f"{self.id}.arrays", source=src)
        try:
            validate_arrays(arrs, self.kind, self.shape, self.rank, d)
        except InputError as err:
            raise err.at(source=src, field_prefix=self.id) from None
        return arrs

    def _expect(self, d: int | None) -> Any:
        """Returns an ``expect`` for load_npz that refuses, before any allocation, a member
        the record does not list, a dtype its table does not allow, and a shape that differs
        from the operator's m, N, the rank r or the width d, or whose free sizes (cycle length
        k, rectangle count s) exceed m N."""
        table = KINDS[self.kind]
        m, n = self.shape
        sizes: dict[str, int] = {"m": m, "n": n}
        if self.rank is not None:
            sizes["r"] = self.rank
        if d is not None:
            sizes["d"] = d
        listed = set(self.arrays)

        def expect(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
            if name not in listed:
                return f"array {name!r} is not listed in the record"
            want, spec = table[name]
            if dtype.kind not in ("f" if want == "f" else "iu"):
                return f"dtype {dtype.str} refused for {name!r}"
            if len(shape) != len(spec):
                return f"{name!r} must be {len(spec)}-D, got shape {tuple(shape)}"
            for got, sym in zip(shape, spec, strict=True):
                bound = sym if isinstance(sym, int) else sizes.get(sym)
                if bound is not None and got != bound:
                    return f"{name!r} has shape {tuple(shape)}, expected {spec} = {bound} there"
                if bound is None and got > m * n:
                    return f"{name!r} has shape {tuple(shape)}: size {sym} exceeds m N = {m * n}"
            return None
        return expect

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "operator": self.operator, "kind": self.kind,
                               "file": self.file, "sha256": self.sha256,
                               "arrays": list(self.arrays)}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.eps:
            out["eps"] = [str(e) for e in self.eps]
        if self.producer:
            out["producer"] = self.producer
        if self.claims:
            out["claims"] = self.claims
        return out


def validate_arrays(arrs: Mapping[str, Any], kind: str, shape: tuple[int, int],
                    rank: int | None, d: int | None = None) -> dict[str, np.ndarray]:
    """Returns the arrays as numpy arrays after checking them against ``kind``'s table.

    Raises InputError naming the array for an unknown or missing name, a wrong dtype or
    shape, NaN / Inf, r larger than the factors allow (r > min(m, N)) or a singular-looking
    gauge (G with a zero determinant in float, which no check can invert).
    """
    table = KINDS[kind]
    m, n = shape
    if kind == "rank":
        if rank is None or isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise InputError(f"rank must be a positive integer, got {rank!r}", field="rank")
        if rank > min(m, n):
            raise InputError(f"r = {rank} is larger than the factors allow (min(m, N) = "
                             f"{min(m, n)})", field="rank")
        for name in RANK_REQUIRED:
            if name not in arrs:
                raise InputError("required array is missing", field=name)
    out: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {"m": m, "n": n}
    if rank is not None:
        sizes["r"] = rank
    if d is not None:
        sizes["d"] = d
    for name, val in arrs.items():
        if name not in table:
            raise InputError(f"unknown array for a {kind} record; known: {sorted(table)}",
                             field=name)
        X = np.asarray(val)
        want, spec = table[name]
        if X.dtype.kind == "O" or (want == "f" and X.dtype not in (np.float64, np.float32)) \
                or (want == "i" and X.dtype.kind not in "iu"):
            need = "float64/float32" if want == "f" else "integer"
            raise InputError(f"dtype {X.dtype} not accepted ({need} needed)", field=name)
        if X.ndim != len(spec):
            raise InputError(f"must be {len(spec)}-D, got shape {X.shape}", field=name)
        for axis, (got, sym) in enumerate(zip(X.shape, spec, strict=True)):
            if isinstance(sym, int):
                if got != sym:
                    raise InputError(f"axis {axis} has size {got}, expected {sym}", field=name)
            elif sym in sizes:
                if got != sizes[sym]:
                    raise InputError(f"shape {X.shape}: axis {axis} must be {sym} = "
                                     f"{sizes[sym]}", field=name)
            else:
                sizes[sym] = got
        if want == "f" and not np.all(np.isfinite(X)):
            raise InputError("NaN or Inf entries", field=name)
        out[name] = X
    if kind == "rank" and "G" in out:
        G = out["G"].astype(np.float64)
        sv = np.linalg.svd(G, compute_uv=False)
        if not sv[-1] > 0 or not np.isfinite(sv[0] / sv[-1]) or sv[0] / sv[-1] > 1e15:
            raise InputError("the gauge G is singular (or numerically so): X G, Y G^-T is "
                             "not a factorization of T", field="G")
    if "cycle" in out and "cycle_rows" in out and len(out["cycle"]) != len(out["cycle_rows"]):
        raise InputError("cycle_rows must have one row per cycle edge", field="cycle_rows")
    return out


def _parse(rec: Any, src: str, line: int, root: Path, shapes: Mapping[str, tuple[int, int]]
           ) -> IntrinsicRecord:
    where, rid = _record_head(rec, src, line)
    op = _require(rec, "operator", str, where, src)
    if op not in shapes:
        raise InputError(f"unknown operator {op!r}", field=f"{where}.operator", source=src)
    kind = rec.get("kind")
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; known: {sorted(KINDS)}",
                         field=f"{where}.kind", source=src)
    rank = rec.get("rank")
    if kind == "rank":
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise InputError(f"rank must be a positive integer, got {rank!r}",
                             field=f"{where}.rank", source=src)
        if rank > min(shapes[op]):
            raise InputError(f"r = {rank} is larger than the factors allow (min(m, N) = "
                             f"{min(shapes[op])})", field=f"{where}.rank", source=src)
    elif rank is not None:
        raise InputError("a native record has no rank", field=f"{where}.rank", source=src)
    eps_raw = rec.get("eps", [])
    if not isinstance(eps_raw, list):
        raise InputError("eps must be a list of exact rationals", field=f"{where}.eps",
                         source=src)
    try:
        eps = tuple(parse_eps(e, field=f"{where}.eps") for e in eps_raw)
    except InputError as err:
        raise err.at(source=src) from None
    arrays = _require(rec, "arrays", list, where, src)
    if not all(isinstance(a, str) for a in arrays) or not set(arrays) <= set(KINDS[kind]):
        raise InputError(f"arrays must be names from {sorted(KINDS[kind])}",
                         field=f"{where}.arrays", source=src)
    if kind == "rank" and not set(RANK_REQUIRED) <= set(arrays):
        raise InputError("a rank record needs X and Y", field=f"{where}.arrays", source=src)
    producer = rec.get("producer", {}) or {}
    claims = rec.get("claims", {}) or {}
    if not isinstance(producer, dict) or not isinstance(claims, dict):
        raise InputError("producer and claims must be objects", field=where, source=src)
    file = _require(rec, "file", str, where, src)
    safe_member_path(root, file, f"{where}.file", src)
    return IntrinsicRecord(id=rid, operator=op, kind=kind, rank=rank, eps=eps,
                           file=file,
                           sha256=_require(rec, "sha256", str, where, src),
                           arrays=tuple(arrays), producer=producer, claims=claims,
                           shape=shapes[op], root=root)


def read_intrinsic(reader: StoreReader) -> list[IntrinsicRecord]:
    """Returns the validated intrinsic records of a store ([] when it has none).

    Raises InputError naming ``intrinsic.jsonl`` and the field for malformed, duplicate or
    dangling records.
    """
    path = reader.root / INTRINSIC_FILE
    if not os.path.lexists(path):  # a dangling link is not "no file": open_regular refuses it
        return []
    shapes = {o.id: o.shape for o in reader.operators}
    recs = [_parse(r, str(path), n, reader.root, shapes) for n, r in _read_jsonl(path)]
    seen: set[str] = set()
    for r in recs:
        if r.id in seen:
            raise InputError(f"duplicate id {r.id!r}", field="id", source=str(path))
        seen.add(r.id)
    return recs


class IntrinsicWriter:
    """Appends intrinsic records to an existing store (rewrites intrinsic.jsonl atomically)."""

    def __init__(self, reader: StoreReader):
        self.root = reader.root
        self._shapes = {o.id: o.shape for o in reader.operators}
        self._records = [r.to_json() for r in read_intrinsic(reader)]
        self._ids = {r["id"] for r in self._records}

    @property
    def ids(self) -> set[str]:
        return set(self._ids)

    def add(self, operator: str, kind: str, arrays: Mapping[str, Any], *, rank: int | None = None,
            eps: tuple[object, ...] = (), producer: Mapping[str, Any] | None = None,
            claims: Mapping[str, Any] | None = None, id: str | None = None) -> str:
        """Validates and stores one record; returns its id.  Nothing is written on error."""
        if operator not in self._shapes:
            raise InputError(f"unknown operator {operator!r}", field="operator")
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r}", field="kind")
        rid = id or (f"{operator}.r{rank}" if kind == "rank" else f"{operator}.native")
        if not _ID.match(rid) or rid in self._ids:
            raise InputError(f"invalid or duplicate intrinsic id {rid!r}", field="id")
        eps_q = tuple(parse_eps(e, field="eps") for e in eps)
        try:
            arrs = validate_arrays(arrays, kind, self._shapes[operator], rank)
        except InputError as err:
            raise err.at(field_prefix=rid) from None
        rel = f"arrays/{rid}.intrinsic.npz"

        def writer(fh: Any) -> None:
            np.savez_compressed(fh, **arrs)

        sha = write_atomic(self.root / rel, writer, root=self.root, field="store")
        rec: dict[str, Any] = {"id": rid, "operator": operator, "kind": kind, "file": rel,
                               "sha256": sha, "arrays": list(arrs)}
        if rank is not None:
            rec["rank"] = rank
        if eps_q:
            rec["eps"] = [str(e) for e in eps_q]
        if producer:
            rec["producer"] = dict(producer)
        if claims:
            rec["claims"] = dict(claims)
        self._records.append(rec)
        self._ids.add(rid)
        return rid

    def flush(self) -> None:
        write_text_atomic(self.root / INTRINSIC_FILE,
                          "".join(jsonexact.dumps(r, sort_keys=True) + "\n"
                                  for r in self._records), root=self.root, field="store")

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> IntrinsicWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
