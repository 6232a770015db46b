"""Writing a replay bundle: a zip of JSON (exact rationals as strings) and raw arrays.

Layout (read by replay/replay.py; described in proofs_notes/replay.md):

* ``manifest.json``: format, version, a description, and for every other member its byte
  length and sha256;
* ``bundle.json``: the operators (stored A, logits or block, beta, the least chi the
  kernel charged on the operator's records) and the
  ends (bracket, operator, eps, kind, rank, the kernel's status, the certificate's arrays);
* ``arrays/<sha256>.bin``: raw little-endian arrays (``<f8``, ``<f4`` or ``<i8``), named by
  content, so an array shared by several ends is stored once.

Every end of a bracket is written from the one bracket record, so all of them name its
operator and eps, and its ``end`` label is ``upper`` (kind factors) or ``lower`` (the claimed
lower kind, and the nonzero fallback beside it): the replayer refuses any other bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.certify.numerics import workbound
from softrank.certify.numerics.workbound import DEFAULT_MAX_WORK
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
               "polytope": ("Y", "I", "F", "Z", "G"), "nerve": ("T", "Z", "G")}


# The replayer's archive limits (replay/replay.py imports nothing from here, so a test
# keeps the two equal): a bundle it would refuse is not written.
MAX_MEMBER, MAX_TOTAL, MAX_MEMBERS, MAX_RATIO, RATIO_FREE = 1 << 30, 1 << 31, 100_000, 100, 32 << 20


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
                 frobenius: bool = True, digest: str | None = None,
                 max_work: int | None = None, force: bool = True,
                 field: str = "--out") -> dict[str, Any]:
    """Writes the bundle of ``records`` (the check records of ``store``) to ``out`` atomically:
    over a regular file or a link at ``out`` only with ``force`` (the commands pass their
    --force, default off), never over anything else (checked when the file is put in place,
    after the work; InputError naming ``field``, the option that named ``out``).

    Every end of every record is exported with its kernel status; frobenius_tail ends the
    kernel proved get a Ky Fan certificate when the search finds one within ``max_work``
    work units an end (``frobenius=False`` skips the search).  Returns counts for reports.

    Raises InputError (nothing written) when a record is an input error (each is named),
    when the store's record files are no longer those of ``digest`` (the digest of the
    records the checks read: the arrays written must be the ones checked), when a record
    names a bracket the store does not hold, or when the archive would pass the replayer's
    limits.
    """
    recs = list(records)
    errors = [r for r in recs if "error" in r]
    if errors:
        shown_errors = "; ".join(str(r.get("error"))[:300] for r in errors[:5])
        raise InputError(f"{len(errors)} brackets are input errors, so no bundle is written "
                         f"(a bundle without them would replay as complete): {shown_errors}",
                         field="records")
    reader = open_store(store)
    if digest is not None and reader.digest != digest:
        raise InputError("the store's record files changed since its brackets were checked; "
                         "no bundle is written", field="store", source=str(store))
    by_id = {b.id: b for b in reader.brackets}
    mem = _Members()
    ops: dict[str, dict[str, Any]] = {}
    ends: list[dict[str, Any]] = []
    counts = {"ends": 0, "kernel_proved": 0, "kyfan_missing": 0}
    # an operator's records may charge different chi (the cheap one, or arb's where it
    # changed an outcome): each is a proved bound, so the least serves every end proved
    chi: dict[str, Fraction] = {}
    for r in recs:
        c = Fraction(r["chi"])
        chi[r["operator"]] = min(c, chi.get(r["operator"], c))
    current: tuple[str, dict[str, Any]] | None = None  # one operator's arrays at a time
    for r in sorted(recs, key=lambda r: (str(r["operator"]), str(r["bracket"]))):
        br = by_id.get(r["bracket"])
        if br is None or br.operator != r["operator"]:
            raise InputError(f"the store holds no bracket {r['bracket']} of operator "
                             f"{r['operator']}", field="bracket", source=str(store))
        op = reader.operator(br.operator)
        if current is None or current[0] != op.id:
            current = (op.id, op.load())
            arrs = current[1]
            entry: dict[str, Any] = {"id": op.id, "shape": list(op.shape),
                                     "A": mem.array(arrs["A"]),
                                     "chi": str(chi[op.id])}
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
                    cert = _kyfan(current[1]["A"], lower["rank"], br.eps,
                                  chi[op.id], mem, max_work)
                # without one the replayer cannot confirm the end, whatever the reason
                counts["kyfan_missing"] += cert is None
            ends.append({**base, "end": "lower", "kind": lower["kind"], "rank": lower["rank"],
                         "kernel": status, "certificate": cert})
        if r.get("nonzero_check"):
            ends.append({**base, "end": "lower", "kind": "nonzero", "rank": 1,
                         "kernel": r["nonzero_check"]["status"], "certificate": None})
    current = None
    ends.sort(key=lambda e: e["bracket"])  # stable: a bracket's ends keep their order
    counts["ends"] = len(ends)
    counts["kernel_proved"] = sum(e["kernel"] == "holds" for e in ends)
    doc = {"format": FORMAT, "version": VERSION, "store": str(reader.header.get(
        "description", "")), "operators": [ops[k] for k in sorted(ops)], "ends": ends}
    mem.files["bundle.json"] = json.dumps(doc, indent=0, sort_keys=True).encode("utf-8")
    manifest = {"format": FORMAT, "version": VERSION, "about": ABOUT,
                "files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                          for n, b in sorted(mem.files.items())}}
    man = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    _within_replay_limits(mem.files, len(man))
    # highly compressible arrays (one-hot rows) would pass the replayer's ratio limit, which
    # guards it against zip bombs: past its free allowance such members are stored
    free = len(man) + sum(len(b) for b in mem.files.values()) <= RATIO_FREE

    def write(fh: Any) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("manifest.json", man)
            for name, data in sorted(mem.files.items()):
                zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if free
                            else _compress_type(data))

    write_atomic(out, write, field=field, replace=force)
    counts["bytes"] = Path(out).stat().st_size
    counts["manifest_sha256"] = hashlib.sha256(man).hexdigest()
    return counts


def _compress_type(data: bytes) -> int:
    """Deflate a member unless it shrinks below 1/MAX_RATIO (50 times, to leave room for the
    archive's own totals): stored, it can never trip the replayer's ratio limit."""
    if len(data) < 4096:
        return zipfile.ZIP_DEFLATED
    packed = len(zlib.compress(data))  # the level zipfile deflates with
    return zipfile.ZIP_DEFLATED if packed * (MAX_RATIO // 2) >= len(data) else zipfile.ZIP_STORED


def _within_replay_limits(files: Mapping[str, bytes], manifest_bytes: int) -> None:
    sizes = [manifest_bytes, *(len(b) for b in files.values())]
    if len(sizes) > MAX_MEMBERS or max(sizes) > MAX_MEMBER or sum(sizes) > MAX_TOTAL:
        raise InputError(f"the bundle would hold {len(sizes)} members of {sum(sizes)} bytes "
                         f"(largest {max(sizes)}): above the replayer's limits ({MAX_MEMBERS} "
                         f"members, {MAX_MEMBER} a member, {MAX_TOTAL} in all); no bundle is "
                         "written", field="--out")


def _kyfan(A: np.ndarray, L: int, eps: Fraction, chi: Fraction, mem: _Members,
           max_work: int | None) -> dict[str, Any] | None:
    m = A.shape[0]
    t = eps + chi
    try:
        with workbound.metered(DEFAULT_MAX_WORK if max_work is None else max_work):
            c = kyfan_certificate(A, L, m * t * t)
    except workbound.WorkLimit:
        return None
    if c is None:
        return None
    out: dict[str, Any] = {"side": c["side"]}
    if "z" in c:
        out.update(z=str(c["z"]), G=mem.array(c["G"]), C=mem.array(c["C"]))
    return out


def check_bundle_target(path: str, field: str, force: bool = False) -> None:
    """Raises InputError naming ``field`` when a bundle cannot be written at ``path``: its
    folder is missing or not a folder, the path itself is a folder, anything but a regular
    file (a device, a FIFO, a socket or a link: the atomic write would replace it with the
    bundle, and /dev/null run as root became a regular file), or a regular file and not
    ``force``."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InputError(f"{path} is a folder, not a bundle file", field=field)
    if not parent.is_dir():
        raise InputError(f"{parent} is not an existing folder", field=field)
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(f"{path} exists and is not a regular file (a device, FIFO, socket "
                         "or link): it is never replaced", field=field)
    if mode is not None and not force:
        raise InputError(f"{path} exists (use --force to replace it)", field=field)
