"""The gauge example: the native query-key radius product depends on coordinates, the
intrinsic size kappa(C) does not.

Queries and keys are the four points +-e1, +-e2 of R^2, logits H = beta Q K^T.  The shear
S_t = [[1, t], [0, 1]] maps Q -> Q S_t and K -> K S_t^{-T}; the logits (Q S_t)(K S_t^{-T})^T
= Q S_t S_t^{-1} K^T = Q K^T are unchanged, hence so is A = softmax(H).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

from softrank.certify.errors import InputError
from softrank.certify.rationals import to_rational

from .meb import enclosing_radius

_E = [(1, 0), (-1, 0), (0, 1), (0, -1)]


@dataclass
class GaugeExample:
    """Exact data of the gauge example at shear t (see module docstring).

    ``A`` (sympy, entries in e^{+-beta}) equals ``A0`` (t = 0) because the logit matrices are
    exactly equal (``logits_equal``); Gamma = beta rho_Q rho_K with exact enclosing radii;
    kappa(C) = beta proved by a factorization (primal) and the rectangle (dual).
    """

    beta: sympy.Expr
    t: Fraction
    Q: sympy.Matrix
    K: sympy.Matrix
    logits: sympy.Matrix
    logits_equal: bool
    A: sympy.Matrix
    C: sympy.Matrix
    rho_Q: sympy.Expr
    rho_K: sympy.Expr
    gamma: sympy.Expr
    kappa: sympy.Expr
    primal: dict[str, Any]
    dual: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"beta": str(self.beta), "t": str(self.t), "A_unchanged": self.logits_equal,
                "rho_Q": str(self.rho_Q), "rho_K": str(self.rho_K),
                "Gamma": str(self.gamma), "kappa": str(self.kappa),
                "kappa_primal": str(self.primal["value"]),
                "kappa_dual": str(self.dual["value"]),
                "C": [[str(x) for x in self.C.row(i)] for i in range(self.C.rows)]}


MAX_BITS = 2048  # cost guard on t and beta (see gauge_example)


def parse_beta(beta: object) -> sympy.Expr:
    """Returns beta as a positive sympy number or symbol; InputError otherwise."""
    if isinstance(beta, sympy.Symbol):
        if not beta.is_positive:
            raise InputError("a symbolic beta must be declared positive", field="beta")
        return beta
    if isinstance(beta, str) and beta.isidentifier():
        return sympy.Symbol(beta, positive=True)
    b = to_rational(beta, field="beta")
    if b <= 0:
        raise InputError(f"must be > 0, got {b}", field="beta")
    return sympy.Rational(b.numerator, b.denominator)


def _rat(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def _centering(n: int) -> sympy.Matrix:
    return sympy.eye(n) - sympy.ones(n, n) / n


def _radius(rows: sympy.Matrix) -> tuple[sympy.Expr, dict[str, Any]]:
    pts = [[Fraction(int(sympy.fraction(x)[0]), int(sympy.fraction(x)[1]))
            for x in rows.row(i)] for i in range(rows.rows)]
    proof = enclosing_radius(pts)
    if not proof.exact:
        raise RuntimeError("enclosing radius not exact")
    return proof.radius, {"center": [str(c) for c in proof.center], "pair": proof.pair}


def gauge_example(beta: object, t: object) -> GaugeExample:
    """Returns the exact gauge example at (beta, t): beta > 0 rational or a positive symbol,
    t rational.  Contract: ``A`` is exact (sympy), proved equal to the t = 0 matrix;
    gamma = beta rho_Q rho_K with exact radii; kappa(C) exact (primal value = dual value)."""
    b = parse_beta(beta)
    tq = to_rational(t, field="t")
    # sympy's simplification time grows steeply with the size of the rationals (t = 1e-1200
    # takes 25 s, 1e-3000 minutes): a cost guard by the bits actually carried
    for name, q in (("t", tq), ("beta", b if isinstance(b, sympy.Rational) else None)):
        if q is not None and max(abs(int(q.numerator)).bit_length(),
                                 int(q.denominator).bit_length()) > MAX_BITS:
            raise InputError(f"numerator or denominator longer than {MAX_BITS} bits: too "
                             "costly for the exact simplification", field=name)
    T = _rat(tq)
    Q0 = sympy.Matrix(_E)
    K0 = sympy.Matrix(_E)
    S = sympy.Matrix([[1, T], [0, 1]])
    Q = Q0 * S
    K = K0 * S.inv().T
    H = b * Q * K.T
    H0 = b * Q0 * K0.T
    equal = sympy.simplify(H - H0) == sympy.zeros(4, 4)
    A = _softmax(H)
    A0 = _softmax(H0)
    if equal and A != A0:  # equal logits give identical expressions entry by entry
        raise RuntimeError("equal logits but different softmax matrices")
    # C = P (log A) P with log A = H - (log Z) 1^T; the row constant is killed by P on the right.
    P = _centering(4)
    C = (P * H * P).applyfunc(sympy.expand)
    rho_Q, rq = _radius(Q)
    rho_K, rk = _radius(K)
    gamma = sympy.simplify(b * rho_Q * rho_K)
    # Primal: C = X Y^T with X = P Q0 = Q0, Y = beta P K0 = beta K0 (column sums of Q0 vanish).
    X, Y = P * Q0, b * P * K0
    if (X * Y.T - C).applyfunc(sympy.expand) != sympy.zeros(4, 4):
        raise RuntimeError("factorization X Y^T = C failed its exact check")
    rad_X, _ = _radius(X)
    rad_Y0, _ = _radius(P * K0)
    kappa_primal = rad_X * b * rad_Y0  # rad(beta K0) = beta rad(K0), beta > 0
    rect = sympy.expand(C[0, 0] - C[0, 1] - C[1, 0] + C[1, 1])
    kappa_dual = sympy.Abs(rect) / 4
    if sympy.simplify(kappa_primal - kappa_dual) != 0:
        raise RuntimeError("primal and dual bounds on kappa(C) differ")
    primal = {"X": "P Q (= Q)", "Y": "beta P K (= beta K)", "rad_X": rad_X,
              "rad_Y": b * rad_Y0, "value": kappa_primal, "rho_Q_proof": rq, "rho_K_proof": rk}
    dual = {"rows": (0, 1), "cols": (0, 1), "C11-C12-C21+C22": rect, "value": kappa_dual}
    return GaugeExample(b, tq, Q, K, H, equal, A, C, rho_Q, rho_K, gamma,
                        sympy.simplify(kappa_dual), primal, dual)


def _softmax(H: sympy.Matrix) -> sympy.Matrix:
    rows = []
    for i in range(H.rows):
        w = [sympy.exp(x) for x in H.row(i)]
        z = sum(w)
        rows.append([x / z for x in w])
    return sympy.Matrix(rows)
