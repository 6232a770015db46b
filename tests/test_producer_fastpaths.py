"""The producers' fast paths compute what the slower code they replaced computed, bit for bit.

A work-mode store is meant to be the same bytes wherever and however fast it is written, so a
change that only saves CPU must not move a single search: each fast path is compared here with
a plain reference (the code it replaced, or scipy's own ``linprog``) on many random inputs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from softrank.witnesses.producers import _highs, altl1, keyset, subdivide
from softrank.witnesses.producers._common import budget_settings, clock, row_l1
from softrank.witnesses.producers._common import linprog as charged_linprog

core = _highs.core
needs_binding = pytest.mark.skipif(core is None, reason="scipy without the HiGHS binding")


def _stochastic(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    X = rng.exponential(size=(m, n)) ** rng.uniform(1.0, 6.0)
    return X / X.sum(axis=1, keepdims=True)


# -- key sets ---------------------------------------------------------------------------

def _assign_scan(A, rows, gamma):
    """The scan the key-set search used before: one pass over the keys per query."""
    AQ = A[rows]
    owner = np.argmax(AQ, axis=0)
    top = AQ[owner, np.arange(AQ.shape[1])]
    keep = top > gamma * (AQ.sum(axis=0) - top)
    sets = [np.flatnonzero(keep & (owner == t)) for t in range(len(rows))]
    return None if any(s.size == 0 for s in sets) else sets


def _score_scan(A, rows):
    best = (np.inf, None)
    for gamma in (1.0, 0.5, 2.0):
        sets = _assign_scan(A, rows, gamma)
        if sets is None:
            continue
        M = np.stack([A[rows][:, S].sum(axis=1) for S in sets], axis=1)
        nrm, _ = keyset.inv_norm(M)
        if nrm < best[0]:
            best = (nrm, (rows, sets))
    return best


def test_keyset_scoring_equals_the_scan():
    rng = np.random.default_rng(20261204)
    seen_none = seen_sets = 0
    for _ in range(12):
        m, n = (int(v) for v in rng.integers(2, 160, 2))
        A = _stochastic(rng, m, n)
        for _ in range(60):
            p = int(rng.integers(1, min(m, n, 40) + 1))
            rows = [int(r) for r in rng.choice(m, p, replace=False)]
            for gamma in (1.0, 0.5, 2.0):
                want, got = _assign_scan(A, rows, gamma), keyset.assign(
                    A, rows, singletons=False, gamma=gamma)
                assert (want is None) == (got is None)
                if want is not None:
                    assert len(want) == len(got)
                    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
                    assert np.array_equal(keyset.matrix(A, rows, want),
                                          keyset.matrix(A, rows, got))
            want, got = _score_scan(A, rows), keyset._score(A, rows, False)
            assert want[0] == got[0] or (np.isinf(want[0]) and np.isinf(got[0]))
            assert (want[1] is None) == (got[1] is None)
            if want[1] is None:
                seen_none += 1
            else:
                seen_sets += 1
                assert all(np.array_equal(a, b)
                           for a, b in zip(want[1][1], got[1][1], strict=True))
    assert seen_none and seen_sets  # both outcomes were compared


# -- alternating l1 ---------------------------------------------------------------------

def test_alt_l1_error_is_the_row_l1_of_its_factors():
    """alt_l1 keeps |A - U V| of its iterate instead of recomputing it for the row errors:
    the error it returns is exactly row_l1's maximum for the factors it returns."""
    rng = np.random.default_rng(7)
    for m, n, k in ((24, 30, 3), (40, 40, 9), (64, 48, 20)):
        A = _stochastic(rng, m, n)
        Us, s, Vt = np.linalg.svd(A, full_matrices=False)
        for iters, patient in ((40, False), (120, True)):
            U, V, err = altl1.alt_l1(A, k, 0.05, Us[:, :k] * s[:k], Vt[:k], iters=iters,
                                     patient=patient)
            assert err == float(row_l1(A, U, V).max())


# -- HiGHS models -----------------------------------------------------------------------

def _model_by_lp(C, cost, lo, hi, rlo, rhi, maximize=False):
    """The construction lp_model used before: a HighsLp filled attribute by attribute."""
    n_row, n_col = C.shape
    M = sp.csc_matrix(C)
    lp = core.HighsLp()
    lp.num_col_, lp.num_row_ = n_col, n_row
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_col, n_row
    lp.a_matrix_.format_ = core.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = M.indptr, M.indices, M.data
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lo, hi
    lp.row_lower_, lp.row_upper_ = rlo, rhi
    if maximize:
        lp.sense_ = core.ObjSense.kMaximize
    h = core._Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("presolve", "off")
    h.setOptionValue("threads", 1)
    h.setOptionValue("simplex_iteration_limit", 50 * (n_col + n_row) + 1000)
    h.passModel(lp)
    return h


def _state(h):
    s = h.getSolution()
    return (h.getModelStatus(), np.array(s.col_value), np.array(s.row_dual),
            h.getInfo().simplex_iteration_count)


