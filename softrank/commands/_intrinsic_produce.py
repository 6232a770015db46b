"""The intrinsic part of ``produce``: witnesses for C, tau, kappa (and Gamma) per operator.

``--intrinsic-ranks 1 2 4 8`` runs the untrusted producers of
``witnesses.producers.intrinsic`` on every operator of the run and appends one ``rank``
record per (operator, r) - and one ``native`` record when the operator stores Q and K - to
the store's ``intrinsic.jsonl``.  Every operator is validated before anything is written
(the visible interaction must be defined, r <= min(m, N)), so bad input leaves no store
and no half-written record.  Resumable: ids already present are skipped.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError
from softrank.witnesses import open_store
from softrank.witnesses.intrinsic_store import IntrinsicWriter
from softrank.witnesses.producers import intrinsic as P
from softrank.witnesses.producers._common import one_blas_thread

PRODUCER = "intrinsic-v1"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--intrinsic-ranks", type=int, nargs="+", metavar="R",
                   help="also store intrinsic witnesses (T_r, tau, kappa; Gamma when Q and K "
                        "are stored) for these ranks, e.g. 1 2 4 8")
    p.add_argument("--intrinsic-budget", type=float, default=P.DEFAULT_BUDGET, metavar="SEC",
                   help=f"seconds of gauge search per (operator, rank) (default "
                        f"{P.DEFAULT_BUDGET})")


def validate_ranks(ranks: Iterable[int]) -> list[int]:
    out = sorted(set(ranks))
    if not out or out[0] < 1:
        raise InputError(f"ranks must be positive integers, got {list(ranks)}",
                         field="--intrinsic-ranks")
    return out


def precheck(op_id: str, A: np.ndarray, logits: np.ndarray | None, ranks: list[int]) -> None:
    """Raises InputError (naming the operator) when an intrinsic record cannot be made."""
    m, n = A.shape
    if ranks[-1] > min(m, n):
        raise InputError(f"r = {ranks[-1]} is larger than the factors allow (min(m, N) = "
                         f"{min(m, n)})", field=f"{op_id}.intrinsic-ranks")
    try:
        P.interaction_float(A, logits)
    except InputError as err:
        raise err.at(field_prefix=op_id) from None


def _work(job: tuple[str, np.ndarray, np.ndarray | None, float, list[int], float,
                     np.ndarray | None, np.ndarray | None]) -> tuple[str, list[Any], Any]:
    op_id, A, logits, beta, ranks, budget, Q, K = job
    with one_blas_thread():
        C = P.interaction_float(A, logits, beta)
        wit = [P.rank_witness(C, r, budget=budget) for r in ranks]
        nat = P.native_witness(Q, K) if Q is not None else None
    return op_id, wit, nat


def _map(jobs: list[Any], n: int) -> Iterator[tuple[str, list[Any], Any]]:
    if n == 1 or len(jobs) <= 1:
        for j in jobs:
            yield _work(j)
        return
    import multiprocessing as mp

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    from ..workers import init_worker, stopping_pool  # as produce's own pool

    pool = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                               initializer=init_worker, initargs=(os.getpid(),))
    with stopping_pool(pool) as ex:
        yield from ex.map(_work, jobs)


def produce_intrinsic(root: str | Path, op_ids: Iterable[str], ranks: list[int], *,
                      budget: float = P.DEFAULT_BUDGET, jobs: int = 1) -> dict[str, int]:
    """Appends intrinsic records for ``op_ids`` x ``ranks`` to the store at ``root`` and
    returns counts; skips ids already present (resume)."""
    reader = open_store(root)
    writer = IntrinsicWriter(reader)
    have = writer.ids
    todo = []
    for oid in op_ids:
        op = reader.operator(oid)
        want = [r for r in ranks if f"{oid}.r{r}" not in have]
        arrs = op.load()
        need_native = "Q" in arrs and f"{oid}.native" not in have
        if not want and not need_native:
            continue
        beta = float(op.beta) if op.beta is not None else 1.0
        todo.append((oid, np.asarray(arrs["A"], dtype=np.float64), arrs.get("logits"), beta,
                     want, budget, arrs.get("Q") if need_native else None,
                     arrs.get("K") if need_native else None))
    written = 0
    try:
        for oid, wits, nat in _map(todo, jobs):
            for w in wits:
                writer.add(oid, "rank", w.arrays, rank=w.r,
                           producer={"name": PRODUCER, "budget_seconds": budget},
                           claims=w.claims)
                written += 1
            if nat is not None:
                writer.add(oid, "native", {k: nat[k] for k in
                                           ("centre_q", "weights_q", "centre_k", "weights_k")},
                           producer={"name": PRODUCER},
                           claims={"rad_q": nat["rad_q"], "rad_k": nat["rad_k"]})
                written += 1
            writer.flush()
    finally:
        writer.close()
    return {"intrinsic_records_written": written, "intrinsic_operators": len(todo)}
