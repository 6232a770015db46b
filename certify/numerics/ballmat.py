"""Float64 matrix bounds in round-to-nearest only: norms, mid-radius products, exact splits.

Every function returns float64 numbers whose exact values are rigorous bounds.  Each bound is
computed in round-to-nearest (RN) and then moved outward with ``rounding.up``/``down``; the
a-priori product lemma (proofs_notes/rounding.md, proofs_notes/background.md section 4) is

    |fl(x^T y) - x^T y| <= gamma_n |x|^T |y| + n eta,     eta = 2^-1074,

valid for any summation order (blocked BLAS, FMA) but not for Strassen-type products.

``split_residual_frob_upper`` is the sharp tool: with an Ozaki/Rump error-free split
X = Xh + Xl, Y = Yh + Yl on power-of-two grids, the product Xh Yh is computed *exactly* by
BLAS, so only the small cross terms carry an a-priori bound (proofs_notes/svd.md).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..rationals import float_up
from .rounding import (
    ETA,
    ETA_F,
    U,
    down,
    gamma_up,
    inv_one_minus_gamma_up,
    inv_one_plus_gamma_down,
    nonneg_sum_upper,
    one_plus_gamma_up,
    up,
)

U_F = float(U)  # 2^-53, exact


@lru_cache(maxsize=4096)
def n_eta_up(n: int) -> float:
    """Returns a float64 >= n eta (the underflow charge of n products)."""
    return float_up(n * ETA)


def sumsq_upper(fl_sumsq: np.ndarray | float, n: int) -> np.ndarray | float:
    """Returns values >= x^T x given ``fl_sumsq`` = fl(x^T x) for length-n vectors (any order).

    From |fl(x^T x) - x^T x| <= gamma_n x^T x + n eta: x^T x <= (fl + n eta) / (1 - gamma_n).
    """
    if n == 0:
        return fl_sumsq
    n_eta = n_eta_up(n)
    return up(up(fl_sumsq + n_eta) * inv_one_minus_gamma_up(n))


def frob_upper(X: np.ndarray) -> float:
    """Returns a float64 >= ||X||_F (0 for an empty matrix); ``inf`` on overflow."""
    if X.size == 0:
        return 0.0
    s = float(np.einsum("ij,ij->", X, X)) if X.ndim == 2 else float(np.dot(X, X))
    if not math.isfinite(s):
        return math.inf
    return float(up(math.sqrt(float(sumsq_upper(s, X.size)))))


def row_norms_upper(X: np.ndarray) -> np.ndarray:
    """Returns float64 values >= the 2-norms of the rows of X."""
    n = X.shape[1]
    s = np.einsum("ij,ij->i", X, X)
    return up(np.sqrt(sumsq_upper(s, n)))


def abs_row_sums_upper(X: np.ndarray) -> np.ndarray:
    """Returns float64 values >= sum_j |X_ij| for every row (X finite)."""
    return nonneg_sum_upper(np.abs(X).sum(axis=1), X.shape[1])


def abs_row_sums_lower(X: np.ndarray) -> np.ndarray:
    """Returns float64 values <= sum_j |X_ij| for every row (X finite)."""
    n = X.shape[1]
    s = np.abs(X).sum(axis=1)
    return np.maximum(down(s * inv_one_plus_gamma_down(max(n - 1, 1))), 0.0)


def nonneg_product_upper(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Returns a float64 matrix >= P Q entrywise, for entrywise nonnegative float P, Q."""
    k = P.shape[1]
    C = P @ Q
    if k == 0:
        return C
    k_eta = n_eta_up(k)
    return up(up(C + k_eta) * inv_one_minus_gamma_up(k))


@dataclass(frozen=True)
class Ball:
    """A float64 midpoint-radius matrix: the set {X : |X - mid| <= rad entrywise}.

    ``zero_rad`` True promises rad == 0 everywhere (``Ball.exact``), so products skip their
    radius terms without scanning rad; False promises nothing.
    """

    mid: np.ndarray
    rad: np.ndarray
    zero_rad: bool = False

    @staticmethod
    def exact(X: np.ndarray) -> Ball:
        """Returns the ball {X}; its rad is a read-only broadcast zero (no memory to fill:
        a decoder check builds five of these per bracket, one of them the operator)."""
        return Ball(X, np.broadcast_to(np.zeros((), dtype=X.dtype), X.shape), zero_rad=True)


