"""Lower certificate ``rowset``: p rows of A whose images of the unit cube reach every orthant.

Certificate (rank p): I (p distinct row indices of A) and Z (2^(p-1) x N, every entry in
[-1, 1]); row s of Z belongs to the sign pattern sigma(s) (:func:`sign_patterns`).  With
t = eps + chi,

    value := min over s and i of sigma_i(s) (A[I] z_s)_i  >  t

proves that every B with ||A - B||_row1 <= t has rank >= p (proofs_notes/rowset.md): if
rank B < p, some y != 0 has y^T B[I] = 0, so ||A[I]^T y||_1 = ||(A - B)[I]^T y||_1 <= t ||y||_1,
while z_s for the orthant of y gives ||A[I]^T y||_1 >= y . A[I] z_s > t ||y||_1.  For fixed
rows the best Z makes the test exact (LP duality), so the kind decides r_t(A[I]) >= p.

Certificate ``rowmix`` (rank p): D (p x m, every row of l1 norm at most 1) in place of the row
selection: ||D A - D B||_row1 <= ||D||_inf ||A - B||_row1 <= t and rank D B <= rank B, so
the same test on the rows of D A proves rank B >= p.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from ..arrays import as_index_vector, as_matrix
from ..errors import InputError
from ..numerics import arbutil, dyadic, tiers, workbound
from ..numerics.ballmat import Ball, ball_matmul
from ..numerics.blocks import row_blocks
from ..numerics.rounding import down, up
from ..numerics.tiers import safe_min_lower, safe_min_upper
from ..rationals import qstr
from ..result import Check, Enclosure

ARRAYS = ("I", "Z")
MIX_ARRAYS = ("D", "Z")
#: Largest rank accepted: Z holds 2^(p-1) rows, so the kind is for small ranks only.
MAX_RANK = 12
ARB_PRECISIONS = (128, 256)


def sign_patterns(p: int) -> np.ndarray:
    """Returns the 2^(p-1) x p matrix of sign patterns: row s has sigma_0 = +1 and
    sigma_i = -1 exactly when bit i - 1 of s is set (1 <= i < p).  One of each pair
    +-sigma: z_s serves -sigma(s) as -z_s."""
    s = np.arange(1 << (p - 1), dtype=np.int64)[:, None]
    bits = (s >> np.arange(p - 1, dtype=np.int64)[None, :]) & 1
    return np.hstack([np.ones((len(s), 1)), 1.0 - 2.0 * bits])


def parse_arrays(arrays: Mapping[str, object], rank: int, m: int, N: int, *,
                 source: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (I, Z) as an int64 vector of p distinct rows and a float64 2^(p-1) x N matrix.

    Raises InputError naming ``lower.rank`` (p > MAX_RANK or p > m), ``lower.I`` (not p
    distinct indices in [0, m)) or ``lower.Z`` (other shape, NaN/Inf, an entry outside
    [-1, 1]).  The rank is checked before Z's expected shape is formed.
    """
    if rank > MAX_RANK:
        raise InputError(f"rank {rank} exceeds {MAX_RANK}: a rowset certificate holds 2^(p-1) "
                         "sign vectors and is meant for small ranks", field="lower.rank",
                         source=source)
    if rank > m:
        raise InputError(f"rank {rank} exceeds the {m} rows of A", field="lower.rank",
                         source=source)
    I = as_index_vector(arrays["I"], "lower.I", m, source=source)
    if len(I) != rank:
        raise InputError(f"has {len(I)} indices but rank is {rank}", field="lower.I",
                         source=source)
    Z = as_matrix(arrays["Z"], "lower.Z", source=source, shape=(1 << (rank - 1), N))
    if not np.all(np.abs(Z) <= 1.0):  # exact comparison of stored floats
        raise InputError("every entry must lie in [-1, 1]", field="lower.Z", source=source)
    return I, Z


