"""Checking the intrinsic witnesses of one head vs a plain float64 evaluation, same process.

One synthetic 256 x 256 head (logits Q K^T / sqrt(d) with d = 32, Q and K Gaussian with a
decaying spectrum), ranks r = 1, 2, 4, 8. The witnesses (offsets and a key cycle for tau;
gauge, centres and enclosing-ball dual weights plus one rectangle for kappa) come from the
float prototypes in tests/ and are not timed. Timed:

* checked: `interaction_from_logits` once, then per r `tau_bracket` and `kappa_bracket`
  (everything the kernel does to prove the brackets);
* plain: the same quantities in float64 without any bound (centred logits, max row
  oscillation of E - b, the cycle mean, the two radii, the nuclear norm of the weighted
  covariance product).

``--real L H`` uses layer L, head H of MiniLM on the joined example texts, truncated to 256
tokens, instead (needs the [models] extra).

Target: checked <= 2 s. Run: ``.venv/bin/python benchmarks/bench_intrinsic.py [--reps N]
[--real 2 5]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from softrank.certify.intrinsic.interaction import interaction_from_logits  # noqa: E402
from softrank.certify.intrinsic.kappa import kappa_bracket  # noqa: E402
from softrank.certify.intrinsic.tau import tau_bracket  # noqa: E402
from tests.intrinsic_kappa_witness import kappa_witness_fw  # noqa: E402
from tests.intrinsic_witness import tau_witness  # noqa: E402

RANKS = (1, 2, 4, 8)


def head(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    spec = 2.0 ** -np.arange(d / 4, step=0.25)
    Q = rng.standard_normal((n, d)) * spec
    K = rng.standard_normal((n, d)) * spec
    return Q @ K.T * (4 / np.sqrt(d))


def witnesses(H: np.ndarray) -> list[dict]:
    C = interaction_from_logits(H)
    U, s, Vt = np.linalg.svd(C.mid)
    out = []
    for r in RANKS:
        X, Y = U[:, :r] * np.sqrt(s[:r]), Vt[:r].T * np.sqrt(s[:r])
        b, cyc, rows = tau_witness(C.mid - X @ Y.T)
        w = kappa_witness_fw(X, Y, steps=40)
        rect = [int(np.argmax(X[:, 0])), int(np.argmin(X[:, 0])),
                int(np.argmax(Y[:, 0])), int(np.argmin(Y[:, 0]))]
        out.append({"X": X, "Y": Y, "b": b, "cycle": cyc, "cycle_rows": rows, "G": w["G"],
                    "a": w["a"], "c": w["c"], "lam": w["lam"], "mu": w["mu"],
                    "rects": [rect]})
    return out


def checked(H: np.ndarray, wits: list[dict]) -> list[tuple[float, float, float]]:
    C = interaction_from_logits(H)
    res = []
    for w in wits:
        t = tau_bracket(C, w["X"], w["Y"], b=w["b"], cycle=w["cycle"],
                        cycle_rows=w["cycle_rows"])
        k = kappa_bracket(w["X"], w["Y"], G=w["G"], a=w["a"], c=w["c"], lam=w["lam"],
                          mu=w["mu"], rects=w["rects"])
        res.append((float(t.tau.ratio or 0), float(k.ratio or 0), float(k.hi)))
    return res


def plain(H: np.ndarray, wits: list[dict]) -> None:
    C = H - H.mean(axis=1, keepdims=True) - H.mean(axis=0, keepdims=True) + H.mean()
    for w in wits:
        X, Y = w["X"], w["Y"]
        F = C - X @ Y.T - w["b"][None, :]
        _ = (F.max(axis=1) - F.min(axis=1)).max()
        cyc, rows = w["cycle"], w["cycle_rows"]
        _ = np.mean(F[rows, cyc] - F[rows, np.roll(cyc, -1)])
        G = w["G"]
        XG, YG = X @ G, Y @ np.linalg.inv(G).T
        _ = np.sqrt(((XG - w["a"]) ** 2).sum(1).max() * ((YG - w["c"]) ** 2).sum(1).max())
        lam, mu = w["lam"], w["mu"]
        i, j = np.nonzero(lam)[0], np.nonzero(mu)[0]  # the supports, as the kernel does
        Xt, Yt = X[i] - lam[i] @ X[i], Y[j] - mu[j] @ Y[j]
        B = np.sqrt(lam[i])[:, None] * (Xt @ Yt.T) * np.sqrt(mu[j])[None, :]
        _ = np.linalg.svd(B, compute_uv=False).sum()


def median_time(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--real", type=int, nargs=2, metavar=("LAYER", "HEAD"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.real:
        from softrank.witnesses.models import Capture, read_texts

        root = Path(__file__).resolve().parent.parent
        text = " ".join(read_texts(root / "examples" / "minilm_texts.txt"))
        H = next(Capture("minilm").capture(text, tokens=args.n, layers=[args.real[0]],
                                           heads=[args.real[1]])).logits
        print(f"# MiniLM layer {args.real[0]} head {args.real[1]}, {args.n} tokens")
    else:
        H = head(args.n, 32, rng)
    wits = witnesses(H)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# one {args.n} x {args.n} head, r in {RANKS}, cpus={os.cpu_count()}, "
          f"load average {load:.2f}")
    for r, (tr, kr, khi) in zip(RANKS, checked(H, wits), strict=True):
        print(f"r = {r}: tau upper/lower = {tr:.12g}, kappa upper/lower = {kr:.6g} "
              f"(kappa <= {khi:.6g})")
    t_plain = median_time(lambda: plain(H, wits), args.reps)
    t_check = median_time(lambda: checked(H, wits), args.reps)
    print(f"plain float64: {t_plain * 1e3:.1f} ms, checked: {t_check * 1e3:.1f} ms, "
          f"ratio {t_check / t_plain:.1f} (target: checked <= 2 s)")


if __name__ == "__main__":
    main()
