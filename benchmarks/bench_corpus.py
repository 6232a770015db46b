"""Corpus-scale recheck: validated time vs plain float64 time for the same work, same process.

Builds (once, cached in ``--dir``) a synthetic corpus like a published study's: operators
256 x 256 whose operator of record is the row softmax of stored float32 logits (attention-like:
Q K^T / sqrt(32) with gaussian Q, K), float32 A, and per eps in {0.15, 0.25, 0.35} a
truncated-SVD upper witness and a pseudoinverse decoder lower certificate.  Full size is 3,334
operators x 3 eps = 10,002 brackets (about 6 GB); ``--operators N`` builds a smaller one.

Then, in one process, it times
  plain     : load every operator's and bracket's arrays, the float64 row-l1 error of U V and
              the float64 decoder inequality (what an unvalidated recheck does);
  validated : ``softrank.runner.iter_checks`` (chi charged, every rounding accounted for)
              with 1 worker and with 2 worker processes;
and prints the ratio validated / plain, brackets per second, the 2-worker speed-up, CPU seconds
(this process plus its workers: robust on a busy machine, and total CPU at 2 workers against
1 worker shows the parallel overhead), and the load average before and after each timing
(wall times on a loaded machine are not comparable).

Run: ``.venv/bin/python benchmarks/bench_corpus.py --operators 200``  (reduced size) or
without ``--operators`` for the full corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

EPS = ("0.15", "0.25", "0.35")
DECODER_BUDGET = 1.0 - 1e-6


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _attention(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    d = 32
    Q = rng.standard_normal((n, d)) * rng.uniform(0.8, 2.0)
    K = rng.standard_normal((n, d))
    L = (Q @ K.T / np.sqrt(d)).astype(np.float32)
    X = L.astype(np.float64)
    E = np.exp(X - X.max(axis=1, keepdims=True))
    return L, (E / E.sum(axis=1, keepdims=True)).astype(np.float32)


def _inf(M: np.ndarray) -> float:
    return float(np.abs(M).sum(axis=1).max())


def _decoder_value(A, D, W, X, eps: float) -> float:
    M = D @ A @ W
    return _inf(np.eye(X.shape[0]) - X @ M) + _inf(X @ D) * _inf(W) * eps


def _witnesses(A: np.ndarray, eps: float, Us, s, Vt) -> tuple[dict, dict | None]:
    """Least-rank truncated SVD with float64 error <= eps (1 - 1e-9), and the largest
    pseudoinverse decoder with float64 value <= budget (binary searches, untrusted)."""
    t = eps * (1 - 1e-9)
    lo, hi = 1, A.shape[1]
    while lo < hi:
        k = (lo + hi) // 2
        if np.abs(A - (Us[:, :k] * s[:k]) @ Vt[:k]).sum(axis=1).max() <= t:
            hi = k
        else:
            lo = k + 1
    up = {"kind": "factors", "rank": lo, "U": Us[:, :lo] * s[:lo], "V": Vt[:lo].copy()}
    # D = U_p^T, W = V_p, X = diag(1/s_p): D A W is U^T A V cut to p x p, formed once
    M = Us.T @ A @ Vt.T
    col_d = np.abs(Us).sum(axis=0)  # l1 norm of row j of U^T
    best = None
    lo, hi = 1, int(np.sum(s > s[0] * 1e-12))
    while lo <= hi:
        p = (lo + hi) // 2
        Xd = 1.0 / s[:p]
        delta = _inf(np.eye(p) - Xd[:, None] * M[:p, :p])
        w_inf = float(np.abs(Vt[:p]).sum(axis=0).max())
        value = delta + float((Xd * col_d[:p]).max()) * w_inf * eps
        if value <= DECODER_BUDGET:
            best = p
            lo = p + 1
        else:
            hi = p - 1
    if best is not None:
        p = best
        best = {"kind": "decoder", "rank": p, "D": Us[:, :p].T.copy(), "W": Vt[:p].T.copy(),
                "X": np.diag(1.0 / s[:p])}
    return up, best


def build(path: Path, n_ops: int, size: int, seed: int = 0) -> None:
    from softrank.witnesses import Store

    meta = path / "bench.json"
    want = {"operators": n_ops, "size": size, "seed": seed, "eps": list(EPS)}
    if meta.is_file() and json.loads(meta.read_text()) == want:
        return
    if path.exists():
        raise SystemExit(f"{path} exists and is not this corpus; remove it or pick --dir")
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    with Store.create(path, description="bench_corpus synthetic corpus") as st:
        for o in range(n_ops):
            L, A = _attention(rng, size)
            oid = st.add_operator(A, family="synthetic", logits=L, id=f"op{o:05d}")
            A64 = A.astype(np.float64)
            Us, s, Vt = np.linalg.svd(A64, full_matrices=False)
            for e in EPS:
                up, lo = _witnesses(A64, float(e), Us, s, Vt)
                st.add_bracket(oid, e, up, lo, id=f"{oid}-e{e}",
                               producer={"upper": "tsvd", "lower": "pinv_decoder"})
            if (o + 1) % 100 == 0:
                print(f"# built {o + 1}/{n_ops} operators ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
    meta.write_text(json.dumps(want))


def plain_recheck(path: Path) -> int:
    """The unvalidated float64 recheck of every bracket; returns the number of brackets."""
    from softrank.witnesses import open_store

    reader = open_store(path)
    by_op: dict[str, list] = {}
    for b in reader.brackets:
        by_op.setdefault(b.operator, []).append(b)
    n = 0
    for op_id, brs in by_op.items():
        with np.load(reader.operator(op_id).path) as z:
            A = z["A"].astype(np.float64)
            _ = z["logits"]
        for b in brs:
            with np.load(b.path) as z:
                arrs = {k: z[k] for k in z.files}
            e = float(b.eps)
            _ = np.abs(A - arrs["upper.U"] @ arrs["upper.V"]).sum(axis=1).max() <= e
            if "lower.X" in arrs:
                _ = _decoder_value(A, arrs["lower.D"], arrs["lower.W"], arrs["lower.X"], e) < 1
            n += 1
    return n


def validated(path: Path, jobs: int) -> tuple[int, dict]:
    from softrank.runner import iter_checks

    recs = list(iter_checks(str(path), jobs=jobs))
    errors = sum("error" in r for r in recs)
    outcomes: dict[str, int] = {}
    for r in recs:
        key = f"{r.get('upper_outcome')}/{r.get('lower_outcome')}"
        outcomes[key] = outcomes.get(key, 0) + 1
    return len(recs), {"errors": errors, "outcomes": outcomes,
                       "chi_max": str(max((Fraction(r.get("chi", "0")) for r in recs),
                                          default=0))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--operators", type=int, default=3334,
                    help="operators in the corpus (default 3334 = 10,002 brackets)")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--dir", type=Path, default=None,
                    help="corpus folder, reused when it holds the same corpus "
                         "(default /tmp/bench-corpus-<operators>x<size>)")
    ap.add_argument("--workers", default="1,2", help="worker counts to time (default 1,2)")
    args = ap.parse_args()
    path = args.dir or Path(f"/tmp/bench-corpus-{args.operators}x{args.size}")
    build(path, args.operators, args.size)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")  # workers run with one BLAS thread: so does this
    except ImportError:  # pragma: no cover
        pass
    from softrank.workers import tune_allocator

    # the checker's processes keep freed memory (softrank.workers.tune_allocator); the plain
    # baseline runs in this same process after it, so both are timed with the same allocator
    tuned = tune_allocator()
    print(f"# corpus {path}: {args.operators} operators {args.size} x {args.size}, "
          f"eps {', '.join(EPS)}; cpus {os.cpu_count()}; allocator tuned {tuned}")
    plain_recheck(path)  # warm the page cache, so both timings read from memory
    la0 = _load()
    c0, t0 = _cpu(), time.perf_counter()
    n = plain_recheck(path)
    t_plain, c_plain = time.perf_counter() - t0, _cpu() - c0
    print(f"plain float64      : {n} brackets {t_plain:8.2f} s  {n / t_plain:8.0f} brackets/s"
          f"   cpu {c_plain:7.2f} s   load {la0} -> {_load()}")
    times = {}
    for jobs in (int(w) for w in args.workers.split(",")):
        la0 = _load()
        c0, t0 = _cpu(), time.perf_counter()
        n, info = validated(path, jobs)
        t, c = time.perf_counter() - t0, _cpu() - c0
        times[jobs] = t
        print(f"validated {jobs} worker{'s' if jobs > 1 else ' '}: {n} brackets {t:8.2f} s  "
              f"{n / t:8.0f} brackets/s  ratio to plain {t / t_plain:5.2f}   cpu {c:7.2f} s "
              f"(ratio {c / c_plain:5.2f})   load {la0} -> {_load()}   {json.dumps(info)}")
    if 1 in times and 2 in times:
        print(f"2-worker speed-up over 1 worker: {times[1] / times[2]:.2f}x")


if __name__ == "__main__":
    main()
