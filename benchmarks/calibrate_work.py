"""Calibrates the work units of ``--budget-mode work`` against CPU seconds.

Usage:

    nice -n 19 .venv/bin/python benchmarks/calibrate_work.py [--npz heads.npz] \
        [--eps 0.25] [--budget-scale 0.25] [--producers alt_l1 bernstein rowset]

Every budgeted producer is run on each head twice: in cpu mode (its budget CPU seconds, the
work units it was charged counted alongside) and in work mode (its budget work units, the CPU
seconds it took measured).  Printed per producer and head: CPU seconds and work units of each
run, and units per CPU second of the cpu-mode run.  The unit costs in
``witnesses/producers/_common.py`` are right when that ratio is near 1 on 128 x 128 heads
(then the default work budget takes about as long as the default CPU budget).  Without
``--npz`` the heads are three 128 x 128 softmax(Q K^T / sqrt(64)) matrices of seeded Gaussian
Q, K at temperatures 1, 2 and 4.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

from softrank.witnesses.producers import get_producer
from softrank.witnesses.producers._common import (
    SCALE_ENV,
    budget_settings,
    one_blas_thread,
    work_done,
)


def synthetic_heads() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261202)
    heads = {}
    for temp in (1.0, 2.0, 4.0):
        Q, K = rng.standard_normal((128, 64)), rng.standard_normal((128, 64))
        L = temp * (Q @ K.T) / 8.0
        E = np.exp(L - L.max(axis=1, keepdims=True))
        heads[f"T{temp:g}"] = E / E.sum(axis=1, keepdims=True)
    return heads


def measure(name: str, A: np.ndarray, eps: Fraction, mode: str, scale: float
            ) -> tuple[float, float, object]:
    with one_blas_thread(), budget_settings(mode, scale, {}):
        t0, w0 = time.process_time(), work_done()
        out = get_producer(name).produce(A, eps)
        return time.process_time() - t0, work_done() - w0, getattr(out, "rank", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npz")
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--budget-scale", type=float, default=0.25)
    ap.add_argument("--producers", nargs="+", default=["alt_l1", "bernstein", "rowset"])
    args = ap.parse_args()
    heads = dict(np.load(args.npz)) if args.npz else synthetic_heads()
    eps = Fraction(args.eps)
    print(f"# {SCALE_ENV} = {args.budget_scale}; columns: producer head | cpu mode: CPU s, "
          "units, units/s, rank | work mode: CPU s, units, rank")
    for name in args.producers:
        for hid, A in heads.items():
            cs, cu, cr = measure(name, A, eps, "cpu", args.budget_scale)
            ws, wu, wr = measure(name, A, eps, "work", args.budget_scale)
            print(f"{name:10s} {hid:6s} | {cs:7.2f} {cu:8.2f} {cu / max(cs, 1e-9):6.2f} "
                  f"{cr!s:>4} | {ws:7.2f} {wu:8.2f} {wr!s:>4}", flush=True)


if __name__ == "__main__":
    main()
