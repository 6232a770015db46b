"""Warm-startable LP models through the HiGHS binding scipy ships (a search helper, untrusted).

``linprog`` rebuilds and presolves its model on every call; the producers solve long runs of
LPs that differ in a few bounds or coefficients, where keeping one model and its basis is
several times faster (benchmarks/bench_orthants.py: 5.6 - 9.2x for rowset's orthant LPs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

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
        M = sp.csc_matrix(C)
        lp = core.HighsLp()
        lp.num_col_, lp.num_row_ = n_col, n_row
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_col, n_row
        lp.a_matrix_.format_ = core.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = M.indptr, M.indices, M.data
        if maximize:
            lp.sense_ = core.ObjSense.kMaximize
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lower, col_upper
        lp.row_lower_, lp.row_upper_ = row_lower, row_upper
        h = core._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        h.setOptionValue("threads", 1)
        h.setOptionValue("simplex_iteration_limit", 50 * (n_col + n_row) + 1000)
        h.passModel(lp)
        return h
    except Exception:  # any binding mismatch: the caller's linprog path
        return None


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