def ball_matmul(A: Ball, B: Ball) -> Ball:
    """Returns a ball containing every product X Y with X in ``A`` and Y in ``B``.

    |X Y - fl(a b)| <= |ab - fl(ab)| + |a| rb + ra (|b| + rb) and
    |ab - fl(ab)| <= gamma_k |a||b| + k eta, so the radius is charged with two nonnegative
    products, |a| (gamma_k |b| + rb) and ra (|b| + rb), each bounded above (INTLAB-style,
    round-to-nearest only).
    """
    k = A.mid.shape[1]
    C = A.mid @ B.mid
    absb = np.abs(B.mid)
    g = gamma_up(max(k, 1))
    k_eta = n_eta_up(k)
    if not B.zero_rad and np.any(B.rad):
        R = nonneg_product_upper(np.abs(A.mid), up(up(absb * g) + B.rad))
    else:
        # exact B: |a| (g |b|) = g (|a| |b|), so gamma is charged on the (usually much
        # smaller) product instead of entrywise on |b| -- two outward passes saved per entry
        R = up(nonneg_product_upper(np.abs(A.mid), absb) * g)
    R = up(R + k_eta)
    if not A.zero_rad and np.any(A.rad):
        R = up(R + nonneg_product_upper(A.rad, up(absb + B.rad)))
    return Ball(C, R)


def ball_abs_row_sums(X: Ball) -> tuple[np.ndarray, np.ndarray]:
    """Returns float64 (lo, hi) with lo_i <= sum_j |Y_ij| <= hi_i for every Y in the ball."""
    a = np.abs(X.mid)
    hi = abs_row_sums_upper(up(a + X.rad))
    lo = abs_row_sums_lower(np.maximum(down(a - X.rad), 0.0))
    return lo, hi


def identity_minus(X: Ball) -> Ball:
    """Returns a ball containing I - Y for every Y in the (square) ball ``X``."""
    n = X.mid.shape[0]
    M = np.eye(n) - X.mid
    # one RN subtraction per entry: error <= u |fl(.)| (no underflow in a subtraction)
    return Ball(M, up(X.rad + up(np.abs(M) * U_F)))


# --- exact splitting -------------------------------------------------------------------

def _pow2_exponent_upper(X: np.ndarray) -> int | None:
    """Returns q with max |X| <= 2^q, or ``None`` if X is zero."""
    mx = max(float(X.max()), -float(X.min())) if X.size else 0.0  # no |X| temporary
    if not math.isfinite(mx):
        return 1024  # no power of two bounds it: no split fits, callers fall back
    if mx == 0.0:
        return None
    _, e = math.frexp(mx)  # mx = f 2^e, 0.5 <= f < 1
    return e


