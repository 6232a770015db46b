"""Writing a replay bundle: a zip of JSON (exact rationals as strings) and raw arrays.

Layout (read by replay/replay.py; described in proofs_notes/replay.md):

* ``manifest.json``: format, version, a description, and for every other member its byte
  length and sha256;
* ``bundle.json``: the operators (stored A, logits or block, beta, the kernel's chi) and the
  ends (bracket, operator, eps, kind, rank, the kernel's status, the certificate's arrays);
* ``arrays/<sha256>.bin``: raw little-endian arrays (``<f8``, ``<f4`` or ``<i8``), named by
  content, so an array shared by several ends is stored once.

Every end of a bracket is written from the one bracket record, so all of them name its
operator and eps, and its ``end`` label is ``upper`` (kind factors) or ``lower`` (the claimed
lower kind, and the nonzero fallback beside it): the replayer refuses any other bundle.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.witnesses import open_store
from softrank.witnesses.atomic import write_atomic

from .kyfan import kyfan_certificate

FORMAT, VERSION = "softrank-replay-bundle", 1
ABOUT = ("Replay bundle of softrank-certify: every end of every bracket with the kernel's "
         "status and the arrays a replay needs. Rationals are strings; arrays are raw "
         "little-endian (dtype and shape in bundle.json); every member's sha256 is listed "
         "here. Replay with: python replay/replay.py BUNDLE")
LOWER_NAMES = {"nonzero": (), "frobenius_tail": (), "decoder": ("D", "W", "X"),
               "submatrix": ("rows", "cols", "X"), "bernstein": ("W", "P", "J"),
               "rowset": ("I", "Z"), "rowmix": ("D", "Z"),
               "polytope": ("Y", "I", "F", "Z", "G")}


class _Members:
    """The archive's members, arrays stored once by content."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def array(self, X: Any) -> dict[str, Any]:
        X = np.asarray(X)
        if X.dtype.kind in "iu":
            dt = "<i8"
        elif X.dtype == np.float32:
            dt = "<f4"
        else:
            dt = "<f8"
        data = np.ascontiguousarray(X, dtype=np.dtype(dt)).tobytes()
        name = f"arrays/{hashlib.sha256(data).hexdigest()}.bin"
        self.files[name] = data
        return {"file": name, "dtype": dt, "shape": list(X.shape)}


def write_bundle(store: str | Path, records: Iterable[Mapping[str, Any]], out: str | Path, *,
                 frobenius: bool = True) -> dict[str, Any]:
    """Writes the bundle of ``records`` (the check records of ``store``) to ``out`` atomically.

    Every end of every record that checked without an input error is exported with its
    kernel status; frobenius_tail ends the kernel proved get a Ky Fan certificate when the
    search finds one (``frobenius=False`` skips the search).  Returns counts for reports.
    """
    reader = open_store(store)
    by_id = {b.id: b for b in reader.brackets}
    mem = _Members()
    ops: dict[str, dict[str, Any]] = {}
    op_arrays: dict[str, dict[str, Any]] = {}
    ends: list[dict[str, Any]] = []
    counts = {"ends": 0, "kernel_proved": 0, "skipped_errors": 0, "kyfan_missing": 0}
    for r in sorted(records, key=lambda r: r["bracket"]):
        if "error" in r:
            counts["skipped_errors"] += 1
            continue
        br = by_id[r["bracket"]]
        op = reader.operator(br.operator)
        if op.id not in ops:
            arrs = op.load()
            op_arrays[op.id] = arrs
            entry: dict[str, Any] = {"id": op.id, "shape": list(op.shape),
                                     "A": mem.array(arrs["A"]), "chi": str(r["chi"])}
            for name in ("logits", "block"):
                if name in arrs:
                    entry[name] = mem.array(arrs[name])
            if op.beta is not None:
                entry["beta"] = str(op.beta)
            ops[op.id] = entry
        upper, lower = br.load()
        base = {"bracket": br.id, "operator": op.id, "eps": str(br.eps)}
        if upper is not None and r.get("upper_check"):
            ends.append({**base, "end": "upper", "kind": "factors", "rank": upper["rank"],
                         "kernel": r["upper_check"]["status"],
                         "certificate": {n: mem.array(upper[n]) for n in ("U", "V")}})
        if lower is not None and r.get("lower_check"):
            status = r["lower_check"]["status"]
            cert: dict[str, Any] | None = {n: mem.array(lower[n])
                                           for n in LOWER_NAMES[lower["kind"]]}
            if lower["kind"] == "frobenius_tail":
                cert = None
                if status == "holds" and frobenius:
                    cert = _kyfan(op_arrays[op.id]["A"], lower["rank"], br.eps,
                                  Fraction(r["chi"]), mem)
                    counts["kyfan_missing"] += cert is None
            ends.append({**base, "end": "lower", "kind": lower["kind"], "rank": lower["rank"],
                         "kernel": status, "certificate": cert})
        if r.get("nonzero_check"):
            ends.append({**base, "end": "lower", "kind": "nonzero", "rank": 1,
                         "kernel": r["nonzero_check"]["status"], "certificate": None})
    counts["ends"] = len(ends)
    counts["kernel_proved"] = sum(e["kernel"] == "holds" for e in ends)
    doc = {"format": FORMAT, "version": VERSION, "store": str(reader.header.get(
        "description", "")), "operators": list(ops.values()), "ends": ends}
    mem.files["bundle.json"] = json.dumps(doc, indent=0, sort_keys=True).encode("utf-8")
    manifest = {"format": FORMAT, "version": VERSION, "about": ABOUT,
                "files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                          for n, b in sorted(mem.files.items())}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        for name, data in sorted(mem.files.items()):
            zf.writestr(name, data)
    write_atomic(out, lambda fh: fh.write(buf.getvalue()))
    counts["bytes"] = len(buf.getvalue())
    counts["manifest_sha256"] = hashlib.sha256(
        json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")).hexdigest()
    return counts


def _kyfan(A: np.ndarray, L: int, eps: Fraction, chi: Fraction, mem: _Members
           ) -> dict[str, Any] | None:
    m = A.shape[0]
    t = eps + chi
    c = kyfan_certificate(A, L, m * t * t)
    if c is None:
        return None
    out: dict[str, Any] = {"side": c["side"]}
    if "z" in c:
        out.update(z=str(c["z"]), G=mem.array(c["G"]), C=mem.array(c["C"]))
    return out


def check_bundle_target(path: str, field: str) -> None:
    """Raises InputError naming ``field`` when a bundle cannot be written at ``path``: its
    folder is missing or not a folder, or the path itself is a folder."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InputError(f"{path} is a folder, not a bundle file", field=field)
    if not parent.is_dir():
        raise InputError(f"{parent} is not an existing folder", field=field)
