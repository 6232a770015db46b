"""Stored brackets (format v1) and untrusted float64 producers.

Public API:

* :class:`Store` - write a store: ``Store.create(path)``, ``add_operator(...)``,
  ``add_bracket(...)``, ``close()`` (atomic writes; ``Store.open(path)`` appends/resumes);
* :func:`open_store` ``(path)`` -> :class:`StoreReader` - validated, read-only view with
  :class:`OperatorRecord` and :class:`BracketRecord` entries (arrays loaded on demand,
  sha256-checked, never pickles);
* ``FORMAT_NAME``, ``FORMAT_VERSION``, ``LOWER_ARRAYS`` - the format's constants;
* :mod:`witnesses.producers` - the plugin interface of the untrusted producers.

Nothing in this package decides a verdict; ``certify`` does.
"""

from .store import (
    FORMAT_NAME,
    FORMAT_VERSION,
    LOWER_ARRAYS,
    BracketRecord,
    OperatorRecord,
    Store,
    StoreReader,
    open_store,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LOWER_ARRAYS",
    "BracketRecord",
    "OperatorRecord",
    "Store",
    "StoreReader",
    "open_store",
]