def split(X: np.ndarray, q: int, t: int, out: tuple[np.ndarray, np.ndarray] | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """Returns (Xh, Xl) with X = Xh + Xl exactly, Xh on the grid 2^(q-t), |Xl| <= 2^(q-t-1).

    Requires max|X| <= 2^q and 1 <= t <= 50 (Rump-Ogita-Oishi ExtractScalar): with
    c = 1.5 * 2^(q-t+52), X + c stays in the binade of c, whose ulp is 2^(q-t); so
    fl(X + c) - c is X rounded to that grid, exactly, and fl(X - Xh) is exact.
    ``out`` optionally supplies the two result buffers (same shape as X).
    """
    c = math.ldexp(1.5, q - t + 52)
    Xh, Xl = out if out is not None else (np.empty_like(X), np.empty_like(X))
    np.add(X, c, out=Xh)
    np.subtract(Xh, c, out=Xh)
    np.subtract(X, Xh, out=Xl)
    return Xh, Xl


def _exact_product_t(q_x: int, q_y: int, bound: float) -> int:
    """Largest t with bound <= 2^(53 + q_x + q_y - 2t) (0 if none is useful)."""
    if bound <= 0.0:
        return 26
    t = (53 + q_x + q_y - math.ceil(math.log2(bound))) // 2
    return int(t)


class Workspace:
    """Reusable float64 buffers keyed by (name, shape).

    Fresh large arrays cost page faults on first touch (comparable to a BLAS product at
    n = 256), so residual computations reuse buffers.  Not thread-safe: use
    :func:`thread_workspace` (one per thread) or a private instance.  Buffers only ever hold
    intermediates that are fully overwritten before use.
    """

    MAX_BYTES = 64 * 2**20

    def __init__(self) -> None:
        self._bufs: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], zeroed: bool = False) -> np.ndarray:
        """Returns a buffer; ``zeroed`` buffers are all zero when (re)created, and callers that
        ask for them only ever write the part they rely on being overwritten."""
        key = (name, shape)
        buf = self._bufs.get(key)
        if buf is None:
            buf = np.zeros(shape) if zeroed else np.empty(shape)
            if buf.nbytes > self.MAX_BYTES:
                return buf  # too large to keep around
            if sum(b.nbytes for b in self._bufs.values()) + buf.nbytes > self.MAX_BYTES:
                self._bufs.clear()  # shapes changed: drop the old buffers
            self._bufs[key] = buf
        return buf


_local = threading.local()


def thread_workspace() -> Workspace:
    """Returns this thread's reusable :class:`Workspace`."""
    ws = getattr(_local, "ws", None)
    if ws is None:
        ws = _local.ws = Workspace()
    return ws


def _sqrt_up(n: int) -> float:
    """Returns a float64 >= sqrt(n) (math.sqrt is correctly rounded; one ulp up)."""
    return float(np.nextafter(math.sqrt(n), np.inf))


