"""Checking the brackets of a store: one JSON-safe record per bracket, optionally in parallel.

This layer reads files and hands arrays and exact rationals to the kernel; it never decides
anything itself.  Every record is produced by ``certify.check_bracket``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from fractions import Fraction
from pathlib import Path
from typing import Any

import certify
from certify.errors import InputError
from witnesses import BracketRecord, StoreReader, open_store

from .workers import init_worker


def operator_chi(reader: StoreReader, op_id: str, arrays: dict[str, Any]) -> Fraction:
    """Returns the slack chi charged for an operator (0 when the stored A is the record)."""
    op = reader.operator(op_id)
    if op.record_kind == "A":
        return Fraction(0)
    # Q and K (when stored) describe the scores; they are not part of the operator of record
    record: dict[str, Any] = {k: v for k, v in arrays.items() if k not in ("Q", "K")}
    if op.beta is not None:
        record["beta"] = op.beta
    try:
        return certify.operator_slack(record).chi
    except InputError as err:
        raise err.at(source=str(op.path), field_prefix="operator") from None


class _OperatorCache:
    """Keeps the last operator's arrays and chi: brackets of one operator are adjacent."""

    def __init__(self, reader: StoreReader):
        self.reader = reader
        self.key: str | None = None
        self.value: tuple[dict[str, Any], Fraction] | None = None

    def get(self, op_id: str) -> tuple[dict[str, Any], Fraction]:
        if op_id != self.key:
            arrays = self.reader.operator(op_id).load()
            self.value = (arrays, operator_chi(self.reader, op_id, arrays))
            self.key = op_id
        assert self.value is not None
        return self.value


def check_record(reader: StoreReader, br: BracketRecord, cache: _OperatorCache, *,
                 tier: str = "auto") -> dict[str, Any]:
    """Returns the JSON-safe record of checking one bracket (or of its input error)."""
    op = reader.operator(br.operator)
    base: dict[str, Any] = {
        "bracket": br.id, "operator": op.id, "family": op.family, "shape": list(op.shape),
        "eps": str(br.eps), "producer": br.producer, "claims": br.claims,
        "upper_claim": br.upper.rank, "lower_claim": br.lower.rank if br.lower else None,
        "lower_kind": br.lower.kind if br.lower else None,
        "record_kind": op.record_kind,
    }
    try:
        arrays, chi = cache.get(op.id)
        upper, lower = br.load()
        result = certify.check_bracket(arrays["A"], br.eps, upper, lower, tier=tier, chi=chi,
                                       source=str(br.path))
        changed = _ends_changed_by_chi(arrays["A"], br, upper, lower, tier, result)
    except InputError as err:
        return {**base, "error": str(err)}
    return {**base, **result.to_json(), "chi_changed": changed}


def _ends_changed_by_chi(A: Any, br: BracketRecord, upper: Any, lower: Any, tier: str,
                         result: certify.BracketCheck) -> list[str]:
    """Returns the ends whose outcome would differ had the slack chi not been charged.

    Only ends not confirmed can differ (chi only moves thresholds against the claim), so the
    second check runs only for those, and only when chi > 0.
    """
    if result.chi == 0:
        return []
    ends = [e for e in ("upper", "lower")
            if getattr(result, f"{e}_outcome") not in ("confirmed", "absent")]
    if not ends:
        return []
    plain = certify.check_bracket(A, br.eps, upper, lower, tier=tier, chi=0,
                                  source=str(br.path))
    return [e for e in ends
            if getattr(plain, f"{e}_outcome") != getattr(result, f"{e}_outcome")]


_WORKER: dict[str, Any] = {}  # per-process: the opened store, so chunks do not re-read it


def _check_ids(store_path: str, ids: Sequence[str], tier: str) -> list[dict[str, Any]]:
    if _WORKER.get("path") != store_path:
        reader = open_store(store_path)
        _WORKER.update(path=store_path, reader=reader, cache=_OperatorCache(reader),
                       by_id={b.id: b for b in reader.brackets})
    reader, cache, by_id = _WORKER["reader"], _WORKER["cache"], _WORKER["by_id"]
    return [check_record(reader, by_id[i], cache, tier=tier) for i in ids]


def iter_checks(store_path: str | Path, ids: Iterable[str] | None = None, *, jobs: int = 1,
                tier: str = "auto", chunk: int = 8) -> Iterator[dict[str, Any]]:
    """Yields one record per bracket of the store (all, or ``ids``) as each finishes.

    With ``jobs > 1`` chunks of brackets (grouped by operator) run in worker processes; the
    order of the yielded records is then the order of completion.
    """
    reader = open_store(store_path)
    id_set = None if ids is None else set(ids)
    wanted = [b for b in reader.brackets if id_set is None or b.id in id_set]
    wanted.sort(key=lambda b: (b.operator, b.id))
    store_path = str(store_path)
    if jobs <= 1:
        cache = _OperatorCache(reader)
        for br in wanted:
            yield check_record(reader, br, cache, tier=tier)
        return
    chunks = [[b.id for b in wanted[i:i + chunk]] for i in range(0, len(wanted), chunk)]
    with ProcessPoolExecutor(max_workers=jobs, initializer=init_worker,
                             initargs=(os.getpid(),)) as pool:
        pending = {pool.submit(_check_ids, store_path, c, tier) for c in chunks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield from fut.result()


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))
