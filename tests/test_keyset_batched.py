"""The stacked key-set scoring finds what a scan scoring one query list at a time finds.

The reference below is the scan as it was written before the scoring was stacked: each
candidate scored by ``_score`` alone, a swap taken at once (with the stacked search's rule for
scores equal up to rounding).  The stacked search must pick
the same query lists and key sets, with scores equal up to the rounding of M's sums, and
charge the same work (a work-mode budget reads it)."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.witnesses.producers import _common
from softrank.witnesses.producers import keyset as ks


def _grow_ref(A, rows, cands):
    scored = [ks._score(A, [*rows, int(q)], False) for q in cands if int(q) not in rows]
    if not scored or not min(s for s, _ in scored) < np.inf:
        return np.inf, None
    least = min(s for s, _ in scored)
    return next((s, c) for s, c in scored if s <= least * (1 + ks.TIE))


def _improve_ref(A, cfg, score, goal, cands, passes=2):
    rows = list(cfg[0])
    for _ in range(passes):
        improved = False
        for pos in range(len(rows)):
            if score <= goal:
                return score, cfg
            chosen = set(rows)
            for q in cands:
                if int(q) in chosen:
                    continue
                trial = rows.copy()
                trial[pos] = int(q)
                s, c = ks._score(A, trial, False)
                if s < score * (1 - ks.TIE) and c is not None:
                    score, cfg, rows, improved = s, c, trial, True
                    chosen = set(rows)
        if not improved:
            break
    return score, cfg


def _attention(rng, m, N, temp):
    L = rng.standard_normal((m, N)) * temp
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _same(a, b):
    assert (a[1] is None) == (b[1] is None)
    if a[1] is None:
        return
    assert a[0] == pytest.approx(b[0], rel=1e-9)
    assert list(a[1][0]) == list(b[1][0])
    assert [s.tolist() for s in a[1][1]] == [s.tolist() for s in b[1][1]]


def _worked(f, *args):
    with _common.budget_settings(mode="work"):
        out = f(*args)
        return out, _common.work_done()


@pytest.mark.parametrize("seed", range(8))
def test_stacked_search_takes_the_scans_steps(seed):
    rng = np.random.default_rng(seed)
    m, N = int(rng.integers(6, 40)), int(rng.integers(6, 40))
    A = _attention(rng, m, N, float(rng.choice([1.0, 3.0, 6.0])))
    cands = np.argsort(-A.max(axis=1))
    rows: list[int] = []
    swaps = 0
    for _ in range(min(m, N, 8)):
        new, w_new = _worked(ks._grow, A, rows, False, cands)
        ref, w_ref = _worked(_grow_ref, A, rows, cands)
        _same(new, ref)
        assert w_new == w_ref
        if ref[1] is None:
            break
        # a goal below reach: the swap search runs both passes
        goal = 0.5 * ref[0]
        new, w_new = _worked(ks._improve, A, ref[1], ref[0], goal, False, cands)
        old, w_old = _worked(_improve_ref, A, ref[1], ref[0], goal, cands)
        _same((new[0], new[1]), (old[0], old[1]))
        assert w_new == w_old
        swaps += list(old[1][0]) != list(ref[1][0])
        rows = list(old[1][0])
    assert swaps  # the swap search did move: its first-hit order was exercised


def test_singular_stack_scores_each_matrix_alone():
    M = np.stack([np.eye(3), np.zeros((3, 3)), 2 * np.eye(3)])
    assert ks._inv_norms(M).tolist() == [1.0, np.inf, 0.5]


def test_no_free_candidate_gives_no_configuration():
    A = _attention(np.random.default_rng(1), 4, 6, 2.0)
    s, cfg = ks._grow(A, [0, 1, 2, 3], False, np.arange(4))
    assert s == np.inf and cfg is None
