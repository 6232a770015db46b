"""Set-up shared by every worker process of a parallel run."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def init_worker(parent: int) -> None:
    """Pool initializer: one BLAS thread per worker, SIGINT ignored, and the worker dies with
    its parent.

    N workers each starting the machine's default number of BLAS threads oversubscribe the
    cores, and busy-waiting OpenBLAS threads then slow every product by 10-100x.  Without
    PR_SET_PDEATHSIG, ``kill -9`` of the parent leaves workers blocked on their queue forever;
    workers hold nothing worth saving (the parent journals every record).
    """
    _limit_blas_threads()
    allow_long_integers()  # spawned workers do not inherit the parent's setting
    # Ctrl-C reaches the whole process group; the parent alone reports it (one line) and
    # shuts the pool down, so workers ignore SIGINT instead of printing tracebacks
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL))
        except (OSError, AttributeError):  # pragma: no cover - no prctl: best effort only
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


_LIMITER: Any = None

# Exact rationals the readers accept have at most about 13000 bits (certify.rationals); claim
# strings print products of two or three of them (m (eps + chi)^2), beyond Python's default
# 4300-digit limit for int-to-str.  Conversions of this size take milliseconds.
INT_DIGITS = 50_000


def allow_long_integers() -> None:
    """Raises Python's int-to-str digit limit to INT_DIGITS (never lowers it)."""
    get = getattr(sys, "get_int_max_str_digits", None)
    if get is not None and 0 < get() < INT_DIGITS:
        sys.set_int_max_str_digits(INT_DIGITS)


def _limit_blas_threads() -> None:
    global _LIMITER
    from threadpoolctl import threadpool_limits

    _LIMITER = threadpool_limits(limits=1, user_api="blas")  # kept alive for the process
