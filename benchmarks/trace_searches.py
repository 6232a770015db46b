"""Where the producers' work goes: every descent of ``bernstein`` and every run of ``alt_l1`` on
some MiniLM heads, with the phase it belongs to, its work units and the value it reached.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/trace_searches.py \\
        benchmarks/tuning_orchard.txt L0.H5,L2.H9 trace.jsonl

The heads are MiniLM's on the first paragraph of the text file at 128 tokens (the ``models``
extra), or the arrays named like ``L0.H5`` of an .npz file given instead of a text. For each
head and eps 0.35, 0.25, 0.15 (in that order) it runs ``alt_l1`` and then ``bernstein`` with the
ceiling alt_l1 claims, in work mode at the default budgets, and appends one JSON line: head,
eps, U, L, the work of each, and ``events``: ["desc", phase, p, work, F / goal] for each
descent (phase "hop", "_race", "augmented_start" or "-" for the key-set and grown descents)
and ["alt", iters, k, work, error / target, patient] for each alt_l1 run (iters 300 with
patient true: the l1 fit that starts one of bernstein's descents). Untrusted search internals,
for deciding where a search rule could save work; the rules themselves are measured with
``produce`` on a text they were not tuned on.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction

import numpy as np

from softrank.witnesses.producers import altl1
from softrank.witnesses.producers import bernstein as b
from softrank.witnesses.producers._common import budget_settings, work_done

EPS = (Fraction(7, 20), Fraction(1, 4), Fraction(3, 20))
_phase = ["-"]
_events: list[list] = []


def _tagged(name: str) -> None:
    orig = getattr(b, name)

    def run(*a, **kw):
        outer, _phase[0] = _phase[0], name
        try:
            return orig(*a, **kw)
        finally:
            _phase[0] = outer
    setattr(b, name, run)


def _install() -> None:
    for name in ("hop", "_race", "augmented_start"):
        _tagged(name)
    descend, fit = b.descend, altl1.alt_l1

    def traced_descend(A, W0, goal, deadline, **kw):
        w0 = work_done()
        F, W = descend(A, W0, goal, deadline, **kw)
        _events.append(["desc", _phase[0], int(W0.shape[1]), round(work_done() - w0, 3),
                        float(F / goal)])
        return F, W

    def traced_fit(A, k, t, U0, V0, **kw):
        w0 = work_done()
        out = fit(A, k, t, U0, V0, **kw)
        _events.append(["alt", kw.get("iters"), int(k), round(work_done() - w0, 3),
                        float(out[2] / t), bool(kw.get("patient"))])
        return out

    b.descend, altl1.alt_l1, b.alt_l1 = traced_descend, traced_fit, traced_fit


def main(npz: str, heads: str, out_path: str) -> None:
    """Appends the trace of ``heads`` (comma-separated) to ``out_path``."""
    _install()
    if npz.endswith(".npz"):
        arrays = dict(np.load(npz))
    else:
        from softrank.witnesses.models import Capture, read_texts

        caught = Capture("minilm").capture(read_texts(npz)[0], tokens=128)
        arrays = {f"L{h.layer}.H{h.head}": h.A for h in caught}
    with open(out_path, "a") as out:
        for head in heads.split(","):
            A = np.asarray(arrays[head], dtype=np.float64)
            for eps in EPS:
                _events.clear()
                with budget_settings("work"):
                    w = altl1.AlternatingL1().produce(A, eps)
                    upper = work_done()
                    c = b.Bernstein().produce(A, eps, stop_at=w.rank)
                    lower = work_done() - upper
                out.write(json.dumps({"head": head, "eps": str(eps), "U": w.rank,
                                      "L": None if c is None else c.rank,
                                      "upper_work": upper, "lower_work": lower,
                                      "events": _events}) + "\n")
                out.flush()
                print(head, eps, w.rank, None if c is None else c.rank, round(upper, 1),
                      round(lower, 1), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
