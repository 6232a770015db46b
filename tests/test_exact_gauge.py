"""Gauge example: A unchanged by the shear, Gamma(t) = beta (1 + t^2), kappa(C) = beta."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from softrank.certify.errors import InputError
from softrank.exact import gauge_example


@pytest.mark.parametrize("t,gamma", [(0, 1), (2, 5), (5, 26), (10, 101)])
def test_table_beta_one(t, gamma):
    g = gauge_example(1, t)
    assert g.logits_equal
    assert g.gamma == gamma and g.kappa == 1
    assert g.dual["C11-C12-C21+C22"] == 4
    assert g.rho_Q == g.rho_K == sympy.sqrt(1 + t * t)


def test_matrix_independent_of_t_numerically():
    base = None
    for t in (0, 2, 5, 10):
        g = gauge_example(1, t)
        Q = np.array(g.Q.evalf(), dtype=float)
        K = np.array(g.K.evalf(), dtype=float)
        H = Q @ K.T
        A = np.exp(H) / np.exp(H).sum(axis=1, keepdims=True)
        assert np.allclose(A, np.array(g.A.evalf(), dtype=float), atol=1e-14)
        base = A if base is None else base
        assert np.allclose(A, base, atol=1e-12)
        # C from log A numerically equals the exact C
        L = np.log(A)
        P = np.eye(4) - np.ones((4, 4)) / 4
        assert np.allclose(P @ L @ P, np.array(g.C.evalf(), dtype=float), atol=1e-12)


def test_symbolic_and_rational_beta():
    b = sympy.Symbol("beta", positive=True)
    g = gauge_example(b, "1/2")
    assert sympy.simplify(g.gamma - b * (1 + sympy.Rational(1, 4))) == 0
    assert sympy.simplify(g.kappa - b) == 0
    g = gauge_example("3/2", 3)
    assert g.gamma == sympy.Rational(3, 2) * 10 and g.kappa == sympy.Rational(3, 2)
    assert math.isclose(float(g.A[0, 0]), math.e ** 1.5 / (math.e ** 1.5 + math.e ** -1.5 + 2))


@pytest.mark.parametrize("beta", [0, -1, "1/0", "x y", float("nan")])
def test_bad_beta(beta):
    with pytest.raises(InputError, match="beta"):
        gauge_example(beta, 1)


def test_bad_t():
    with pytest.raises(InputError, match="t"):
        gauge_example(1, "two")
