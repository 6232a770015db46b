"""The local process executor keeps a bounded window of queued chunks.

Queuing one future per chunk up front made the parent's ``wait`` loop quadratic in the
number of operators; these tests pin the bound and that every chunk still runs once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from softrank.audit import executors


class _CountingPool(ThreadPoolExecutor):
    """A thread pool standing in for the process pool: counts chunks queued but not done."""

    live = 0
    peak = 0
    lock = threading.Lock()

    def __init__(self, max_workers, initializer=None, initargs=()):
        super().__init__(max_workers=max_workers)

    def submit(self, fn, *args, **kwargs):
        with _CountingPool.lock:
            _CountingPool.live += 1
            _CountingPool.peak = max(_CountingPool.peak, _CountingPool.live)
        fut = super().submit(fn, *args, **kwargs)

        def done(_):
            with _CountingPool.lock:
                _CountingPool.live -= 1
        fut.add_done_callback(done)
        return fut


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_window_bounds_queued_chunks_and_runs_each_once(monkeypatch, workers):
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _CountingPool)
    monkeypatch.setattr(executors, "check_chunk",
                        lambda store, ids, tier: [{"bracket": i} for i in ids])
    _CountingPool.live = _CountingPool.peak = 0
    chunks = [[f"b{k}a", f"b{k}b"] for k in range(200)]
    out = list(executors.ProcessExecutor(workers).run(("s", "d"), chunks, "auto"))
    assert sorted(r["bracket"] for r in out) == sorted(i for c in chunks for i in c)
    assert _CountingPool.peak <= executors.WINDOW_PER_WORKER * workers
    assert _CountingPool.peak >= min(len(chunks), workers)  # every worker had work


def test_window_error_in_a_chunk_propagates(monkeypatch):
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _CountingPool)

    def boom(store, ids, tier):
        if ids == ["x7"]:
            raise RuntimeError("worker failed")
        return [{"bracket": i} for i in ids]
    monkeypatch.setattr(executors, "check_chunk", boom)
    with pytest.raises(RuntimeError, match="worker failed"):
        list(executors.ProcessExecutor(2).run(("s", "d"), [[f"x{k}"] for k in range(20)],
                                              "auto"))
