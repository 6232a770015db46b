"""Bracket quality on real heads: all 72 MiniLM heads of one text, validated U/L and resolved share.

Usage (needs the [models] extra; per eps, about 1.5 min at 64 tokens and 5 min at 128 tokens
on one core):

    .venv/bin/python benchmarks/quality_minilm.py --tokens 64 128 --eps 0.25

Reference run (text 0, 72 heads, every claim confirmed by the kernel):
T=64 eps=0.25: median L 5, U 8, U/L 1.44, resolved 98.6%;
T=128 eps=0.25: median L 5.5, U 11, U/L 1.61, resolved 95.8%.

For each sequence length it builds (or resumes) a store under ``--out`` with the alternating-l1
upper producer and every built-in lower producer, then rechecks every bracket with the kernel
(``certify.check_bracket`` through the runner, operator slack chi included) and reports the
median validated L, U, U/L and the share of resolved brackets (U <= 2L, or U - L <= 2, or
U - L <= full rank / 10).  Validated means: a witness or certificate the kernel does not confirm
counts as full rank (upper) or 0 (lower).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from softrank.cli import main as cli_main

LOWERS = ["nonzero", "frobenius_tail", "pinv_decoder", "submatrix", "keyset", "decoder_lp"]
TEXTS = Path(__file__).resolve().parent.parent / "examples" / "minilm_texts.txt"


def resolved(L: int, U: int, full: int) -> bool:
    return U <= 2 * L or U - L <= 2 or 10 * (U - L) <= full


def validated_brackets(store: str | Path, jobs: int = 1) -> list[dict[str, Any]]:
    """Returns per (operator, eps): validated L (max over records) and U (min over records)."""
    import certify

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    if hasattr(certify, "check_bracket"):
        from softrank.runner import iter_checks

        for r in iter_checks(str(store), jobs=jobs):
            if "error" in r:
                raise SystemExit(f"input error: {r['error']}")
            key = (r["operator"], r["eps"])
            full = min(r["shape"])
            cur = rows.setdefault(key, {"operator": key[0], "eps": key[1], "L": 0, "U": full,
                                        "full": full, "L_claim": 0, "U_claim": full,
                                        "lower_kind": None})
            cur["U"] = min(cur["U"], int(r["upper"]))
            cur["U_claim"] = min(cur["U_claim"], int(r["upper_claim"]))
            if r.get("lower") is not None and int(r["lower"]) > cur["L"]:
                cur["L"], cur["lower_kind"] = int(r["lower"]), r.get("lower_kind")
            cur["L_claim"] = max(cur["L_claim"], int(r.get("lower_claim") or 0))
        return list(rows.values())
    # kernel for lower certificates not available: uppers validated, lowers as claimed
    print("note: certify.check_bracket missing; lower ends are UNVALIDATED float claims",
          file=sys.stderr)
    from witnesses import open_store

    reader = open_store(store)
    by_op: dict[str, list[Any]] = defaultdict(list)
    for br in reader.brackets:
        by_op[br.operator].append(br)
    for op_id, brs in by_op.items():
        op = reader.operator(op_id)
        A = op.load()["A"]
        full = min(op.shape)
        for br in brs:
            key = (op_id, str(br.eps))
            cur = rows.setdefault(key, {"operator": op_id, "eps": str(br.eps), "L": 0,
                                        "U": full, "full": full, "L_claim": 0,
                                        "U_claim": full, "lower_kind": None})
            up, _ = br.load()
            if certify.check_upper(A, up["U"], up["V"], br.eps).holds:
                cur["U"] = min(cur["U"], br.upper.rank)
            cur["U_claim"] = min(cur["U_claim"], br.upper.rank)
            if br.lower is not None and br.lower.rank > cur["L"]:
                cur["L"] = cur["L_claim"] = br.lower.rank
                cur["lower_kind"] = br.lower.kind
    return list(rows.values())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["U"] / r["L"] if r["L"] else float("inf") for r in rows]
    kinds: dict[str, int] = defaultdict(int)
    for r in rows:
        kinds[str(r["lower_kind"])] += 1
    return {
        "operators": len(rows),
        "median_L": statistics.median(r["L"] for r in rows),
        "median_U": statistics.median(r["U"] for r in rows),
        "median_U_over_L": statistics.median(ratios),
        "resolved_share": sum(resolved(r["L"], r["U"], r["full"]) for r in rows) / len(rows),
        "median_gap": statistics.median(r["U"] - r["L"] for r in rows),
        "closed": sum(r["U"] == r["L"] for r in rows),
        "claims_not_confirmed": sum(r["L"] != r["L_claim"] or r["U"] != r["U_claim"]
                                    for r in rows),
        "best_lower_kind": dict(kinds),
    }


def combine(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The validated bracket of each (operator, eps) over the records of both runs."""
    out = {(r["operator"], r["eps"]): dict(r) for r in a}
    for r in b:
        key = (r["operator"], r["eps"])
        cur = out.setdefault(key, dict(r))
        if r["U"] < cur["U"]:
            cur["U"], cur["U_claim"] = r["U"], r["U_claim"]
        if r["L"] > cur["L"]:
            cur["L"], cur["L_claim"], cur["lower_kind"] = r["L"], r["L_claim"], r["lower_kind"]
    return list(out.values())


