"""``alt_l1``'s SVD steps after the chain and the descent (operators of large tsvd rank).

Untrusted producer code: what is checked is that the steps find the least rank their runs can
reach on operators where that rank is known, keep to their deadline, start from the rank the
chain and the descent ended at (so they never raise it), that ``produce`` runs them only from
SVD_STEPS_TSVD up (below, the search is as before), and that every witness they lead to is
proved by the kernel.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.upper import check_upper
from softrank.witnesses.producers import altl1
from softrank.witnesses.producers._common import budget_settings, clock, row_l1

from .helpers import disjoint_mixture as _mixture
from .helpers import random_attention


@pytest.mark.parametrize("seed", range(3))
def test_the_steps_end_at_the_exact_rank_of_a_mixture(seed: int) -> None:
    A = _mixture(seed)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    start = (Us[:, :9] * s[:9], Vt[:9], 0.0)
    ends: dict = {}
    with budget_settings(mode="work"):
        r, (U, V, e) = altl1._svd_steps(A, 0.25, Us, s, Vt, 9, start, clock() + 1e6, ends)
    assert r == 5
    assert U.shape == (40, 5) and V.shape == (5, 36)
    assert e == row_l1(A, U, V).max() <= 0.25
    assert sorted(ends) == [4, 5, 6, 7, 8]  # one run a rank, down to the one that failed
    assert min(e for e, _ in ends[4]) > 0.25


def test_steps_past_their_deadline_return_the_fit_they_were_given() -> None:
    A = _mixture(0)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    start = (Us[:, :12] * s[:12], Vt[:12], 0.0)
    ends: dict = {}
    with budget_settings(mode="work"):
        r, fit = altl1._svd_steps(A, 0.25, Us, s, Vt, 12, start, clock() - 1.0, ends)
    assert r == 12 and fit is start and not ends


def _softmax(seed: int) -> np.ndarray:
    return random_attention(np.random.default_rng(seed), 24, 24)


def _small() -> altl1.AlternatingL1:
    # a few tenths of a work unit each for the chain and the descent: seconds of CPU (work
    # units are calibrated on 128 x 128 operators and undercount the steps of small ones)
    return altl1.AlternatingL1(budget=0.3, descent_budget=0.3, restarts=1)


def test_produce_steps_on_from_the_threshold_and_the_kernel_proves_the_result(monkeypatch
                                                                            ) -> None:
    A = _softmax(1)
    with budget_settings(mode="work"):
        plain = _small().produce(A, Fraction(1, 4))
    assert "svd_steps_rank" not in plain.claims  # tsvd rank below SVD_STEPS_TSVD: no steps
    monkeypatch.setattr(altl1, "SVD_STEPS_TSVD", plain.claims["tsvd_rank"])
    with budget_settings(mode="work"):
        w = _small().produce(A, Fraction(1, 4))
    # the chain and the descent run as before; the steps start where they ended
    assert w.claims["chain_rank"] == plain.claims["chain_rank"]
    assert w.rank == w.claims["svd_steps_rank"] <= plain.rank
    assert check_upper(A, w.U, w.V, "1/4", rank=w.rank).status == "holds"


@pytest.mark.parametrize("seed", [1, 2])
def test_steps_go_on_below_a_chain_out_of_budget(monkeypatch, seed: int) -> None:
    # the large-rank case in small: a chain with almost no budget ends near the tsvd rank
    A = _softmax(seed)
    starved = altl1.AlternatingL1(budget=0.001, descent_budget=0.0, restarts=1)
    with budget_settings(mode="work"):
        before = starved.produce(A, Fraction(1, 4))
    monkeypatch.setattr(altl1, "SVD_STEPS_TSVD", 1)
    with budget_settings(mode="work"):
        after = starved.produce(A, Fraction(1, 4))
    assert after.claims["chain_rank"] == before.rank
    assert after.rank < before.rank
    assert check_upper(A, after.U, after.V, "1/4", rank=after.rank).status == "holds"
    assert after.claims["upper_next_rank"] == after.rank - 1  # the failed step is claimed


def test_below_the_threshold_the_search_is_unchanged(monkeypatch) -> None:
    A = _softmax(2)
    with budget_settings(mode="work"):
        before = _small().produce(A, Fraction(1, 4))
    monkeypatch.setattr(altl1, "SVD_STEPS_TSVD", before.claims["tsvd_rank"] + 1)
    with budget_settings(mode="work"):
        after = _small().produce(A, Fraction(1, 4))
    assert after.rank == before.rank
    np.testing.assert_array_equal(after.V, before.V)
    assert after.claims == before.claims


def _recording(monkeypatch) -> list[tuple[int, int, bytes, float]]:
    """Records every alt_l1 run of ``produce`` as (rank, steps, start, error)."""
    runs: list[tuple[int, int, bytes, float]] = []
    real = altl1.alt_l1

    def spy(A, k, t, U0, V0, *args, **kwargs):
        U, V, e = real(A, k, t, U0, V0, *args, **kwargs)
        runs.append((k, kwargs.get("iters"), U0.tobytes() + V0.tobytes(), e))
        return U, V, e

    monkeypatch.setattr(altl1, "alt_l1", spy)
    return runs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_steps_do_not_repeat_a_run_of_the_descent(monkeypatch, seed: int) -> None:
    # a descent with budget for every start at the rank below its end, so that it ends by
    # failing them all (the SVD start of SVD_STEPS_ITERS steps among them) before its deadline
    A = _softmax(seed)
    roomy = altl1.AlternatingL1(budget=0.3, descent_budget=50.0, restarts=0)
    monkeypatch.setattr(altl1, "SVD_STEPS_TSVD", 1)
    runs = _recording(monkeypatch)
    with budget_settings(mode="work"):
        w = roomy.produce(A, Fraction(1, 4))
    keys = [(k, n, x) for k, n, x, _ in runs]
    assert len(keys) == len(set(keys))  # no start run twice with as many steps
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    svd_below = (Us[:, :w.rank - 1] * s[:w.rank - 1]).tobytes() + Vt[:w.rank - 1].tobytes()
    below = [e for k, n, x, e in runs if k == w.rank - 1 and n == altl1.SVD_STEPS_ITERS
             and x == svd_below]
    assert len(below) == 1 and not below[0] <= 0.25  # the one run the steps would have made
    # and without the record of that run the steps make it once more, to the same end
    runs.clear()
    monkeypatch.setattr(altl1, "_svd_steps", _forgetful(altl1._svd_steps))
    with budget_settings(mode="work"):
        again = roomy.produce(A, Fraction(1, 4))
    assert again.rank == w.rank
    np.testing.assert_array_equal(again.V, w.V)
    twice = [e for k, n, x, e in runs if k == w.rank - 1 and n == altl1.SVD_STEPS_ITERS
             and x == svd_below]
    assert len(twice) == 2 and twice[0] == twice[1]
    assert check_upper(A, w.U, w.V, "1/4", rank=w.rank).status == "holds"


def _forgetful(steps):
    def run(*args, failed=(), **kwargs):
        return steps(*args, **kwargs)
    return run
