"""Per-task overhead of checking a store serially, in local worker processes and on a Dask
LocalCluster, one operator per task and batched: many small operators, so the time is the
machinery's, not the kernel's.

Builds (in ``--dir``, default a temporary folder) a store of ``--operators`` N x N row-softmax
operators (default 10,000 of 8 x 8), each with one bracket (rank-N/2 truncated-SVD factors and a
``nonzero`` lower certificate), then times ``softrank.runner.iter_checks`` serially, with
``--jobs 2`` and on a two-worker LocalCluster (one thread each) for each ``--batches`` value
(operators per Dask task; default ``1,auto``), and prints wall seconds, records per second,
the CPU seconds of this process (the client: what it spends per record bounds the rate one
client sustains) and the overhead per operator against the serial run
(wall x workers / N - serial / N; per task: that times operators per task).

Last it times what the single writer does per record: ``audit`` appends each record to its
journal (HMAC, one fsync per record, then one fsync per 64 records as a Dask task of 64
operators delivers them) and ``produce`` adds each bracket to the store (one npz
file and one JSON line per bracket).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scheduler.py
[--operators 10000] [--size 8] [--batches 1,auto,256]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
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


def _cpu() -> float:
    """CPU seconds of this process (with a LocalCluster: the client and the scheduler) and
    of its reaped children (the --jobs pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(label: str, fn, client=None) -> tuple[float, float, list]:  # noqa: ANN001
    """Runs ``fn`` and returns (wall seconds, CPU seconds of every process that worked: this
    one, the pool's workers, the Dask workers of ``client``, records)."""
    w0 = sum(client.run(_own_cpu).values()) if client is not None else 0.0
    t0, c0 = time.perf_counter(), _cpu()
    recs = list(fn())
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    workers = sum(client.run(_own_cpu).values()) - w0 if client is not None else 0.0
    n = len(recs)
    print(f"{label:<32} {n:>7} records  {wall:8.2f} s wall  {n / wall:8.1f} records/s  "
          f"CPU: this process {cpu:6.2f} s ({1e3 * cpu / n:.3f} ms/record), workers "
          f"{workers:6.2f} s  load {os.getloadavg()[0]:.2f}", flush=True)
    return wall, cpu + workers, recs


def writers(root: Path, store: Path, records: list, size: int) -> None:
    """Times the single writer's work per record: journal appends (audit) and store
    brackets (produce)."""
    from softrank import __version__
    from softrank.audit.journal import Journal, journal_key
    from softrank.witnesses import Store

    key = journal_key(store, "auto", __version__)
    out = root / "journal-out"
    out.mkdir(exist_ok=True)
    with Journal.open(out, key, restart=True) as journal:
        t0 = time.perf_counter()
        for r in records:
            journal.append(r)
        wall = time.perf_counter() - t0
    print(f"audit journal append (fsync each): {len(records)} records {wall:.2f} s, "
          f"{len(records) / wall:.0f} records/s", flush=True)
    # what audit does since the group commit: one fsync per batch that arrives together (a
    # Dask task holds at most batching.MAX_BATCH operators, one record each here)
    from softrank.audit.batching import MAX_BATCH

    with Journal.open(out, key, restart=True) as journal:
        t0 = time.perf_counter()
        for i in range(0, len(records), MAX_BATCH):
            journal.append_many(records[i:i + MAX_BATCH])
        wall = time.perf_counter() - t0
    print(f"audit journal append_many ({MAX_BATCH} per fsync): {len(records)} records "
          f"{wall:.2f} s, {len(records) / wall:.0f} records/s", flush=True)
    rng = np.random.default_rng(1)
    for n, count in ((size, min(len(records), 2000)), (128, min(len(records), 500))):
        L = rng.normal(size=(n, n))
        A = np.exp(L - L.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        u, s, vt = np.linalg.svd(A)
        k = n // 2
        up = {"kind": "factors", "rank": k, "U": u[:, :k] * s[:k], "V": vt[:k]}
        target = root / f"writer-{n}"
        shutil.rmtree(target, ignore_errors=True)  # a fresh store on every run
        with Store.create(target) as st:
            st.add_operator(A, family="bench", id="op")
            t0 = time.perf_counter()
            for i in range(count):
                st.add_bracket("op", f"{i + 1}/{count + 1}", up, {"kind": "nonzero", "rank": 1},
                               id=f"b{i:06d}")
            st.flush()
            wall = time.perf_counter() - t0
        print(f"produce store.add_bracket, {n} x {n} rank {k}: {count} brackets {wall:.2f} s, "
              f"{count / wall:.0f} brackets/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--operators", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--batches", default="1,auto",
                    help="operators per Dask task to time, comma-separated (default 1,auto)")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    from softrank.audit.batching import batches, chunk_works, parse_batch
    from softrank.recheck import operator_chunks
    from softrank.runner import iter_checks
    from softrank.witnesses import open_store

    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    t0 = time.perf_counter()
    store = build(root, args.operators, args.size)
    print(f"store of {args.operators} operators ({args.size} x {args.size}) in {store}: "
          f"built in {time.perf_counter() - t0:.1f} s")
    reader = open_store(store)
    chunks = operator_chunks(reader.brackets)
    n = args.operators
    serial, serial_cpu, records = timed("serial", lambda: iter_checks(store))
    runs = {"--jobs 2": timed("--jobs 2", lambda: iter_checks(store, jobs=2))[:2]}
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=50)
    client = Client(cluster)
    tasks = {}
    try:
        for b in args.batches.split(","):
            k = parse_batch(b)
            tasks[b] = len(batches(chunk_works(reader, chunks), 2, k))
            label = f"LocalCluster, batch {b}"
            runs[label] = timed(f"{label} ({tasks[b]} tasks)",
                                lambda k=k: iter_checks(store, scheduler=client, batch=k),
                                client)[:2]
    finally:
        client.close()
        cluster.close()
    print(f"serial per operator: {1e3 * serial / n:.2f} ms wall, {1e3 * serial_cpu / n:.2f} ms "
          "CPU")
    for label, (wall, cpu) in runs.items():
        b = label.rsplit(" ", 1)[-1]
        over = 2 * wall / n - serial / n
        extra = (cpu - serial_cpu) / n  # CPU every process spent beyond the serial run's
        line = (f"{label}: speed-up {serial / wall:.2f}x on 2 workers; overhead per operator "
                f"{1e3 * over:.3f} ms by wall (wall x 2 / N - serial / N), {1e3 * extra:.3f} ms "
                "by CPU (all processes' CPU - serial CPU) / N")
        if b in tasks:
            line += (f"; per task ({n / tasks[b]:.1f} operators): "
                     f"{1e3 * extra * n / tasks[b]:.2f} ms CPU")
        print(line)
    writers(root, store, records, args.size)


if __name__ == "__main__":
    main()
