"""Pluggable, UNTRUSTED float64 producers of upper witnesses and lower certificates.

A producer looks at an operator (float64 ``A``, optionally its logits) and a tolerance ``eps``
and returns a :class:`Witness` (upper end: B = U V) or a :class:`Certificate` (lower end) in
store format v1, plus its own float64 claims.  Nothing a producer says is believed: every
witness and certificate is replayed by ``certify`` (which never imports this package).

Producers register by name in the entry-point group ``softrank.producers``; an entry point
names a class (or a zero-argument factory) returning an object with ``name``, ``role``
(``"upper"`` or ``"lower"``) and ``produce(A, eps, *, logits=None)``.  Third-party packages
plug in with, in their ``pyproject.toml``::

    [project.entry-points."softrank.producers"]
    my_svd = "my_pkg.producers:MySVD"

The built-ins are registered the same way by this project's ``pyproject.toml``.  A plug-in
under a built-in's name with another target is refused (an input error naming the plug-in)
when that name is asked for: it would otherwise run, be priced and be reported as the
built-in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import metadata
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from softrank.certify.errors import InputError

ENTRY_POINT_GROUP = "softrank.producers"
Role = Literal["upper", "lower"]

# name -> "module:attr"; the same table pyproject.toml declares.  It is used for a built-in
# only when the installed metadata lacks it (an editable install made before the table
# existed), so a stale install still finds the built-ins.
BUILTINS: dict[str, str] = {
    "tsvd": "softrank.witnesses.producers.upper:TruncatedSVD",
    "rw_svd": "softrank.witnesses.producers.upper:RowReweightedSVD",
    "alt_l1": "softrank.witnesses.producers.altl1:AlternatingL1",
    "cpqr": "softrank.witnesses.producers.upper:ColumnPivotedQR",
    "rpqr": "softrank.witnesses.producers.upper:RowPivotedQR",
    "rep_rows": "softrank.witnesses.producers.upper:RepresentativeRows",
    "nonzero": "softrank.witnesses.producers.lower:Nonzero",
    "frobenius_tail": "softrank.witnesses.producers.lower:FrobeniusTail",
    "pinv_decoder": "softrank.witnesses.producers.lower:PinvDecoder",
    "submatrix": "softrank.witnesses.producers.lower:SubmatrixSearch",
    "keyset": "softrank.witnesses.producers.lower:KeySetDecoder",
    "decoder_lp": "softrank.witnesses.producers.decoder_lp:DecoderLP",
    "bernstein": "softrank.witnesses.producers.bernstein:Bernstein",
    "rowset": "softrank.witnesses.producers.rowset:RowSet",
    "nerve": "softrank.witnesses.producers.nerve:NerveChain",
}

# Built-ins that ``produce`` runs only when named.  decoder_lp: on 144 MiniLM heads (two texts,
# 128 tokens, eps 1/4, every rank validated by the kernel) bernstein's rank was at least
# decoder_lp's on every head, and decoder_lp took a quarter of the producing time.  nerve: on
# the 22 open brackets of lower end <= 7 of a held-out MiniLM paragraph (128 tokens, eps 1/4)
# it raised one lower end by one and closed none, for 120 CPU s a bracket
# (witnesses/producers/README.md, "nerve").
OPT_IN: frozenset[str] = frozenset({"decoder_lp", "nerve"})


def default_producers() -> list[str]:
    """Returns the built-in names ``produce`` runs when none are given (BUILTINS order)."""
    return [n for n in BUILTINS if n not in OPT_IN]


@dataclass
class Witness:
    """An upper witness B = U V of rank ``rank`` (claimed, in float64, to be within eps)."""

    rank: int
    U: np.ndarray
    V: np.ndarray
    claims: dict[str, Any] = field(default_factory=dict)
    kind: str = "factors"

    def to_mapping(self) -> dict[str, Any]:
        """Returns the store-format upper mapping {"kind", "rank", "U", "V"}."""
        return {"kind": self.kind, "rank": int(self.rank), "U": self.U, "V": self.V}


@dataclass
class Certificate:
    """A lower certificate of kind ``kind`` claiming r_eps(A) >= ``rank``."""

    kind: str
    rank: int
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    claims: dict[str, Any] = field(default_factory=dict)

    def to_mapping(self) -> dict[str, Any]:
        """Returns the store-format lower mapping {"kind", "rank", <arrays of the kind>}."""
        return {"kind": self.kind, "rank": int(self.rank), **self.arrays}


@runtime_checkable
class Producer(Protocol):
    """What a producer must offer (duck-typed; subclassing :class:`BaseProducer` is optional)."""

    name: str
    role: Role

    def produce(self, A: np.ndarray, eps: Fraction, *, logits: np.ndarray | None = None
                ) -> Witness | Certificate | None: ...


class BaseProducer:
    """Convenience base class: subclasses set ``name``, ``role`` and implement ``produce``."""

    name: str = "base"
    role: Role = "upper"

    def produce(self, A: np.ndarray, eps: Fraction, *, logits: np.ndarray | None = None
                ) -> Witness | Certificate | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<producer {self.name} ({self.role})>"


def _entry_points() -> list[Any]:
    """The installed entry points of the group (a seam tests monkeypatch)."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _load_target(target: str) -> Callable[[], Any]:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _registry() -> dict[str, Callable[[], Any]]:
    loaders: dict[str, Callable[[], Any]] = {}
    for name, target in BUILTINS.items():
        loaders[name] = (lambda t=target: _load_target(t))
    for ep in _entry_points():
        if ep.name in BUILTINS and ep.value.replace(" ", "") != BUILTINS[ep.name]:
            # a plug-in under a built-in's name would be run, priced and reported as the
            # built-in (``prices``, the defaults): refused when asked for, never run
            loaders[ep.name] = _conflict(ep.name, ep.value)
        elif ep.name not in loaders or ep.name not in BUILTINS:
            loaders[ep.name] = ep.load
    return loaders


