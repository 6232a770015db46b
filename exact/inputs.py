"""Parsing of exact rational cells: matrices and tolerances as Python ``Fraction``s."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from softrank.certify.errors import InputError
from softrank.certify.rationals import to_rational

Matrix = list[list[Fraction]]


def rational_matrix(A: object, *, field: str = "matrix", source: str | None = None) -> Matrix:
    """Returns ``A`` as a non-empty rectangular list of rows of exact ``Fraction``s.

    Entries may be ints, ``Fraction``s, sympy ``Rational``s, floats (their exact binary value)
    or strings such as ``"1/3"`` and ``"0.25"``.  Raises :class:`InputError` naming the entry
    (``matrix[i][j]``) for anything non-rational, and for ragged or empty input.
    """
    if hasattr(A, "tolist") and not isinstance(A, str):
        A = A.tolist()
    if isinstance(A, str | bytes) or not isinstance(A, Sequence) or len(A) == 0:
        raise InputError("must be a non-empty list of rows", field=field, source=source)
    rows: Matrix = []
    width = None
    for i, row in enumerate(A):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) == 0:
            raise InputError("must be a non-empty list of entries", field=f"{field}[{i}]",
                             source=source)
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise InputError(f"has {len(row)} entries, row 0 has {width} (ragged matrix)",
                             field=f"{field}[{i}]", source=source)
        try:
            rows.append([to_rational(x, field=f"{field}[{i}][{j}]") for j, x in enumerate(row)])
        except InputError as err:
            raise err.at(source=source) from None
    return rows


def unit_eps(eps: object, *, field: str = "eps", source: str | None = None) -> Fraction:
    """Returns the exact tolerance ``eps``; raises :class:`InputError` unless 0 < eps < 1."""
    try:
        q = to_rational(eps, field=field)
    except InputError as err:
        raise err.at(source=source) from None
    if not 0 < q < 1:
        raise InputError(f"must satisfy 0 < eps < 1, got {q}", field=field, source=source)
    return q


# Entries at or above this are not handed to the float proposals: their squares, SVDs and LP
# costs (differences of entries) must stay finite, and 2^500 squared is still 2^1000.  An
# exact cell of 8e307 entries made the truncated SVD's u s infinite and a row (1.2e308,
# -1.2e308) an LP cost, both crashes (exit 3) before this bound.
FLOAT_HEADROOM = Fraction(2) ** 500


def float_view(M: Matrix) -> np.ndarray | None:
    """Returns ``M`` rounded to float64 for the float proposals, or None when an entry is at
    or above FLOAT_HEADROOM in magnitude (the proposals are then skipped; no verdict rests on
    them)."""
    if any(abs(x) >= FLOAT_HEADROOM for row in M for x in row):
        return None
    return np.array([[float(x) for x in row] for row in M], dtype=np.float64)
