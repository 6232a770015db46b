"""Check the intrinsic records of a store with the trusted kernel (``certify.intrinsic``).

One result dict per record: the proved brackets for q, tau, kappa (rank records) or Gamma
(native records), and the profile at every eps of the record (default: the eps values of the
operator's brackets).  Records flow one way: store -> kernel -> these dicts -> reports.
An input error becomes ``{"id": ..., "error": ...}`` and never a bracket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from softrank.certify import intrinsic as K
from softrank.certify.errors import InputError
from softrank.certify.numerics import workbound
from softrank.terminal import shown
from softrank.witnesses.intrinsic_store import IntrinsicRecord, read_intrinsic
from softrank.witnesses.store import StoreReader

from ..numfmt import clamped_float, interval

_KAPPA_KEYS = ("G", "a", "c", "rects", "M", "D1", "D2", "lam", "mu")


def _eps_of(reader: StoreReader) -> dict[str, list[Fraction]]:
    out: dict[str, set[Fraction]] = {}
    for b in reader.brackets:
        out.setdefault(b.operator, set()).add(b.eps)
    return {k: sorted(v) for k, v in out.items()}


class _Operators:
    """Loads each operator once and builds its interaction lazily (errors kept per op)."""

    def __init__(self, reader: StoreReader):
        self.reader = reader
        self._arrays: dict[str, dict[str, np.ndarray]] = {}
        self._C: dict[str, Any] = {}

    def arrays(self, op_id: str) -> dict[str, np.ndarray]:
        if op_id not in self._arrays:
            self._arrays = {op_id: self.reader.operator(op_id).load()}  # keep one in memory
        return self._arrays[op_id]

    def interaction(self, op_id: str) -> Any:
        if op_id not in self._C:
            op = self.reader.operator(op_id)
            arrs = self.arrays(op_id)
            try:
                C = K.interaction_from_operator(arrs["A"], logits=arrs.get("logits"),
                                                block=arrs.get("block"),
                                                beta=op.beta if op.beta is not None else 1)
            except InputError as err:
                raise err.at(source=str(op.path), field_prefix=op_id) from None
            self._C = {op_id: C}
        return self._C[op_id]


def _bits(q: Fraction) -> int:
    return q.numerator.bit_length() + q.denominator.bit_length()


def _within_limit(rec: IntrinsicRecord, src: str, m: int, n: int, r: int,
                  arrays: list[np.ndarray], max_work: int | None,
                  witness: dict[str, Any] | None = None, beta: Fraction | None = None,
                  eps: list[Fraction] | None = None) -> None:
    """Prices the record (``workbound.intrinsic_record``, from its sizes, the bits of its
    arrays and of beta, and ``workbound.profiles`` for its eps) before any kernel work;
    raises InputError naming the record when the price is over ``max_work`` (default
    ``workbound.DEFAULT_MAX_WORK``): an intrinsic record has no undecided state, so one over
    the limit is refused (exit 2) instead of run."""
    limit = workbound.DEFAULT_MAX_WORK if max_work is None else int(max_work)
    floats = [np.asarray(a, dtype=np.float64) for a in arrays if a is not None]
    try:
        price = workbound.intrinsic_record(m, n, r, *floats,
                                           beta_bits=_bits(beta) if beta is not None else 0)
        if eps:
            price += workbound.profiles(len(eps), max(_bits(e) for e in eps))
        if witness:  # the kappa witnesses: rectangles, gauge, PSD dual
            b = max((workbound.bits(a) for a in floats[1:] if a.size), default=1)  # X, Y
            price += workbound.intrinsic_witness(m, n, r, b, {
                k: None if witness.get(k) is None else np.asarray(witness[k])
                for k in ("rects", "G", "M", "lam", "mu")})
        workbound.Meter(limit).charge(price, f"intrinsic record {rec.id} ({m} x {n}, width {r})")
        dense = workbound.intrinsic_dense_bytes(m, n, witness or {})
        if dense > workbound.MAX_DENSE_BYTES:
            raise InputError(f"the PSD dual (M, D1, D2) would allocate {dense} bytes of dense "
                             f"buffers, above the limit of {workbound.MAX_DENSE_BYTES}",
                             field=f"{rec.id}.M", source=src)
    except workbound.WorkLimit as err:
        raise InputError(str(err), field=rec.id, source=src) from None


def check_record(rec: IntrinsicRecord, ops: _Operators, eps: list[Fraction],
                 max_work: int | None = None) -> dict[str, Any]:
    """Returns the proved brackets of one intrinsic record (raises InputError on bad input,
    and on a record priced over ``max_work``, see :func:`_within_limit`)."""
    t0 = time.monotonic()
    out: dict[str, Any] = {"id": rec.id, "operator": rec.operator, "kind": rec.kind,
                           "rank": rec.rank, "shape": list(rec.shape)}
    op = ops.reader.operator(rec.operator)
    if rec.kind == "native":
        arrs = ops.arrays(rec.operator)
        if "Q" not in arrs:
            raise InputError("a native record needs Q and K in its operator record",
                             field=f"{rec.id}.operator", source=str(op.path))
        w = rec.load(d=int(arrs["Q"].shape[1]))
        _within_limit(rec, str(rec.path), arrs["Q"].shape[0], arrs["K"].shape[0],
                      int(arrs["Q"].shape[1]), [arrs["Q"], arrs["K"]], max_work)
        beta = op.beta if op.beta is not None else 1
        try:
            g = K.native_size(arrs["Q"], arrs["K"], beta, centre_q=w.get("centre_q"),
                              centre_k=w.get("centre_k"), weights_q=w.get("weights_q"),
                              weights_k=w.get("weights_k"))
        except InputError as err:
            raise err.at(source=str(rec.path), field_prefix=rec.id) from None
        out["Gamma"] = g.to_json()
    else:
        w = rec.load()
        r = int(rec.rank)  # type: ignore[arg-type]
        arrs = ops.arrays(rec.operator)
        A = arrs.get("logits", arrs.get("block", arrs["A"]))
        beta = op.beta if op.beta is not None else 1
        _within_limit(rec, str(rec.path), A.shape[0], A.shape[1], r,
                      [np.where(np.isfinite(A), A, 0.0), w["X"], w["Y"]], max_work, w,
                      beta=Fraction(beta), eps=list(rec.eps or eps))
        C = ops.interaction(rec.operator)
        try:
            # r: factors whose width differs from the record's rank are refused, not checked
            tr = K.tau_bracket(C, w["X"], w["Y"], b=w.get("b"), cycle=w.get("cycle"),
                               cycle_rows=w.get("cycle_rows"), r=r)
            kb = K.kappa_bracket(w["X"], w["Y"], **{k: w[k] for k in _KAPPA_KEYS if k in w})
            profiles = [K.profile(kb, tr.tau, e, r).to_json() for e in (rec.eps or eps)]
        except InputError as err:
            raise err.at(source=str(rec.path), field_prefix=rec.id) from None
        out.update(q=tr.q.to_json(), tau=tr.tau.to_json(), kappa=kb.to_json(),
                   profiles=profiles)
    out["seconds"] = round(time.monotonic() - t0, 4)
    return out


def iter_intrinsic_checks(reader: StoreReader, max_work: int | None = None
                          ) -> Iterator[dict[str, Any]]:
    """Yields one result per intrinsic record of the store (none when it has no
    intrinsic.jsonl); input errors (and records priced over ``max_work``) are yielded as
    {"id", "operator", "error"}."""
    records = read_intrinsic(reader)
    ops = _Operators(reader)
    eps = _eps_of(reader)
    for rec in sorted(records, key=lambda r: (r.operator, r.kind, r.rank or 0)):
        try:
            yield check_record(rec, ops, eps.get(rec.operator, []), max_work)
        except InputError as err:
            yield {"id": rec.id, "operator": rec.operator, "kind": rec.kind,
                   "rank": rec.rank, "error": str(err)}


def refuse_intrinsic_errors(reader: StoreReader, max_work: int | None = None) -> None:
    """Raises the first input error ``check`` would report on the store's intrinsic records
    (InputError naming the file and field), after checking them as ``check`` does; returns
    None when there is none.  For ``export`` and ``diff``, which do not report intrinsic
    records: a store that ``check`` refuses must not pass them with exit 0."""
    for res in iter_intrinsic_checks(reader, max_work):
        if "error" in res:
            raise InputError(f"intrinsic record {res['id']!r}: {res['error']}",
                             field="intrinsic.jsonl", source=str(reader.root))


def _f(s: str | None) -> float | None:
    # a ratio of proved ends may lie beyond the float range: +inf there, never OverflowError
    return None if s is None else clamped_float(Fraction(s))


def summarize_intrinsic(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns counts and the median kappa / tau bracket ratios per rank (float, for reports)."""
    by_r: dict[int, dict[str, list[float]]] = {}
    for res in results:
        if "error" in res or res["kind"] != "rank":
            continue
        d = by_r.setdefault(int(res["rank"]), {"kappa": [], "tau": []})
        for q in ("kappa", "tau"):
            ratio = res[q].get("ratio")
            if ratio is not None:
                d[q].append(float(ratio))
    return {
        "records": len(results), "errors": sum("error" in r for r in results),
        "native": sum(r.get("kind") == "native" and "error" not in r for r in results),
        "by_rank": {str(r): {"heads": len(d["kappa"]),
                             "median_kappa_ratio": float(np.median(d["kappa"])) if d["kappa"]
                             else None,
                             "max_tau_ratio": max(d["tau"]) if d["tau"] else None}
                    for r, d in sorted(by_r.items())},
    }


def format_result(res: dict[str, Any]) -> str:
    """Returns one text line for a result: every proved interval printed with 6 significant
    digits, rounded outward from its exact ends (the printed interval contains the proved one;
    the exact ends are in the JSON)."""
    head = f"{shown(res['id']):<28}"
    if "error" in res:
        return f"{head} INPUT ERROR: {shown(res['error'])}"
    if res["kind"] == "native":
        g = res["Gamma"]
        return f"{head} Gamma in {interval(g['lo'], g['hi'])}"
    t, k = res["tau"], res["kappa"]
    prof = ", ".join(f"eps={p['eps']}: {p['status']}" for p in res["profiles"])
    return (f"{head} r={res['rank']:<3} tau in {interval(t['lo'], t['hi'])}  "
            f"kappa in {interval(k['lo'], k['hi'])}  {prof}")