def parse_mix_arrays(arrays: Mapping[str, object], rank: int, m: int, N: int, *,
                     source: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (D, Z) as float64 p x m and 2^(p-1) x N matrices.

    Raises InputError naming ``lower.rank`` (p > MAX_RANK), ``lower.D`` (not p x m, NaN/Inf,
    or a row whose exact l1 norm exceeds 1) or ``lower.Z`` (as :func:`parse_arrays`).
    """
    if rank > MAX_RANK:
        raise InputError(f"rank {rank} exceeds {MAX_RANK}: a rowmix certificate holds 2^(p-1) "
                         "sign vectors and is meant for small ranks", field="lower.rank",
                         source=source)
    D = as_matrix(arrays["D"], "lower.D", source=source, shape=(rank, m))
    Z = as_matrix(arrays["Z"], "lower.Z", source=source, shape=(1 << (rank - 1), N))
    if not np.all(np.abs(Z) <= 1.0):  # exact comparison of stored floats
        raise InputError("every entry must lie in [-1, 1]", field="lower.Z", source=source)
    # every array is validated before any work is charged: a malformed certificate must be
    # an input error under any work limit, never "undecided (work limit)"
    if _row_norms_exceed_one(D):
        raise InputError("every row must have l1 norm at most 1 (exactly)", field="lower.D",
                         source=source)
    return D, Z


def _row_norms_exceed_one(D: np.ndarray) -> bool:
    """Returns whether some row of the finite float64 matrix D has exact l1 norm above 1.

    A float64 sum of n non-negative terms, in any order and any rounding mode, is within
    2 (n - 1) u of the exact sum relative to it (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., section 4.2; additions in the subnormal range are exact), and terms
    of at most 1 cannot overflow; so a computed row sum below 1 - n 2^-50 or above
    1 + n 2^-50 decides its row, and only rows in between are summed exactly."""
    A = np.abs(D)
    if np.any(A > 1.0):
        return True
    if A.size == 0:
        return False
    n = A.shape[1]
    s = A.sum(axis=1)
    slack = n * 2.0 ** -50
    if np.any(s > 1.0 + slack):
        return True
    near = np.flatnonzero(s >= 1.0 - slack)
    if near.size == 0:
        return False
    # not charged: validation must not depend on the work limit, and this is linear in the
    # array (p <= MAX_RANK rows of integers of at most 53 + 2100 bits)
    return dyadic.max_row_abs_sum(*dyadic.to_int_matrix(np.ascontiguousarray(D[near]))) > 1


def check_rowset(A: np.ndarray, I: np.ndarray, Z: np.ndarray, t: Fraction, *,
                 eps: Fraction, chi: Fraction, tier: str = "auto") -> Check:
    """Decides min_{s,i} sigma_i(s) (A[I] z_s)_i > t for exact stored A, I, Z (validated by
    :func:`parse_arrays`; ``t`` = eps + chi).

    Returns a :class:`Check` of kind ``"rowset"`` with ``threshold`` t and
    ``detail["sense"]`` ``">"`` (``margin`` = value - t; a margin of exactly 0 is not a
    proof).  ``value`` is an interval containing the exact minimum.  ``status`` is
    ``"holds"`` when value > t is proved (then every B with ||A - B||_row1 <= t has rank
    >= p), ``"fails"`` when value <= t is proved, else ``"undecided"``.  ``tier="auto"`` runs
    float64 (a-priori rounding bounds), arb at 128 and 256 bits, then exact dyadic integers,
    stopping at the first tier that decides; the exact tier always decides.
    """
    return _decide("rowset", f"min_(s,i) sigma_i(s) (A[I] z_s)_i > {qstr(t)}", None,
                   np.ascontiguousarray(A[I]), Z, t, eps, chi, tier)


def check_rowmix(A: np.ndarray, D: np.ndarray, Z: np.ndarray, t: Fraction, *,
                 eps: Fraction, chi: Fraction, tier: str = "auto") -> Check:
    """Decides min_{s,i} sigma_i(s) (D A z_s)_i > t for exact stored A, D, Z (validated by
    :func:`parse_mix_arrays`, so every row of D has l1 norm at most 1; ``t`` = eps + chi).

    Returns a :class:`Check` of kind ``"rowmix"``, otherwise as :func:`check_rowset`: when
    it holds, every B with ||A - B||_row1 <= t has rank >= p (D B is within t of D A).
    """
    return _decide("rowmix", f"min_(s,i) sigma_i(s) (D A z_s)_i > {qstr(t)}", D, A, Z, t, eps,
                   chi, tier)


def _decide(kind: str, claim: str, D: np.ndarray | None, M: np.ndarray, Z: np.ndarray,
            t: Fraction, eps: Fraction, chi: Fraction, tier: str) -> Check:
    """The tier escalation of both kinds: the rows compared are those of D M (of M when D
    is None), exactly."""
    S = sign_patterns(Z.shape[0].bit_length())

    def enclose(tr: str, prec: int | None) -> Enclosure | None:
        if tr == "float64":
            return _float_min(D, M, Z, S)
        if tr == "arb":
            return _arb_min(D, M, Z, S, prec)  # type: ignore[arg-type]
        return _exact_min(D, M, Z, S)

    out = tiers.decide_above(tiers.plan(tier, ARB_PRECISIONS), enclose, t)
    return Check(status=out.status, kind=kind, rank=S.shape[1], eps=eps,  # type: ignore[arg-type]
                 threshold=t, value=out.value, tier=out.run[-1] if out.run else "float64",
                 claim=claim, chi=chi, precision=out.precision,
                 tiers_run=tuple(out.run), detail={"sense": ">"})


def _float_min(D: np.ndarray | None, M: np.ndarray, Z: np.ndarray,
               S: np.ndarray) -> Enclosure | None:
    """Mid-radius enclosure of Z (D M)^T (ballmat, a-priori rounding bounds; D M formed as a
    ball first); multiplying by sigma = +-1 is exact, so the signed entries lie in
    [sigma mid - rad, sigma mid + rad]."""
    (r, N), q = M.shape, Z.shape[0]
    p = r if D is None else D.shape[0]
    workbound.charge(workbound.float_product(q, N, p)
                     + (0 if D is None else workbound.float_product(p, D.shape[1], N)),
                     "the float64 tier")
    with np.errstate(all="ignore"):
        if D is None:
            Mt = Ball.exact(np.ascontiguousarray(M.T))
        else:
            DM = ball_matmul(Ball.exact(D), Ball.exact(M))
            Mt = Ball(np.ascontiguousarray(DM.mid.T), np.ascontiguousarray(DM.rad.T))
        Y = ball_matmul(Ball.exact(Z), Mt)
        signed = S * Y.mid
        # a NaN entry (overflow met inf - inf) leaves the minimum without a lower bound
        lo = safe_min_lower(down(signed - Y.rad))
        hi = safe_min_upper(up(signed + Y.rad))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return Enclosure(Fraction(lo), Fraction(hi))


def _arb_min(D: np.ndarray | None, M: np.ndarray, Z: np.ndarray, S: np.ndarray,
             prec: int) -> Enclosure | None:
    q, (r, N) = Z.shape[0], M.shape
    p = r if D is None else D.shape[0]
    workbound.charge(workbound.arb_product(q, N, p, prec) + 3000 * q * p
                     + (0 if D is None else workbound.arb_product(p, D.shape[1], N, prec)),
                     f"the arb tier at {prec} bits")
    with arbutil.precision(prec):
        if D is None:
            Mt = arbutil.matrix(np.ascontiguousarray(M.T))
        else:  # all of A for rowmix: a row block at a time (memory, not time)
            Mt = arbutil.left_product(D, M).transpose()
        found = []
        for b in row_blocks(q, N):  # witnesses a block at a time: memory, not time
            Y = arbutil.matrix(Z[b]) * Mt
            found.append(arbutil.signed_min((Y[s, i], S[b][s, i]) for s in range(Y.nrows())
                                            for i in range(Y.ncols())))
    if any(e is None for e in found):
        return None
    return Enclosure(min(e[0] for e in found), min(e[1] for e in found))


def _exact_min(D: np.ndarray | None, M: np.ndarray, Z: np.ndarray,
               S: np.ndarray) -> Enclosure:
    (r, N), q, bz = M.shape, Z.shape[0], workbound.bits(Z)
    if D is None:
        price = workbound.exact_chain(Z, M.T)
    else:  # D M is formed exactly first: its bits follow from D's and M's
        p, bd, bm = D.shape[0], workbound.bits(D), workbound.bits(M)
        bdm = workbound.product_bits(bd, bm, r)
        price = (workbound.exact_product(p, r, N, bd, bm)
                 + workbound.exact_product(q, N, p, bz, bdm)
                 + workbound.exact_rows(q * p, workbound.product_bits(bz, bdm, N)))
    workbound.charge(price, "the exact tier")
    if D is None:
        Mt, em = dyadic.to_int_matrix(np.ascontiguousarray(M.T))
    else:
        MD, ed = dyadic.to_int_matrix(D)
        MM, e1 = dyadic.to_int_matrix(M)
        Mt, em = (MD * MM).transpose(), ed + e1
    best = None
    for b in row_blocks(q, N):  # witnesses a block at a time, each block its own 2^ez
        MZ, ez = dyadic.to_int_matrix(Z[b])
        Y = MZ * Mt
        cols, Sb = Y.ncols(), S[b]
        low = min(int(Sb[k // cols, k % cols]) * int(v) for k, v in enumerate(Y.entries()))
        val = Fraction(low) * dyadic.pow2(ez + em)
        best = val if best is None else min(best, val)
    assert best is not None  # q >= 1
    return Enclosure(best, best)