def split_residual_frob_upper(X: np.ndarray, Y: np.ndarray, Z: np.ndarray | None,
                              ws: Workspace | None = None) -> float:
    """Returns a float64 >= ||X Y - Z||_F >= ||X Y - Z||_2 (Z = None means the identity).

    Splits X = Xh + Xl and Y = Yh + Yl on grids 2^(q_x - t), 2^(q_y - t) with t chosen so
    that every partial sum of Xh Yh is an integer multiple of 2^(q_x + q_y - 2t) of size below
    2^53 units (checked rigorously through row norms of Xh and column norms of Yh and
    Cauchy-Schwarz), hence fl(Xh Yh) = Xh Yh in any summation order.  Then
    X Y - Z = (Xh Yh - Z) + Xh Yl + Xl Y: T1 = fl(Xh Yh - Z) costs one RN charge, and the
    two cross products are accumulated into T1 by dgemm with beta = 1, each charged as a
    (k+1)-term sum (proofs_notes/svd.md).  Falls back to the plain a-priori bound when no
    split fits.  Returns ``inf`` on overflow.
    """
    from scipy.linalg import blas

    k = X.shape[1]
    rows, cols = X.shape[0], Y.shape[1]
    qx, qy = _pow2_exponent_upper(X), _pow2_exponent_upper(Y)
    if qx is None or qy is None:  # X Y = 0
        # ||I_n||_F = sqrt(n), the contract's norm (1 would bound only ||I||_2)
        return _sqrt_up(min(rows, cols)) if Z is None else frob_upper(Z)
    ws = ws if ws is not None else Workspace()
    X, Y = np.ascontiguousarray(X), np.ascontiguousarray(Y)
    rx, cy = row_norms_upper(X), _col_norms_upper(Y)
    for t in _candidate_ts(float(rx.max()), float(cy.max()), qx, qy):
        # |Xl| <= 2^(qx-t-1): row norms of Xh = X - Xl are <= rx + 2^(qx-t-1) sqrt(k)
        bound = float(up(_shifted_max(rx, qx - t - 1, k) * _shifted_max(cy, qy - t - 1, k)))
        if not bound <= math.ldexp(1.0, 53 + qx + qy - 2 * t):
            continue
        Xh, Xl = split(X, qx, t, (ws.get("xh", X.shape), ws.get("xl", X.shape)))
        Yh, Yl = split(Y, qy, t, (ws.get("yh", Y.shape), ws.get("yl", Y.shape)))
        # exact; scipy's BLAS like the products below and LAPACK's SVD: numpy ships a second
        # OpenBLAS whose spinning threads would stall scipy's when both run multithreaded
        # (beta = 0: the stale buffer is not read)
        C = blas.dgemm(1.0, Yh.T, Xh.T, c=ws.get("c0", (rows, cols)).T, overwrite_c=1).T
        if Z is None:
            C[np.diag_indices(min(rows, cols))] -= 1.0
        else:
            np.subtract(C, Z, out=C)
        t1 = frob_upper(C)  # T1 = fl(C0 - Z)
        # C^T := Yl^T Xh^T + C^T, then Y^T Xl^T + C^T (C-ordered arrays seen as Fortran)
        Ct = blas.dgemm(1.0, Yl.T, Xh.T, beta=1.0, c=C.T, overwrite_c=1)  # T2
        Ct = blas.dgemm(1.0, Y.T, Xl.T, beta=1.0, c=Ct, overwrite_c=1)  # Em
        em = frob_upper(Ct)
        xl_f = frob_upper(Xl)
        xh_f = float(up(_frob_from_norms(rx) + xl_f))  # ||Xh||_F <= ||X||_F + ||Xl||_F
        c1 = float(up(xh_f * frob_upper(Yl)))  # >= || |Xh||Yl| ||_F
        c2 = float(up(xl_f * _frob_from_norms(cy)))  # >= || |Xl||Y| ||_F
        g1 = gamma_up(k + 1)
        under = float(up(n_eta_up(k) * up(math.sqrt(rows * cols))))
        # |T2| <= (1 + gamma)(|T1| + |Xh||Yl|) + k eta entrywise
        t2 = float(up(up(up(t1 + c1) * one_plus_gamma_up(k + 1)) + under))
        blas_err = up(up(g1 * up(up(t1 + c1) + up(t2 + c2))) + up(2.0 * under))
        total = float(up(em + up(up(U_F * t1) + blas_err)))
        return total if math.isfinite(total) else math.inf
    return apriori_residual_frob_upper(X, Y, Z)


def _frob_from_norms(v: np.ndarray) -> float:
    """Returns a float64 >= sqrt(sum v_i^2), i.e. >= ||X||_F if v bounds X's row norms."""
    return float(up(math.sqrt(float(sumsq_upper(float(np.dot(v, v)), len(v))))))


def _shifted_max(norms: np.ndarray, e: int, k: int) -> float:
    """Returns a float64 >= max(norms) + 2^e sqrt(k) (norm bound after an exact split)."""
    return float(up(float(norms.max()) + float(up(math.ldexp(1.0, e) * up(math.sqrt(k))))))


def _candidate_ts(rx_max: float, cy_max: float, qx: int, qy: int) -> list[int]:
    """Split parameters t to try, from upper bounds of X's row and Y's column norms."""
    nb = float(up(rx_max * cy_max))
    if not math.isfinite(nb):
        return []
    t0 = min(_exact_product_t(qx, qy, nb), 26)
    # the grid unit must not underflow below the subnormal spacing
    return [t for t in (t0, t0 - 1, t0 - 2)
            if 1 <= t <= 50 and qx + qy - 2 * t >= -1074 and qx - t + 52 < 1023
            and qy - t + 52 < 1023]


def _minus_z(C: np.ndarray, Z: np.ndarray | None) -> np.ndarray:
    if Z is None:
        T = C.copy()
        T[np.diag_indices(min(T.shape))] -= 1.0
        return T
    return C - Z


