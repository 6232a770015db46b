"""Refresh the lower ends of a store's anchor brackets with one lower producer (untrusted).

    .venv/bin/python examples/refresh_lower.py STORE PRODUCER

For every bracket that carries a lower certificate (the anchor brackets of the producer
layout), PRODUCER runs on the bracket's operator at its eps; where its claimed rank is larger
than the stored one, the bracket's file is rewritten with the same upper arrays and the new
lower arrays, and its record gets the new lower end, ``producer.lower`` and ``lower_*``
claims (the old ``lower_*`` claims are dropped).  Run it on a copy: a bracket file is
rewritten in place just before its record.  Everything else is left as it was, in the
same order.  This is what the pipeline keeps (the largest claimed lower rank), applied to a
store that already exists; nothing here decides a verdict: run ``softrank-certify check`` on
the result.
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
    compact_certificate,
    malformed_certificate,
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
    if getattr(prod, "role", None) != "lower":
        ap.error(f"{args.producer} is not a lower producer")
    store = Store.open(args.store)
    # a rewritten bracket file no longer matches the old record's sha256: write the records
    # right after each change, so an interrupted run leaves at most one mismatched bracket
    store.flush_every = 1
    ops: dict[str, dict[str, np.ndarray]] = {}
    anchors = [b for b in reader.brackets if b.lower is not None]
    changed = 0
    bar = tqdm(anchors, unit="bracket", file=sys.stderr, disable=not sys.stderr.isatty())
    for i, br in enumerate(bar, 1):
        if br.operator not in ops:
            ops.clear()  # one operator at a time: brackets are grouped by operator
            ops[br.operator] = reader.operator(br.operator).load()
        arrs = ops[br.operator]
        A = np.asarray(arrs["A"], dtype=np.float64)
        logits = arrs.get("logits")
        t0 = time.perf_counter()
        try:
            cert = prod.produce(A, br.eps, logits=None if logits is None
                                else np.asarray(logits, dtype=np.float64))
        except Exception as err:  # untrusted code: report it, keep the stored certificate
            print(f"{br.id}: {args.producer}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        secs = time.perf_counter() - t0
        if cert is None or cert.rank <= br.lower.rank:
            continue
        bad = malformed_certificate(cert, A.shape)
        if bad:
            print(f"{br.id}: {args.producer}: {bad}", file=sys.stderr)
            continue
        upper, _ = br.load()
        old = store.bracket_record(br.id)
        claims: dict[str, Any] = {k: v for k, v in old.get("claims", {}).items()
                                  if not k.startswith("lower_")}
        claims.update(_jsonable({(k if k.startswith("lower_") else f"lower_{k}"): v
                                 for k, v in cert.claims.items()}))
        claims.update({"lower_rank": int(cert.rank), "lower_kind": cert.kind,
                       "lower_seconds": round(secs, 4)})
        producer = dict(old.get("producer", {}), lower=args.producer)
        store.replace_bracket(br.id, br.operator, br.eps, upper,
                              compact_certificate(cert).to_mapping(), producer=producer,
                              claims=claims)
        changed += 1
        tqdm.write(f"[{i}/{len(anchors)}] {br.id}: lower {br.lower.rank} -> {cert.rank}",
                   file=sys.stdout)
    store.close()
    print(f"{changed} of {len(anchors)} lower ends raised by {args.producer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
