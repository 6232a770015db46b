"""Helpers of the topology studies (benchmarks/study_binding_spheres.py, study_topology_gap.py)."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from study_binding_spheres import prune  # noqa: E402
from study_topology_gap import slp_polish  # noqa: E402


def test_prune_keeps_a_cycle_and_drops_what_hangs_off_it() -> None:
    # the four sign patterns of rows 0, 1, 2 (first sign +) are RP^2's triangles in the
    # quotient of the octahedron: every edge in two of them, so nothing is pruned; a triangle
    # through a new row has two edges in nothing else and goes, and so does a second one
    # glued to it along one edge
    sphere = {((0, 1, 2), s) for s in ((1, 1, 1), (1, 1, -1), (1, -1, 1), (1, -1, -1))}
    hanging = {((0, 1, 3), (1, 1, 1)), ((0, 3, 4), (1, 1, 1))}
    assert set(prune(sphere)) == sphere
    assert set(prune(sphere | hanging)) == sphere
    assert prune(hanging) == []


def test_slp_polish_never_raises_the_error_and_reports_its_own_fit() -> None:
    rng = np.random.default_rng(3)
    P = np.exp(2.0 * rng.standard_normal((5, 5)))
    A = P / P.sum(axis=1, keepdims=True)
    U0, V0 = rng.standard_normal((5, 2)), rng.standard_normal((2, 5))
    start = np.abs(A - U0 @ V0).sum(axis=1).max()
    err, U, V = slp_polish(A, U0, V0, steps=30)
    assert err == np.abs(A - U @ V).sum(axis=1).max()
    assert err < start
