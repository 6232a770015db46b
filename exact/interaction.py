"""Visible interaction C = P_m (log A) P_N and exact bounds on its size kappa(C)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations

import sympy

from softrank.certify.errors import InputError

from .inputs import rational_matrix
from .meb import enclosing_radius


def visible_interaction(A: object) -> sympy.Matrix:
    """Returns C = P_m (log A) P_N exactly (sympy, entries are rational combinations of logs).

    Raises :class:`InputError` naming the entry when A is not entrywise positive (log A is
    undefined there) or not rational.
    """
    M = rational_matrix(A)
    for i, row in enumerate(M):
        for j, x in enumerate(row):
            if x <= 0:
                raise InputError(f"must be > 0 for log A (visible interaction), got {x}",
                                 field=f"matrix[{i}][{j}]")
    m, n = len(M), len(M[0])
    L = sympy.Matrix(m, n, lambda i, j: sympy.log(sympy.Rational(M[i][j].numerator,
                                                                  M[i][j].denominator)))
    Pm = sympy.eye(m) - sympy.ones(m, m) / m
    Pn = sympy.eye(n) - sympy.ones(n, n) / n
    return (Pm * L * Pn).applyfunc(sympy.expand)


def rectangle_lower_bound(C: sympy.Matrix) -> tuple[sympy.Expr, tuple[int, int, int, int]]:
    """Returns (max |C_ij - C_il - C_kj + C_kl| / 4, (i, k, j, l)): a lower bound on kappa(C).

    Exhaustive over all rectangles (small C only); comparisons are made on exact values.
    """
    best, arg = sympy.Integer(0), (0, 0, 0, 0)
    for i, k in combinations(range(C.rows), 2):
        for j, l in combinations(range(C.cols), 2):
            v = sympy.Abs(sympy.expand(C[i, j] - C[i, l] - C[k, j] + C[k, l])) / 4
            if sympy.simplify(v - best) > 0:
                best, arg = v, (i, k, j, l)
    return best, arg


def factorization_upper_bound(X: Sequence[Sequence[Fraction]],
                              Y: Sequence[Sequence[Fraction]]) -> tuple[Fraction, Fraction]:
    """Returns exact (upper_sq_X, upper_sq_Y) with rad(X)^2 <= upper_sq_X, rad(Y)^2 <= ...;
    kappa(X Y^T) <= sqrt(upper_sq_X * upper_sq_Y) for rational factors."""
    return enclosing_radius(X).upper_sq, enclosing_radius(Y).upper_sq
