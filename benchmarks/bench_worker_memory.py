"""Memory per Dask worker and check time per operator on real-size heads.

Builds (in ``--dir``, default a temporary folder) one store per ``--sizes`` (default 128 and
512) of ``--operators`` (one count per size, default 96 and 16) float64 operators of n x n
whose operator of record is the row softmax of stored float64 logits (Q K^T / sqrt(32),
gaussian Q and K, as ``bench_corpus.py``), each with three brackets (eps 0.15, 0.25, 0.35:
least-rank truncated-SVD factors and the largest pseudoinverse decoder certificate, from
``bench_corpus._witnesses``).  For each store it prints the serial check time per operator
(wall and CPU, this process), then checks it on a fresh two-worker LocalCluster (one thread
each, automatic batching) and prints each worker process's resident memory before the run
(idle, package imported) and its peak during the run (``ru_maxrss``), with the number of Dask
tasks sent.  ``--reader-store STORE`` also prints the memory a worker's store reader takes
(every record of STORE, held for the whole run).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_worker_memory.py
[--sizes 128 512] [--operators 96 16] [--reader-store STORE]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_corpus import EPS, _witnesses  # noqa: E402


def build(path: Path, n_ops: int, size: int, seed: int = 0) -> None:
    from softrank.witnesses import Store

    if (path / "store.json").exists():
        return
    rng = np.random.default_rng(seed)
    with Store.create(path, description="bench_worker_memory") as st:
        for o in range(n_ops):
            d = 32
            Q = rng.standard_normal((size, d)) * rng.uniform(0.8, 2.0)
            K = rng.standard_normal((size, d))
            L = Q @ K.T / np.sqrt(d)
            E = np.exp(L - L.max(axis=1, keepdims=True))
            A = E / E.sum(axis=1, keepdims=True)
            oid = st.add_operator(A, family="synthetic", logits=L, id=f"op{o:05d}")
            Us, s, Vt = np.linalg.svd(A, full_matrices=False)
            for e in EPS:
                up, lo = _witnesses(A, float(e), Us, s, Vt)
                st.add_bracket(oid, e, up, lo, id=f"{oid}-e{e}")


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _warm() -> int:
    import softrank.recheck  # noqa: F401  (what a task imports first)

    return 0


def measure(store: Path, n_ops: int) -> None:
    from distributed import Client, LocalCluster

    from softrank.audit.batching import chunk_works
    from softrank.audit.executors import DaskExecutor
    from softrank.audit.journal import store_digest
    from softrank.recheck import operator_chunks
    from softrank.runner import iter_checks
    from softrank.witnesses import open_store

    t0, c0 = time.perf_counter(), time.process_time()
    serial = list(iter_checks(store))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"  serial: {len(serial)} records, {1e3 * wall / n_ops:.1f} ms wall, "
          f"{1e3 * cpu / n_ops:.1f} ms CPU per operator; store "
          f"{sum(p.stat().st_size for p in store.rglob('*') if p.is_file()) / 2**20:.1f} MiB")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=50)
    client = Client(cluster)
    try:
        client.run(_warm)
        idle = client.run(_rss)
        ex = DaskExecutor(client)  # what iter_checks(store, scheduler=client) runs
        reader = open_store(store)
        chunks = operator_chunks(reader.brackets)
        path = str(store.resolve())
        t0 = time.perf_counter()
        recs = list(ex.run((path, store_digest(path)), chunks, "auto", None,
                           chunk_works(reader, chunks)))
        wall = time.perf_counter() - t0
        peak, now = client.run(_peak), client.run(_rss)
        assert sorted(r["bracket"] for r in recs) == sorted(r["bracket"] for r in serial)
        print(f"  LocalCluster: {len(recs)} records in {wall:.2f} s, {ex.tasks} tasks")
        for a in sorted(idle):
            print(f"    worker {a}: idle {idle[a] / 2**20:.0f} MiB, peak {peak[a] / 2**20:.0f} "
                  f"MiB, after {now[a] / 2**20:.0f} MiB")
    finally:
        client.close()
        cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--operators", type=int, nargs="+", default=[96, 16],
                    help="operators per size, one number per --sizes (default 96 16)")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--reader-store", type=Path, default=None,
                    help="also print the memory and time of opening this store's records "
                         "(what each worker holds: every record of the store)")
    args = ap.parse_args()
    if len(args.operators) != len(args.sizes):
        raise SystemExit("give one --operators count per --sizes value")
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-worker-memory-"))
    print(f"load {os.getloadavg()[0]:.2f}; stores in {root}")
    for n, count in zip(args.sizes, args.operators, strict=True):
        store = root / f"heads{n}x{count}"
        t0 = time.perf_counter()
        build(store, count, n)
        print(f"{count} operators {n} x {n} (float64, logits, 3 eps, factors + "
              f"decoder): built in {time.perf_counter() - t0:.1f} s")
        measure(store, count)
    if args.reader_store is not None:
        reader_memory(args.reader_store)
    print(f"load {os.getloadavg()[0]:.2f}")


def reader_memory(path: Path) -> None:
    """Prints the resident memory and time of a worker's store reader (``executors._reader``:
    the StoreReader and a dict of its brackets) for the store at ``path``."""
    import gc

    from softrank.audit.executors import _reader
    from softrank.audit.journal import store_digest

    p = str(path.resolve())
    ref = (p, store_digest(p))
    gc.collect()
    before = _rss()
    t0 = time.perf_counter()
    reader, by_id = _reader(ref)
    wall = time.perf_counter() - t0
    gc.collect()
    grown = _rss() - before
    n = len(by_id)
    print(f"store reader of {path}: {len(reader.operators)} operators, {n} brackets: opened "
          f"in {wall:.2f} s, {grown / 2**20:.1f} MiB ({grown / max(1, n) / 1024:.2f} KiB per "
          f"bracket)")


if __name__ == "__main__":
    main()
