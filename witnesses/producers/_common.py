"""Float64 helpers shared by the built-in producers (untrusted; only steer the search)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

# Relative slack every claim keeps so that the rigorous replay (which charges rounding of
# order N * 2^-53 relative) confirms what the float search found.
SAFETY = 1e-9


def clock() -> float:
    """Returns the CPU seconds this process has used (``time.process_time``).

    Every search budget of the built-in producers is CPU time, not wall time: on a busy
    machine (another job, the other workers of ``produce --jobs``) a wall-clock budget ends
    after less work, and a rerun finds looser brackets (measured: up to 5 ranks on one head
    with a second process busy).  Measured in CPU time the same budget buys the same work.
    """
    return time.process_time()


def target(eps: Fraction | float) -> float:
    """Returns the float64 error budget a witness must meet: eps (rounded down) * (1 - SAFETY)."""
    e = float(eps)
    if Fraction(e) > Fraction(eps):
        e = float(np.nextafter(e, 0.0))
    return e * (1.0 - SAFETY)


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
    return parse_budget(os.environ.get(SCALE_ENV)) or 1.0


def budget_from_env(name: str, default: float) -> float:
    """Returns the positive finite float in environment variable ``name``, else ``default``,
    times ``budget_scale()``."""
    return (parse_budget(os.environ.get(name)) or default) * budget_scale()


def size_scale(shape: tuple[int, ...]) -> float:
    """Returns max(SIZE_FLOOR, m N / 128^2) for an m x N operator: the factor on a default
    search budget (those are per 128 x 128 operator), so a budget buys about the same number
    of search steps per entry at every size."""
    m, N = int(shape[0]), int(shape[1])
    return max(SIZE_FLOOR, m * N / REFERENCE_SIZE)