def _product_error_frob(P: np.ndarray, Q: np.ndarray, k: int) -> float:
    """Returns a float64 >= ||fl(P Q) - P Q||_2 via ||gamma_k |P||Q| + k eta 1 1^T||_2.

    || |P||Q| ||_2 <= || |P| ||_2 || |Q| ||_2 <= ||P||_F ||Q||_F, and the underflow term has
    spectral norm k eta sqrt(rows cols).
    """
    if k == 0:
        return 0.0
    g = gamma_up(k)
    pq = float(up(frob_upper(P) * frob_upper(Q)))
    under = float(up(n_eta_up(k) * up(math.sqrt(P.shape[0] * Q.shape[1]))))
    r = float(up(up(g * pq) + under))
    return r if math.isfinite(r) else math.inf  # 0 * inf would be NaN: never a bound


def apriori_residual_frob_upper(X: np.ndarray, Y: np.ndarray, Z: np.ndarray | None) -> float:
    """Returns a float64 >= ||X Y - Z||_2 with the plain a-priori product bound (no split)."""
    k = X.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        C = X @ Y
        Em = _minus_z(C, Z)
    r_add = up(U_F * frob_upper(Em))
    r = float(up(frob_upper(Em) + up(r_add + _product_error_frob(X, Y, k))))
    return r if math.isfinite(r) else math.inf  # an upper bound is never NaN


def scaled_columns_error_frob(P: np.ndarray) -> float:
    """Returns a float64 >= ||P - U S||_F for P = fl(U diag(s)) (one RN product per entry).

    |fl(x) - x| <= u |x| + eta/2 and |x| <= |fl(x)| + |fl(x) - x| give
    |P - US| <= (u |P| + eta) / (1 - u) entrywise.
    """
    fp = frob_upper(P)
    under = float(up(ETA_F * up(math.sqrt(P.size))))
    return float(up(up(up(U_F * fp) + under) * float_up(1 / (1 - U))))


# --- symmetric Gram defect (syrk / syr2k) -------------------------------------------------

def _upper_tri_buffer(ws: Workspace, name: str, p: int) -> np.ndarray:
    """A Fortran-ordered p x p buffer (transposed view of a workspace buffer) for BLAS C.

    Created zero-filled; dsyrk/dsyr2k never write its strict lower triangle and the only
    other write is to the diagonal, so the strict lower triangle stays zero for the buffer's
    lifetime (:func:`sym_frob_upper` relies on it only for tightness: nonzero entries there
    would only enlarge its upper bound).
    """
    return ws.get(name, (p, p), zeroed=True).T


def sym_frob_upper(C: np.ndarray) -> float:
    """Returns a float64 >= ||X||_F for the symmetric X whose upper triangle is that of ``C``.

    ``C`` must hold zeros in its strict lower triangle.  ||X||_F^2 = 2 S - D with
    S = sum of squares of the upper triangle (= of all of C) and D = sum of the squared
    diagonal: S is bounded above and D below (Lemma 1 of rounding.md), then 2 S - D above.
    """
    p = C.shape[0]
    if p == 0:
        return 0.0
    s = float(np.einsum("ij,ij->", C, C))
    if not math.isfinite(s):
        return math.inf
    s_up = float(sumsq_upper(s, C.size))
    dg = np.diagonal(C)
    d = float(np.dot(dg, dg))
    # x^T x >= (fl(x^T x) - n eta) / (1 + gamma_n): a lower bound, clamped at 0
    d_lo = max(float(down(down(d - n_eta_up(p)) * inv_one_plus_gamma_down(p))), 0.0)
    tot = float(up(float(up(2.0 * s_up)) - d_lo))
    r = float(up(math.sqrt(max(tot, 0.0))))
    return r if not math.isnan(r) else math.inf  # an upper bound is never NaN


def _col_norms_upper(X: np.ndarray) -> np.ndarray:
    """Returns float64 values >= the 2-norms of the columns of X."""
    s = np.einsum("ij,ij->j", X, X)
    return up(np.sqrt(sumsq_upper(s, X.shape[0])))


