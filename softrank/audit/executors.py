"""Where bracket checks run: in this process, in a local process pool, or on a Dask cluster.

Every executor yields one record per requested bracket id (from
``softrank.recheck.check_record``), in completion order; the caller journals and sorts.
``run_batches`` yields the same records as lists of those that arrive together (the records
of every chunk or task that finished since the last list, or, serially, of consecutive chunks
of about a quarter second of estimated work), so the audit journals each list with one fsync
(``Journal.append_many``); ``run`` is its concatenation.
Work is cut into one chunk per operator, so a worker loads each operator's arrays (and
computes its slack chi) once in the whole run.  On Dask and in a pool, several chunks travel
as one task when their estimated work is given (``batching.batches``: about a quarter second
of estimated work, at most 64 operators), since a Dask task costs milliseconds of overhead and
a pool task a round of pickling in both processes; each chunk in a task is still checked alone.

Workers open the store themselves from its path: on a cluster, every worker must see the
store at that path (a shared file system).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Protocol

from softrank.certify.errors import InputError
from softrank.witnesses import StoreReader, open_store

from ..recheck import OperatorCache, check_record, operator_chunks
from ..workers import check_jobs, init_worker, terminate_workers
from .batching import batches

WINDOW_PER_WORKER = 4  # queued chunks per worker process (see ProcessExecutor.run)
# A serial run hands a batch over once it has been filling this long (seconds; looked at
# after each chunk), whatever the estimates said: a batch is journaled only when handed
# over, and a killed run checks what it held again.
SERIAL_BATCH_SECONDS = 0.25

StoreRef = tuple[str, str]  # (absolute store path, store_digest of it)

# One reader per worker process: opening a store parses and validates every record, which
# must not be paid per chunk on a corpus of thousands of brackets.  Keyed by (path, digest)
# so a long-lived (Dask) worker never reuses the records of a store since rewritten.
_READERS: dict[StoreRef, tuple[StoreReader, dict[str, Any]]] = {}
# python-flint's working precision is process-global, so two threads of one Dask worker must
# never run checks at the same time (the arb tier sets and restores it around each product).
_CHECK_LOCK = threading.Lock()


def _reader(store: StoreRef) -> tuple[StoreReader, dict[str, Any]]:
    if store not in _READERS:
        path, digest = store
        reader = open_store(path)
        if reader.digest != digest:  # the bytes parsed, not a second read of the files
            raise InputError("the store changed after the audit started (its record files no "
                             "longer match the journal's sha256); rerun the audit",
                             field="store", source=path)
        _READERS.clear()
        _READERS[store] = (reader, {b.id: b for b in reader.brackets})
    return _READERS[store]


def check_chunk(store: StoreRef, ids: Sequence[str], tier: str,
                max_work: int | None = None) -> list[dict[str, Any]]:
    """Worker entry point: returns the check records of brackets ``ids`` of the store
    ``store`` = (path, sha256 digest of its record files, see ``journal.store_digest``),
    each record's work bounded by ``max_work`` (None: the kernel's default).
    """
    with _CHECK_LOCK:
        reader, by_id = _reader(store)
        cache = OperatorCache(reader)
        return [check_record(reader, by_id[i], cache, tier=tier, max_work=max_work)
                for i in ids]


def check_batch(store: StoreRef, chunks: Sequence[Sequence[str]], tier: str,
                max_work: int | None = None) -> list[dict[str, Any]]:
    """Worker entry point of a Dask or pool task: returns the records of every chunk of
    ``chunks``, each chunk checked by ``check_chunk`` exactly as a task of its own would check
    it."""
    return [r for c in chunks for r in check_chunk(store, c, tier, *_extra(max_work))]


def _extra(max_work: int | None) -> tuple[int, ...]:
    """The optional last argument of ``check_chunk``: none for the default limit, so a
    chunk call reads as before when no limit was given."""
    return () if max_work is None else (int(max_work),)


def plan_chunks(reader: StoreReader, ids: Sequence[str], workers: int,
                max_chunk: int = 16) -> list[list[str]]:
    """Returns ``ids`` cut into one chunk per operator (``recheck.operator_chunks``).

    Every requested bracket of an operator is in the same chunk, so its arrays are loaded
    and its chi computed once in the whole run.  ``workers`` and ``max_chunk`` are kept for
    callers of the earlier signature and no longer change the plan.
    """
    wanted = set(ids)
    return operator_chunks(b for b in reader.brackets if b.id in wanted)


class Executor(Protocol):
    name: str
    workers: int

    def run(self, store: StoreRef, chunks: list[list[str]], tier: str,
            max_work: int | None = None, works: Sequence[float] | None = None
            ) -> Iterator[dict[str, Any]]: ...

    def run_batches(self, store: StoreRef, chunks: list[list[str]], tier: str,
                    max_work: int | None = None, works: Sequence[float] | None = None
                    ) -> Iterator[list[dict[str, Any]]]: ...


def _flatten(batches: Iterator[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Yields the records of ``batches`` one by one; closing this closes ``batches`` at once
    (a pool or a Dask client is stopped then, not when the generator is collected)."""
    try:
        for batch in batches:
            yield from batch
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def _split_failed(done: Iterable[Any], failed: Any) -> tuple[list[Any], list[Any]]:
    """Returns (the futures of ``done`` that finished normally, those that did not), so that
    the records of the first are handed over (and journaled) before an error propagates."""
    ok, bad = [], []
    for fut in done:
        (bad if failed(fut) else ok).append(fut)
    return ok, bad


