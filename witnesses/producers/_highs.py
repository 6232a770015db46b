"""Warm-startable LP models through the HiGHS binding scipy ships (a search helper, untrusted).

``linprog`` rebuilds and presolves its model on every call; the producers solve long runs of
LPs that differ in a few bounds or coefficients, where keeping one model and its basis is
several times faster (benchmarks/bench_orthants.py: 5.6 - 9.2x for rowset's orthant LPs).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ._common import charge_lp

try:
    import scipy.optimize._highspy._core as core
except ImportError:  # pragma: no cover - older scipy: callers fall back to linprog
    core = None


def lp_model(C: np.ndarray, cost: np.ndarray, col_lower: np.ndarray, col_upper: np.ndarray,
             row_lower: np.ndarray, row_upper: np.ndarray, *, maximize: bool = False
             ) -> Any | None:
    """Returns a HiGHS model of  min (or max) cost . x  subject to  row_lower <= C x <=
    row_upper  and the column bounds, with presolve off (so the basis survives changes of
    bounds and coefficients) and an iteration cap (no cycling); None where the binding is
    missing or refuses the model, so that the caller falls back to ``linprog``."""
    if core is None:
        return None
    try:
        n_row, n_col = C.shape
        h = core._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        h.setOptionValue("threads", 1)
        h.setOptionValue("simplex_iteration_limit", 50 * (n_col + n_row) + 1000)
        _pass_model(h, C, cost, col_lower, col_upper, row_lower, row_upper, maximize=maximize)
        return h
    except Exception:  # any binding mismatch: the caller's linprog path
        return None


def _pass_model(h: Any, C: np.ndarray, cost: np.ndarray, col_lower: np.ndarray,
                col_upper: np.ndarray, row_lower: np.ndarray, row_upper: np.ndarray, *,
                maximize: bool = False) -> None:
    """Passes  min (or max) cost . x  subject to  row_lower <= C x <= row_upper  and the column
    bounds to model ``h`` through the overload taking numpy arrays: filling a HighsLp converts
    each array element by element (about 5 ms for a descent's 20 x 3,329 step LP against 1
    ms); the model is the same (all columns continuous), and so are the solves (compared in
    tests/test_producer_fastpaths.py)."""
    n_row, n_col = C.shape
    indptr, indices, data = dense_csc(C)
    f64 = np.float64
    h.passModel(n_col, n_row, len(data), int(core.MatrixFormat.kColwise),
                int(core.ObjSense.kMaximize if maximize else core.ObjSense.kMinimize), 0.0,
                np.ascontiguousarray(cost, f64), np.ascontiguousarray(col_lower, f64),
                np.ascontiguousarray(col_upper, f64), np.ascontiguousarray(row_lower, f64),
                np.ascontiguousarray(row_upper, f64), indptr, indices, data,
                np.zeros(n_col, np.int32))


def dense_csc(C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (indptr, indices, data) of the dense matrix C in compressed sparse column
    form (int32 indices, zeros left out, rows ascending within a column): the arrays
    ``scipy.sparse.csc_array(C)`` holds, without its conversions through COO."""
    CT = C.T
    nz = CT != 0
    if nz.all():
        # the lifts' witness LPs (signed rows of a softmax A beside a column of ones) have no
        # zero: their arrays are a reshape, with no gather of the entries (bit for bit what
        # the general path below builds)
        n_col, n_row = CT.shape
        return (np.arange(n_col + 1, dtype=np.int32) * np.int32(n_row),
                np.tile(np.arange(n_row, dtype=np.int32), n_col),
                np.ascontiguousarray(CT, np.float64).reshape(-1))
    cols, rows = np.nonzero(nz)
    indptr = np.zeros(CT.shape[0] + 1, dtype=np.int32)
    np.cumsum(nz.sum(axis=1), out=indptr[1:])
    return indptr, rows.astype(np.int32), np.ascontiguousarray(CT[cols, rows], np.float64)


def run(h: Any) -> None:
    """Runs model ``h`` and charges the solve to the budget (``_common.charge_lp``: its rows
    + columns and the simplex iterations this run took)."""
    h.run()
    try:
        iters = int(h.getInfo().simplex_iteration_count)
        size = int(h.getNumCol()) + int(h.getNumRow())
    except Exception:  # a binding without these getters: charge the solve as one iteration
        iters, size = 1, 1
    charge_lp(size, iters)


def optimal(h: Any) -> bool:
    """True when the last run of model ``h`` ended at an optimum."""
    return h.getModelStatus() == core.HighsModelStatus.kOptimal


_REUSED = threading.local()  # per thread: {presolve: HiGHS object}, see ``linprog_ub``


def _solver(presolve: bool) -> Any:
    """Returns this thread's HiGHS object with linprog's options and ``presolve``; each
    ``passModel`` replaces its model and solver state, so a solve on it is the solve on a new
    object (about 0.04 ms less per call than creating and configuring one)."""
    got = getattr(_REUSED, "h", None)
    if got is None:
        got = _REUSED.h = {}
    if presolve not in got:
        h = core._Highs()
        for key, val in (("presolve", "on" if presolve else "off"), ("highs_debug_level", 0),
                         ("log_to_console", False), ("output_flag", False),
                         ("simplex_strategy", 1)):  # 1: dual simplex
            h.setOptionValue(key, val)
        got[presolve] = h
    return got[presolve]


def linprog_ub(c: np.ndarray, A_ub: np.ndarray, b_ub: np.ndarray, lb: np.ndarray,
               ub: np.ndarray, *, presolve: bool = True
               ) -> tuple[bool, np.ndarray | None, int] | None:
    """Solves  min c . x  subject to  A_ub x <= b_ub,  lb <= x <= ub  (A_ub dense, infinite
    bounds allowed) with the HiGHS model and options that ``scipy.optimize.linprog(...,
    method="highs")`` builds for it (presolve on unless ``presolve`` is False, dual simplex,
    no time limit), minus its per-call argument cleaning and option validation, which cost
    about ten times the solve of a small LP.  Returns (ok, x, simplex iterations), ok as
    linprog's ``status == 0`` (an optimum that also passes its feasibility check on x); None
    where the binding is missing (the caller then runs ``linprog``)."""
    if core is None:
        return None
    try:
        inf = core.kHighsInf
        n_row, n_col = A_ub.shape
        h = _solver(presolve)
        # linprog hands HiGHS its own infinity, not IEEE inf
        _pass_model(h, A_ub, c, np.where(np.isinf(lb), np.sign(lb) * inf, lb),
                    np.where(np.isinf(ub), np.sign(ub) * inf, ub), np.full(n_row, -inf), b_ub)
        h.run()
    except Exception:  # any binding mismatch: the caller's linprog path
        return None
    info = h.getInfo()
    iters = int(info.simplex_iteration_count)
    if h.getModelStatus() != core.HighsModelStatus.kOptimal:
        return False, None, iters
    sol = h.getSolution()
    x = np.array(sol.col_value)
    # linprog's own check of an optimum (scipy.optimize._linprog_util._check_result, its
    # default tol 1e-9): a solution outside the bounds or constraints by more than
    # sqrt(tol) * 10, or with a NaN, is reported as a failure
    tol = np.sqrt(1e-9) * 10
    slack = b_ub - sol.row_value
    fun = info.objective_function_value
    ok = bool(not (np.isnan(x).any() or np.isnan(fun) or np.isnan(slack).any())
              and ((x >= lb - tol) & (x <= ub + tol)).all() and not (slack < -tol).any())
    return ok, x, iters
