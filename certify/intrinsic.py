"""Intrinsic interaction geometry: validated C, tau(T), kappa(T), native size and profile.

Public entry points (each returns brackets that contain the exact quantity of the exact
stored numbers; see the module of each function for its contract):

* :func:`interaction_from_logits`, :func:`interaction_from_positive`,
  :func:`interaction_from_operator` - enclosures of C = P_m (log A) P_n;
* :func:`tau_bracket` - q(C - X Y^T) and tau = 2 tanh(q / 4) from offsets and a cycle.
"""

from __future__ import annotations

from .interaction import (
    Interaction,
    interaction_from_logits,
    interaction_from_operator,
    interaction_from_positive,
)
from .intrinsic_result import Bracket
from .intrinsic_tau import TauResult, tau_bracket

__all__ = [
    "Bracket",
    "Interaction",
    "TauResult",
    "interaction_from_logits",
    "interaction_from_operator",
    "interaction_from_positive",
    "tau_bracket",
]