@needs_binding
def test_lp_model_solves_as_the_highslp_model_did():
    """Warm-started runs after changed column bounds and row bounds, as the descents do."""
    rng = np.random.default_rng(3)
    for trial in range(30):
        maximize = bool(trial % 3 == 2)  # rowset's orthant LPs maximise
        m, n = int(rng.integers(2, 30)), int(rng.integers(5, 600))
        C = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.6)
        args = (C, rng.standard_normal(n), -rng.random(n), rng.random(n),
                np.full(m, -np.inf), rng.random(m))
        h1, h2 = _model_by_lp(*args, maximize), _highs.lp_model(*args, maximize=maximize)
        assert h2 is not None
        for step in range(4):
            h1.run()
            h2.run()
            a, b = _state(h1), _state(h2)
            assert a[0] == b[0] and a[3] == b[3]
            assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
            if step % 2:
                lo, hi = -rng.random(n) / 2, rng.random(n) / 2
                for h in (h1, h2):
                    h.changeColsBounds(n, np.arange(n, dtype=np.int32), lo, hi)
            else:
                r, v = int(rng.integers(m)), float(rng.random())
                for h in (h1, h2):
                    h.changeRowBounds(r, -np.inf, v)


def test_dense_csc_holds_scipys_arrays():
    rng = np.random.default_rng(2)
    for (m, n), dense in itertools.product(((1, 1), (3, 7), (20, 129), (7, 1000), (5, 0),
                                            (0, 4), (0, 0)), (False, True)):
        # dense: no zero entry (the witness LPs' matrices), another path
        C = rng.standard_normal((m, n)) * (rng.random((m, n)) < (1.1 if dense else 0.5))
        want = sp.csc_array(C)
        got = _highs.dense_csc(C)
        for a, b in zip(got, (want.indptr, want.indices, want.data), strict=True):
            assert np.array_equal(a, b)
        assert got[0].dtype == got[1].dtype == np.int32 and got[2].dtype == np.float64


def _witness_rows(seed: int, m: int, n: int, count: int):
    """Yields (rng, rows): ``count`` sets of signed rows of one random m x n stochastic A, as a
    lift's label sets have them (repeated rows included), scaled."""
    rng = np.random.default_rng(seed)
    A = _stochastic(rng, m, n)
    for _ in range(count):
        p = int(rng.integers(1, 40))
        rows = A[rng.choice(m, p)] * rng.choice([-1.0, 1.0], p)[:, None]
        yield rng, rows * rng.uniform(0.0, 3.0)


def _witness_model(rows: np.ndarray) -> dict:
    """linprog's arguments (but the cost) of the witness LP of ``rows``: max tau subject to
    rows z >= tau, z in the cube."""
    p, N = rows.shape
    return {"A_ub": np.hstack([-rows, np.ones((p, 1))]), "b_ub": np.zeros(p),
            "bounds": [(-1.0, 1.0)] * N + [(None, None)]}


@needs_binding
def test_witness_lp_equals_linprog_without_presolve():
    """subdivide.witness_lp's direct HiGHS call returns the solution of linprog with presolve
    off, bit for bit, and charges the same work."""
    for _, rows in _witness_rows(11, 48, 40, 400):
        N = rows.shape[1]
        c = np.r_[np.zeros(N), -1.0]
        kw = {**_witness_model(rows), "options": {"presolve": False}}
        ref = linprog(c, method="highs", **kw)
        with budget_settings("work", 1.0, {}):
            w0 = clock()
            got = subdivide.witness_lp(rows)
            charged = clock() - w0
        assert ref.status == 0 and got is not None
        z = np.clip(ref.x[:N], -1.0, 1.0)
        assert np.array_equal(got[0], z) and got[1] == float((rows @ z).min())
        with budget_settings("work", 1.0, {}):
            w0 = clock()
            charged_linprog(c, **kw)
            assert clock() - w0 == charged


@needs_binding
def test_witness_lp_value_is_the_presolved_optimum():
    """Presolve off changes which optimal z HiGHS returns at most (on repeated rows), never
    the optimum: witness_lp's value is that of linprog's z (presolve on) to HiGHS's
    feasibility tolerance (1e-7, relative to the rows' size)."""
    for _, rows in _witness_rows(12, 48, 40, 200):
        N = rows.shape[1]
        ref = linprog(np.r_[np.zeros(N), -1.0], method="highs", **_witness_model(rows))
        got = subdivide.witness_lp(rows)
        assert got is not None and np.all(np.abs(got[0]) <= 1.0)
        ref_value = float((rows @ np.clip(ref.x[:N], -1.0, 1.0)).min())
        assert abs(got[1] - ref_value) <= 1e-7 * max(1.0, float(np.abs(rows).sum(1).max()))


@needs_binding
def test_linprog_ub_reused_solver_is_a_fresh_solve():
    """linprog_ub keeps one HiGHS object per thread: a solve after others of other sizes
    returns what linprog (presolve on, a new model) returns, bit for bit."""
    for rng, rows in _witness_rows(13, 30, 25, 100):
        N = rows.shape[1]
        c = np.r_[rng.standard_normal(N), -1.0]
        kw = _witness_model(rows)
        ref = linprog(c, method="highs", **kw)
        lo, hi = np.r_[np.full(N, -1.0), -np.inf], np.r_[np.full(N, 1.0), np.inf]
        ok, x, _ = _highs.linprog_ub(c, kw["A_ub"], kw["b_ub"], lo, hi)
        assert ok == (ref.status == 0)
        if ok:
            assert np.array_equal(x, ref.x)


@needs_binding
def test_linprog_ub_reports_failures_as_linprog_does():
    """An infeasible LP (x >= 2 within [-1, 1]) is a failure on both paths."""
    c = np.array([1.0, 0.0])
    A_ub, b_ub = np.array([[-1.0, 0.0]]), np.array([-2.0])
    lo, hi = np.array([-1.0, -np.inf]), np.array([1.0, np.inf])
    ref = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(-1.0, 1.0), (None, None)], method="highs")
    ok, x, _ = _highs.linprog_ub(c, A_ub, b_ub, lo, hi)
    assert ref.status != 0 and not ok and x is None
