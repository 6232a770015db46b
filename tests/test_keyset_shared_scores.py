"""Key-set scores shared within one operator: the searches find what they found without the
table, a repeated search is charged (almost) nothing, the table is per matrix content and per
context, and its size is bounded."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.witnesses.producers import keyset as ks
from softrank.witnesses.producers._common import KEYSET_UNIT, budget_settings, work_done
from softrank.witnesses.producers.decoder_lp import keyset_path


def attention(m: int, n: int, temp: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    L = temp * rng.standard_normal((m, n))
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def same_search(a, b) -> bool:
    if a is None or b is None:
        return a is b
    rows_a, sets_a, X_a, v_a = a
    rows_b, sets_b, X_b, v_b = b
    return (rows_a == rows_b and v_a == v_b and np.array_equal(X_a, X_b)
            and len(sets_a) == len(sets_b)
            and all(np.array_equal(x, y) for x, y in zip(sets_a, sets_b, strict=True)))


def same_path(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[p][0] == b[p][0] and np.array_equal(a[p][1], b[p][1]) and a[p][2] == b[p][2]
        for p in a)


@pytest.mark.parametrize("seed", range(4))
def test_shared_scores_change_no_result(seed):
    A = attention(24, 24, 2.0 + seed, seed)
    plain = {(e, s): ks.keyset_search(A, e, singletons=s)
             for e in (0.15, 0.3) for s in (False, True)}
    plain_path = {e: keyset_path(A, e, singletons=False, extra=2, deadline=float("inf"))
                  for e in (0.15, 0.3)}
    with ks.shared_scores():
        for _ in range(2):  # the second round runs entirely from the table
            for (e, s), want in plain.items():
                assert same_search(ks.keyset_search(A, e, singletons=s), want)
            for e, want in plain_path.items():
                got = keyset_path(A, e, singletons=False, extra=2, deadline=float("inf"))
                assert same_path(got, want)


def test_a_repeated_search_is_charged_only_its_rebuilt_configurations():
    A = attention(20, 20, 3.0, 7)
    with budget_settings("work", 1.0):
        ks.keyset_search(A, 0.2)
        alone = work_done()
    assert alone > 0
    with budget_settings("work", 1.0), ks.shared_scores():
        ks.keyset_search(A, 0.2)
        first = work_done()
        ks.keyset_search(A, 0.2)
        second = work_done() - first
    # a search revisits some query lists itself (the swaps try lists the growth scored)
    assert first <= 1.05 * alone
    # a kept score that a search adopts is rebuilt: at most a few per query added
    p = len(ks.keyset_search(A, 0.2)[0])
    assert second <= 4 * p * KEYSET_UNIT * p * A.shape[1]
    assert second < 0.2 * alone


def test_tables_are_per_context_and_per_matrix_content():
    A = attention(12, 12, 2.0, 1)
    assert ks.scores_for(A) is None  # outside a context nothing is kept
    with ks.shared_scores():
        t = ks.scores_for(A)
        assert t is not None
        assert ks.scores_for(A.copy()) is t  # the contents, not the object
        assert ks.scores_for(A.astype(np.float32).astype(np.float64)) is not t
        B = A.copy()
        B[0, 0] = np.nextafter(B[0, 0], 1.0)
        assert ks.scores_for(B) is not t
        ks.keyset_search(A, 0.25)
        assert len(t) > 0
        with ks.shared_scores():  # a nested context shares the outer table
            assert ks.scores_for(A) is t
        assert ks.scores_for(A) is t
    assert ks.scores_for(A) is None
    with ks.shared_scores():  # a new context starts empty
        assert len(ks.scores_for(A)) == 0


def test_the_table_is_bounded(monkeypatch):
    monkeypatch.setattr(ks, "MAX_SCORES", 50)
    A = attention(16, 16, 2.0, 3)
    want = ks.keyset_search(A, 0.2)
    with ks.shared_scores():
        got = ks.keyset_search(A, 0.2)
        assert len(ks.scores_for(A)) == 50
        assert same_search(got, want)
        assert same_search(ks.keyset_search(A, 0.2), want)


def test_a_kept_score_that_wins_is_returned_with_its_configuration():
    A = attention(10, 10, 2.0, 5)
    with ks.shared_scores():
        t = ks.scores_for(A)
        s, cfg = ks._score(A, [0, 1, 2], False, t)
        assert cfg is not None
        s2, cfg2 = ks._score(A, [0, 1, 2], False, t)
        assert (s2, cfg2) == (s, None)  # a bare score from the table
        s3, cfg3 = ks._adopt(A, [0, 1, 2], False, t, np.inf)  # the caller keeps it
        assert s3 == s and cfg3 is not None and cfg3[0] == cfg[0]
        assert all(np.array_equal(x, y) for x, y in zip(cfg3[1], cfg[1], strict=True))
