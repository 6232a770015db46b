"""kappa(C) brackets at r = rank C on the 72 MiniLM heads of one held-out text: the current
producer against the producer of a given git revision (needs the [models] extra).

Usage (per sequence length: about 2.5 CPU seconds per head to produce, under a second to check):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/intrinsic_fullrank.py --tokens 128 \
        --out /tmp/fullrank [--producer-rev REV]

runs ``softrank-certify produce OUT --model minilm --texts
benchmarks/intrinsic_heldout_text.txt --tokens T --intrinsic-ranks 32 --producers tsvd nonzero
--eps 0.25`` (with the intrinsic producer of ``REV`` swapped in when given: ``git show
REV:witnesses/producers/intrinsic.py``), then
``softrank-certify check OUT --json``, and prints median / p90 / max of the proved kappa
hi / lo at r = 32 and the producer's CPU seconds per head (from the records' claims).
With ``--no-check`` the producer's own float claims are summarised instead (for a slow
kernel run on an old producer's witnesses).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "benchmarks" / "intrinsic_heldout_text.txt"


def swap_producer(rev: str) -> None:
    """Replaces the functions of the intrinsic producer module by those of revision ``rev``."""
    from softrank.witnesses.producers import intrinsic as P

    src = subprocess.run(["git", "-C", str(ROOT), "show",
                          f"{rev}:witnesses/producers/intrinsic.py"],
                         check=True, capture_output=True, text=True).stdout
    exec(compile(src, f"{rev}:intrinsic.py", "exec"), P.__dict__)  # noqa: S102


def stats(v: list[float]) -> dict[str, float]:
    a = np.asarray(v)
    return {"n": len(v), "median": float(np.median(a)), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--producer-rev")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--rank", type=int, default=32)
    args = ap.parse_args()
    if args.producer_rev:
        swap_producer(args.producer_rev)
    from softrank.cli import main as cli

    store = Path(args.out)
    rc = cli(["produce", str(store), "--model", "minilm", "--texts", str(TEXT),
              "--tokens", str(args.tokens), "--intrinsic-ranks", str(args.rank),
              "--producers", "tsvd", "nonzero", "--eps", "0.25", "--quiet"])
    if rc not in (0, 1):
        print(f"produce exit {rc}", file=sys.stderr)
        return rc
    recs = [json.loads(ln) for ln in (store / "intrinsic.jsonl").read_text().splitlines()]
    recs = [r for r in recs if r.get("rank") == args.rank]
    cpu = [float(r["claims"]["seconds"]) for r in recs]
    out: dict[str, object] = {"tokens": args.tokens, "producer_rev": args.producer_rev or "HEAD",
                              "cpu_per_head": stats(cpu)}
    claims = [r["claims"]["kappa_upper"] / r["claims"]["kappa_lower"] for r in recs]
    out["float_claims"] = stats(claims)
    if not args.no_check:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            crc = cli(["check", str(store), "--json"])
        doc = json.loads(buf.getvalue())
        res = [r for r in doc["intrinsic"] if r.get("kind") == "rank" and r["rank"] == args.rank]
        ratios = [float(Fraction(r["kappa"]["hi"]) / Fraction(r["kappa"]["lo"])) for r in res]
        out.update(check_exit=crc, errors=doc["intrinsic_summary"]["errors"],
                   proved=stats(ratios),
                   check_seconds=stats([float(r["seconds"]) for r in res]))
    print(json.dumps(out, indent=1))
    (store / f"fullrank_r{args.rank}.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