class LostRecordsError(RuntimeError):
    """An executor handed over a record twice, one for a bracket nobody asked for, or ended
    without one for every requested bracket: an internal error, never a partial verdict."""


def _accounted(batches: Iterator[list[dict[str, Any]]], chunks: Sequence[Sequence[str]]
               ) -> Iterator[list[dict[str, Any]]]:
    """Yields ``batches`` unchanged and raises ``LostRecordsError`` as soon as a record is
    not for a requested bracket still owed, or at the end if any requested bracket got no
    record.  Why: a cluster that loses a finished task's result (its worker died before the
    result was fetched) must not shorten a report silently; a short report would read as a
    verdict on fewer brackets."""
    owed = {i for c in chunks for i in c}
    try:
        for batch in batches:
            for rec in batch:
                bid = rec.get("bracket")
                if bid not in owed:
                    raise LostRecordsError(f"executor returned an unexpected or repeated "
                                           f"record for bracket {str(bid)[:200]!r}")
                owed.discard(bid)
            yield batch
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
    if owed:
        raise LostRecordsError(f"executor ended without records for {len(owed)} of the "
                               f"requested brackets (first: {min(owed)[:200]!r})")


class _RecordsOfBatches:
    """``run`` and ``run_batches`` for executors that define ``_run_batches``: every record
    accounted for (``_accounted``), in lists or one at a time."""

    def run_batches(self, store: StoreRef, chunks: list[list[str]], tier: str,
                    max_work: int | None = None, works: Sequence[float] | None = None
                    ) -> Iterator[list[dict[str, Any]]]:
        """Yields the records of every requested bracket exactly once, as lists of those
        that arrived together (see the executor's ``_run_batches``)."""
        return _accounted(self._run_batches(store, chunks, tier,  # type: ignore[attr-defined]
                                            max_work, works), chunks)

    def run(self, store: StoreRef, chunks: list[list[str]], tier: str,
            max_work: int | None = None, works: Sequence[float] | None = None
            ) -> Iterator[dict[str, Any]]:
        return _flatten(self.run_batches(store, chunks, tier, max_work, works))


