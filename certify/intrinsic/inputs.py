"""Validation of the witness arrays of the intrinsic checks (factors, vectors, index lists)."""

from __future__ import annotations

import numpy as np

from ..arrays import as_matrix
from ..errors import InputError


def factors(X: object, Y: object, *, m: int | None = None, n: int | None = None,
            r: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns the factors (X m x r, Y n x r) of T = X Y^T as float64 arrays.

    Raises InputError naming "X", "Y" or "r" for non-finite entries, shape mismatches, r = 0,
    or r larger than the factors allow (r > min(m, n)).
    """
    Xa = as_matrix(X, "X", shape=(m, None))
    Ya = as_matrix(Y, "Y", shape=(n, None))
    if Xa.shape[1] != Ya.shape[1]:
        raise InputError(f"X has {Xa.shape[1]} columns but Y has {Ya.shape[1]}: T = X Y^T needs "
                         "equal inner dimensions", field="Y")
    k = Xa.shape[1]
    if r is not None and (isinstance(r, bool) or not isinstance(r, int | np.integer)):
        raise InputError(f"must be an integer, got {r!r}", field="r")
    if r is not None and k != r:
        raise InputError(f"the factors have {k} columns but rank r = {r} was declared",
                         field="r")
    if k < 1:
        raise InputError("the factors need at least one column (r >= 1)", field="r")
    if k > min(Xa.shape[0], Ya.shape[0]):
        raise InputError(f"r = {k} is larger than the factors allow (min(m, n) = "
                         f"{min(Xa.shape[0], Ya.shape[0])})", field="r")
    return Xa, Ya


def vector(x: object, field: str, length: int | None) -> np.ndarray:
    """Returns ``x`` as a finite float64 1-D array (of ``length`` when given)."""
    if x is None:
        raise InputError("is missing", field=field)
    if isinstance(x, np.ma.MaskedArray):
        raise InputError("masked arrays are not accepted", field=field)
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # a ragged list, say
        raise InputError(f"not a vector of numbers: {err}", field=field) from None
    if arr.ndim != 1:
        raise InputError(f"must be a 1-D vector, got shape {arr.shape}", field=field)
    M = as_matrix(arr.reshape(1, -1) if arr.size else arr.reshape(1, 0), field)
    v = M[0]
    if length is not None and v.shape[0] != length:
        raise InputError(f"has length {v.shape[0]}, expected {length}", field=field)
    return v


def indices(x: object, field: str, bound: int, *, length: int | None = None,
            distinct: bool = False, min_len: int = 1) -> np.ndarray:
    """Returns ``x`` as a 1-D int64 array of indices in [0, bound)."""
    if isinstance(x, np.ma.MaskedArray):
        raise InputError("masked arrays are not accepted", field=field)
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise InputError(f"not an index vector: {err}", field=field) from None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InputError(f"must be a 1-D integer vector, got {arr.dtype} {arr.shape}",
                         field=field)
    arr = arr.astype(np.int64)
    if arr.size < min_len:
        raise InputError(f"needs at least {min_len} entries", field=field)
    if length is not None and arr.size != length:
        raise InputError(f"has length {arr.size}, expected {length}", field=field)
    if arr.size and (arr.min() < 0 or arr.max() >= bound):
        raise InputError(f"indices must lie in [0, {bound})", field=field)
    if distinct and len(np.unique(arr)) != arr.size:
        raise InputError("indices must be distinct", field=field)
    return arr
