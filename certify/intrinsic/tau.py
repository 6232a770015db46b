"""Enclosures of q(C - T) and tau(T) = 2 tanh(q(C - T) / 4) for T = X Y^T.

q(E) = inf_b max_i osc(E_i - b^T).  Upper bound: any offsets b.  Lower bound: any cycle of
keys j_1 -> ... -> j_k -> j_1 with one row per edge: q(E) >= (1/k) sum_t (E[i_t, j_t] -
E[i_t, j_{t+1}]) (proofs_notes/intrinsic_tau.md; q is the maximum cycle mean of
w(j, l) = max_i (E_ij - E_il), Karp 1978).

Tiers: float64 with a rigorous entrywise bound on E - b (the interaction radius, the a-priori
product bound of X Y^T and two subtractions), then arb at 128 and 256 bits on the rows that
can still decide the maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from flint import arb

from ..numerics.arbutil import endpoints, from_fraction, precision
from ..numerics.dyadic import to_int_matrix
from ..numerics.fpenv import quiet_floats
from ..numerics.rounding import U, dot_error_upper, down, up
from ..numerics.tiers import may_attain_max, safe_max_upper
from ..result import check_tier
from .inputs import factors, indices, vector
from .interaction import Interaction
from .result import Bracket

_U = float(U)
REL_TOL = Fraction(1, 10**10)  # escalate while (hi - lo) > REL_TOL * hi


@dataclass(frozen=True)
class TauResult:
    """Brackets for q(C - X Y^T) and tau = 2 tanh(q / 4)."""

    q: Bracket
    tau: Bracket

    def to_json(self) -> dict:
        return {"q": self.q.to_json(), "tau": self.tau.to_json()}


@quiet_floats
def tau_bracket(C: Interaction, X: object, Y: object, *, b: object = None,
                cycle: object = None, cycle_rows: object = None, tier: str = "auto",
                r: int | None = None) -> TauResult:
    """Returns brackets that contain q(C - X Y^T) and tau(X Y^T) = 2 tanh(q / 4).

    ``b`` (n offsets) proves the upper end (b = 0 when missing); ``cycle`` (k distinct key
    indices) with optional ``cycle_rows`` (k row indices, chosen by the kernel when missing)
    proves the lower end (0 when missing).  ``tier`` is "auto", "float64" or "arb".
    """
    check_tier(tier)
    Xa, Ya = factors(X, Y, m=C.m, n=C.n, r=r)
    bv = np.zeros(C.n) if b is None else vector(b, "b", C.n)
    cyc = None if cycle is None else indices(cycle, "cycle", C.n, distinct=True)
    rows = None
    if cycle_rows is not None:
        if cyc is None:
            from ..errors import InputError

            raise InputError("cycle_rows given without a cycle", field="cycle_rows")
        rows = indices(cycle_rows, "cycle_rows", C.m, length=len(cyc))

    F, err = _float_residual(C, Xa, Ya, bv)
    with np.errstate(invalid="ignore", over="ignore"):
        hi_rows = up(np.max(up(F + err), axis=1) - np.min(down(F - err), axis=1))
        lo_rows = down(np.max(down(F - err), axis=1) - np.min(up(F + err), axis=1))
    # a NaN row bound (unknown) or no row at all gives no upper bound: safe_max_upper is +inf
    worst = safe_max_upper(hi_rows)
    q_hi = Fraction(worst) if math.isfinite(worst) else _INF
    if rows is None and cyc is not None:
        # after an overflow F is only a guess: for small cycles the exact product decides
        exact_rows = None if np.isfinite(err).any() else _exact_best_rows(C, Xa, Ya, cyc)
        rows = exact_rows if exact_rows is not None else _best_rows(F, cyc)
    q_lo = Fraction(0)
    if cyc is not None:
        q_lo = max(q_lo, _cycle_lower_float(F, err, cyc, rows))
    used = "float64"
    if tier in ("arb", "exact") or (tier == "auto" and cyc is not None
                                    and q_hi - q_lo > REL_TOL * q_hi):
        for prec in (128, 256):
            used = "arb"
            # every row that may attain the maximum (NaN bounds included) goes to arb: the
            # maximum over these rows is the maximum over all rows
            cand = [int(i) for i in may_attain_max(hi_rows, lo_rows)]
            q_hi = min(q_hi, _rows_upper_arb(C, Xa, Ya, bv, cand, prec))
            if cyc is not None:
                q_lo = max(q_lo, _cycle_lower_arb(C, Xa, Ya, cyc, rows, prec))
            if q_hi - q_lo <= REL_TOL * q_hi or tier != "auto":
                break
    detail_q = {"upper": "offsets b" if b is not None else "offsets b = 0",
                "lower": f"cycle of length {len(cyc)}" if cyc is not None else "none (q >= 0)"}
    qb = Bracket("q", q_lo, q_hi if q_hi < _INF else None, used, detail_q)
    return TauResult(qb, _tau_from_q(qb))


def _float_residual(C: Interaction, X: np.ndarray, Y: np.ndarray,
                    b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (F, err) with |(C - X Y^T)_ij - b_j - F_ij| <= err_ij (exact values); F is
    finite, err is finite or +inf everywhere (no NaN)."""
    r = X.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        P = X @ Y.T
        errP = dot_error_upper(np.abs(X) @ np.abs(Y).T, r)
    with np.errstate(over="ignore", invalid="ignore"):
        F1 = C.mid - P
        F = F1 - b[None, :]
        err = up(up(up(errP + C.rad) + up(_U * np.abs(F1))) + up(_U * np.abs(F)))
    if not (np.isfinite(F).all() and np.isfinite(err).all()):
        # an overflow (X Y^T too large, or cancelling huge terms giving inf - inf = NaN): the
        # float tier proves nothing.  err = inf with a finite F keeps every later float
        # expression free of NaN (F +- err = +-inf) and every row a candidate for the arb
        # tier; F is then only a guess that chooses the cycle rows (any choice is sound).
        F = _scaled_guess(C, X, Y)
        err = np.full(F.shape, np.inf)
    return F, err


