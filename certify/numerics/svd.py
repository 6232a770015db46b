"""Rigorous enclosures of all singular values of a stored float64 matrix.

Miyajima's form (proof in proofs_notes/svd.md; reference in proofs_notes/background.md):
from any approximate thin SVD A ~ U S V^T (m >= n; transpose otherwise) and upper bounds

    e >= ||U S V^T - A||_2,   f >= ||V^T V - I||_2,   g >= ||U^T U - I||_2,

the i-th largest singular value satisfies

    s_i sqrt((1 - f)(1 - g)) - e  <=  sigma_i(A)  <=  s_i sqrt((1 + f)(1 + g)) + e

(the lower form needs f, g < 1).  The tiers differ only in how e, f, g are bounded:

* ``float64``: Ozaki/Rump error-free splits make the dominant products exact in BLAS
  (certify.numerics.ballmat.gram_residual_frob_upper with dsyrk/dsyr2k for f and g,
  certify.numerics.ballmat.split_residual_frob_upper for e); the cross terms carry a-priori bounds.
* ``arb``: the residual matrices as python-flint balls at 128 bits.
* ``exact``: the residual matrices exactly as dyadic integers (fmpz_mat).

All three use the same float64 SVD factors; they are all rigorous, the higher tiers are
tighter only by the a-priori part of the float64 charge.  The final combination is done in
float64 with outward rounding, so ``lo_f``/``hi_f`` are floats whose exact values are bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

import numpy as np
from flint import arb, arb_mat, fmpz_mat
from scipy.linalg import lapack

from ..arrays import as_matrix
from ..errors import InputError
from ..rationals import float_down, float_up
from ..result import Enclosure, check_tier
from . import arbutil, dyadic, workbound
from .ballmat import (
    frob_upper,
    gram_residual_frob_upper,
    scaled_columns_error_frob,
    split_residual_frob_upper,
    thread_workspace,
)
from .blocks import row_blocks
from .fpenv import quiet_floats
from .rounding import down, up

ARB_PREC = 128


@dataclass(frozen=True)
class SingularValues:
    """Enclosures sigma_i(A) in [lo[i], hi[i]] for the exact stored A, i = 0..p-1, p = min(m, N).

    ``lo``/``hi`` are tuples of exact Fractions sorted descending (the rigorous bounds).
    ``lo_f``/``hi_f`` are float64 arrays with lo_f <= lo and hi_f >= hi (equal to them unless
    A was rescaled or a bound is not a float; ``hi_f`` may be ``inf`` beyond the float range).
    ``residuals`` holds the float upper bounds e, f, g that were charged (see the module
    docstring) for A * 2^scale_exponent, ``approx`` the float64 SVD values used (unscaled).
    """

    lo_f: np.ndarray
    hi_f: np.ndarray
    tier: str
    shape: tuple[int, int]
    approx: np.ndarray
    residuals: dict[str, float] = field(default_factory=dict)
    scale_exponent: int = 0
    exact_bounds: tuple[tuple[Fraction, ...], tuple[Fraction, ...]] | None = None

    @cached_property
    def lo(self) -> tuple[Fraction, ...]:
        if self.exact_bounds is not None:
            return self.exact_bounds[0]
        return tuple(Fraction(float(x)) for x in self.lo_f)

    @cached_property
    def hi(self) -> tuple[Fraction, ...]:
        if self.exact_bounds is not None:
            return self.exact_bounds[1]
        return tuple(Fraction(float(x)) for x in self.hi_f)

    def __len__(self) -> int:
        return len(self.lo_f)

    def enclosure(self, i: int) -> Enclosure:
        """Returns an interval containing sigma_{i+1}(A) (0-based ``i``)."""
        return Enclosure(self.lo[i], self.hi[i])

    @property
    def max_width(self) -> float:
        """Largest hi - lo (display only)."""
        return float(max(h - lo for lo, h in zip(self.lo, self.hi, strict=True))) if len(self) \
            else 0.0


@dataclass
class _Factors:
    B: np.ndarray  # A or A^T, with rows >= cols (possibly scaled by a power of two)
    U: np.ndarray
    s: np.ndarray
    Vt: np.ndarray


@quiet_floats
def singular_values(A: object, *, tier: str = "auto", source: str | None = None
                    ) -> SingularValues:
    """Returns enclosures of all p = min(m, N) singular values of the exact stored ``A``.

    ``tier`` is ``"float64"``, ``"arb"``, ``"exact"`` or ``"auto"`` (float64, then arb only if
    the float64 tier could not prove any positive lower bound although A is nonzero).  Each
    returned [lo_i, hi_i] contains sigma_i(A) (descending).  Raises InputError for an empty
    matrix, NaN or Inf.
    """
    check_tier(tier)
    A = as_matrix(A, "A", source=source)
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise InputError(f"empty matrix of shape {A.shape}", field="A", source=source)
    return enclose(A, tier)


def _scale_exponent(A: np.ndarray) -> int:
    """Returns k such that A * 2^k is exact and has max |entry| in [1/2, 1), or 0.

    Scaling by a power of two scales every singular value exactly; it keeps the float tier
    away from underflow (whose absolute charges would swamp tiny singular values) and from
    overflow.  Moderate matrices are left alone.
    """
    mx = float(np.max(np.abs(A)))
    e = math.frexp(mx)[1]
    if -100 <= e <= 100:
        return 0
    k = -e
    if k < 0 and not np.array_equal(np.ldexp(np.ldexp(A, k), -k), A):
        return 0  # scaling down would round the smallest entries
    return k


def enclose(A: np.ndarray, tier: str, cache: dict | None = None) -> SingularValues:
    """Kernel entry for validated finite float64 ``A`` (see :func:`singular_values`).

    ``cache`` (a dict owned by the caller) keeps the scaled matrix and its float SVD between
    calls at different tiers for the same A.
    """
    p = min(A.shape)
    if not np.any(A):  # all singular values are exactly 0
        z = np.zeros(p)
        return SingularValues(lo_f=z, hi_f=z, tier="exact" if tier == "exact" else "float64",
                              shape=A.shape, approx=z, residuals={"e": 0.0, "f": 0.0, "g": 0.0})
    cache = {} if cache is None else cache
    if "fac" not in cache:
        k = _scale_exponent(A)
        cache["k"] = k
        cache["As"] = np.ldexp(A, k) if k else A
        cache["fac"] = approximate_factors(cache["As"])
    k, As, fac = cache["k"], cache["As"], cache["fac"]
    if fac is None:
        return _trivial(A, "float64" if tier == "auto" else tier)
    if tier in ("auto", "float64"):
        sv = _from_residuals(A, As, k, fac, *_float_residuals(fac), "float64")
        if tier == "float64" or sv.lo_f[0] > 0:
            return sv
        tier = "arb"
    if tier == "arb":
        workbound.charge(_residual_price(fac, ARB_PREC), "the arb residuals of the SVD")
        return _from_residuals(A, As, k, fac, *_arb_residuals(fac, ARB_PREC), "arb")
    workbound.charge(_residual_price(fac, None), "the exact residuals of the SVD")
    return _from_residuals(A, As, k, fac, *_exact_residuals(fac), "exact")


def _residual_price(fac: _Factors, prec: int | None) -> int:
    """Prices the arb (``prec``) or exact (None) residuals: U S V^T - B (m x p x p, then
    m x p x n), V^T V - I and U^T U - I, from the factors' shapes and bits."""
    (m, p), n = fac.U.shape, fac.Vt.shape[1]
    if prec is not None:
        return (workbound.arb_product(m, p, p, prec) + workbound.arb_product(m, p, n, prec)
                + workbound.arb_product(p, n, p, prec) + workbound.arb_product(p, m, p, prec)
                + 3000 * (m * n + 2 * p * p))
    bu, bs, bv = workbound.bits(fac.U), workbound.bits(fac.s), workbound.bits(fac.Vt)
    bus = workbound.product_bits(bu, bs, p)
    return (workbound.exact_product(m, p, p, bu, bs) + workbound.exact_product(m, p, n, bus, bv)
            + workbound.exact_product(p, n, p, bv, bv) + workbound.exact_product(p, m, p, bu, bu)
            + workbound.exact_rows(m * n, max(workbound.bits(fac.B),
                                              workbound.product_bits(bus, bv, p)) + 2200))


