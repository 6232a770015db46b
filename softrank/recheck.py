"""Checking one bracket record of a store with the kernel: its operator's arrays and slack chi
(cached per operator), then ``certify.check_bracket``; one JSON-safe record per bracket.

This layer reads files and hands arrays and exact rationals to the kernel; it never decides
anything itself.  ``softrank.runner`` iterates it over a store (serially or through the
executors of ``softrank.audit.executors``, which import this module, never the runner).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np

from softrank import certify
from softrank.certify.errors import InputError
from softrank.certify.numerics import workbound
from softrank.witnesses import BracketRecord, StoreReader

from .workers import allow_long_integers, tune_allocator


def _operator_record(reader: StoreReader, op_id: str, arrays: dict[str, Any]
                     ) -> dict[str, Any] | None:
    """Returns the record for ``certify``'s slack functions (None when A is the record)."""
    op = reader.operator(op_id)
    if op.record_kind == "A":
        return None
    # Q and K (when stored) describe the scores; they are not part of the operator of record
    record: dict[str, Any] = {k: v for k, v in arrays.items() if k not in ("Q", "K")}
    if op.beta is not None:
        record["beta"] = op.beta
    return record


def operator_chi(reader: StoreReader, op_id: str, arrays: dict[str, Any], *,
                 tight: bool = False) -> Fraction:
    """Returns the slack chi charged for an operator (0 when the stored A is the record).

    By default the float64-first ``certify.charged_slack`` (chi <= 2 chi_true); with
    ``tight`` the arb enclosure of ``certify.operator_slack`` (chi within 2^-30 relative).
    """
    record = _operator_record(reader, op_id, arrays)
    if record is None:
        return Fraction(0)
    fn = certify.operator_slack if tight else certify.charged_slack
    try:
        return fn(record).chi
    except InputError as err:
        raise err.at(source=str(reader.operator(op_id).path), field_prefix="operator") from None


class OperatorCache:
    """Keeps the last operator's arrays and chi: brackets of one operator are adjacent.

    ``get`` returns the cheap charged chi; ``tighten`` the arb chi, computed at most once per
    operator and only when a caller found that the charged chi changes an outcome.
    """

    def __init__(self, reader: StoreReader):
        self.reader = reader
        self.key: str | None = None
        self.value: tuple[dict[str, Any], Fraction] | None = None
        self.tight: Fraction | None = None
        self.arrays: dict[str, Any] = {}
        self.limited: workbound.WorkLimit | None = None  # chi over the work limit

    def get(self, op_id: str, max_work: int | None = None) -> tuple[dict[str, Any], Fraction]:
        """Returns the operator's arrays and charged chi; raises ``workbound.WorkLimit``
        when chi cannot be enclosed within ``max_work`` (the failure is kept: asking again
        raises again without repeating the work)."""
        if op_id != self.key:
            arrays = self.reader.operator(op_id).load()
            # A widened to float64 once here, not by the kernel on each of the operator's
            # checks: the same exact numbers (stored A is float32 or float64, load checks)
            arrays["A"] = np.asarray(arrays["A"], dtype=np.float64)
            try:
                with workbound.metered(max_work):
                    chi = operator_chi(self.reader, op_id, arrays)
            except workbound.WorkLimit as err:
                self.key, self.value, self.arrays, self.limited = op_id, None, arrays, err
                self.tight = None
                raise
            self.key, self.value, self.arrays, self.limited = op_id, (arrays, chi), arrays, None
            self.tight = None
        if self.value is None:
            assert self.limited is not None
            raise self.limited
        return self.value

    def tighten(self, op_id: str, max_work: int | None = None) -> Fraction:
        arrays, chi = self.get(op_id, max_work)
        if self.tight is None:
            try:
                with workbound.metered(max_work):
                    tight = operator_chi(self.reader, op_id, arrays, tight=True)
            except workbound.WorkLimit:
                tight = chi  # the charged chi stays: rigorous, only less tight
            self.tight = min(chi, tight)
        return self.tight


