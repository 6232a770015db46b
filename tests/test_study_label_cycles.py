"""The label-cycle study (benchmarks/study_label_cycles.py) on cells whose Z2-index is known."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from study_label_cycles import nerve_simplices, odd_cycle_exists  # noqa: E402


def _probe(A: np.ndarray, p: int, t: float = 0.25) -> bool:
    return odd_cycle_exists(nerve_simplices(A, list(range(len(A))), p, t))


def test_distinct_one_hot_rows_give_the_cross_polytope_at_every_rank() -> None:
    # p one-hot rows: every sign pattern is served (z = the signs), N / Z2 holds RP^(p-1)
    for p in (1, 2, 3, 4):
        assert _probe(np.eye(p), p)


def test_a_repeated_row_lowers_the_index_by_one() -> None:
    # rows e1, e2, e3, e3: a served set never holds both copies with opposite signs, so the
    # complex retracts onto the one over e1, e2, e3 (index 2): an odd cycle at p = 3, none at 4
    A = np.eye(3)[[0, 1, 2, 2]]
    assert _probe(A, 3)
    assert not _probe(A, 4)


def test_rows_within_the_tolerance_of_each_other_have_index_zero() -> None:
    # mixed-sign pairs of near-uniform rows are never served at t = 1/4: the complex is two
    # disjoint simplices (the + and the - labels), index 0, so no odd 1-cycle
    rng = np.random.default_rng(0)
    A = np.full((5, 6), 1 / 6) + rng.uniform(-0.01, 0.01, (5, 6))
    A /= A.sum(axis=1, keepdims=True)
    assert _probe(A, 1)
    assert not _probe(A, 2)


@pytest.mark.parametrize("t", [0.3, 0.45])
def test_the_tolerance_can_only_lower_the_index(t: float) -> None:
    # a served set at t is served at any smaller t: an odd cycle at t exists at 0.2 too
    rng = np.random.default_rng(1)
    A = rng.dirichlet(np.full(5, 0.3), size=6)
    for p in (2, 3):
        if _probe(A, p, t):
            assert _probe(A, p, 0.2)


def test_an_empty_complex_has_no_cycle() -> None:
    assert not odd_cycle_exists([])