def _scaled_guess(C: Interaction, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Returns a finite float matrix close to (C - X Y^T) 2^-s for some s >= 0 (no rigour:
    it only chooses cycle rows).  The factors are scaled by powers of two so that their
    product cannot overflow, and the product is scaled back only as far as the float range
    allows; the offsets b shift every row by the same amounts, which no row choice sees."""
    sx = max(math.frexp(float(np.max(np.abs(X))))[1], 0)
    sy = max(math.frexp(float(np.max(np.abs(Y))))[1], 0)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        P = np.ldexp(X, -sx) @ np.ldexp(Y, -sy).T  # entries <= r in magnitude
        top = float(np.max(np.abs(P))) if P.size else 0.0
        s = max(math.frexp(top)[1] + sx + sy - 1020, 0) if top > 0 else 0
        G = np.ldexp(C.mid, -s) - np.ldexp(P, sx + sy - s)
    return np.where(np.isfinite(G), G, 0.0)


EXACT_ROWS_LIMIT = 20_000  # m * k rational comparisons at most (a fraction of a second)


def _exact_best_rows(C: Interaction, X: np.ndarray, Y: np.ndarray,
                     cyc: np.ndarray) -> np.ndarray | None:
    """Returns, per cycle edge j -> l, a row maximising mid(C)_ij - mid(C)_il - (T_ij - T_il)
    with T = X Y^T exact (integer products), or None when m k exceeds EXACT_ROWS_LIMIT.
    Only a choice (any rows are sound); used when the float product overflowed."""
    m, k = X.shape[0], len(cyc)
    if m * k > EXACT_ROWS_LIMIT:
        return None
    nxt = np.roll(cyc, -1)
    Xi, ex = to_int_matrix(X)
    Yi, ey = to_int_matrix(np.vstack([Y[cyc], Y[nxt]]))  # one exponent for both halves
    P = Xi * Yi.transpose()  # m x 2k: T[:, cyc] and T[:, nxt] as integers times 2^(ex + ey)
    scale = Fraction(2) ** (ex + ey)
    out = np.empty(k, dtype=np.int64)
    for t in range(k):
        j, l = int(cyc[t]), int(nxt[t])
        best, arg = None, 0
        for i in range(m):
            v = (Fraction(float(C.mid[i, j])) - Fraction(float(C.mid[i, l]))
                 - (int(P[i, t]) - int(P[i, k + t])) * scale)
            if best is None or v > best:
                best, arg = v, i
        out[t] = arg
    return out


def _best_rows(F: np.ndarray, cyc: np.ndarray) -> np.ndarray:
    nxt = np.roll(cyc, -1)
    return np.argmax(F[:, cyc] - F[:, nxt], axis=0).astype(np.int64)


def _cycle_lower_float(F: np.ndarray, err: np.ndarray, cyc: np.ndarray,
                       rows: np.ndarray) -> Fraction:
    """Returns a rational <= (1/k) sum_t (E[i_t, j_t] - E[i_t, j_t+1]) (the offsets b cancel
    around the cycle, so F = E - b may be used)."""
    nxt = np.roll(cyc, -1)
    a = down(F[rows, cyc] - err[rows, cyc])
    c = up(F[rows, nxt] + err[rows, nxt])
    if not (np.isfinite(a).all() and np.isfinite(c).all()):
        return Fraction(0)
    total = sum((Fraction(float(x)) - Fraction(float(y)) for x, y in zip(a, c, strict=True)),
                Fraction(0))
    return total / len(cyc)


def _t_ball(X: np.ndarray, Y: np.ndarray, i: int, j: int) -> arb:
    return sum((arb(float(x)) * arb(float(y)) for x, y in zip(X[i], Y[j], strict=True)), arb(0))


def _rows_upper_arb(C: Interaction, X: np.ndarray, Y: np.ndarray, b: np.ndarray,
                    rows: list[int], prec: int) -> Fraction:
    """Returns a rational >= max over ``rows`` of osc(C_i - T_i - b), from arb balls
    (``_INF``, no bound, for an empty ``rows``: the caller bounds q over all rows by it)."""
    if not rows:
        return _INF
    best = Fraction(0)
    with precision(prec):
        crows = C.row_balls(rows, prec)
        Yl = Y.tolist()
        bl = b.tolist()
        for i, crow in zip(rows, crows, strict=True):
            xi = [arb(v) for v in X[i].tolist()]
            vals = []
            for j, cij in enumerate(crow):
                t = sum((x * y for x, y in zip(xi, Yl[j], strict=True)), arb(0))
                vals.append(cij - t - bl[j])
            try:
                hi = max(endpoints(v)[1] for v in vals)
                lo = min(endpoints(v)[0] for v in vals)
            except ValueError:
                return _INF
            best = max(best, hi - lo)
    return best


# "no bound": above any float and any |C - X Y^T - b| of finite factors (< 2^2100); callers
# keep the float bound
_INF = Fraction(10) ** 700


def _cycle_lower_arb(C: Interaction, X: np.ndarray, Y: np.ndarray, cyc: np.ndarray,
                     rows: np.ndarray, prec: int) -> Fraction:
    """Returns a rational <= the cycle mean, from arb balls of the 2k entries of C - T."""
    nxt = np.roll(cyc, -1)
    uniq = sorted({int(i) for i in rows})
    with precision(prec):
        balls = dict(zip(uniq, C.row_balls(uniq, prec), strict=True))
        total = arb(0)
        for i, j, l in zip(rows.tolist(), cyc.tolist(), nxt.tolist(), strict=True):
            total += (balls[i][j] - _t_ball(X, Y, i, j)) - (balls[i][l] - _t_ball(X, Y, i, l))
        try:
            lo, _ = endpoints(total / len(cyc))
        except ValueError:
            return Fraction(0)
    return lo


def _tau_from_q(q: Bracket) -> Bracket:
    """Returns a bracket for 2 tanh(q / 4) (increasing in q) from a bracket for q."""
    with precision(128):
        lo = endpoints(2 * (from_fraction(q.lo) / 4).tanh())[0]
        hi = endpoints(2 * (from_fraction(q.hi) / 4).tanh())[1] if q.hi is not None else None
    lo = max(lo, Fraction(0))
    if hi is not None:
        hi = min(hi, Fraction(2))
    return Bracket("tau", lo, hi, q.tier, {"from": "2 tanh(q/4)", "q": q.detail})
