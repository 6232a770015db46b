"""Lower bounds on real heads: today's best lower producers against ``bernstein``.

Usage (heads as an npz of m x N probability matrices, one array per head):

    nice -n 19 .venv/bin/python benchmarks/bernstein_heads.py --npz heads.npz --eps 0.25 \
        [--every 3] [--out rows.jsonl]

Per head: L of ``keyset`` and ``decoder_lp`` (their default budgets, each certificate
rechecked by ``certify.check_lower``), L of ``bernstein`` and the seconds each took; then the
heads where L rose, the total and the median rise.  The reported L is the max over the
producers, so it never falls.  A Bernstein certificate counts only when checked: by
``certify.check_lower`` when the kernel knows the kind, else by the float64 bound below,
which charges every rounding of P A W - W and of the norms a priori (Higham, Accuracy and
Stability of Numerical Algorithms, 2002, section 3.5: |fl(x.y) - x.y| <= gamma_n |x|.|y|,
gamma_n = n u / (1 - n u)).  ``--out`` appends one JSON line per head (resumable: heads
already in the file are skipped).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from softrank.certify import check_lower
from softrank.witnesses.producers import get_producer

U = 2.0 ** -53


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def bernstein_bound(A: np.ndarray, W: np.ndarray, P: np.ndarray, J: np.ndarray,
                    eps: Fraction) -> float:
    """Returns an upper bound for ||P A W - W||_inf + eps ||P||_inf (inf when W[J] != I).

    Products in float64 with a-priori error bounds; sums of nonnegative terms bounded by
    (1 + gamma_n) and one more rounding per operation, all charged upwards.
    """
    p = W.shape[1]
    if (J.shape != (p,) or len(set(J.tolist())) != p
            or not np.array_equal(W[J], np.eye(p))):
        return float("inf")
    m, N = A.shape
    PA = P @ A
    err_PA = _gamma(m) * (np.abs(P) @ np.abs(A))
    R = PA @ W - W
    # |fl(PA) W - PA W| <= err_PA |W|; fl of the product adds gamma_N |fl(PA)| |W|; the
    # subtraction of W one more relative u on |R|
    err = (err_PA @ np.abs(W)) * (1 + _gamma(N)) + _gamma(N + 1) * (np.abs(PA) @ np.abs(W))
    err += U * (np.abs(R) + np.abs(W))
    rows = (np.abs(R) + err).sum(axis=1) * (1 + _gamma(p + 1))
    nP = np.abs(P).sum(axis=1).max() * (1 + _gamma(m + 1))
    e_up = float(np.nextafter(float(eps), np.inf))
    return float((rows.max() + e_up * nP) * (1 + 4 * U))


def bernstein_holds(A: np.ndarray, arrays: dict, rank: int, eps: Fraction) -> bool:
    """True when the kernel (or, without a Bernstein check, the float64 bound) confirms."""
    cert = {"kind": "bernstein", "rank": rank, **arrays}
    try:
        return check_lower(A, cert, eps).status == "holds"
    except Exception:  # a kernel without the kind: the a-priori float64 bound decides
        return bernstein_bound(A, arrays["W"], arrays["P"], arrays["J"], eps) < 1.0


def run_head(A: np.ndarray, eps: Fraction) -> dict:
    out: dict = {}
    for name in ("keyset", "decoder_lp", "bernstein"):
        t0 = time.perf_counter()
        c = get_producer(name).produce(A, eps)
        out[f"t_{name}"] = round(time.perf_counter() - t0, 2)
        L = 0
        if c is not None:
            if c.kind == "bernstein":
                L = c.rank if bernstein_holds(A, c.arrays, c.rank, eps) else 0
            else:
                cert = {"kind": c.kind, "rank": c.rank, **c.arrays}
                L = c.rank if check_lower(A, cert, eps).status == "holds" else 0
        out[f"L_{name}"] = L
    out["L_today"] = max(out["L_keyset"], out["L_decoder_lp"])
    out["L_new"] = max(out["L_today"], out["L_bernstein"])
    return out


def summary(rows: list[dict]) -> str:
    rises = [r["L_new"] - r["L_today"] for r in rows]
    up = [r for r, d in zip(rows, rises, strict=True) if d > 0]
    t_old = sum(r["t_keyset"] + r["t_decoder_lp"] for r in rows)
    t_new = sum(r["t_bernstein"] for r in rows)
    return (f"{len(rows)} heads: L rose on {len(up)} ({', '.join(r['head'] for r in up)}); "
            f"total rise {sum(rises)}; median rise {statistics.median(rises) if rises else 0}; "
            f"median L {statistics.median([r['L_today'] for r in rows]) if rows else 0} -> "
            f"{statistics.median([r['L_new'] for r in rows]) if rows else 0}; "
            f"seconds keyset+decoder_lp {t_old:.0f}, bernstein {t_new:.0f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--npz", required=True, help="heads: one m x N probability array each")
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--every", type=int, default=1, help="every k-th head (sorted names)")
    ap.add_argument("--start", type=int, default=0, help="first head index of the subset")
    ap.add_argument("--out", help="JSON lines, one per head (resumable)")
    args = ap.parse_args(argv)
    eps = Fraction(args.eps)
    with np.load(args.npz, allow_pickle=False) as z:
        heads = {k: np.asarray(z[k], dtype=np.float64) for k in sorted(z.files)}
    names = list(heads)[args.start::args.every]
    rows: list[dict] = []
    done: set[str] = set()
    if args.out and Path(args.out).exists():
        for line in Path(args.out).read_text().splitlines():
            r = json.loads(line)
            if r.get("eps") == str(eps) and r["head"] in names:
                rows.append(r)
                done.add(r["head"])
    print(f"{'head':8} {'keyset':>6} {'dec_lp':>6} {'bern':>5} {'L':>7}   "
          "seconds (ks / dlp / bern)")
    for r in rows:
        print(_line(r))
    for name in names:
        if name in done:
            continue
        r = {"head": name, "eps": str(eps), **run_head(heads[name], eps)}
        rows.append(r)
        print(_line(r), flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(r) + "\n")
    print(summary(rows))
    return 0


def _line(r: dict) -> str:
    d = r["L_new"] - r["L_today"]
    return (f"{r['head']:8} {r['L_keyset']:6d} {r['L_decoder_lp']:6d} {r['L_bernstein']:5d} "
            f"{r['L_today']:3d}->{r['L_new']:<3d}{' +' + str(d) if d else '   '} "
            f"{r['t_keyset']:6.1f} / {r['t_decoder_lp']:5.1f} / {r['t_bernstein']:5.1f}")


if __name__ == "__main__":
    sys.exit(main())
