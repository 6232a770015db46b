"""Validation of array inputs: real, finite, 2-D, of the expected shapes.

Kernel routines take arrays, never files; callers that read files pass ``source`` so the
error names it.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

_EXACT_FLOATS = (np.float16, np.float32, np.float64)


def as_matrix(x: object, field: str, *, source: str | None = None,
              shape: tuple[int | None, int | None] | None = None,
              check_finite: bool = True) -> np.ndarray:
    """Returns ``x`` as a float64 2-D array holding exactly the same numbers.

    float16/32/64 and integer arrays (|x| <= 2**53) widen exactly.  Raises
    :class:`InputError` naming ``field`` for other dtypes, wrong dimension or shape, and
    (when ``check_finite``) NaN or Inf.
    """
    if isinstance(x, np.ma.MaskedArray):
        # masked entries would be zeros to some arithmetic and stored data to other: refuse
        raise InputError("masked arrays are not accepted; pass the data (np.asarray(x.data)) "
                         "or fill the masked entries explicitly", field=field, source=source)
    if type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 2:
        arr = x
    else:
        arr = _plain_array(x, field, source)
        if arr.dtype == object or arr.dtype.kind not in "fiu":
            raise InputError(f"must be a real float or integer array, got dtype {arr.dtype}",
                             field=field, source=source)
        if arr.dtype.kind == "f" and arr.dtype.type not in _EXACT_FLOATS:
            raise InputError(f"dtype {arr.dtype} does not widen exactly to float64",
                             field=field, source=source)
        if arr.dtype.kind in "iu" and arr.size and int(np.abs(arr).max()) > 2**53:
            raise InputError("integer entries above 2**53 are not exact in float64",
                             field=field, source=source)
        if arr.ndim != 2:
            raise InputError(f"must be a 2-D array, got shape {arr.shape}",
                             field=field, source=source)
        arr = arr.astype(np.float64)
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                raise InputError(f"has shape {arr.shape}, expected {_fmt_shape(shape)}",
                                 field=field, source=source)
    if check_finite:
        require_finite(arr, field, source=source)
    return arr


def _plain_array(x: object, field: str, source: str | None) -> np.ndarray:
    """Returns ``x`` as a base-class ndarray (np.matrix and other subclasses dropped)."""
    try:
        return np.asarray(x).view(np.ndarray)
    except (ValueError, TypeError) as err:  # ragged nested lists and the like
        raise InputError(f"not a rectangular numeric array: {err}", field=field,
                         source=source) from None


def require_finite(arr: np.ndarray, field: str, *, source: str | None = None) -> None:
    """Raises :class:`InputError` if ``arr`` holds NaN or Inf, naming the first bad entry."""
    if arr.size and not np.isfinite(arr).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise InputError(f"non-finite entry {float(arr[idx])} at index {idx} (NaN and Inf are "
                         "not numbers a bracket can be checked on)",
                         field=field, source=source)


def require_all_finite(source: str | None = None, **arrays: np.ndarray) -> None:
    """Raises InputError naming the first of ``arrays`` (by keyword) that holds NaN or Inf."""
    for name, X in arrays.items():
        require_finite(X, name, source=source)


def as_index_vector(x: object, field: str, bound: int, *, source: str | None = None) -> np.ndarray:
    """Returns ``x`` as a 1-D int64 array of distinct indices in [0, bound)."""
    if isinstance(x, np.ma.MaskedArray):
        raise InputError("masked arrays are not accepted", field=field, source=source)
    arr = _plain_array(x, field, source)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise InputError(f"must be a 1-D integer index vector, got {arr.dtype} {arr.shape}",
                         field=field, source=source)
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= bound):
        raise InputError(f"indices must lie in [0, {bound})", field=field, source=source)
    if len(np.unique(arr)) != arr.size:
        raise InputError("indices must be distinct", field=field, source=source)
    return arr


def _fmt_shape(shape: tuple[int | None, int | None]) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