def report_changes(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Prints the heads whose validated L or U differs between the runs."""
    old = {(r["operator"], r["eps"]): r for r in base}
    up = down = 0
    for r in sorted(new, key=lambda r: (r["operator"], r["eps"])):
        o = old.get((r["operator"], r["eps"]))
        if o is None or (o["L"], o["U"]) == (r["L"], r["U"]):
            continue
        worse = r["L"] < o["L"] or r["U"] > o["U"]
        up += not worse
        down += worse
        print(f"  {r['operator']} eps={r['eps']}: [{o['L']}, {o['U']}] -> [{r['L']}, {r['U']}]"
              f"{'  WORSE' if worse else ''}")
    print(f"  {up} heads tighter, {down} with an end worse than the baseline")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--eps", nargs="+", default=["0.25"])
    ap.add_argument("--text-index", type=int, default=0)
    ap.add_argument("--texts", default=str(TEXTS))
    ap.add_argument("--out", default="out/quality_minilm")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--producers", nargs="+", default=None,
                    help="producers to run (default: alt_l1 and every built-in lower one)")
    ap.add_argument("--baseline", default=None,
                    help="a directory of stores from an earlier run (same layout): per-head "
                         "comparison, and the bracket of both runs' records together")
    args = ap.parse_args(argv)
    producers = args.producers or ["alt_l1", *LOWERS]
    for T in args.tokens:
        store = Path(args.out) / f"minilm_T{T}"
        rc = cli_main(["produce", str(store), "--model", "minilm", "--texts", args.texts,
                       "--text-index", str(args.text_index), "--tokens", str(T),
                       "--eps", *args.eps, "--producers", *producers,
                       "--jobs", str(args.jobs), "--quiet"])
        if rc == 2:
            return rc
        rows = validated_brackets(store, jobs=args.jobs)
        runs = [("this run", rows)]
        if args.baseline:
            base = validated_brackets(Path(args.baseline) / f"minilm_T{T}", jobs=args.jobs)
            runs = [("baseline", base), *runs, ("both", combine(base, rows))]
            report_changes(base, rows)
        for label, rs in runs:
            for eps in sorted({r["eps"] for r in rs}):
                s = summarize([r for r in rs if r["eps"] == eps])
                print(f"[{label}] T={T} eps={eps}: {s['operators']} heads, median L "
                      f"{s['median_L']}, median U {s['median_U']}, median U/L "
                      f"{s['median_U_over_L']:.2f}, median U-L {s['median_gap']}, closed "
                      f"{s['closed']}, resolved {100 * s['resolved_share']:.1f}%, claims not "
                      f"confirmed {s['claims_not_confirmed']}, best lower kinds "
                      f"{s['best_lower_kind']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
