"""The audit journal's write rate: one fsync per record against one fsync per batch.

Appends ``--records`` bracket records (default 5,000: copies of an 8 x 8 audit record, about
1.3 KB each; ``--from JOURNAL`` takes an audit's own records instead, cycled) to a fresh
journal in ``--dir`` (default a temporary folder on the disk of ``tempfile``) with
``Journal.append`` (flush and fsync per record), then with ``Journal.append_many`` in batches
of each ``--batches`` size (one fsync per batch), and last with ``os.fsync`` replaced by
nothing (the rate without any fsync: what the HMAC, JSON and write cost).  Prints records per
second of each and its ratio to the per-record run of the same process.

Run: ``.venv/bin/python benchmarks/bench_journal.py [--records 5000] [--batches 4,16,64]
[--from DIR/journal.jsonl]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def record(i: int) -> dict:
    """Returns a record shaped and sized like the one an audit journals for an 8 x 8
    bracket (about 1.3 KB as a line)."""
    def check(kind: str, sense: str, rank: int) -> dict:
        iv = {"hi": "11612299555216071/36028797018963968",
              "lo": "1451537444401999/4503599627370496"}
        return {"chi": "0", "claim": f"{kind} claim", "eps": "1/2", "kind": kind,
                "margin": iv, "precision": None, "rank": rank, "sense": sense,
                "status": "holds", "threshold": "1/2", "tier": "float64",
                "tiers_run": ["float64"], "value": iv}
    return {"bracket": f"b{i:06d}", "operator": f"op{i:06d}", "eps": "1/2", "shape": [8, 8],
            "upper": 4, "upper_kind": "factors", "upper_result": "proved",
            "upper_check": check("factors", "<=", 4), "lower_claim": 1,
            "lower_kind": "nonzero", "lower_result": "proved", "lower_outcome": "confirmed",
            "lower_check": check("nonzero", ">", 1), "nonzero_check": None, "producer": {},
            "record_kind": "A", "resolved": False}


def from_journal(path: Path, n: int) -> list[dict]:
    """Returns ``n`` records of the audit journal ``path`` (cycled, renamed b000000...)."""
    import json

    lines = path.read_text().splitlines()[1:]
    recs = [{k: v for k, v in json.loads(ln).items() if k != "hmac"} for ln in lines]
    return [{**recs[i % len(recs)], "bracket": f"b{i:06d}"} for i in range(n)]


def timed(out: Path, key: dict, records: list[dict], batch: int | None) -> float:
    """Returns the records per second of journaling ``records`` into a fresh journal in
    ``out``: one ``append`` each (``batch`` None) or ``append_many`` per ``batch``."""
    from softrank.audit.journal import Journal

    with Journal.open(out, key, restart=True) as journal:
        t0 = time.perf_counter()
        if batch is None:
            for r in records:
                journal.append(r)
        else:
            for i in range(0, len(records), batch):
                journal.append_many(records[i:i + batch])
        wall = time.perf_counter() - t0
        assert len(journal.records) == len(records)
    return len(records) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--batches", default="4,16,64")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="an audit's journal.jsonl whose records to append")
    args = ap.parse_args()
    from softrank.audit import journal as J

    key = {"store": "/bench", "store_sha256": "0" * 64, "tier": "auto",
           "softrank_certify": "bench"}
    records = (from_journal(args.source, args.records) if args.source is not None
               else [record(i) for i in range(args.records)])
    with tempfile.TemporaryDirectory(prefix="bench-journal-", dir=args.dir) as tmp:
        out = Path(tmp)
        base = timed(out, key, records, None)
        print(f"append (fsync per record):        {base:9.0f} records/s  1.00x", flush=True)
        if hasattr(J.Journal, "append_many"):
            for b in (int(t) for t in args.batches.split(",")):
                rate = timed(out, key, records, b)
                print(f"append_many, {b:>3} per batch (fsync each): {rate:9.0f} records/s  "
                      f"{rate / base:.2f}x", flush=True)
        fsync = os.fsync
        os.fsync = lambda fd: None  # type: ignore[assignment]
        try:
            rate = timed(out, key, records, None)
        finally:
            os.fsync = fsync
        print(f"append without fsync (flush only): {rate:9.0f} records/s  {rate / base:.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