class SerialExecutor(_RecordsOfBatches):
    """Checks every chunk in this process, in order."""

    name = "serial"
    workers = 1

    def _run_batches(self, store: StoreRef, chunks: list[list[str]], tier: str,
                     max_work: int | None = None, works: Sequence[float] | None = None
                     ) -> Iterator[list[dict[str, Any]]]:
        """Yields the records of consecutive chunks grouped as a one-worker Dask run would
        group them from ``works`` (``batching.batches``: about 0.25 s of estimated work, a
        chunk estimated above that alone; one chunk per list without ``works``), and a list
        early whenever it has been filling for ``SERIAL_BATCH_SECONDS``.  On an error the
        records checked before it are yielded first."""
        if works is not None and len(works) == len(chunks):
            groups = batches(works, 1)
        else:
            groups = [range(i, i + 1) for i in range(len(chunks))]
        for g in groups:
            batch: list[dict[str, Any]] = []
            since = time.monotonic()
            for i in g:
                try:
                    batch.extend(check_chunk(store, chunks[i], tier, *_extra(max_work)))
                except BaseException:
                    if batch:
                        yield batch
                    raise
                if time.monotonic() - since >= SERIAL_BATCH_SECONDS:
                    yield batch
                    batch, since = [], time.monotonic()
            if batch:
                yield batch


# a pool groups chunks into 4x the tasks per worker a Dask run gets: a pool task costs far
# less than a Dask one, and the estimates do not see the cost of a lower kind (a polytope
# check of a 64 x 64 head takes seconds), so small stores keep one heavy chunk per task
POOL_SPREAD = 4


