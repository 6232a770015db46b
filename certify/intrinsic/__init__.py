"""Intrinsic interaction geometry: validated C, tau(T), kappa(T), native size and profile.

Public entry points (each returns brackets that contain the exact quantity of the exact
stored numbers; see the module of each function for its contract):

* :func:`interaction_from_logits`, :func:`interaction_from_positive`,
  :func:`interaction_from_operator` - enclosures of C = P_m (log A) P_n;
* :func:`tau_bracket` - q(C - X Y^T) and tau = 2 tanh(q / 4) from offsets and a cycle;
* :func:`kappa_bracket` (:func:`kappa_upper`, :func:`kappa_lower_rectangles`,
  :func:`kappa_lower_psd`) - kappa(X Y^T) from a gauge, rectangles and a PSD dual;
* :func:`radius_bracket`, :func:`native_size` - enclosing radii and Gamma = beta rad Q rad K;
* :func:`profile` - (1 + kappa/(eps - tau)^2)^{r/2} and its logarithm when tau < eps;
* :func:`check_intrinsic` - all of the above for one stored record (witness arrays by name).
"""

from __future__ import annotations

from .check import WITNESS_KEYS, IntrinsicCheck, check_intrinsic
from .interaction import (
    Interaction,
    interaction_from_logits,
    interaction_from_operator,
    interaction_from_positive,
)
from .kappa import (
    kappa_bracket,
    kappa_lower_psd,
    kappa_lower_rectangles,
    kappa_lower_variance,
    kappa_upper,
)
from .profile import ProfileResult, profile
from .radius import native_size, radius_bracket, radius_sq_bracket
from .result import Bracket
from .tau import TauResult, tau_bracket

__all__ = [
    "WITNESS_KEYS",
    "Bracket",
    "IntrinsicCheck",
    "check_intrinsic",
    "kappa_lower_variance",
    "Interaction",
    "ProfileResult",
    "TauResult",
    "kappa_bracket",
    "kappa_lower_psd",
    "kappa_lower_rectangles",
    "kappa_upper",
    "native_size",
    "profile",
    "radius_bracket",
    "radius_sq_bracket",
    "interaction_from_logits",
    "interaction_from_operator",
    "interaction_from_positive",
    "tau_bracket",
]
