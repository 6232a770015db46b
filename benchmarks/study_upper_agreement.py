"""Is the upper end of an open bracket likely the least rank?  The study behind the agreement
rule of ``softrank/audit/loose.py`` (proofs_notes/audit.md, section 2b).

Usage (needs the [models] extra; a few CPU seconds per head of tsvd rank <= 16):

    .venv/bin/python benchmarks/study_upper_agreement.py --texts benchmarks/heldout_beekeeper.txt \
        --max-tsvd 16 [--eps 0.25] [--pool 64] [--part 0 --parts 2]

For every MiniLM head of the text (128 tokens) whose truncated-SVD rank at ``--eps`` is at most
``--max-tsvd`` it runs ``alt_l1`` at the defaults (work mode) and prints, as one JSON line:
its rank U, its claims at U - 1 (``upper_next_ratio``, ``upper_next_runs``,
``upper_next_agree``), and what a much wider search at U - 1 reaches from its witness:
``--pool`` starts (each of the witness's U SVD components dropped, random (U - 1)-dimensional
subspaces of its row space, random rows of A, random rotations of the leading singular
subspace), 10 IRLS steps each, the best quarter 100 steps, the best quarter of those 600, the
best one 5,000 (successive halving).  ``frontier_ratio`` is that search's least error / eps;
``frontier_below`` says whether it reached eps (which would lower U).  With ``--structured``
the same halving also runs from starts of other shapes, reported as ``structured_ratio``:
coordinate starts (e_j for the k1 columns of largest maximum, or of largest sum, plus the
leading right singular vectors of the other columns, k1 from 0 to k - 1 in eight steps:
rank-(k - 1) fits with l1-sparse rows, which SVD-type starts do not look like) and a row-span
start (k - 1 rows of A chosen greedily, each the row farthest in l1 from the span of those
before, U from exact l1 regressions).  Float64 searches only: nothing here is claimed or
proved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["SOFTRANK_BUDGET_MODE"] = "work"

from softrank.witnesses.producers import get_producer  # noqa: E402
from softrank.witnesses.producers._common import (  # noqa: E402
    clock,
    fresh_count,
    one_blas_thread,
    target,
)
from softrank.witnesses.producers.altl1 import (  # noqa: E402
    AlternatingL1,
    _components,
    _without,
    alt_l1,
    l1_regression,
)

SCHEDULE = ((10, 0.25), (100, 0.25), (600, 0.25), (5000, 0.0))


def _lstsq_start(A: np.ndarray, V0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.linalg.lstsq(V0.T, A.T, rcond=None)[0].T, V0


def _starts(A: np.ndarray, U: np.ndarray, V: np.ndarray, pool: int,
            rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Returns ``pool`` rank-(k - 1) starts from the rank-k fit U V (see the module note)."""
    k = U.shape[1]
    Ub, Vb, _ = _components(A, U, V)
    out = [_without(Ub, Vb, j) for j in range(k)]
    _, _, Vt = np.linalg.svd(A, full_matrices=False)
    while len(out) < pool:
        kind = len(out) % 3
        if kind == 0:
            V0 = np.linalg.qr(rng.standard_normal((k, k - 1)))[0].T @ Vb
        elif kind == 1:
            V0 = A[np.sort(rng.choice(A.shape[0], k - 1, replace=False))]
        else:
            q = min(k + 2, Vt.shape[0])
            V0 = np.linalg.qr(rng.standard_normal((q, k - 1)))[0].T @ Vt[:q]
        out.append(_lstsq_start(A, V0))
    return out[:max(pool, k)]


