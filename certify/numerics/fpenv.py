"""The floating-point environment of the kernel's entry points."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")


class FloatEnvironmentError(RuntimeError):
    """Raised when the process's floating-point environment is not the IEEE default the
    float64 tier's a-priori bounds assume (round to nearest, gradual underflow).  Never a
    verdict: a command that meets it ends with an internal error (exit 3)."""


# 2^-1074 (the least subnormal), 2^-1022 (the least normal), 1, 3 2^-54, 2^-53
_PROBE = np.array([2.0**-1074, 2.0**-1022, 1.0, 3 * 2.0**-54, 2.0**-53])
_BLAS_N = 256  # large enough that a threaded BLAS splits the product over its workers
_blas_checked = False


def _elementwise_reason() -> str | None:
    """Returns why this thread's float arithmetic is not IEEE default, or None."""
    tiny, least_normal, one, three, half = _PROBE
    if not (_PROBE[:1] + 0.0)[0] > 0 or not float(tiny) + 0.0 > 0:
        return "subnormal inputs are read as zero (denormals-are-zero)"
    if not (_PROBE[1:2] * 0.5)[0] > 0 or not float(least_normal) * 0.5 > 0:
        return "subnormal results are flushed to zero (flush-to-zero)"
    # 1 + 3 2^-54 lies 3/4 ulp above 1: only round-to-nearest gives 1 + 2^-52 for it and
    # -(1 + 2^-52) for its negative, and the tie 1 + 2^-53 goes to the even 1
    ups = (one + three, (_PROBE[2:3] + _PROBE[3:4])[0])  # as a scalar and as an array
    downs = (-one - three, (-_PROBE[2:3] - _PROBE[3:4])[0])
    if not (all(u == 1 + 2.0**-52 for u in ups) and all(d == -(1 + 2.0**-52) for d in downs)
            and one + half == 1.0):
        return "the rounding mode is not round-to-nearest"
    return None


def _blas_reason() -> str | None:
    """Returns why the BLAS products (its worker threads included) are not IEEE default, or
    None.  Every entry of each product below is exact under the default environment."""
    n = _BLAS_N
    X = np.full((n, n), 2.0**-520)
    C = X @ np.full((n, n), 2.0**-530)  # products 2^-1050, subnormal; sums exact
    if not np.all(C == n * 2.0**-1050):
        return "the BLAS flushes subnormal results to zero"
    C = np.full((n, n), 2.0**-1060) @ np.full((n, n), 2.0**40)  # subnormal inputs
    if not np.all(C == n * 2.0**-1020):
        return "the BLAS reads subnormal inputs as zero"
    X = np.zeros((n, n))
    X[:, 0], X[:, 1] = 1.0, 3 * 2.0**-54
    Y = np.zeros((n, n))
    Y[0], Y[1] = 1.0, 1.0
    if not (np.all(X @ Y == 1 + 2.0**-52) and np.all(-X @ Y == -(1 + 2.0**-52))):
        return "the BLAS does not round to nearest"
    return None


def float_environment_reason() -> str | None:
    """Returns None when this process computes in the IEEE default environment the float64
    tier assumes (proofs_notes/rounding.md: round to nearest, gradual underflow), else why
    not.  The calling thread is tested on every call (microseconds); the BLAS, whose worker
    threads keep the environment they were started with, once per process until it passes."""
    global _blas_checked
    why = _elementwise_reason()
    if why is None and not _blas_checked:
        with np.errstate(all="ignore"):
            why = _blas_reason()
        _blas_checked = why is None
    return why


def require_default_floats() -> None:
    """Raises :class:`FloatEnvironmentError` unless ``float_environment_reason`` is None."""
    why = float_environment_reason()
    if why is not None:
        raise FloatEnvironmentError(
            f"the floating-point environment is not the IEEE default: {why} (as after "
            "torch.set_flush_denormal(True), fesetround, or loading a library built with "
            "-ffast-math); the float64 rounding bounds assume it, so nothing is checked. "
            "Run the check in a fresh process")


def quiet_floats(fn: Callable[P, R]) -> Callable[P, R]:
    """Returns ``fn`` run with every NumPy floating-point error ignored, after
    ``require_default_floats``.

    No check relies on a float exception: underflow is charged by the rounding bounds (the eta
    terms), and a NaN or an infinity is detected by the explicit finiteness tests, after which
    the next tier runs. A caller's ``np.seterr(all="raise")`` would otherwise turn such a
    charged underflow into a crash instead of a verdict. Flush-to-zero or a directed rounding
    mode, by contrast, would break the bounds themselves (a subnormal read as zero is an error
    of up to 2^-1022, not 2^-1075), so the call is refused instead."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with np.errstate(all="ignore"):
            require_default_floats()
            return fn(*args, **kwargs)

    return run
