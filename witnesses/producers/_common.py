"""Float64 helpers shared by the built-in producers (untrusted; only steer the search)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

# Relative slack every claim keeps so that the rigorous replay (which charges rounding of
# order N * 2^-53 relative) confirms what the float search found.
SAFETY = 1e-9


MODE_ENV = "SOFTRANK_BUDGET_MODE"
MODES = ("work", "cpu")
# Work units are stated in reference CPU seconds: one unit is about what one second of CPU
# bought on a 128 x 128 head when the units were calibrated (witnesses/producers/README.md,
# "Budgets").  The costs below are charged per counted operation; they depend on the sizes
# of the operation only, never on a clock, so a budget of work units buys the same search on
# every machine and every number of workers.
IRLS_UNIT = 2e-10    # per m N (k^2 + 4 k) of one alternating-l1 (IRLS) step
LP_UNIT = 4.8e-7     # per (rows + columns) of one LP solve, ...
LP_ITER_UNIT = 1.2e-7  # ... and per (rows + columns) of each of its simplex iterations
KEYSET_UNIT = 2.5e-7  # per p N of scoring one key-set configuration of p queries
CLOCK_UNIT = 1e-5    # per budget check: every loop that checks a budget ends in work mode
# one interior-point LP with n nonzeros: IPM_UNIT n^IPM_POWER (its iteration count says little
# of its work; measured, one thread: 84,524 nonzeros 3.4 s, 299,000 15 s, 957,782 100 s)
IPM_UNIT = 4.3e-7
IPM_POWER = 1.4
# what store.json records of the work units (``produce`` provenance): a change of the costs
# changes what a budget buys, so a store says which costs its brackets were searched under
WORK_UNITS = {"version": 2, "irls": IRLS_UNIT, "lp": LP_UNIT, "lp_iteration": LP_ITER_UNIT,
              "keyset": KEYSET_UNIT, "clock": CLOCK_UNIT, "ipm": IPM_UNIT,
              "ipm_power": IPM_POWER}
_STATE = threading.local()


class _Settings:
    """A thread's budget settings, set by ``budget_settings`` (Dask runs tasks in threads,
    so they are per thread, not process-wide environment variables)."""

    mode: str | None = None
    scale: float | None = None
    env: dict[str, str] | None = None


def _settings() -> _Settings:
    st = getattr(_STATE, "settings", None)
    if st is None:
        st = _STATE.settings = _Settings()
    return st


@contextlib.contextmanager
def budget_settings(mode: str | None = None, scale: float | None = None,
                    env: dict[str, str] | None = None) -> Iterator[None]:
    """Within the block, in this thread: budgets in ``mode`` ("work" or "cpu"), times
    ``scale``, and the budget variables ``env`` ({name: value}) read in place of the process
    environment; None leaves a setting to the environment.  The work count restarts at 0."""
    st = _settings()
    saved = (st.mode, st.scale, st.env, getattr(_STATE, "work", 0.0))
    st.mode, st.scale, st.env = mode, scale, env
    _STATE.work = 0.0
    try:
        yield
    finally:
        st.mode, st.scale, st.env, _STATE.work = saved


def env_value(name: str) -> str | None:
    """Returns the budget variable ``name``: from ``budget_settings`` when it gave an ``env``
    (absent there means unset), else from the process environment."""
    env = _settings().env
    return env.get(name) if env is not None else os.environ.get(name)


def budget_mode() -> str:
    """Returns "work" (budgets count work units) or "cpu" (budgets are CPU seconds): from
    ``budget_settings``, else environment ``SOFTRANK_BUDGET_MODE``, else "cpu" (a producer
    called as a library keeps its CPU-second budgets; ``produce`` defaults to "work")."""
    mode = _settings().mode or os.environ.get(MODE_ENV, "").strip().lower()
    return mode if mode in MODES else "cpu"


def work_done() -> float:
    """Returns the work units charged in this thread since its ``budget_settings`` began."""
    return float(getattr(_STATE, "work", 0.0))


@contextlib.contextmanager
def fresh_count() -> Iterator[None]:
    """Within the block the work count starts at 0 (afterwards it is the count before plus the
    block's work): a search then sees the same clock values whatever ran before it in this
    thread (a resumed run skips some searches), so its float deadlines compare the same."""
    outer = work_done()
    _STATE.work = 0.0
    try:
        yield
    finally:
        _STATE.work = outer + work_done()


def charge(units: float) -> None:
    """Charges ``units`` of work to this thread's count (what a work-mode budget reads)."""
    _STATE.work = getattr(_STATE, "work", 0.0) + float(units)


def irls_cost(m: int, N: int, k: int) -> float:
    """Returns the work units of one alternating-l1 (IRLS) step at rank k on an m x N
    operator (what ``charge_irls`` charges)."""
    return IRLS_UNIT * m * N * (k * k + 4 * k)


def charge_irls(m: int, N: int, k: int) -> None:
    """Charges one alternating-l1 step at rank k on an m x N operator."""
    charge(irls_cost(m, N, k))


def charge_lp(size: int, iterations: int) -> None:
    """Charges one LP solve with ``size`` rows + columns and ``iterations`` simplex steps."""
    charge((LP_UNIT + LP_ITER_UNIT * max(int(iterations), 0)) * max(int(size), 1))


def ipm_cost(nonzeros: int) -> float:
    """Returns the work units of one interior-point LP solve with ``nonzeros`` nonzeros."""
    return IPM_UNIT * float(max(int(nonzeros), 1)) ** IPM_POWER


def charge_keyset(p: int, N: int) -> None:
    """Charges scoring one key-set configuration of p queries over N keys."""
    charge(KEYSET_UNIT * p * N)


def clock() -> float:
    """Returns the budget clock every producer search reads: in work mode the work units this
    thread was charged (each read charges CLOCK_UNIT, so a loop that only reads it still
    ends); in cpu mode the CPU seconds this process has used (``time.process_time``).

    A deadline is ``clock() + budget``.  CPU time, not wall time, in cpu mode: on a busy
    machine (another job, the other workers of ``produce --jobs``) a wall-clock budget ends
    after less work, and a rerun finds looser brackets (measured: up to 5 ranks on one head
    with a second process busy).  Measured in CPU time the same budget buys about the same
    work; counted in work units it buys exactly the same work.
    """
    charge(CLOCK_UNIT)  # in cpu mode too: the calibration compares the two counts
    if budget_mode() == "work":
        return work_done()
    return time.process_time()


def time_limit(left: float | None) -> dict[str, float]:
    """Returns the HiGHS options for an LP with ``left`` budget units to go: a time limit in
    cpu mode, none in work mode (a time limit would make the result depend on the machine;
    the LP is charged by its size and iterations instead, see ``linprog``)."""
    if left is None or budget_mode() == "work":
        return {}
    return {"time_limit": float(left)}


def linprog(c: Any, A_ub: Any = None, b_ub: Any = None, A_eq: Any = None, b_eq: Any = None,
            bounds: Any = (0, None), method: str = "highs",
            options: dict[str, Any] | None = None) -> Any:
    """``scipy.optimize.linprog`` with the budget's conventions: a ``time_limit`` option is
    dropped in work mode, and the solve is charged (``charge_lp``)."""
    from scipy.optimize import linprog as _linprog

    opts = dict(options or {})
    if budget_mode() == "work":
        opts.pop("time_limit", None)
    r = _linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method=method,
                 options=opts)
    rows = sum(0 if X is None else int(np.shape(X)[0]) for X in (A_ub, A_eq))
    charge_lp(rows + int(np.size(c)), int(getattr(r, "nit", 0) or 0))
    return r