def approximate_factors(A: np.ndarray) -> _Factors | None:
    """Returns float64 SVD factors of A (or A^T when A is wide); ``None`` if LAPACK fails.

    Untrusted: nothing below assumes anything about these factors beyond finiteness.
    """
    B = A if A.shape[0] >= A.shape[1] else A.T
    # LAPACK dgesdd on B^T: for C-ordered B that is a Fortran-ordered view (no copy), and
    # B^T = U' S V'^T gives B = V' S U'^T.  (About 20% faster than np.linalg.svd.)
    u, s, vt, info = lapack.dgesdd(B.T, compute_uv=1, full_matrices=0)
    if info != 0:
        try:
            U, s, Vt = np.linalg.svd(B, full_matrices=False)
        except np.linalg.LinAlgError:
            return None
    else:
        U, Vt = vt.T, u.T
    if not (np.isfinite(U).all() and np.isfinite(s).all() and np.isfinite(Vt).all()):
        return None
    return _Factors(B=B, U=U, s=s, Vt=Vt)


def _float_down_safe(q: Fraction) -> float:
    try:
        return float_down(q)
    except OverflowError:
        return float(np.finfo(np.float64).max)


def _float_up_safe(q: Fraction) -> float:
    try:
        return float_up(q)
    except OverflowError:
        return math.inf


