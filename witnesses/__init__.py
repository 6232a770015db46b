"""Stored brackets (format v1) and untrusted float64 producers.

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