def target(eps: Fraction | float) -> float:
    """Returns the float64 error budget a witness must meet: eps (rounded down) * (1 - SAFETY)."""
    e = float(eps)
    if Fraction(e) > Fraction(eps):
        e = float(np.nextafter(e, 0.0))
    return e * (1.0 - SAFETY)


SEARCH_DIGITS = 6


def search_claim(x: float, digits: int = SEARCH_DIGITS) -> float:
    """Returns x rounded to ``digits`` significant digits: for claims about a search's
    failed attempts (how near a rank it missed came), which no stored array pins down.  Their
    last bits may differ between processes (measured: a Bernstein value 1.0176166438734027 on
    a Dask worker, 1.0176166438734031 in the parent process, the stored certificates
    byte-identical; float64 kernels are not bitwise reproducible across processes in general),
    and a work-mode record must be the same bytes wherever it is written.  A value within a
    few ulps of a rounding boundary can still round apart: rare, not excluded."""
    return float(f"{x:.{digits}g}")


def row_l1(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Returns the float64 row l1 norms of A - U V (an estimate, not an enclosure)."""
    return np.abs(A - U @ V).sum(axis=1)


def max_row_l1(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> float:
    return float(row_l1(A, U, V).max())


def least_rank(attempt: Callable[[int], tuple[bool, object]], kmax: int, *, start: int = 1,
               known_ok: tuple[int, object] | None = None) -> tuple[int, object]:
    """Galloping + binary search for the least k in [start, kmax] where ``attempt(k)`` succeeds.

    ``attempt(k)`` returns (ok, payload).  Assumes success is (roughly) monotone in k; the
    payload of the least successful rank found is returned.  ``attempt(kmax)`` must succeed
    (it is tried last if nothing smaller did); ``known_ok`` = (k, payload) skips re-trying a
    rank already known to succeed.
    """
    hi, hi_payload = (known_ok if known_ok is not None else (None, None))
    lo = start - 1  # largest rank known to fail
    k = start
    step = 1
    while hi is None or k < hi:
        if k >= kmax:
            break
        ok, payload = attempt(k)
        if ok:
            hi, hi_payload = k, payload
            break
        lo = k
        step *= 2
        k = start - 1 + step
    if hi is None:
        ok, payload = attempt(kmax)
        hi, hi_payload = kmax, payload
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, payload = attempt(mid)
        if ok:
            hi, hi_payload = mid, payload
        else:
            lo = mid
    return hi, hi_payload


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Limits BLAS to one thread when threadpoolctl is installed (else does nothing).

    The producers make many small products; threaded BLAS on them is slower, and much
    slower on a shared machine.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def as_float64(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(A, dtype=np.float64))


def eps_up(eps: Fraction | float) -> float:
    """Returns the least float64 >= eps (float(eps) rounds to nearest, possibly below eps)."""
    e = float(eps)
    return float(np.nextafter(e, np.inf)) if Fraction(e) < Fraction(eps) else e


SCALE_ENV = "SOFTRANK_BUDGET_SCALE"
# The default search budgets are stated for a 128 x 128 operator and scale with m N: a 6 x 6
# operator gets SIZE_FLOOR of them (its LPs and IRLS steps cost microseconds; at the full
# budget a 6 x 6 matrix at three eps took 56 s, nearly all of it searching a closed bracket).
REFERENCE_SIZE = 128 * 128
SIZE_FLOOR = 1 / 100


def parse_budget(raw: str | None, *, zero_ok: bool = False) -> float | None:
    """Returns the finite float written in ``raw`` when it is > 0 (or 0 with ``zero_ok``);
    None when ``raw`` is unset, empty or anything else."""
    try:
        b = float(raw) if raw else None
    except ValueError:
        return None
    ok = b is not None and np.isfinite(b) and (b > 0 or (zero_ok and b == 0))
    return b if ok else None


def budget_scale() -> float:
    """Returns the positive finite float in ``SOFTRANK_BUDGET_SCALE`` (``produce
    --budget-scale``), else 1: the factor on every producer's search budget."""
    scale = _settings().scale
    if scale is not None:
        return float(scale)
    return parse_budget(env_value(SCALE_ENV)) or 1.0


def budget_from_env(name: str, default: float) -> float:
    """Returns the positive finite float in environment variable ``name``, else ``default``,
    times ``budget_scale()``."""
    return (parse_budget(env_value(name)) or default) * budget_scale()


def size_scale(shape: tuple[int, ...]) -> float:
    """Returns max(SIZE_FLOOR, m N / 128^2) for an m x N operator: the factor on a default
    search budget (those are per 128 x 128 operator), so a budget buys about the same number
    of search steps per entry at every size."""
    m, N = int(shape[0]), int(shape[1])
    return max(SIZE_FLOOR, m * N / REFERENCE_SIZE)
