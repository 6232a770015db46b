"""One intrinsic record: tau, kappa and the profile of a retained part T = X Y^T of C."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..numerics.fpenv import quiet_floats
from .inputs import factors
from .interaction import Interaction
from .kappa import kappa_bracket
from .profile import ProfileResult, profile
from .result import Bracket
from .tau import TauResult, tau_bracket

WITNESS_KEYS = ("X", "Y", "b", "cycle", "cycle_rows", "G", "a", "c", "rects", "lam", "mu",
                "M", "D1", "D2")


@dataclass(frozen=True)
class IntrinsicCheck:
    """Brackets for q, tau and kappa of T = X Y^T and the profile at (eps, r)."""

    r: int
    tau: TauResult
    kappa: Bracket
    profile: ProfileResult

    def to_json(self) -> dict[str, Any]:
        return {"r": self.r, "q": self.tau.q.to_json(), "tau": self.tau.tau.to_json(),
                "kappa": self.kappa.to_json(), "profile": self.profile.to_json()}


@quiet_floats
def check_intrinsic(C: Interaction, witness: Mapping[str, Any], eps: object, r: int, *,
                    tier: str = "auto") -> IntrinsicCheck:
    """Returns brackets that contain q(C - T), tau(T), kappa(T) and the profile for the
    stored factors T = X Y^T of rank r, from the witness arrays (keys in WITNESS_KEYS; all
    but X and Y optional).  Unknown keys and bad arrays raise InputError naming the key."""
    if not isinstance(witness, Mapping):
        raise InputError(f"must be a mapping of array names to arrays, got "
                         f"{type(witness).__name__}", field="witness")
    if isinstance(r, bool) or not isinstance(r, numbers.Integral):
        raise InputError(f"must be an integer >= 1, got {r!r}", field="r")
    r = int(r)  # a NumPy integer as well: checked here, before any work
    unknown = sorted(set(witness) - set(WITNESS_KEYS))
    if unknown:
        raise InputError(f"unknown witness array {unknown[0]!r}", field=unknown[0])
    for key in ("X", "Y"):
        if witness.get(key) is None:
            raise InputError("is required", field=key)
    X, Y = factors(witness["X"], witness["Y"], m=C.m, n=C.n, r=r)
    tau = tau_bracket(C, X, Y, b=witness.get("b"), cycle=witness.get("cycle"),
                      cycle_rows=witness.get("cycle_rows"), tier=tier)
    kap = kappa_bracket(X, Y, G=witness.get("G"), a=witness.get("a"), c=witness.get("c"),
                        rects=witness.get("rects"), M=witness.get("M"), D1=witness.get("D1"),
                        D2=witness.get("D2"), lam=witness.get("lam"), mu=witness.get("mu"))
    return IntrinsicCheck(r, tau, kap, profile(kap, tau.tau, eps, r))
