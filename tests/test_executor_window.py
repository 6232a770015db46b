"""The local process executor keeps a bounded window of queued chunks.

Queuing one future per chunk up front made the parent's ``wait`` loop quadratic in the
number of operators; these tests pin the bound and that every chunk still runs once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from softrank.audit import executors
from softrank.audit.batching import TARGET_TASK_WORK


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


@pytest.mark.parametrize("workers", [1, 2])
def test_pool_tasks_group_chunks_by_their_estimated_work(monkeypatch, workers):
    seen: list[list[list[str]]] = []
    real = executors.check_batch

    def batch(store, chunks, tier, *extra):
        seen.append([list(c) for c in chunks])
        return real(store, chunks, tier, *extra)
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _CountingPool)
    monkeypatch.setattr(executors, "check_batch", batch)
    monkeypatch.setattr(executors, "check_chunk", _one_record_each)
    chunks = [[f"b{k}a", f"b{k}b"] for k in range(200)]
    # cheap chunks: at most 200 // (4 x POOL_SPREAD x workers) per task, each chunk once
    out = list(executors.ProcessExecutor(workers).run(("s", "d"), chunks, "auto", None,
                                                      [1.0] * 200))
    assert sorted(r["bracket"] for r in out) == sorted(i for c in chunks for i in c)
    assert sorted(c for task in seen for c in task) == sorted(chunks)
    assert len(seen) == -(-200 // min(64, 200 // (4 * executors.POOL_SPREAD * workers)))
    assert len(seen) < 200
    # a chunk estimated above the target travels alone; without estimates, one per task
    seen.clear()
    list(executors.ProcessExecutor(workers).run(("s", "d"), chunks[:10], "auto", None,
                                                [TARGET_TASK_WORK * 2.0] * 10))
    assert sorted(len(t) for t in seen) == [1] * 10
    seen.clear()
    list(executors.ProcessExecutor(workers).run(("s", "d"), chunks[:10], "auto"))
    assert sorted(len(t) for t in seen) == [1] * 10


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


# ------------------------------------------------------------------ batches handed over


def _one_record_each(store, ids, tier):
    return [{"bracket": i} for i in ids]


def test_serial_batches_follow_the_estimated_work_and_keep_the_order(monkeypatch):
    monkeypatch.setattr(executors, "check_chunk", _one_record_each)
    chunks = [[f"b{k}"] for k in range(40)]
    ser = executors.SerialExecutor()
    # tiny estimates: batching.batches with one worker, at most 40 // 4 = 10 chunks a batch
    got = list(ser.run_batches(("s", "d"), chunks, "auto", None, [1.0] * 40))
    assert [len(b) for b in got] == [10, 10, 10, 10]
    assert [r["bracket"] for b in got for r in b] == [c[0] for c in chunks]
    # a chunk estimated above the target is a batch of its own
    works = [1.0] * 40
    works[3] = 10 * TARGET_TASK_WORK
    sizes = [len(b) for b in ser.run_batches(("s", "d"), chunks, "auto", None, works)]
    assert sizes[:3] == [3, 1, 10] and sum(sizes) == 40
    # no estimates: one chunk a batch; run() is the same records, flat
    assert [len(b) for b in ser.run_batches(("s", "d"), chunks, "auto")] == [1] * 40
    assert list(ser.run(("s", "d"), chunks, "auto", None, [1.0] * 40)) == [
        r for b in got for r in b]


def test_serial_batch_is_handed_over_once_it_has_filled_long_enough(monkeypatch):
    monkeypatch.setattr(executors, "check_chunk", _one_record_each)
    monkeypatch.setattr(executors, "SERIAL_BATCH_SECONDS", 0.0)
    chunks = [[f"b{k}"] for k in range(40)]
    got = list(executors.SerialExecutor().run_batches(("s", "d"), chunks, "auto", None,
                                                       [1.0] * 40))
    assert [len(b) for b in got] == [1] * 40


def test_serial_error_hands_over_the_records_checked_before_it(monkeypatch):
    def boom(store, ids, tier):
        if ids == ["b5"]:
            raise RuntimeError("kernel failed")
        return [{"bracket": i} for i in ids]
    monkeypatch.setattr(executors, "check_chunk", boom)
    chunks = [[f"b{k}"] for k in range(40)]
    it = executors.SerialExecutor().run_batches(("s", "d"), chunks, "auto", None, [1.0] * 40)
    assert [r["bracket"] for r in next(it)] == ["b0", "b1", "b2", "b3", "b4"]
    with pytest.raises(RuntimeError, match="kernel failed"):
        next(it)


def test_pool_batches_hold_every_record_once(monkeypatch):
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _CountingPool)
    monkeypatch.setattr(executors, "check_chunk", _one_record_each)
    chunks = [[f"b{k}a", f"b{k}b"] for k in range(50)]
    got = list(executors.ProcessExecutor(2).run_batches(("s", "d"), chunks, "auto"))
    flat = [r["bracket"] for b in got for r in b]
    assert sorted(flat) == sorted(i for c in chunks for i in c)
    # a batch is whole chunks (never a chunk split across batches), at most the window
    assert all(b and len(b) % 2 == 0 and len(b) <= 2 * executors.WINDOW_PER_WORKER * 2
               for b in got)


# ------------------------------------------------------------------ every record accounted


@pytest.mark.parametrize("fault", ["drop", "repeat", "stranger"])
def test_a_missing_repeated_or_unasked_record_is_an_internal_error(monkeypatch, fault):
    def faulty(store, ids, tier):
        recs = [{"bracket": i} for i in ids]
        if ids == ["b7"]:
            recs = {"drop": [], "repeat": recs + recs, "stranger": [{"bracket": "zz"}]}[fault]
        return recs
    monkeypatch.setattr(executors, "check_chunk", faulty)
    chunks = [[f"b{k}"] for k in range(20)]
    for ex in (executors.SerialExecutor(), _pool_executor(monkeypatch)):
        got = []
        with pytest.raises(executors.LostRecordsError):
            for rec in ex.run(("s", "d"), chunks, "auto"):
                got.append(rec["bracket"])
        assert len(got) <= 20 and len(set(got)) == len(got)


def _pool_executor(monkeypatch):
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _CountingPool)
    return executors.ProcessExecutor(2)


def test_accounting_passes_a_complete_run_through_unchanged(monkeypatch):
    monkeypatch.setattr(executors, "check_chunk", _one_record_each)
    chunks = [[f"b{k}a", f"b{k}b"] for k in range(30)]
    out = list(executors.SerialExecutor().run(("s", "d"), chunks, "auto"))
    assert [r["bracket"] for r in out] == [i for c in chunks for i in c]


class _FakeFuture:
    def __init__(self, key, records, lose_once):
        self.key, self.records, self.lose_once = key, records, lose_once
        self.status = "finished"

    def result(self):
        return self.records

    def release(self):
        pass


class _FakeAsCompleted:
    """Hands back every added future; a future marked ``lose_once`` comes back first as
    ``lost`` (its worker died after it finished), then finished once it is added again."""

    def __init__(self):
        self.queue = []

    def add(self, fut):
        self.queue.append(fut)

    def batches(self):
        while self.queue:
            fut = self.queue.pop(0)
            if fut.lose_once:
                fut.lose_once, fut.status = False, "lost"
            else:
                fut.status = "finished"
            yield [fut]


class _FakeClient:
    def __init__(self, lose):
        self.lose, self.n = lose, 0

    def submit(self, fn, store, chunks, tier, *extra, pure):
        self.n += 1
        recs = [{"bracket": i} for c in chunks for i in c]
        return _FakeFuture(f"k{self.n}", recs, lose_once=self.n in self.lose)

    def cancel(self, futs):
        pass


def test_dask_task_whose_result_was_lost_is_awaited_again_not_dropped(monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(distributed, "as_completed", _FakeAsCompleted)
    ex = object.__new__(executors.DaskExecutor)
    ex.client, ex._owned, ex.workers, ex.batch, ex.tasks = _FakeClient({2, 5}), False, 2, None, 0
    chunks = [[f"b{k}a", f"b{k}b"] for k in range(12)]
    out = [r["bracket"] for r in ex.run(("s", "d"), chunks, "auto")]
    assert sorted(out) == sorted(i for c in chunks for i in c)
    assert ex.tasks == 12  # the lost tasks were awaited again, not submitted twice
