"""The ``--batch`` option of ``check``, ``audit`` and ``produce``: operators per Dask task."""

from __future__ import annotations

import argparse

from softrank.certify.errors import InputError

from ..audit.batching import MAX_BATCH, TARGET_TASK_WORK, TASKS_PER_WORKER, parse_batch


def add_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", metavar="K", default="auto",
                   help="with --scheduler: operators per Dask task (a task costs milliseconds "
                        "of scheduling). auto (default): from the declared sizes, about "
                        f"{TARGET_TASK_WORK / 1e9:g} s of estimated work per task, at most "
                        f"{MAX_BATCH} operators, at least {TASKS_PER_WORKER} tasks per "
                        "worker thread when there are enough operators; 1 sends one "
                        "operator per task. Results are the same for every K")


def value(args: argparse.Namespace) -> int | None:
    """Returns ``args.batch`` as a count, None for auto; InputError when it is not 'auto' or a
    positive integer, or when a count is given without ``--scheduler``."""
    k = parse_batch(getattr(args, "batch", "auto"))
    if k is not None and getattr(args, "scheduler", None) is None:
        raise InputError("--batch needs --scheduler (it groups operators into Dask tasks)",
                         field="--batch")
    return k
