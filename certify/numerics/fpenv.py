"""The floating-point environment of the kernel's entry points."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")


def quiet_floats(fn: Callable[P, R]) -> Callable[P, R]:
    """Returns ``fn`` run with every NumPy floating-point error ignored.

    No check relies on a float exception: underflow is charged by the rounding bounds (the eta
    terms), and a NaN or an infinity is detected by the explicit finiteness tests, after which
    the next tier runs. A caller's ``np.seterr(all="raise")`` would otherwise turn such a
    charged underflow into a crash instead of a verdict."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return run
