"""Lower certificate ``nonzero`` (L = 1): ||A||_row1 > eps + chi, so B = 0 is not close
enough.  Statement and proof: proofs_notes/lower_nonzero.md."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..numerics.rowl1 import decide_max_row_l1
from ..rationals import qstr
from ..result import Check


def check_nonzero(A: np.ndarray, t: Fraction, eps: Fraction, chi: Fraction, tier: str,
                  source: str | None) -> Check:
    """Returns the check of ||A||_row1 > t = eps + chi: ``holds`` when proved (then every B
    within t of A has rank >= 1), ``fails`` when ||A||_row1 <= t is proved (B = 0 is within
    t), else ``undecided``; ``value`` encloses ||A||_row1.  proofs_notes/lower_nonzero.md."""
    m, N = A.shape
    d = decide_max_row_l1(A, np.zeros((m, 0)), np.zeros((0, N)), t, tier=tier, source=source)
    status = {"fails": "holds", "holds": "fails"}.get(d.status, "undecided")
    return Check(status=status, kind="nonzero", rank=1, eps=eps, threshold=t,  # type: ignore[arg-type]
                 value=d.value, tier=d.tier, claim=f"||A||_row1 > {qstr(t)}", chi=chi,
                 precision=d.precision, tiers_run=d.tiers_run,
                 detail={"sense": ">", "rows_escalated": d.rows_escalated})
