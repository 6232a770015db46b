"""The grid family, computed exactly from its definition.

Points a, b in {0..L-1}^r (lexicographic order), logits H_ab = 2 s a.b - s ||b||^2 with
s = log(8 r / (1 - eps)), A = row softmax of H.  With q = e^{-s} = (1 - eps) / (8 r) (rational)
A_ab = q^{e_ab} / sum_b' q^{e_ab'} with integer exponents e_ab = ||b||^2 - 2 a.b, so A is an
exact rational matrix.  It is kept as integer weights T[e_ab] / Z_a with one common scaling
(the L = 20, r = 2 matrix has 160000 entries with thousands of digits each).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import flint
import sympy

from softrank.certify.errors import InputError

from .inputs import unit_eps
from .meb import RadiusProof, enclosing_radius_scaled


@dataclass
class GridFamily:
    """The exact grid-family matrix with its computed invariants.

    ``rank_C`` is the exact rank of C = P (log A) P; ``kappa`` the exact size kappa(C) (sympy),
    proved by a factorization (``primal``) and a rectangle (``dual``) of equal value;
    ``r_eps`` = L^r, proved by ``row1_A_minus_I`` < 1 - eps (exact rational).
    """

    r: int
    L: int
    eps: Fraction
    q: Fraction
    s: sympy.Expr
    points: list[tuple[int, ...]]
    rank_C: int
    kappa: sympy.Expr
    primal: dict[str, Any]
    dual: dict[str, Any]
    row1_A_minus_I: Fraction
    r_eps: int
    _T: dict[int, int] = field(repr=False, default_factory=dict)
    _Z: list[int] = field(repr=False, default_factory=list)

    @property
    def n(self) -> int:
        return len(self.points)

    def exponent(self, i: int, j: int) -> int:
        a, b = self.points[i], self.points[j]
        return sum(x * x for x in b) - 2 * sum(x * y for x, y in zip(a, b, strict=True))

    def entry(self, i: int, j: int) -> Fraction:
        """Returns A_ij exactly."""
        return Fraction(self._T[self.exponent(i, j)], self._Z[i])

    def matrix(self) -> list[list[Fraction]]:
        """Returns A as exact Fraction rows (large for big L: n^2 entries)."""
        return [[self.entry(i, j) for j in range(self.n)] for i in range(self.n)]

    def to_json(self) -> dict[str, Any]:
        return {
            "r": self.r, "L": self.L, "eps": str(self.eps), "n": self.n,
            "exp_minus_s": str(self.q), "s": str(self.s),
            "rank_C": self.rank_C, "kappa": str(self.kappa),
            "kappa_value": float(self.kappa.evalf(30)),
            "primal": {k: str(v) for k, v in self.primal.items()},
            "dual": {k: str(v) for k, v in self.dual.items()},
            "row1_A_minus_I": str(self.row1_A_minus_I),
            "one_minus_eps": str(1 - self.eps),
            "r_eps": self.r_eps,
        }


def _short_int(x: int) -> str:
    """``x`` in decimal when short, else its digit count (display only)."""
    if abs(x) < 10**12:
        return str(x)
    return f"({x.bit_length() * 30103 // 100000 + 1}-digit integer)"


def _positive_int(x: object, name: str, least: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < least:
        raise InputError(f"must be an integer >= {least}, got {x!r}", field=name)
    return x


# Cost guards by the work done, not by L^r alone: the weights T[e] (2D + 1 integers of up to
# 2 D b bits, D = r (L-1)^2, b = bits of q) take about D^2 b bits, and the row sums add n^2
# integers of up to 2 D b bits.  (r = 1, L = 400 has only 400 points but D^2 b ~ 2e11 bits.)
# One unit of row work is about 1e-10 CPU s on the development machine in every regime
# measured (b from 7 to 26,000 bits, n from 9 to 1,600), so MAX_ROW_WORK is about 25 s.
MAX_WEIGHT_BITS = 2 * 10**9
MAX_ROW_WORK = 25 * 10**10
# What a point pair costs besides its big-integer sum (Python's loop over r coordinates: the
# r = 10, L = 2 grid spends a second there with D b = 110), and what the interaction step
# costs per n^3 (two n x n integer products and a rank, about 4e8 n^3 a second).
PAIR_UNITS = 1000
INTERACTION_UNITS = 25


def grid_cost(r: int, L: int, q: Fraction) -> tuple[int, int]:
    """Returns (bits held by the weights T, units of work of the row sums and the interaction
    step), both estimates of the work :func:`grid_family` does (up to a small constant
    factor).  A product or gcd of b-bit numbers costs about b / 64 word operations per bit
    once b passes a machine word (schoolbook and gcd; an eps of 3,900 digits made a run priced
    at 2% of the limit take 69 s), so the row work grows with b^2 / 64 there; each point pair
    adds PAIR_UNITS r, and rank C with its factorization check INTERACTION_UNITS n^3."""
    D = r * (L - 1) ** 2
    b = q.numerator.bit_length() + q.denominator.bit_length()
    n = L ** r
    rows = n * n * (D * b * max(1, b // 64) + PAIR_UNITS * r)
    return D * D * b, rows + INTERACTION_UNITS * n ** 3


def grid_family(r: int, L: int, eps: object, *, max_points: int = 1600) -> GridFamily:
    """Returns the exact grid family for (r, L, eps) with rank C, kappa(C) and r_eps(A).

    Contract: A is exact; rank_C is the exact rank of P (log A) P; kappa is exact when the
    primal factorization and the dual rectangle agree (they do for every valid input, else
    RuntimeError); r_eps = L^r is proved by ||A - I||_row1 < 1 - eps.  Raises InputError for
    r < 1, L < 2, eps outside (0, 1), more than ``max_points`` points, or a cost
    (:func:`grid_cost`) above MAX_WEIGHT_BITS / MAX_ROW_WORK.
    """
    r = _positive_int(r, "r", 1)
    L = _positive_int(L, "L", 2)
    e = unit_eps(eps)
    # L^r >= 2^r: a large r is refused before L^r is formed (it can have millions of digits,
    # past Python's limit for printing an integer), and the message never prints it
    if r >= max_points.bit_length() or L ** r > max_points:
        raise InputError(f"L^r = {_short_int(L)}^{_short_int(r)} points exceed the limit "
                         f"{max_points}", field="L")
    q = (1 - e) / (8 * r)
    weight_bits, row_work = grid_cost(r, L, q)
    if weight_bits > MAX_WEIGHT_BITS or row_work > MAX_ROW_WORK:
        raise InputError(f"(r, L, eps) = ({r}, {L}, {e}) needs about {weight_bits:.2e} bits of "
                         f"weights and {row_work:.2e} bit operations (limits "
                         f"{MAX_WEIGHT_BITS:.0e}, {MAX_ROW_WORK:.0e}): too costly", field="L")
    s = sympy.log(1 / sympy.Rational(q.numerator, q.denominator))  # s = log(8 r / (1 - eps))
    points = list(itertools.product(range(L), repeat=r))
    n = len(points)
    sq = [sum(x * x for x in p) for p in points]
    # Exponents e_ab = ||b||^2 - 2 a.b range over [-D, D], D = r (L-1)^2; scale q^e by
    # u^D v^D (q = u / v) so every weight T[e] = u^(e+D) v^(D-e) is an integer.
    u, v, D = q.numerator, q.denominator, r * (L - 1) ** 2
    T = {k: u ** (k + D) * v ** (D - k) for k in range(-D, D + 1)}
    Z: list[int] = []
    worst = Fraction(0)
    for i, a in enumerate(points):
        ws = [T[sq[j] - 2 * sum(x * y for x, y in zip(a, b, strict=True))]
              for j, b in enumerate(points)]
        z = sum(ws)
        Z.append(z)
        # sum_j |A_ij - delta_ij| with A_ij = ws[j] / z, computed in integers
        dev = sum(abs(w - z) if j == i else abs(w) for j, w in enumerate(ws))
        worst = max(worst, Fraction(dev, z))
    if not worst < 1 - e:
        raise RuntimeError("||A - I||_row1 < 1 - eps failed; the r_eps proof does not apply")
    rank_C, kappa, primal, dual = _interaction(points, s)
    return GridFamily(r, L, e, q, s, points, rank_C, kappa, primal, dual, worst, n, T, Z)


def _interaction(points: list[tuple[int, ...]], s: sympy.Expr):
    """rank, kappa (primal + dual) of C = P (log A) P = s P K P, K_ab = 2 a.b - ||b||^2.

    log A_ab = s K_ab - log Z_a (row constant), and P_m c 1^T P_N = 0, so C = s P K P.
    With n^2 P K P = (n I - J) K (n I - J) everything below is integer arithmetic.
    """
    n, r = len(points), len(points[0])
    K = flint.fmpz_mat([[2 * sum(x * y for x, y in zip(a, b, strict=True)) - sum(y * y for y in b)
                         for b in points] for a in points])
    nIJ = flint.fmpz_mat([[n - 1 if i == j else -1 for j in range(n)] for i in range(n)])
    Cn = nIJ * K * nIJ  # = n^2 P K P, so C = s * Cn / n^2
    rank_C = int(Cn.rank())
    # Primal: X = P X0 (centred points), Y = 2 s P X0, and X Y^T = C (checked exactly).
    colsum = [sum(p[k] for p in points) for k in range(r)]
    Xn = flint.fmpz_mat([[n * p[k] - colsum[k] for k in range(r)] for p in points])  # n P X0
    if 2 * Xn * Xn.transpose() != Cn:
        raise RuntimeError("factorization X Y^T = C failed its exact check")
    rad: RadiusProof = enclosing_radius_scaled(Xn.tolist(), n)
    if not rad.exact:
        raise RuntimeError("enclosing radius of the centred grid is not exact")
    R2 = sympy.Rational(rad.upper_sq.numerator, rad.upper_sq.denominator)
    rad_X = sympy.sqrt(R2)
    rad_Y = 2 * s * sympy.sqrt(R2)  # rad scales with the positive factor 2 s
    kappa_primal = rad_X * rad_Y  # sqrt(R2)^2 = R2 evaluates exactly: 2 R2 s
    # Dual: rectangle on the farthest pairs of X (rows) and of Y (columns, same points).
    i, k = rad.pair
    j, l = rad.pair
    val = int(Cn[i, j]) - int(Cn[i, l]) - int(Cn[k, j]) + int(Cn[k, l])
    kappa_dual = s * sympy.Rational(abs(val), 4 * n * n)
    if sympy.expand(kappa_primal - kappa_dual) != 0:
        raise RuntimeError("primal and dual bounds on kappa(C) differ")
    primal = {"X": "P X0 (centred grid points)", "Y": "2 s P X0",
              "rad_X": rad_X, "rad_Y": rad_Y, "center_X": rad.center, "value": kappa_primal}
    dual = {"rows": (i, k), "cols": (j, l), "points": (points[i], points[k]),
            "C_ij-C_il-C_kj+C_kl": s * sympy.Rational(val, n * n),
            "value": kappa_dual}
    return rank_C, kappa_primal, primal, dual