class ProcessExecutor(_RecordsOfBatches):
    """Checks chunks in a local pool of ``workers`` processes."""

    name = "processes"

    def __init__(self, workers: int):
        self.workers = workers

    def _run_batches(self, store: StoreRef, chunks: list[list[str]], tier: str,
                     max_work: int | None = None, works: Sequence[float] | None = None
                     ) -> Iterator[list[dict[str, Any]]]:
        """Yields the records of all tasks that finished together (one ``wait``) as one
        list; while the caller journals a list, more tasks finish, so lists grow with the
        rate.  A task holds several chunks when ``works`` (their estimated work) is given,
        as ``batching.batches`` groups them, else one.  A task that raised propagates its
        error after the others' records."""
        pool = ProcessPoolExecutor(max_workers=self.workers, initializer=init_worker,
                                   initargs=(os.getpid(),))
        groups = [range(i, i + 1) for i in range(len(chunks))] \
            if works is None or len(works) != len(chunks) else \
            batches(works, POOL_SPREAD * self.workers)
        try:
            # A bounded window of queued tasks, not one future per task up front: ``wait``
            # walks every pending future on each call, so queuing a 3,000-operator corpus at
            # once cost the parent quadratic CPU (~13 s at 3,334 chunks, taken from the two
            # cores the workers run on); a few tasks per worker keep every worker busy.  Tasks
            # of several cheap chunks: each task costs both processes a round of pickling and
            # queueing, which weighed on a corpus of 13 ms operators.
            todo = ([chunks[i] for i in g] for g in groups)
            window = WINDOW_PER_WORKER * self.workers
            pending = {pool.submit(check_batch, store, g, tier, *_extra(max_work))
                       for g in itertools.islice(todo, window)}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                ok, bad = _split_failed(done, lambda f: f.cancelled() or f.exception() is not None)
                batch: list[dict[str, Any]] = []
                for fut in ok:
                    for g in itertools.islice(todo, 1):
                        pending.add(pool.submit(check_batch, store, g, tier, *_extra(max_work)))
                    batch.extend(fut.result())
                if batch:
                    yield batch
                for fut in bad:
                    fut.result()  # raises its error
        except BaseException:
            # an error, an interrupt or a consumer that stopped: the running chunks' records
            # are not wanted. The workers ignore SIGINT, so waiting for them took as long as
            # their chunks, and a second Ctrl-C in that wait left the process hung in
            # multiprocessing's exit handler; they are stopped instead
            terminate_workers(pool)
            raise
        finally:
            # drop queued chunks instead of finishing them
            pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(_RecordsOfBatches):
    """Checks chunks on a Dask cluster (``pip install 'softrank-certify[dask]'``).

    ``address`` is a scheduler address (``tcp://host:8786``) or an existing
    ``distributed.Client``.  Workers must see the store at the same path and have this
    package installed.  Checks in one worker process run one at a time (see ``_CHECK_LOCK``),
    so start workers with ``--nthreads 1`` and as many ``--nworkers`` as cores.  ``batch``
    is the number of operators (chunks) per task, None to choose it from the chunks'
    estimated work (``batching.batches``).  ``tasks`` counts the tasks the last ``run``
    submitted.
    """

    name = "dask"

    def __init__(self, address: Any, batch: int | None = None):
        try:
            from distributed import Client
        except ImportError:
            raise InputError("--scheduler needs the dask extra: pip install "
                             "'softrank-certify[dask]'", field="--scheduler") from None
        if isinstance(address, Client):
            self.client, self._owned = address, False
        else:
            try:
                self.client, self._owned = Client(address), True
            # a malformed or unreachable address, or a server that is not a Dask scheduler:
            # distributed reads its bytes as frames and fails however they happen to parse
            # (MemoryError for a frame length of exabytes, and an empty AssertionError in its
            # protocol code when the reply arrived in pieces), so any Exception building the
            # client from the user's address is that address's fault, not an internal error
            except Exception as err:
                raise InputError(f"cannot use the Dask scheduler {str(address)[:200]!r}: "
                                 f"{type(err).__name__}: {err}", field="--scheduler") from None
        self.address = str(self.client.scheduler.address)
        self.workers = max(1, sum(self.client.nthreads().values()))
        self.batch = batch
        self.tasks = 0

    def groups(self, n: int, works: Sequence[float] | None) -> list[range]:
        """Returns the tasks of ``n`` chunks as index ranges: ``batch`` chunks each when set,
        else from ``works`` (the chunks' estimated work), else one chunk per task (no
        estimate, no grouping)."""
        if self.batch is None and (works is None or len(works) != n):
            return [range(i, i + 1) for i in range(n)]
        return batches(works if works is not None else [0] * n, self.workers, self.batch)

    def _run_batches(self, store: StoreRef, chunks: list[list[str]], tier: str,
                     max_work: int | None = None, works: Sequence[float] | None = None
                     ) -> Iterator[list[dict[str, Any]]]:
        """Yields the records of all tasks that have finished since the last list
        (``as_completed(...).batches()``) as one list.  A task that failed propagates its
        error after the others' records.  A task reported done whose result was then lost
        (its worker died before this process fetched it: status ``lost``, and Dask recomputes
        it) goes back into the queue and is handed over when it completes again."""
        from distributed import as_completed

        # A bounded window of tasks, as in ProcessExecutor: the scheduler holds a few tasks
        # per worker thread instead of a whole corpus, and each task's results are released
        # on the cluster as soon as this process has them.  A task of a worker that dies is
        # rerun by Dask as a whole; its records arrive here once, when it completes.
        todo = iter(self.groups(len(chunks), works))
        live: dict[str, Any] = {}
        queue = as_completed()
        self.tasks = 0

        def submit(count: int) -> None:
            for g in itertools.islice(todo, count):
                fut = self.client.submit(check_batch, store, [chunks[i] for i in g], tier,
                                         *_extra(max_work), pure=False)
                live[fut.key] = fut
                queue.add(fut)
                self.tasks += 1

        try:
            submit(WINDOW_PER_WORKER * self.workers)
            for done in queue.batches():
                ok, bad = _split_failed(done, lambda f: f.status != "finished")
                failed = [f for f in bad if f.status in ("error", "cancelled")]
                for fut in bad:
                    if fut.status not in ("error", "cancelled"):
                        queue.add(fut)  # lost or pending again: Dask is recomputing it
                bad = failed
                batch: list[dict[str, Any]] = []
                for fut in ok:
                    batch.extend(fut.result())
                    del live[fut.key]
                    fut.release()
                    submit(1)
                if batch:
                    yield batch
                for fut in bad:
                    fut.result()  # raises its error
        finally:
            self.client.cancel(list(live.values()))
            if self._owned:
                self.client.close()


def make_executor(jobs: int, scheduler: Any = None, batch: int | None = None) -> Executor:
    """Returns the Dask executor when ``scheduler`` is given (``batch`` operators per task,
    None: automatic), else a pool or serial one."""
    if scheduler is not None:
        return DaskExecutor(scheduler, batch)
    check_jobs(jobs)
    return ProcessExecutor(jobs) if jobs > 1 else SerialExecutor()
