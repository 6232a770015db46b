"""Stores for the report and diff tests: a subset of the shipped example store, and a copy of a
store with one witness tampered (its sha256 updated, so the store stays valid and only the
check can notice)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "minilm"


def example_subset(dst: Path, operators: list[str]) -> Path:
    """Copies the example store restricted to ``operators`` (their arrays, brackets and
    records unchanged) to ``dst``; returns dst."""
    dst.mkdir(parents=True)
    (dst / "arrays").mkdir()
    shutil.copy(EXAMPLE / "store.json", dst / "store.json")
    for name in ("operators.jsonl", "brackets.jsonl"):
        keep = []
        for line in (EXAMPLE / name).read_text().splitlines():
            rec = json.loads(line)
            if (rec["id"] if name == "operators.jsonl" else rec["operator"]) in operators:
                keep.append(line)
                shutil.copy(EXAMPLE / rec["file"], dst / rec["file"])
        (dst / name).write_text("\n".join(keep) + "\n")
    return dst


def tamper_witness(src: Path, dst: Path, bracket: str, factor: float = 1.5) -> Path:
    """Copies store ``src`` to ``dst`` with the upper factor U of ``bracket`` scaled by
    ``factor`` and the bracket's sha256 updated; returns dst."""
    shutil.copytree(src, dst)
    lines = []
    for line in (dst / "brackets.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"] == bracket:
            f = dst / rec["file"]
            with np.load(f) as z:
                arrays = {k: z[k] for k in z.files}
            arrays["upper.U"] = arrays["upper.U"] * arrays["upper.U"].dtype.type(factor)
            with open(f, "wb") as fh:
                np.savez_compressed(fh, **arrays)
            rec["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
            line = json.dumps(rec, sort_keys=True)
        lines.append(line)
    (dst / "brackets.jsonl").write_text("\n".join(lines) + "\n")
    return dst