def _coordinate_starts(A: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rank-k starts whose first k1 rows are coordinate vectors (see the module note)."""
    N = A.shape[1]
    out = []
    for score in (A.max(axis=0), A.sum(axis=0)):
        order = np.argsort(-score, kind="stable")
        for k1 in sorted({round(i * (k - 1) / 7) for i in range(8)}):
            rest = np.setdiff1d(np.arange(N), order[:k1])
            V0 = np.zeros((k, N))
            V0[np.arange(k1), order[:k1]] = 1.0
            if k > k1:
                V0[k1:, rest] = np.linalg.svd(A[:, rest], full_matrices=False)[2][:k - k1]
            out.append(_lstsq_start(A, V0))
    return out


def _row_span_start(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A rank-k start spanned by k rows of A, each the one farthest in l1 from the span of the
    rows chosen before it (the first: the row of largest l1 norm)."""
    rows = [int(np.argmax(np.abs(A).sum(axis=1)))]
    while len(rows) < k:
        V0 = A[rows]
        d = [np.abs(a - l1_regression(V0, a) @ V0).sum() for a in A]
        rows.append(int(np.argmax(d)))
    V0 = A[rows].copy()
    return np.array([l1_regression(V0, a) for a in A]), V0


def halving(A: np.ndarray, t: float, k1: int, starts: list[tuple[np.ndarray, np.ndarray]]
            ) -> tuple[float, bool]:
    """Returns (least error at rank k1, whether it is <= t) of successive halving (SCHEDULE)
    over ``starts``."""
    cands = [(np.inf, U0, V0) for U0, V0 in starts]
    for steps, keep in SCHEDULE:
        ran = []
        for _, U0, V0 in cands:
            U2, V2, e = alt_l1(A, k1, t, U0, V0, iters=steps, patient=True)
            if e <= t:
                return e, True
            ran.append((e, U2, V2))
        ran.sort(key=lambda x: x[0])
        cands = ran[:max(1, int(len(ran) * keep))]
    return cands[0][0], False


def frontier(A: np.ndarray, t: float, U: np.ndarray, V: np.ndarray, pool: int,
             seed: int = 0) -> tuple[float, bool]:
    """Returns (least error at rank k - 1, whether it is <= t) of the successive-halving
    search from the rank-k fit U V."""
    rng = np.random.default_rng([seed, U.shape[1]])
    return halving(A, t, U.shape[1] - 1, _starts(A, U, V, pool, rng))


def structured(A: np.ndarray, t: float, k1: int) -> tuple[float, bool]:
    """Returns (least error at rank k1, whether it is <= t) of successive halving from the
    coordinate starts and the row-span start."""
    return halving(A, t, k1, _coordinate_starts(A, k1) + [_row_span_start(A, k1)])


def main(argv: list[str] | None = None) -> int:
    from softrank.witnesses.models import Capture, read_texts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=Path, required=True)
    ap.add_argument("--text-index", type=int, default=0)
    ap.add_argument("--eps", default="0.25")
    ap.add_argument("--max-tsvd", type=int, default=16)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--structured", action="store_true",
                    help="also run the coordinate and row-span starts (structured_ratio)")
    a = ap.parse_args(argv)
    eps = Fraction(a.eps)
    t = target(eps)
    heads = list(Capture("minilm").capture(read_texts(a.texts)[a.text_index], tokens=128,
                                           text_index=a.text_index))
    tsvd = get_producer("tsvd")
    with one_blas_thread():
        for i, h in enumerate(heads):
            if i % a.parts != a.part or tsvd.produce(h.A, eps).rank > a.max_tsvd:
                continue
            with fresh_count():
                w = AlternatingL1().produce(h.A, eps)
                c = w.claims
                start = clock()
                best, below = (None, False) if w.rank <= 1 else \
                    frontier(h.A, t, w.U, w.V, a.pool)
                rec = {"head": h.id, "U": w.rank, "ratio": c.get("upper_next_ratio"),
                       "runs": c.get("upper_next_runs"), "agree": c.get("upper_next_agree"),
                       "frontier_ratio": None if best is None else round(best / t, 5),
                       "frontier_below": below, "frontier_work": round(clock() - start, 2)}
                if a.structured and w.rank > 1:
                    sb, sbelow = structured(h.A, t, w.rank - 1)
                    rec.update(structured_ratio=round(sb / t, 5), structured_below=sbelow)
            print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
