"""Per-task overhead of checking a store serially, in local worker processes and on a Dask
LocalCluster: many small operators, so the time is the machinery's, not the kernel's.

Builds (in ``--dir``, default a temporary folder) a store of ``--operators`` N x N row-softmax
operators (default 10,000 of 8 x 8), each with one bracket (rank-N/2 truncated-SVD factors and a
``nonzero`` lower certificate), then times ``softrank.runner.iter_checks`` serially, with
``--jobs 2`` and on a two-worker LocalCluster (one thread each), and prints wall seconds,
operators per second and the overhead per task against the serial run
(wall x workers / N - serial / N).

Run: ``.venv/bin/python benchmarks/bench_scheduler.py [--operators 10000] [--size 8]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def build(root: Path, n_ops: int, size: int) -> Path:
    from softrank.witnesses import Store

    store = root / "store"
    if (store / "store.json").exists():
        return store
    rng = np.random.default_rng(0)
    with Store.create(store, description="scheduler benchmark") as st:
        for i in range(n_ops):
            L = rng.normal(size=(size, size))
            A = np.exp(L - L.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            u, s, vt = np.linalg.svd(A)
            k = size // 2
            oid = st.add_operator(A, family="bench", id=f"op{i:06d}")
            st.add_bracket(oid, "0.5", {"kind": "factors", "rank": k, "U": u[:, :k] * s[:k],
                                        "V": vt[:k]},
                           {"kind": "nonzero", "rank": 1}, id=f"b{i:06d}")
    return store


def timed(label: str, fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    n = sum(1 for _ in fn())
    wall = time.perf_counter() - t0
    print(f"{label:<28} {n:>7} records  {wall:8.2f} s  {n / wall:8.1f} records/s  "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--operators", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    from softrank.runner import iter_checks

    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    t0 = time.perf_counter()
    store = build(root, args.operators, args.size)
    print(f"store of {args.operators} operators ({args.size} x {args.size}) in {store}: "
          f"built in {time.perf_counter() - t0:.1f} s")
    n = args.operators
    serial = timed("serial", lambda: iter_checks(store))
    jobs2 = timed("--jobs 2", lambda: iter_checks(store, jobs=2))
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=50)
    client = Client(cluster)
    try:
        dask2 = timed("LocalCluster, 2 workers", lambda: iter_checks(store, scheduler=client))
    finally:
        client.close()
        cluster.close()
    per = serial / n
    print(f"serial per operator: {1e3 * per:.2f} ms")
    for label, wall in (("--jobs 2", jobs2), ("LocalCluster", dask2)):
        print(f"{label}: speed-up {serial / wall:.2f}x on 2 workers, overhead per task "
              f"{1e3 * (2 * wall / n - per):.2f} ms (wall x workers / N - serial / N)")


if __name__ == "__main__":
    main()