def check_record(reader: StoreReader, br: BracketRecord, cache: OperatorCache, *,
                 tier: str = "auto", max_work: int | None = None) -> dict[str, Any]:
    """Returns the JSON-safe record of checking one bracket (or of its input error).

    The charged chi is the float64-first one; when it changes an outcome (compared with
    chi = 0) the arb chi replaces it, so every outcome is the one the arb chi gives (see
    ``_needs_plain``).
    """
    allow_long_integers()  # in any process (API use, Dask workers): long exact claim strings
    tune_allocator()  # speed only: temporaries of the float tiers are not page-faulted anew
    op = reader.operator(br.operator)
    base: dict[str, Any] = {
        "bracket": br.id, "operator": op.id, "family": op.family, "shape": list(op.shape),
        "eps": str(br.eps), "producer": br.producer, "claims": br.claims,
        "upper_claim": br.upper.rank, "lower_claim": br.lower.rank if br.lower else None,
        "lower_kind": br.lower.kind if br.lower else None,
        "record_kind": op.record_kind,
    }
    # the slack meters are the operator's own (explicit limits); the record's checks share one
    limit = workbound.check_max_work(max_work)
    limit = workbound.DEFAULT_MAX_WORK if limit is None else limit
    try:
        try:
            arrays, chi = cache.get(op.id, limit)
        except workbound.WorkLimit as err:
            upper, lower = br.load()
            result = certify.bracket.work_limited_bracket(cache.arrays["A"], upper, lower,
                                                          br.eps, f"{err} (operator slack chi)")
            return {**base, **result.to_json(), "chi_changed": []}
        upper, lower = br.load()
        A = arrays["A"]
        changed: list[str] = []
        # one meter for the record: the comparison at chi = 0 and the check at the tight chi
        # spend what the first check left, so a record costs at most one limit, not three
        with workbound.metered(limit):
            result = certify.check_bracket(A, br.eps, upper, lower, tier=tier, chi=chi,
                                           source=str(br.path))
            plain = (certify.check_bracket(A, br.eps, upper, lower, tier=tier, chi=0,
                                           source=str(br.path))
                     if _needs_plain(result) else None)
            if plain is not None and not _limited(plain):  # a stopped comparison says nothing
                if _verdict(plain) != _verdict(result):
                    tight = cache.tighten(op.id, limit)
                    again = (certify.check_bracket(A, br.eps, upper, lower, tier=tier,
                                                   chi=tight, source=str(br.path))
                             if tight < chi else None)
                    if again is not None and not _limited(again):
                        result = again  # else the verdict at the charged chi stands
                changed = [e for e in ("upper", "lower")
                           if getattr(plain, f"{e}_outcome") != getattr(result, f"{e}_outcome")]
    except InputError as err:
        if err.field == "A":  # the operator's matrix lives in the operator's file
            err = InputError(err.reason, field="A", source=str(op.path))
        return {**base, "error": str(err)}
    return {**base, **result.to_json(), "chi_changed": changed}


def _verdict(r: certify.BracketCheck) -> tuple[Any, ...]:
    return (r.upper, r.lower, r.upper_outcome, r.lower_outcome)


def _limited(result: certify.BracketCheck) -> bool:
    """True when a check of the bracket stopped at the work limit."""
    return any(c is not None and str(c.detail.get("reason", "")).startswith(workbound.WORK_LIMIT)
               for c in (result.upper_check, result.lower_check, result.nonzero_check))


def _needs_plain(result: certify.BracketCheck) -> bool:
    """False when no chi in [0, result.chi] can give a different verdict.

    Every check is monotone in chi: a claim confirmed at chi stays confirmed at any smaller
    chi (its threshold eps -+ chi only gets easier), including the nonzero fallback.  So with
    both claims confirmed or absent and no failed fallback there is nothing to compare.
    Otherwise the caller compares with chi = 0: a verdict equal at 0 and at chi is the
    verdict at every chi in between (a refutation at 0 persists, and an undecided
    enclosure that straddles both thresholds straddles every one between).
    """
    if result.chi == 0:
        return False
    confirmed = (result.upper_outcome in ("confirmed", "absent")
                 and result.lower_outcome in ("confirmed", "absent"))
    return not confirmed or (result.nonzero_check is not None
                             and not result.nonzero_check.holds)


def operator_chunks(brackets: Iterable[BracketRecord]) -> list[list[str]]:
    """Returns the ids of ``brackets`` cut into one chunk per operator, in operator order.

    A chunk is the unit a worker runs: all brackets of an operator in one chunk means its
    arrays are loaded (decompressed) and its chi computed exactly once in the whole run,
    and a killed worker loses at most one operator's work.
    """
    groups: dict[str, list[str]] = {}
    for b in sorted(brackets, key=lambda b: (b.operator, b.id)):
        groups.setdefault(b.operator, []).append(b.id)
    return list(groups.values())