def _finish(lo_f: np.ndarray, hi_f: np.ndarray, k: int, tier: str, shape: tuple[int, int],
            approx: np.ndarray, residuals: dict[str, float]) -> SingularValues:
    """Bounds lo_f/hi_f for sigma(A 2^k) -> exact bounds for sigma(A) = sigma(A 2^k) 2^-k."""
    if k == 0:
        return SingularValues(lo_f=lo_f, hi_f=hi_f, tier=tier, shape=shape, approx=approx,
                              residuals=residuals)
    scale = dyadic.pow2(-k)
    lo = tuple(Fraction(float(x)) * scale for x in lo_f)
    hi = tuple(Fraction(float(x)) * scale for x in hi_f)
    return SingularValues(lo_f=np.array([_float_down_safe(x) for x in lo]),
                          hi_f=np.array([_float_up_safe(x) for x in hi]), tier=tier,
                          shape=shape, approx=np.ldexp(approx, -k), residuals=residuals,
                          scale_exponent=k, exact_bounds=(lo, hi))


def _trivial(A: np.ndarray, tier: str) -> SingularValues:
    """sigma_i in [0, ||A||_F] and ||A||_F <= sqrt(m N) max|A|: always true."""
    p = min(A.shape)
    fa = frob_upper(A)
    if math.isfinite(fa):
        bound = Fraction(fa)
    else:
        bound = Fraction(float(np.max(np.abs(A)))) * (math.isqrt(A.size) + 1)
    lo, hi = (Fraction(0),) * p, (bound,) * p
    return SingularValues(lo_f=np.zeros(p), hi_f=np.full(p, _float_up_safe(bound)), tier=tier,
                          shape=A.shape, approx=np.full(p, np.nan), residuals={"trivial": 1.0},
                          exact_bounds=(lo, hi))


def _float_residuals(fac: _Factors) -> tuple[float, float, float]:
    """Returns float64 upper bounds (e, f, g) of ||USV^T - B||_2, ||V^TV - I||_2, ||U^TU - I||_2."""
    U, s, Vt, B = fac.U, fac.s, fac.Vt, fac.B
    ws = thread_workspace()
    f = gram_residual_frob_upper(Vt.T, ws)
    g = gram_residual_frob_upper(U, ws)
    P = U * s  # P = fl(U S) differs from U S by a charged rounding
    e_p = split_residual_frob_upper(P, Vt, B, ws)
    # ||(U S - P) V^T||_2 <= ||U S - P||_F ||V||_2 and ||V||_2 <= sqrt(1 + f)
    v_norm = float(up(math.sqrt(float(up(1.0 + f)))))
    e = float(up(e_p + float(up(scaled_columns_error_frob(P) * v_norm))))
    return e, f, g


