"""Refresh one end of a store's brackets with one producer (untrusted).

    .venv/bin/python examples/refresh.py STORE PRODUCER

A lower PRODUCER runs on every bracket that carries a lower certificate (the anchor brackets
of the producer layout); where its claimed rank is larger than the stored one, the bracket's
file is rewritten with the same upper arrays and the new lower arrays, and its record gets
the new lower end, ``producer.lower`` and ``lower_*`` claims (the old ``lower_*`` claims are
dropped).  As in the pipeline, a lower producer whose ``produce`` takes them gets ``stop_at``,
the least upper rank a bracket of that operator and eps claims (no valid lower end passes a
valid upper end), and ``floor``, the stored lower rank (a certificate at or below it would not
be kept); a bracket whose stored lower rank already reaches ``stop_at`` is skipped.
An upper PRODUCER runs on every bracket it wrote (``producer.upper``); where its
witness has a smaller rank than the stored one, the bracket is rewritten with the new factors
(rounded to float32 when they still meet the budget, as the pipeline stores them) and the same
lower arrays, and the claims not about the lower end are replaced by the witness's.

Run it on a copy: a bracket file is rewritten in place just before its record.  Everything
else is left as it was, in the same order.  This is what the pipeline keeps (the largest
claimed lower rank, the smallest claimed upper rank), applied to a store that already exists;
nothing here decides a verdict: run ``softrank-certify check`` on the result.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from tqdm import tqdm

from softrank.certify.errors import InputError
from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers.pipeline import (
    _jsonable,
    _takes,
    compact_certificate,
    compact_witness,
    malformed_certificate,
    malformed_witness,
)
from softrank.witnesses.store import Store, open_store


def main(argv: list[str] | None = None) -> int:
    """Returns 0 when the run completed, 2 for bad input (a message naming file and field)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("producer")
    args = ap.parse_args(argv)
    try:
        return _refresh(ap, args)
    except InputError as err:
        print(f"input error: {err}", file=sys.stderr)
        return 2


def _refresh(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    reader = open_store(args.store)
    prod = get_producer(args.producer)
    role = getattr(prod, "role", None)
    if role not in ("lower", "upper"):
        ap.error(f"{args.producer} is neither a lower nor an upper producer")
    store = Store.open(args.store)
    # a rewritten bracket file no longer matches the old record's sha256: write the records
    # right after each change, so an interrupted run leaves at most one mismatched bracket
    store.flush_every = 1
    ops: dict[str, dict[str, np.ndarray]] = {}
    if role == "lower":
        todo = [b for b in reader.brackets if b.lower is not None]
    else:
        todo = [b for b in reader.brackets if b.producer.get("upper") == args.producer]
    # the least upper rank claimed per (operator, eps): the lower searches stop there
    least: dict[tuple[str, Any], int] = {}
    for b in reader.brackets:
        key = (b.operator, b.eps)
        least[key] = min(least.get(key, b.upper.rank), b.upper.rank)
    changed = skipped = 0
    bar = tqdm(todo, unit="bracket", file=sys.stderr, disable=not sys.stderr.isatty())
    for i, br in enumerate(bar, 1):
        if br.operator not in ops:
            ops.clear()  # one operator at a time: brackets are grouped by operator
            ops[br.operator] = reader.operator(br.operator).load()
        arrs = ops[br.operator]
        A = np.asarray(arrs["A"], dtype=np.float64)
        logits = arrs.get("logits")
        kw: dict[str, int] = {}
        if role == "lower":
            ceiling = least[(br.operator, br.eps)]
            if br.lower.rank >= ceiling:
                skipped += 1  # closed by the store's own claims: nothing above to reach
                continue
            if _takes(prod.produce, "stop_at"):
                kw["stop_at"] = ceiling
            if _takes(prod.produce, "floor"):
                kw["floor"] = br.lower.rank
        t0 = time.perf_counter()
        try:
            out = prod.produce(A, br.eps, logits=None if logits is None
                               else np.asarray(logits, dtype=np.float64), **kw)
        except Exception as err:  # untrusted code: report it, keep the stored end
            print(f"{br.id}: {args.producer}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        secs = time.perf_counter() - t0
        stored = br.lower.rank if role == "lower" else br.upper.rank
        if out is None or (out.rank <= stored if role == "lower" else out.rank >= stored):
            continue
        bad = (malformed_certificate(out, A.shape) if role == "lower"
               else malformed_witness(out, A.shape))
        if bad:
            print(f"{br.id}: {args.producer}: {bad}", file=sys.stderr)
            continue
        upper, lower = br.load()
        old = store.bracket_record(br.id)
        kept = {k: v for k, v in old.get("claims", {}).items()
                if k.startswith("lower_") != (role == "lower")}
        if role == "lower":
            new = _jsonable({(k if k.startswith("lower_") else f"lower_{k}"): v
                             for k, v in out.claims.items()})
            new.update({"lower_rank": int(out.rank), "lower_kind": out.kind,
                        "lower_seconds": round(secs, 4)})
            lower = compact_certificate(out).to_mapping()
        else:
            w = compact_witness(A, out, br.eps)
            new = _jsonable({**w.claims, "upper_rank": int(w.rank),
                             "upper_seconds": round(secs, 4)})
            upper = w.to_mapping()
        claims: dict[str, Any] = {**kept, **new}
        producer = dict(old.get("producer", {}), **{role: args.producer})
        store.replace_bracket(br.id, br.operator, br.eps, upper, lower, producer=producer,
                              claims=claims)
        changed += 1
        tqdm.write(f"[{i}/{len(todo)}] {br.id}: {role} {stored} -> {out.rank}", file=sys.stdout)
    store.close()
    verb = "raised" if role == "lower" else "lowered"
    print(f"{changed} of {len(todo)} {role} ends {verb} by {args.producer}"
          + (f" ({skipped} closed, not searched)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
