"""The oracle's time budget, shared by every step (parse, searches, minors, decoders).

:func:`deadline` opens a budget of ``seconds`` from now (nested budgets keep the earlier end);
the long loops of the exact steps call :func:`tick`, which raises :class:`OutOfTime` once the
end has passed.  A step interrupted this way contributes nothing: the oracle keeps the bracket
it had before the step (every end already recorded is proved) and notes that the budget ran
out, so running out of time can only leave a bracket open, never make it wrong.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

_END: contextvars.ContextVar[float | None] = contextvars.ContextVar("oracle_end", default=None)


class OutOfTime(Exception):
    """Raised by :func:`tick` after the current budget's end."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Runs the block with a budget ending ``seconds`` from now, or at the enclosing budget's
    end if that comes first."""
    end = time.monotonic() + max(0.0, float(seconds))
    cur = _END.get()
    token = _END.set(end if cur is None else min(cur, end))
    try:
        yield
    finally:
        _END.reset(token)


def remaining() -> float:
    """Returns the seconds left in the current budget (inf without one, 0 once spent)."""
    end = _END.get()
    return float("inf") if end is None else max(0.0, end - time.monotonic())


def tick() -> None:
    """Raises :class:`OutOfTime` when the current budget has ended (no budget: never)."""
    end = _END.get()
    if end is not None and time.monotonic() >= end:
        raise OutOfTime


class Unaffordable(OutOfTime):
    """Raised by :func:`afford`: the step would end past the budget, which has time left."""


def afford(seconds: float) -> None:
    """Raises :class:`Unaffordable` (an :class:`OutOfTime`) now when a step estimated to take
    ``seconds`` would end past the current budget: a single exact step (one rational product
    or inverse) cannot be interrupted by :func:`tick`, so its price is checked before it
    starts.  A caller may go on with a cheaper step."""
    if seconds > remaining():
        raise Unaffordable