def gram_residual_frob_upper(M: np.ndarray, ws: Workspace | None = None) -> float:
    """Returns a float64 >= ||M^T M - I||_F >= ||M^T M - I||_2 (M real rows x p, any layout).

    Split M = Mh + Ml on the grid 2^(q - t) (as in :func:`split_residual_frob_upper`) with
    t checked so that every partial sum of Mh^T Mh is exact; then, with
    W = fl(Mh + Ml/2) = Mh + Ml/2 + D_W,

        M^T M - I = (Mh^T Mh - I) + (W^T Ml + Ml^T W) - (D_W^T Ml + Ml^T D_W).

    Mh^T Mh is computed exactly by dsyrk (half a GEMM); dsyr2k (about one GEMM) adds
    W^T Ml + Ml^T W to T1 = fl(Mh^T Mh - I) in place (beta = 1: (2k+1)-term sums, gamma_{2k+1});
    D_W is charged a priori.  Both BLAS calls fill the upper triangle only; the Frobenius norm
    is taken from the triangle (:func:`sym_frob_upper`).  Proof and charges:
    proofs_notes/svd.md.  Falls back to :func:`apriori_residual_frob_upper` when no exact
    split fits.  Returns ``inf`` on overflow.
    """
    from scipy.linalg import blas

    rows, p = M.shape
    if p == 0:
        return 0.0
    q = _pow2_exponent_upper(M)
    if q is None:
        return _sqrt_up(p)  # ||-I_p||_F
    ws = ws if ws is not None else Workspace()
    # X C-contiguous with X X^T = M^T M (trans=1 below) or X^T X = M^T M (trans=0)
    if M.flags.f_contiguous and not M.flags.c_contiguous:
        X, trans = M.T, 1
    else:
        X, trans = np.ascontiguousarray(M), 0
    k = rows  # dot-product length of M^T M
    cn = _col_norms_upper(M)
    nb = float(up(float(cn.max()) ** 2))
    if not math.isfinite(nb):
        return math.inf
    t0 = min(_exact_product_t(q, q, nb), 26)
    for t in (t0, t0 - 1, t0 - 2):
        if not (1 <= t <= 50 and 2 * q - 2 * t >= -1074 and q - t + 52 < 1023):
            continue
        hn = _shifted_max(cn, q - t - 1, k)  # >= column norms of Mh = M - Ml
        if not float(up(hn * hn)) <= math.ldexp(1.0, 53 + 2 * q - 2 * t):
            continue
        Xh, Xl = split(X, q, t, (ws.get("gxh", X.shape), ws.get("gxl", X.shape)))
        W = ws.get("gw", X.shape)
        np.multiply(Xl, 0.5, out=W)
        np.add(Xh, W, out=W)
        C = blas.dsyrk(1.0, Xh.T, trans=trans, c=_upper_tri_buffer(ws, "gc0", p),
                       overwrite_c=1)  # exact (beta = 0: stale contents are not read)
        C[np.diag_indices(p)] -= 1.0  # T1
        t1 = sym_frob_upper(C)
        C = blas.dsyr2k(1.0, W.T, Xl.T, beta=1.0, trans=trans, c=C, overwrite_c=1)  # Em
        em = sym_frob_upper(C)
        fw, fl_ = frob_upper(W), frob_upper(Xl)
        # |Em - (T1 + W^T Ml + Ml^T W)| <= gamma_{2k+1} (|T1| + |W|^T|Ml| + |Ml|^T|W|) + 2k eta
        blas_err = up(up(gamma_up(2 * k + 1) * up(t1 + up(2.0 * up(fw * fl_))))
                      + up(n_eta_up(2 * k) * float(p)))
        # D_W: |D_W| <= u |W| + eta/2 entrywise; ||D_W^T Ml + Ml^T D_W||_F <= 2 ||D_W||_F ||Ml||_F
        dw = up(up(U_F * fw) + up(0.5 * ETA_F * up(math.sqrt(X.size))))
        w_err = up(2.0 * up(dw * fl_))
        total = float(up(em + up(up(U_F * t1) + up(blas_err + w_err))))
        return total if math.isfinite(total) else math.inf
    return apriori_residual_frob_upper(M.T, M, None)
