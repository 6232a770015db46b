"""Checking the brackets of a store: one JSON-safe record per bracket, optionally in parallel.

This layer reads files and hands arrays and exact rationals to the kernel; it never decides
anything itself.  Every record is produced by ``certify.check_bracket``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from softrank.certify.errors import InputError
from softrank.witnesses import open_store

from .recheck import OperatorCache, check_record, operator_chi, operator_chunks

__all__ = ["check_record", "default_jobs", "iter_checks", "operator_chi", "operator_chunks"]


def iter_checks(store_path: str | Path, ids: Iterable[str] | None = None, *, jobs: int = 1,
                tier: str = "auto", scheduler: Any = None, max_work: int | None = None,
                batch: int | None = None, digest: str | None = None
                ) -> Iterator[dict[str, Any]]:
    """Yields one record per bracket of the store (all, or ``ids``) as each finishes.

    With ``jobs > 1`` operators (all their brackets as one task) run in worker processes;
    with ``scheduler`` (a Dask scheduler address or ``distributed.Client``) they run on
    that cluster, ``batch`` operators per Dask task (None: chosen from the declared sizes,
    ``audit.batching``).  The order of the yielded records is then the order of completion.
    With ``digest`` (``witnesses.store.records_digest``), the store must still be the one
    whose record files had it (InputError, field ``store``, otherwise); every worker checks
    the records it parses against the digest of those read here.
    """
    reader = open_store(store_path)
    if digest is not None and reader.digest != digest:
        raise InputError("the store's record files changed since this run read them",
                         field="store", source=str(store_path))
    id_set = None if ids is None else set(ids)
    wanted = [b for b in reader.brackets if id_set is None or b.id in id_set]
    wanted.sort(key=lambda b: (b.operator, b.id))
    if jobs <= 1 and scheduler is None:
        cache = OperatorCache(reader)
        for br in wanted:
            yield check_record(reader, br, cache, tier=tier, max_work=max_work)
        return
    from .audit.batching import chunk_works
    from .audit.executors import make_executor
    path = str(Path(store_path).resolve())
    executor = make_executor(jobs, scheduler, batch)
    chunks = operator_chunks(wanted)
    works = chunk_works(reader, chunks)
    yield from executor.run((path, reader.digest), chunks, tier, max_work, works)


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))
