"""Replay (exact integers, standard library) vs the kernel vs a plain float64 check.

On the brackets of a few operators of the shipped example store, times in one process:
the plain float64 evaluation of every end (||A - U V||_row1, ||A||_row1, the decoder value),
the kernel's check (``softrank.runner.iter_checks``), and the replayer on an exported bundle,
without and with the flint fast path; prints each as a ratio to the plain float64 time.

Run: .venv/bin/python benchmarks/bench_replay.py [--operators 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay import replay as rp  # noqa: E402
from softrank.export import write_bundle  # noqa: E402
from softrank.runner import iter_checks  # noqa: E402
from softrank.witnesses import open_store  # noqa: E402

STORE = ROOT / "examples" / "minilm"


def plain(reader, ids: list[str]) -> None:
    """The float64 numbers the producers print, no rounding control."""
    by_id = {b.id: b for b in reader.brackets}
    for i in ids:
        br = by_id[i]
        A = reader.operator(br.operator).load()["A"]
        up, low = br.load()
        np.abs(A - up["U"].astype(float) @ up["V"].astype(float)).sum(1).max()
        np.abs(A).sum(1).max()
        if low and low["kind"] == "decoder":
            X, D, W = (low[k].astype(float) for k in ("X", "D", "W"))
            R = np.eye(len(X)) - X @ (D @ A @ W)
            np.abs(R).sum(1).max() + np.abs(X @ D).sum(1).max() * np.abs(W).sum(1).max()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, default=2)
    args = ap.parse_args()
    reader = open_store(STORE)
    ops = sorted({b.operator for b in reader.brackets})[: args.operators]
    ids = [b.id for b in reader.brackets if b.operator in ops]
    t = time.perf_counter()
    plain(reader, ids)
    base = time.perf_counter() - t
    t = time.perf_counter()
    records = list(iter_checks(STORE, ids=ids))
    kernel = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "b.zip"
        write_bundle(STORE, records, out)
        t = time.perf_counter()
        s = rp.replay(str(out))
        std = time.perf_counter() - t
        rp.FLINT = __import__("flint")
        t = time.perf_counter()
        rp.replay(str(out))
        fast = time.perf_counter() - t
        rp.FLINT = None
    print(json.dumps({"operators": len(ops), "brackets": len(ids), "ends": s["ends"],
                      "replayed_proved": s["replayed_proved"], "plain_s": round(base, 4),
                      "kernel_ratio": round(kernel / base, 1),
                      "replay_stdlib_ratio": round(std / base, 1),
                      "replay_flint_ratio": round(fast / base, 1)}))


if __name__ == "__main__":
    main()
