"""How many small cells does the exact oracle close with and without nerve-chain certificates?

Random softmax cells (``study_topology_tightness.cells``: side x side, 3-decimal rational
entries with unit row sums), five tolerances each; every cell runs through ``oracle`` twice in
this process, once as shipped and once with the nerve-chain step switched off, with the same
budgets (the ``oracle`` command's default: 60 s for the call, which also bounds each
search).  Prints one JSON line per (cell, eps) and a summary: brackets closed,
median and total U - L, CPU seconds per call of each variant and their ratio.  Every bracket
printed is re-checked by ``verify_result``.

    cd benchmarks && python bench_oracle_nerve.py --side 5 --cells 30 [--seed 7]
        [--budget 60] [--total-budget 60]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time

from study_topology_tightness import EPS, cells  # benchmarks/ (scripts run from this folder)

from softrank.exact import verify_result

# the module, not the function the package exports under the same name
oracle_mod = importlib.import_module("softrank.exact.oracle")


def run(Q, eps: str, budget: float, total: float, nerve: bool) -> tuple[object, float]:
    keep = oracle_mod._nerve_step
    if not nerve:
        oracle_mod._nerve_step = lambda res: None
    try:
        t0 = time.process_time()
        res = oracle_mod.oracle(Q, eps, budget=budget, total_budget=total)
        secs = time.process_time() - t0
    finally:
        oracle_mod._nerve_step = keep
    if verify_result(res):
        raise SystemExit(f"bracket failed its exact re-check: {verify_result(res)}")
    return res, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", type=int, default=5)
    ap.add_argument("--cells", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds for each of the nerve-chain and subspace searches")
    ap.add_argument("--total-budget", type=float, default=60.0,
                    help="seconds for the whole call (the oracle command's default)")
    ap.add_argument("--new-only", action="store_true", help="skip the run without the step")
    args = ap.parse_args()
    variants = (True,) if args.new_only else (True, False)
    stats = {v: {"closed": 0, "gaps": [], "cpu": 0.0} for v in variants}
    for cell, (Q, _, _) in enumerate(cells(args.side, args.cells, args.seed)):
        for eps in EPS:
            line = {"cell": cell, "eps": eps}
            for v in variants:
                res, secs = run(Q, eps, args.budget, args.total_budget, v)
                s = stats[v]
                s["closed"] += res.decided
                s["gaps"].append(res.upper - res.lower)
                s["cpu"] += secs
                line["with" if v else "without"] = {
                    "bracket": [res.lower, res.upper], "kind": res.lower_certificate.kind,
                    "cpu_s": round(secs, 3)}
            print(json.dumps(line), flush=True)
    pairs = args.cells * len(EPS)
    summary = {v and "with_nerve" or "without_nerve": {
        "pairs": pairs, "closed": s["closed"], "median_gap": statistics.median(s["gaps"]),
        "total_gap": sum(s["gaps"]), "cpu_s_per_call": round(s["cpu"] / pairs, 3)}
        for v, s in stats.items()}
    if not args.new_only:
        summary["cpu_ratio_with_over_without"] = round(stats[True]["cpu"] / stats[False]["cpu"], 3)
    print(json.dumps({"side": args.side, "seed": args.seed, "budget": args.budget,
                      "total_budget": args.total_budget,
                      "summary": summary}), flush=True)


if __name__ == "__main__":
    main()