class NameConflict(InputError):
    """A plug-in registered under a built-in producer's name with another target."""


def _conflict(name: str, value: str) -> Callable[[], Any]:
    def load() -> Any:
        raise NameConflict(f"producer {name!r} is a built-in name, and an installed plug-in "
                         f"registers it too ({value[:200]!r}, not {BUILTINS[name]!r}); "
                         "uninstall that plug-in or register it under another name",
                         field="producers")
    return load


def available_producers() -> dict[str, str]:
    """Returns {name: role} for every registered producer (built-ins and plug-ins).

    A plug-in whose entry point fails to load is listed with role ``"broken"``.
    """
    out: dict[str, str] = {}
    for name in sorted(_registry()):
        try:
            out[name] = get_producer(name).role
        except InputError:
            out[name] = "broken"
    return out


def get_producer(name: str) -> Producer:
    """Returns an instance of the producer registered as ``name``.

    Raises InputError (field ``producers``) for an unknown name, an entry point that does not
    load, or an object without ``name`` / ``role`` / ``produce``.
    """
    loaders = _registry()
    if name not in loaders:
        raise InputError(f"unknown producer {name!r}; available: {sorted(loaders)}",
                         field="producers")
    try:
        target = loaders[name]()
        prod = target() if isinstance(target, type) or not hasattr(target, "produce") else target
    except NameConflict:
        raise  # its message names the plug-in; any other error is wrapped with the name below
    except Exception as err:  # a plug-in's import error must not crash the CLI
        raise InputError(f"producer {name!r} failed to load: {err}", field="producers") from None
    role = getattr(prod, "role", None)
    if role not in ("upper", "lower") or not callable(getattr(prod, "produce", None)):
        raise InputError(f"producer {name!r} lacks role upper/lower or produce()",
                         field="producers")
    if getattr(prod, "name", None) != name:
        try:
            prod.name = name
        except AttributeError:
            pass
    return prod  # type: ignore[return-value]


def producers_by_role(names: list[str] | None = None) -> Mapping[str, list[Producer]]:
    """Returns {"upper": [...], "lower": [...]} for ``names`` (default: every registered one)."""
    chosen = sorted(_registry()) if names is None else names
    out: dict[str, list[Producer]] = {"upper": [], "lower": []}
    for n in chosen:
        p = get_producer(n)
        out[p.role].append(p)
    return out


__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "BaseProducer",
    "Certificate",
    "Producer",
    "Witness",
    "OPT_IN",
    "available_producers",
    "default_producers",
    "get_producer",
    "producers_by_role",
]
