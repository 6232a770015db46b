"""Can a stalled polytope lift be repaired locally by any re-triangulation?  The study behind the
"limits" paragraph of proofs_notes/polytope.md.

Usage (needs the [models] extra; minutes per head, most of it in the exact enumeration):

    .venv/bin/python benchmarks/study_local_fill.py --texts benchmarks/heldout_beekeeper.txt \
        --heads L4.H2 L5.H6 [--eps 0.25] [--new 12] [--ceiling 6 6]

For each MiniLM head (128 tokens) it runs the Bernstein search at the defaults (work mode), takes
the best subspace that missed the next rank p, forms the labelled facets of conv(+-A W) and
solves one LP per facet.  The facets no z serves (LP optimum <= t) form regions (connected
through ridges).  For each region R it asks whether *any* GF(2) chain of served p-label sets
has the same boundary as R (so could replace R in a certificate: an edge subdivision is one
such chain, a cone from a new label another), over the labels of R and the ``--new`` labels
that serve the boundary ridges best: every served set of p labels among them is enumerated
(a set is tried only when all its subsets of one label fewer are served; one LP each) and the
boundary equation is solved exactly over GF(2).  "fillable": False means no re-triangulation
over those labels exists, whatever the geometry.  Float64 LPs decide which sets are served:
a study, not a proof.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict

import numpy as np
from gf2 import solvable  # benchmarks/gf2.py (scripts run from this folder)

from softrank.witnesses.models import Capture, read_texts
from softrank.witnesses.producers import bernstein, polytope, subdivide
from softrank.witnesses.producers._common import budget_settings, one_blas_thread, target


def boundary(simplices) -> set:
    count = Counter(s - {x} for s in simplices for x in s)
    return {r for r, c in count.items() if c % 2}


def regions(bad: set) -> list[set]:
    by_ridge = defaultdict(list)
    for f in bad:
        for x in f:
            by_ridge[f - {x}].append(f)
    out, seen = [], set()
    for f in bad:
        if f in seen:
            continue
        comp, stack = {f}, [f]
        seen.add(f)
        while stack:
            g = stack.pop()
            for x in g:
                for h in by_ridge[g - {x}]:
                    if h not in seen:
                        seen.add(h)
                        comp.add(h)
                        stack.append(h)
        out.append(comp)
    return out


def fill_study(A: np.ndarray, W: np.ndarray, eps: float, new: int) -> dict:
    got = polytope.subspace_certificate(A, W)
    if got is None:
        return {"lift": "qhull refused"}
    _, I, F, _ = got
    k, m, p = len(I), A.shape[0], W.shape[1]
    goal = target(eps) / (1.0 - 1e-6)
    lp = subdivide.LabelLP(A)
    facets = [frozenset(2 * int(I[x % k]) + (x >= k) for x in f) for f in F]
    bad = {f for f in facets if not lp.best(list(f))[1] > goal}
    out = {"p": p, "facets": len(facets), "weak": len(bad), "regions": []}
    for region in regions(bad):
        ridges = boundary(region)
        own = sorted(set().union(*region))
        score = []
        for v in range(2 * m):
            if v in own:
                continue
            vals = [lp.best(list(r) + [v])[1] if v not in r and v ^ 1 not in r else -1.0
                    for r in ridges]
            score.append((float(np.sort(vals)[len(vals) // 4]), v))
        labels = sorted(own + [v for _, v in sorted(score, reverse=True)[:new]])
        level = [frozenset([v]) for v in labels]
        for _ in range(p - 1):
            known, grown = set(level), []
            for a in level:
                for v in labels:
                    c = a | {v}
                    if v <= max(a) or v ^ 1 in a or not all(c - {x} in known for x in a):
                        continue
                    if lp.best(list(c))[1] > goal:
                        grown.append(c)
            level = grown
        fillable = solvable([boundary([c]) for c in level], ridges)
        out["regions"].append({"weak facets": len(region), "labels": len(labels),
                               "served p-sets": len(level), "fillable": fillable})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", required=True)
    ap.add_argument("--text-index", type=int, default=0)
    ap.add_argument("--heads", nargs="+", required=True, help="e.g. L4.H2")
    ap.add_argument("--ceiling", nargs="+", type=int, help="an upper end per head (optional)")
    ap.add_argument("--eps", type=float, default=0.25)
    ap.add_argument("--new", type=int, default=12)
    args = ap.parse_args()
    heads = {h.id: h.A for h in Capture("minilm").capture(read_texts(args.texts)[args.text_index],
                                                           tokens=128, text_index=args.text_index)}
    for j, name in enumerate(args.heads):
        A = np.asarray([a for i, a in heads.items() if f".{name}." in f".{i}."][0], dtype=float)
        ceiling = args.ceiling[j] if args.ceiling else None
        t0 = time.process_time()
        with one_blas_thread(), budget_settings("work", 1.0, {}):
            near: dict = {}
            found = bernstein.search(A, args.eps, bernstein.DEFAULT_BUDGET, near_out=near,
                                     ceiling=ceiling)
            p = (found[0] if found else 0) + 1
            row = {"head": name, "bernstein rank": p - 1}
            if p in near:
                row.update(fill_study(A, near[p][1], args.eps, args.new))
        row["cpu s"] = round(time.process_time() - t0, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