def _from_residuals(A: np.ndarray, As: np.ndarray, k: int, fac: _Factors, e: float, f: float,
                    g: float, tier: str) -> SingularValues:
    """Enclosures for sigma(As), As = A 2^k, from the residual bounds; returned for A."""
    s = np.sort(np.abs(fac.s))[::-1]
    p = len(s)
    fa = frob_upper(As)
    if not all(math.isfinite(x) for x in (e, f, g, fa)):
        out = _trivial(A, tier)
        out.residuals.update(e=e, f=f, g=g)
        return out
    ch = float(up(math.sqrt(float(up(float(up(1.0 + f)) * float(up(1.0 + g)))))))
    hi = up(up(s * ch) + e)
    # fmin, not minimum: a NaN bound (0 * inf if ch overflowed) is replaced by the others
    # (||A||_F bounds every singular value) instead of propagating
    hi = np.fmin(np.fmin.accumulate(hi), fa)
    if f < 1.0 and g < 1.0:
        cl = float(down(math.sqrt(float(down(float(down(1.0 - f)) * float(down(1.0 - g)))))))
        lo = np.maximum(down(down(s * cl) - e), 0.0)
        lo = np.maximum.accumulate(lo[::-1])[::-1]  # sigma_i >= sigma_{i+1} >= lo_{i+1}
    else:
        lo = np.zeros(p)
    return _finish(lo, hi, k, tier, A.shape, s, {"e": e, "f": f, "g": g})


# --- arb tier ----------------------------------------------------------------------------

def _arb_frob_sq(M: arb_mat) -> arb:
    """Returns a ball containing the squared Frobenius norm of every matrix in ``M``."""
    total = arb(0)
    for x in M.entries():
        total += x * x
    return total


def _sqrt_arb_upper(total: arb) -> float:
    """Returns a float64 >= sqrt(x) for every x in the ball ``total`` (inf if it is not finite)."""
    try:
        _, hi = arbutil.endpoints(total)
    except ValueError:
        return math.inf
    return _sqrt_up(hi)


def _arb_frob_upper(M: arb_mat) -> float:
    """Returns a float64 >= the Frobenius norm of every matrix in the ball matrix ``M``."""
    return _sqrt_arb_upper(_arb_frob_sq(M))


def _sqrt_up(q: Fraction) -> float:
    """Returns a float64 >= sqrt(q) for q >= 0."""
    return float(up(math.sqrt(float_up(max(q, Fraction(0))))))


def _arb_residuals(fac: _Factors, prec: int) -> tuple[float, float, float]:
    U, s, Vt, B = fac.U, fac.s, fac.Vt, fac.B
    p = len(s)
    with arbutil.precision(prec):
        Va = arbutil.matrix(Vt)  # p x n with p <= n <= m: at most the size of B
        S = arbutil.matrix(np.diag(s))
        eye = arbutil.identity(p)
        e2, G = arb(0), arb_mat(p, p)
        # ||U S V^T - B||_F^2 and U^T U sum over row blocks of U and B (m x p and m x n):
        # one block is held as balls at a time
        for b in row_blocks(*B.shape):
            Ub = arbutil.matrix(U[b])
            e2 += _arb_frob_sq(Ub * S * Va - arbutil.matrix(B[b]))  # as priced: (U S) V^T
            G += Ub.transpose() * Ub
        F = Va * Va.transpose() - eye
        return _sqrt_arb_upper(e2), _arb_frob_upper(F), _arb_frob_upper(G - eye)


# --- exact tier --------------------------------------------------------------------------

def _exact_frob_sq(M: fmpz_mat, e: int) -> Fraction:
    return Fraction(sum(int(x) ** 2 for x in M.entries())) * dyadic.pow2(2 * e)


