"""Set-up shared by every worker process of a parallel run."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The most worker processes a run starts.  Each worker imports numpy, flint and the kernel
#: (about 100 MB resident before any work), and a pool starts one per queued task up to its
#: size, so an unbounded ``--jobs`` is unbounded memory on a large corpus.
MAX_JOBS = 256


def check_jobs(n: int) -> int:
    """Returns ``n`` when it lies in 1 .. MAX_JOBS; raises InputError naming ``--jobs``."""
    from softrank.certify.errors import InputError

    if not 1 <= n <= MAX_JOBS:
        raise InputError(f"must be from 1 to {MAX_JOBS} worker processes, got {n}",
                         field="--jobs")
    return n


def jobs_count(text: str) -> int:
    """argparse ``type`` of ``--jobs``: returns the integer ``text`` spells when it lies in
    1 .. MAX_JOBS; raises ``argparse.ArgumentTypeError`` (a usage error, exit 2) otherwise."""
    import argparse

    try:
        n = int(text, 10) if text.strip().isascii() else None
    except ValueError:
        n = None
    if n is None or not 1 <= n <= MAX_JOBS:
        raise argparse.ArgumentTypeError(
            f"must be an integer from 1 to {MAX_JOBS} (worker processes), got {text[:40]!r}")
    return n


class Terminated(KeyboardInterrupt):
    """SIGTERM received while a command runs (``kill``, ``timeout``, a batch system's limit).

    A KeyboardInterrupt, so every path that stops on Ctrl-C stops on it the same way: atomic
    writes remove their temporary file, a pool stops its workers, the journal keeps what was
    written.  The CLI reports it in one line and exits 143 (128 + SIGTERM)."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread; the previous
    handler is restored after it.  The block runs unchanged off the main thread (where Python
    cannot install a handler), when SIGTERM is ignored (the invoker's choice, kept as Python
    keeps an ignored SIGINT), and when the handler in place is not Python's (it could not be
    restored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None or previous == signal.SIG_IGN:
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        if os.getpid() == owner:  # a forked child before init_worker: not its interrupt
            raise Terminated
        os._exit(128 + signal.SIGTERM)

    owner = os.getpid()
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        # masked while the old handler returns: a SIGTERM in between would otherwise raise
        # before the restore and leave _raise installed; a pending one is then delivered to
        # the restored handler
        with _signals_blocked(signal.SIGTERM):
            signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_blocked(*signums: int) -> Iterator[None]:
    """Blocks ``signums`` for the calling thread within the block (a pending one is delivered
    when it ends)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def terminate_workers(pool: Any) -> None:
    """Sends SIGTERM to every worker process of the ProcessPoolExecutor ``pool`` (CPython keeps
    them in the private ``_processes``; without it nothing is sent), with SIGINT and SIGTERM
    blocked meanwhile: a second signal stopping the loop halfway left the remaining workers
    (which ignore SIGINT) to be waited for."""
    with _signals_blocked(signal.SIGINT, signal.SIGTERM):
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            try:
                proc.terminate()
            except (OSError, ValueError, AttributeError):  # already gone or closed
                continue


@contextmanager
def stopping_pool(pool: Any) -> Iterator[Any]:
    """Yields the ProcessPoolExecutor ``pool`` and shuts it down after the block.  Left by an
    error, an interrupt (Ctrl-C, SIGTERM) or a consumer that stopped, the workers are
    terminated first and queued work dropped: ``with pool:`` waited for every running task,
    and the workers ignore SIGINT, so a terminated run went on until they finished."""
    try:
        yield pool
    except BaseException:
        terminate_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def init_worker(parent: int) -> None:
    """Pool initializer: one BLAS thread per worker, SIGINT ignored, SIGTERM's default action,
    and the worker dies with its parent.

    N workers each starting the machine's default number of BLAS threads oversubscribe the
    cores, and busy-waiting OpenBLAS threads then slow every product by 10-100x.  Without
    PR_SET_PDEATHSIG, ``kill -9`` of the parent leaves workers blocked on their queue forever;
    workers hold nothing worth saving (the parent journals every record).
    """
    # first, before the slower set-up: Ctrl-C reaches the whole process group; the parent
    # alone reports it (one line) and shuts the pool down, so workers ignore SIGINT instead
    # of printing tracebacks; a forked worker inherits the parent's SIGTERM handler
    # (sigterm_as_interrupt), and the pool stops its workers with SIGTERM: they hold nothing
    # to clean up, so the default action kills them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _limit_blas_threads()
    tune_allocator()
    allow_long_integers()  # spawned workers do not inherit the parent's setting
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
_ALLOCATOR_TUNED = False

# glibc returns freed heap memory above M_TRIM_THRESHOLD to the system and serves blocks
# above M_MMAP_THRESHOLD with fresh mmap pages, so every temporary array of a few hundred KB
# (one 256 x 256 operator) is page-faulted in anew: measured here, that tripled the time of
# the float64 tiers (exp of a 256 x 256 block: 1.6 ms instead of 0.5 ms).  Keeping freed
# memory up to these sizes trades at most TRIM_BYTES of resident memory per process for it.
MMAP_BYTES = 32 << 20  # glibc's own ceiling for its dynamic threshold on 64-bit
TRIM_BYTES = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers


def tune_allocator() -> bool:
    """Asks glibc (once per process) to keep freed memory up to TRIM_BYTES and to serve
    blocks below MMAP_BYTES from its heap; returns whether the setting is in effect.

    A process-wide setting: it changes speed and resident memory only, never a result.
    Without glibc (macOS, musl) or with SOFTRANK_MALLOC_DEFAULTS=1 in the environment
    nothing is changed and the result is False.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    if os.environ.get("SOFTRANK_MALLOC_DEFAULTS") == "1" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc only: musl's mallopt is a no-op
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES) == 1 and mallopt(_M_TRIM_THRESHOLD,
                                                                 TRIM_BYTES) == 1
    _ALLOCATOR_TUNED = ok
    return ok

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