def _align(a: tuple[fmpz_mat, int], b: tuple[fmpz_mat, int]) -> tuple[fmpz_mat, fmpz_mat, int]:
    (Ma, ea), (Mb, eb) = a, b
    e0 = min(ea, eb)
    return dyadic.scaled(Ma, ea - e0), dyadic.scaled(Mb, eb - e0), e0


def _exact_residuals(fac: _Factors) -> tuple[float, float, float]:
    U, s, Vt, B = fac.U, fac.s, fac.Vt, fac.B
    p = len(s)
    MV, ev = dyadic.to_int_matrix(Vt)  # p x n, at most the size of B
    Ms, es = dyadic.to_int_matrix(s.reshape(1, -1))
    S = fmpz_mat(p, p)
    for i in range(p):
        S[i, i] = Ms[0, i]
    e2, G = Fraction(0), None
    # the m-row factors U and B a row block at a time, each block with its own power of two
    for b in row_blocks(*B.shape):
        MU, eu = dyadic.to_int_matrix(U[b])
        # (U S) V^T, the order the price assumes
        X, Y, e0 = _align((MU * S * MV, eu + es + ev), dyadic.to_int_matrix(B[b]))
        e2 += _exact_frob_sq(X - Y, e0)
        Gb = (MU.transpose() * MU, 2 * eu)
        if G is None:
            G = Gb
        else:
            X, Y, e0 = _align(G, Gb)
            G = (X + Y, e0)
    G = (fmpz_mat(p, p), 0) if G is None else G
    X, Y, e0 = _align((MV * MV.transpose(), 2 * ev), (dyadic.identity(p), 0))
    f = _sqrt_up(_exact_frob_sq(X - Y, e0))
    X, Y, e0 = _align(G, (dyadic.identity(p), 0))
    g = _sqrt_up(_exact_frob_sq(X - Y, e0))
    return _sqrt_up(e2), f, g


def frobenius_sq_exact(A: np.ndarray) -> Fraction:
    """Returns ||A||_F^2 = sum_ij A_ij^2 exactly (A finite float64)."""
    return sum((_exact_frob_sq(*dyadic.to_int_matrix(A[b])) for b in row_blocks(*A.shape)),
               Fraction(0))


_VELTKAMP = 134217729.0  # 2^27 + 1


def _split_terms(x: np.ndarray) -> list[float]:
    """Returns ah^2, 2 ah al, al^2 for the Veltkamp halves of every entry of ``x`` (exact
    floats in the guarded range)."""
    t = x * _VELTKAMP
    ah = t - (t - x)
    al = x - ah
    return np.concatenate([ah * ah, 2.0 * (ah * al), al * al]).tolist()


def frobenius_sq_enclosure(A: np.ndarray) -> Enclosure:
    """Returns an interval of width <= 2 ulps containing ||A||_F^2 (A finite float64).

    Veltkamp's split a = ah + al (26-bit halves) makes ah^2, 2 ah al and al^2 exact floats
    when no partial product underflows or overflows (guarded: every nonzero |a| in
    [2^-450, 2^500]); math.fsum returns their sum correctly rounded, so one ulp outward on
    each side encloses the exact sum.  Otherwise falls back to :func:`frobenius_sq_exact`.
    """
    x = np.abs(A).ravel()
    nz = x[x != 0]
    if nz.size == 0:
        return Enclosure(Fraction(0), Fraction(0))
    if nz.min() < 2.0**-450 or nz.max() > 2.0**500:
        workbound.charge(workbound.exact_rows(A.size, 2 * workbound.bits(A) + 64),
                         "the exact Frobenius norm")
        q = frobenius_sq_exact(A)
        return Enclosure(q, q)
    # fsum keeps exact partial sums over the whole stream, so feeding it one block of terms
    # at a time (not all 3 |A| terms as Python floats at once) gives the same rounded sum
    s = math.fsum(t for b in row_blocks(nz.size, 1) for t in _split_terms(nz[b]))
    return Enclosure(Fraction(float(down(s))), Fraction(float(up(s))))
