"""Lower certificate ``polytope``: a labelled antipodal sphere that A maps away from the eps-ball.

Certificate (rank p): points Y (k x p) labelled by rows I (k indices of A; point j carries
the signed row +a_I[j], its mirror -Y[j] the signed row -a_I[j]); facets F (f x p, indices
into the 2k points, j + k standing for -Y[j]; the kernel adds the mirror of every facet);
witnesses Z (q x N, every entry in [-1, 1]) and G (f indices into Z; the mirror facet uses
-Z[G]).  With t = eps + chi the certificate holds when

1. (sphere) every facet is a simplicial facet of P = conv(+-Y): its p points solve n . y = 1
   for one n, and every other point has n . y < 1; every (p - 1)-subset of a facet lies in
   exactly two of the 2f facets, and the 2f facets are distinct;
2. (value) min over facets F and points x of F of sigma_x (A z_F)_(i_x)  >  t.

Then every B with ||A - B||_row1 <= t has rank >= p (proofs_notes/polytope.md): the facets
are all of P's boundary, a (p - 1)-sphere, and the witnesses give an odd map of it into
{w : ||A w||_inf > t ||w||_inf}; by Borsuk-Ulam B vanishes somewhere on its image.  The
``bernstein`` and ``rowset`` kinds are special cases (Y = A W, and the cross-polytope).

Part 1 is proved whatever tier is asked for: the counts on integer arrays, each facet's
normal by a verified float solve (an a-posteriori bound that also proves the facet
nonsingular) or, where that cannot decide, an exact solve, and each |n . y| < 1 by float
enclosures or, where they cannot decide, exact rationals; every defect is found exactly.
Part 2 runs the float64 -> arb -> exact tiers of the other kinds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpz_mat

from ..arrays import as_matrix
from ..errors import InputError
from ..numerics import arbutil, dyadic, tiers, workbound
from ..numerics.ballmat import Ball, abs_row_sums_upper, ball_matmul, n_eta_up
from ..numerics.rounding import (
    dot_error_upper,
    down,
    gamma_up,
    inv_one_minus_gamma_up,
    nonneg_sum_upper,
    up,
)
from ..numerics.tiers import safe_min_lower, safe_min_upper
from ..rationals import qstr
from ..result import Check, Enclosure

ARRAYS = ("Y", "I", "F", "Z", "G")
#: Largest rank accepted: the sphere's facets grow quickly with p (and are listed).
MAX_RANK = 12
MAX_POINTS = 4096
MAX_FACETS = 100_000
ARB_PRECISIONS = (128,)
#: Most (witness, row) products one block of the value tiers holds: the work limit prices
#: time, not memory, and a product of all distinct witnesses by all distinct rows could take
#: gigabytes (100,000 x 4,096 float64 entries are 3.3 GB; arb balls several times that)
BLOCK_ENTRIES = 1 << 20


def _int_array(x: object, field: str, ndim: int, bound: int, source: str | None
               ) -> np.ndarray:
    """Returns ``x`` as an int64 array of dimension ``ndim`` with entries in [0, bound)."""
    if isinstance(x, np.ma.MaskedArray):
        raise InputError("masked arrays are not accepted", field=field, source=source)
    try:
        arr = np.asarray(x).view(np.ndarray)
    except (ValueError, TypeError) as err:
        raise InputError(f"not a rectangular integer array: {err}", field=field,
                         source=source) from None
    if arr.ndim != ndim or arr.dtype.kind not in "iu":
        raise InputError(f"must be a {ndim}-D integer array, got {arr.dtype} {arr.shape}",
                         field=field, source=source)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= bound):
        raise InputError(f"entries must lie in [0, {bound})", field=field, source=source)
    return arr.astype(np.int64)


def parse_arrays(arrays: Mapping[str, object], rank: int, m: int, N: int, *,
                 source: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (Y, I, F, Z, G): float64 k x p, int64 k, int64 f x p, float64 q x N, int64 f.

    Raises InputError naming ``lower.rank`` (p > MAX_RANK), ``lower.Y`` (not p columns,
    k outside 1 .. MAX_POINTS, NaN/Inf), ``lower.I`` (not k indices in [0, m); repeats are
    allowed), ``lower.F`` (not f x p with f in 1 .. MAX_FACETS, an index outside [0, 2k), a
    facet repeating a point), ``lower.Z`` (not N columns, q outside 1 .. f, NaN/Inf, an entry
    outside [-1, 1]) or ``lower.G`` (not f indices in [0, q)).
    """
    if not 1 <= rank <= MAX_RANK:
        raise InputError(f"a polytope certificate has rank 1 .. {MAX_RANK}, got {rank}",
                         field="lower.rank", source=source)
    Y = as_matrix(arrays["Y"], "lower.Y", source=source, shape=(None, rank))
    k = Y.shape[0]
    if not 1 <= k <= MAX_POINTS:
        raise InputError(f"has {k} points; 1 .. {MAX_POINTS} are accepted", field="lower.Y",
                         source=source)
    I = _int_array(arrays["I"], "lower.I", 1, m, source)
    if len(I) != k:
        raise InputError(f"has {len(I)} labels for {k} points", field="lower.I", source=source)
    F = _int_array(arrays["F"], "lower.F", 2, 2 * k, source)
    f = F.shape[0]
    if F.shape[1] != rank or not 1 <= f <= MAX_FACETS:
        raise InputError(f"has shape {F.shape}; expected (f, {rank}) with 1 <= f <= "
                         f"{MAX_FACETS}", field="lower.F", source=source)
    if rank > 1 and np.any(np.diff(np.sort(F, axis=1), axis=1) == 0):
        raise InputError("a facet repeats a point", field="lower.F", source=source)
    Z, G = witness_arrays(arrays, N, f, "facets", source)
    return Y, I, F, Z, G


def witness_arrays(arrays: Mapping[str, object], N: int, f: int, what: str,
                   source: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (Z, G): float64 q x N witnesses with every entry in [-1, 1] and 1 <= q <= f,
    and an int64 vector of f indices into Z (one per facet or top, ``what`` names them).
    Raises InputError naming ``lower.Z`` or ``lower.G``."""
    Z = as_matrix(arrays["Z"], "lower.Z", source=source, shape=(None, N))
    if not 1 <= Z.shape[0] <= f:
        raise InputError(f"has {Z.shape[0]} witnesses for {f} {what}", field="lower.Z",
                         source=source)
    if not np.all(np.abs(Z) <= 1.0):  # exact comparison of stored floats
        raise InputError("every entry must lie in [-1, 1]", field="lower.Z", source=source)
    G = _int_array(arrays["G"], "lower.G", 1, Z.shape[0], source)
    if len(G) != f:
        raise InputError(f"has {len(G)} entries for {f} {what}", field="lower.G", source=source)
    return Z, G


def column_scaled(Y: np.ndarray) -> np.ndarray:
    """Returns Y D with D = diag(2^s_c): each column c whose scaling is exact is moved so
    that its largest |entry| lies in [1/2, 1); a column whose scaling would round, overflow
    or underflow keeps s_c = 0.

    The facets of conv(+-Y D) are those of conv(+-Y) with the same point indices: x -> x D
    is an invertible linear map, a facet normal n of Y becomes D^-1 n, and
    (D^-1 n) . (y D) = n . y for every point, so every equation n . y = 1, every strict
    inequality |n . y| < 1 and every singular facet matrix (det(B D) = det(B) det(D)) of
    :func:`sphere_defect` is the same for both.  Points with one tiny (e.g. subnormal)
    coordinate then no longer give normals beyond float range or integers of thousands of
    bits.  (Scaling single points, rows, would change the polytope: it is not done.)
    """
    with np.errstate(all="ignore"):
        top = np.max(np.abs(Y), axis=0)
        _, ex = np.frexp(top)
        shift = np.where(top > 0, -ex, 0).astype(np.int64)
        Ys = np.ldexp(Y, shift[None, :])
        # exact iff it scales back to Y: scaling up by 2^|s| is exact barring overflow, so a
        # rounded (or underflowed) scaled entry cannot come back to the stored one
        ok = np.all(np.isfinite(Ys) & (np.ldexp(Ys, -shift[None, :]) == Y), axis=0)
    return np.where(ok[None, :], Ys, Y)


def _row_keys(S: np.ndarray, base: int) -> list[np.ndarray]:
    """Returns int64 words that identify every row of S (entries in [0, base), rows of
    equal length): two rows are equal iff all their words are.  Each word packs as many
    entries as fit in 62 bits, so the packing is injective and never overflows."""
    bits = max(1, (base - 1).bit_length())
    per = max(1, 62 // bits)
    words = []
    for c0 in range(0, S.shape[1], per):
        w = np.zeros(len(S), dtype=np.int64)
        for c in range(c0, min(c0 + per, S.shape[1])):
            w = (w << bits) | S[:, c].astype(np.int64)
        words.append(w)
    return words


def _run_lengths(words: list[np.ndarray]) -> np.ndarray:
    """Returns, in sorted order, how often each distinct row (given by its words) occurs."""
    order = np.lexsort(words[::-1]) if len(words) > 1 else np.argsort(words[0])
    W = np.stack([w[order] for w in words], axis=1)
    starts = np.flatnonzero(np.r_[True, np.any(W[1:] != W[:-1], axis=1)])
    return np.diff(np.r_[starts, len(W)])


def _normal_balls(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For f facets' p x p point matrices P (f x p x p, rows the facet's signed points)
    returns (nt, e): floats nt (f x p) and radii e (f) with B_r nonsingular and
    ||B_r^{-1} 1 - nt_r||_inf <= e_r wherever e_r is finite; e_r = inf where this float
    a-posteriori bound cannot prove it (the caller then solves that facet exactly).

    With X ~ B^-1: delta = ||I - X B||_inf < 1 proves X B, hence B, nonsingular, and
    n - nt = B^-1 r = (I - (I - X B))^-1 X r with r = 1 - B nt, so
    ||n - nt||_inf <= || |X| |r| ||_inf / (1 - delta).  Every product is bounded by the
    a-priori lemma (gamma_p, p eta), every other operation moved outward by one ulp.
    """
    f, p = P.shape[0], P.shape[1]
    with np.errstate(all="ignore"):
        try:
            X = np.linalg.inv(P)
        except np.linalg.LinAlgError:  # some facet singular in float: invert one by one
            X = np.full_like(P, np.nan)
            for r in range(f):
                try:
                    X[r] = np.linalg.inv(P[r])
                except np.linalg.LinAlgError:
                    pass
        nt = X.sum(axis=2)  # X 1, the approximate normal (any float vector will do)
        # |r| = |1 - B nt| <= |fl(1 - s)| + |s - B nt| with s = fl(B nt)
        s = np.matmul(P, nt[:, :, None])[:, :, 0]
        err_s = dot_error_upper(np.matmul(np.abs(P), np.abs(nt)[:, :, None])[:, :, 0], p)
        r_up = up(up(np.abs(1.0 - s)) + err_s)
        # row sums of |I - X B| <= those of |fl(I - M)| (1 + u) (one RN op per entry, no
        # underflow in a subtraction) plus those of |M - X B| <= gamma_p |X| |B| + p eta,
        # where the row sums of |X| |B| are |X| (|B| 1) exactly: only vectors are bounded
        M = np.matmul(X, P)
        a1 = up(nonneg_sum_upper(np.abs(np.eye(p) - M).sum(axis=2), p) * (1.0 + 2.0 ** -52))
        b1 = nonneg_sum_upper(np.abs(P).sum(axis=2), p)  # >= |B| 1
        c1 = np.matmul(np.abs(X), b1[:, :, None])[:, :, 0]
        c1 = up(up(c1 + n_eta_up(p)) * inv_one_minus_gamma_up(p))  # >= |X| |B| 1
        delta = up(a1 + up(up(gamma_up(p) * c1) + n_eta_up(p * p))).max(axis=1)
        # |X| |r| bounded above: nonnegative products, fl within gamma_p plus p eta
        xr = np.matmul(np.abs(X), r_up[:, :, None])[:, :, 0]
        xr = up(up(xr + n_eta_up(p)) * inv_one_minus_gamma_up(p)).max(axis=1)
        e = up(xr / down(1.0 - delta))
        ok = (delta < 1.0) & np.isfinite(e) & np.all(np.isfinite(nt), axis=1)
    return np.where(ok[:, None], nt, 0.0), np.where(ok, e, np.inf)


def sphere_defect(Y: np.ndarray, F: np.ndarray, *, exact_normals: bool = False
                  ) -> str | None:
    """Returns None when the facets F and their mirrors are exactly the facets of
    P = conv(+-Y), each simplicial (part 1 of the module's statement); otherwise a sentence
    naming the first defect found.

    Each facet's normal n (B n = 1 on its p points B) is enclosed in a float64 ball, by a
    verified float solve (:func:`_normal_balls`) or, where that cannot prove B nonsingular
    (or when ``exact_normals``), by an exact solve rounded to the nearest floats (radius one
    ulp).  n . y for the other points is then enclosed in one float64 ball product, and only
    the pairs that enclosure cannot place strictly inside |n . y| < 1 are compared in exact
    rationals (with the exact normal).  So a float only ever spares exact work where it
    proves the strict inequality (or nonsingularity).  All of it runs on :func:`column_scaled`
    points (the same facets and defects).  The float normal solves, the exact solves, each
    float64 block and the exact pairs it leaves are priced before they run
    (``certify.numerics.workbound``): raises ``workbound.WorkLimit`` instead of starting a
    phase over the current meter's limit.
    """
    k, p = Y.shape
    Y = column_scaled(Y)  # the same facets and defects (see column_scaled), fewer bits
    full = np.vstack([F, (F + k) % (2 * k)])
    srt = np.sort(full, axis=1)
    if np.any(_run_lengths(_row_keys(srt, 2 * k)) != 1):
        return "two facets (counting mirrors) have the same points"
    if p == 1:
        if len(full) != 2:  # S^0 is two points: one facet and its mirror
            return "a rank-1 sphere has exactly one facet and its mirror"
    else:
        # every (p - 1)-subset of a facet: drop one column of the sorted facet at a time
        ridges = np.vstack([np.delete(srt, c, axis=1) for c in range(p)])
        counts = _run_lengths(_row_keys(ridges, 2 * k))
        if np.any(counts != 2):
            bad = int(np.flatnonzero(counts != 2)[0])
            return (f"a ridge lies in {int(counts[bad])} facets, not 2: the facets do not "
                    "close up into a sphere")
    P = np.where(F[:, :, None] < k, Y[F % k], -Y[F % k])  # f x p x p, exact (sign flips)
    # inverse, residual and error products of the verified float solves
    workbound.charge(6 * workbound.float_product(len(F) * p, p, p),
                     f"the float64 normals of {len(F)} facets (rank {p})")
    if exact_normals:
        nt, e = np.zeros((len(F), p)), np.full(len(F), np.inf)
    else:
        nt, e = _normal_balls(P)
    b = workbound.bits(Y)
    n_exact = int(np.count_nonzero(~np.isfinite(e)))
    if n_exact:
        workbound.charge(workbound.solve_facets(n_exact, p, b),
                         f"the exact normals of {n_exact} facets (rank {p}, {b}-bit points)")
    Yz, ex = dyadic.to_int_matrix(Y)
    rows = Yz.tolist()
    ones = fmpz_mat(p, 1, [1] * p)
    scale = dyadic.pow2(-ex)  # Y = Yz 2^ex, so n for Y is n for Yz times 2^-ex
    normals: dict[int, list[Fraction]] = {}

    def exact_normal(r: int) -> list[Fraction] | None:
        """The exact normal of facet r (cached), None when its points are singular."""
        if r not in normals:
            B = fmpz_mat([[(x if j < k else -x) for x in rows[j % k]]
                          for j in F[r].tolist()])
            if B.det() == 0:
                return None
            sol = B.solve(ones)
            normals[r] = [Fraction(int(x.p), int(x.q)) * scale for x in sol.entries()]
        return normals[r]

    nr = np.zeros((len(F), p))
    for r in np.flatnonzero(~np.isfinite(e)).tolist():  # in facet order: first defect first
        n = exact_normal(r)
        if n is None:
            return f"facet {r}: its points do not span a hyperplane missing 0"
        try:
            nt[r] = [float(x) for x in n]  # correctly rounded
            # |n - fl(n)| <= 2^-52 |fl(n)| + 2^-1074, moved up one ulp
            nr[r] = up(np.abs(nt[r]) * 2.0 ** -52 + 2.0 ** -1074)
        except OverflowError:  # beyond float range: its pairs go to exact rationals
            nt[r], nr[r] = 0.0, np.inf
    fin = np.isfinite(e)
    nr[fin] = e[fin, None]
    # crude prefilter, two passes per pair: |n . y| <= |fl(nt . y)| + gamma_p |y| . |nt|
    # + p eta + |y| . |n - nt| <= |C| + a (gamma_p ||nt||_inf + max rad) + p eta with
    # a >= max_j ||Y[j]||_1; |C| below (a float <=) 1 minus that proves |n . y| < 1
    a = float(abs_row_sums_upper(Y).max())
    g, p_eta = gamma_up(p), n_eta_up(p)
    step = max(1, (1 << 22) // k)  # facets per block: about 4M (point, facet) pairs at a time
    for c0 in range(0, len(F), step):
        cols = np.arange(c0, min(c0 + step, len(F)))
        workbound.charge(2 * workbound.float_product(k, p, len(cols)),
                         f"the float64 filter of {k} points against {len(cols)} facets")
        with np.errstate(all="ignore"):
            nb, rb = nt[cols].T, nr[cols].T
            T = up(up(a * up(up(g * np.abs(nb).max(axis=0)) + rb.max(axis=0))) + p_eta)
            inside = np.abs(Y @ nb) < down(1.0 - T)[None, :]  # NaN / inf never inside
            inside[F[cols] % k, np.arange(len(cols))[:, None]] = True  # the facet's points
            redo = np.flatnonzero(~inside.all(axis=0))
            if redo.size:  # the sharper ball product on the facets the prefilter left
                V = ball_matmul(Ball.exact(Y), Ball(nb[:, redo], rb[:, redo]))
                inside[:, redo] |= up(np.abs(V.mid) + V.rad) < 1.0
        bad_j, bad_c = np.nonzero(~inside)
        if bad_j.size:
            fresh = [int(cols[c]) for c in np.unique(bad_c).tolist()
                     if int(cols[c]) not in normals]
            if fresh:
                workbound.charge(workbound.solve_facets(len(fresh), p, b),
                                 f"the exact normals of {len(fresh)} facets (rank {p}, "
                                 f"{b}-bit points)")
            for r in fresh:
                if exact_normal(r) is None:  # cannot happen: a finite e proved B_r nonsingular
                    return f"facet {r}: its points do not span a hyperplane missing 0"
            # bits of the normals as solved (not the a-priori bound): they price the pairs
            nbits = max(max(x.numerator.bit_length(), x.denominator.bit_length())
                        for c in np.unique(bad_c).tolist() for x in normals[int(cols[c])])
            workbound.charge(workbound.point_facet_pairs(int(bad_j.size), p, nbits),
                             f"{int(bad_j.size)} exact point-facet comparisons (normals of "
                             f"{nbits} bits)")
        for c in np.unique(bad_c).tolist():  # facet order, then point order
            r = int(cols[c])
            n = exact_normal(r)
            if n is None:  # cannot happen: a finite e proved B_r nonsingular
                return f"facet {r}: its points do not span a hyperplane missing 0"
            for j in bad_j[bad_c == c].tolist():
                v = sum((Fraction(float(y)) * x for y, x in zip(Y[j], n, strict=True)),
                        Fraction(0))
                if abs(v) >= 1:
                    return (f"facet {r}: point {int(j)} (or its mirror) is not strictly "
                            "inside the facet's hyperplane: not a simplicial facet of "
                            "conv(+-Y)")
    return None


def check_polytope(A: np.ndarray, Y: np.ndarray, I: np.ndarray, F: np.ndarray, Z: np.ndarray,
                   G: np.ndarray, t: Fraction, *, eps: Fraction, chi: Fraction,
                   tier: str = "auto") -> Check:
    """Decides the polytope certificate for exact stored A and arrays validated by
    :func:`parse_arrays` (``t`` = eps + chi).

    Returns a :class:`Check` of kind ``"polytope"`` with ``threshold`` t and
    ``detail["sense"]`` ``">"``.  ``status`` is ``"fails"`` (``value`` None,
    ``detail["reason"]`` the defect) when the facets are not exactly the simplicial facets
    of conv(+-Y); otherwise ``value`` is an interval containing min over facets F and their
    points x of sigma_x (A z_F)_(i_x), and ``status`` is ``"holds"`` when value > t is proved
    (then every B with ||A - B||_row1 <= t has rank >= p), ``"fails"`` when value <= t is
    proved, else ``"undecided"``.  ``tier="auto"`` runs float64, arb 128, exact; the exact
    tier always decides.
    """
    p = Y.shape[1]
    claim = f"facets of conv(+-Y) labelled by rows with min sigma (A z_F)_i > {qstr(t)}"

    def result(status: str, value: Enclosure | None, run: list[str], detail: dict) -> Check:
        return labelled_check("polytope", p, eps, chi, t, claim, status, value, run, detail)

    defect = sphere_defect(Y, F)
    if defect is not None:
        return result("fails", None, ["exact"], {"reason": defect})
    k = Y.shape[0]
    g = G[:, None].repeat(p, axis=1).ravel()  # witness row of every (facet, point) pair
    i = I[F % k].ravel()  # the row of A labelling the point
    sig = np.where(F < k, 1.0, -1.0).ravel()
    out = decide_pairs(A, Z, g, i, sig, t, tier)
    return result(out.status, out.value, out.run, {})


def labelled_check(kind: str, p: int, eps: Fraction, chi: Fraction, t: Fraction, claim: str,
                   status: str, value: Enclosure | None, run: list[str], detail: dict) -> Check:
    """Returns the :class:`Check` of a kind whose claim is "a minimum of labelled witness
    values > t" (polytope, nerve): the tier is the last one run (exact when none ran: a
    structural defect), the precision arb's when that tier decided."""
    return Check(status=status, kind=kind, rank=p, eps=eps,  # type: ignore[arg-type]
                 threshold=t, value=value, tier=run[-1] if run else "exact", claim=claim,
                 chi=chi, precision=ARB_PRECISIONS[-1] if run and run[-1] == "arb" else None,
                 tiers_run=tuple(run), detail={"sense": ">", **detail})


def decide_pairs(A: np.ndarray, Z: np.ndarray, g: np.ndarray, i: np.ndarray,
                 sig: np.ndarray, t: Fraction, tier: str) -> tiers.Escalation:
    """Decides min over pairs n of sig[n] (A z_(g[n]))_(i[n]) > t on the tiers float64, arb
    128, exact (``tier`` as in :func:`check_polytope`): the value part of the polytope and
    nerve kinds.  Returns the tiers' decision (status, an enclosure of the minimum, the tiers
    run)."""

    def enclose(tr: str, prec: int | None) -> Enclosure | None:
        if tr == "float64":
            return _float_min(A, Z, g, i, sig)
        if tr == "arb":
            return _arb_min(A, Z, g, i, sig, prec)  # type: ignore[arg-type]
        return _exact_min(A, Z, g, i, sig)

    return tiers.decide_above(tiers.plan(tier, ARB_PRECISIONS), enclose, t)


def _pairs(g: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the distinct witness rows, the distinct A rows and the pairs' positions in
    the (witness x row) product, so only the rows a facet uses are multiplied."""
    gu, gi = np.unique(g, return_inverse=True)
    iu, ii = np.unique(i, return_inverse=True)
    return gu, iu, gi.ravel() * len(iu) + ii.ravel()


def _blocks(nw: int, cols: int, pos: np.ndarray
            ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Yields, for consecutive blocks [start, stop) of the distinct witnesses with at most
    ``BLOCK_ENTRIES`` products each (at least one witness), the pairs whose witness lies in
    the block (indices into ``pos``) and their positions in that block's product."""
    wi = pos // cols
    order = np.argsort(wi, kind="stable")
    ranked = wi[order]
    step = max(1, BLOCK_ENTRIES // max(cols, 1))
    for start in range(0, nw, step):
        stop = min(nw, start + step)
        a, b = np.searchsorted(ranked, [start, stop])
        sel = order[a:b]
        yield start, stop, sel, pos[sel] - start * cols


def _float_min(A: np.ndarray, Z: np.ndarray, g: np.ndarray, i: np.ndarray,
               sig: np.ndarray) -> Enclosure | None:
    """Returns an interval containing min sigma (Z A^T) over the pairs used, or None when
    the float64 enclosure overflows.  One float64 product Z A^T; its rounding is charged
    a priori through |z| <= 1 (every entry of Z has been checked to lie in [-1, 1]; the
    bound uses the measured max |Z| all the same): |fl(z . a) - z . a| <= gamma_N |z| . |a|
    + N eta <= gamma_N max|Z| ||a||_1 + N eta, one radius per row a of A.  Multiplying by
    sigma = +-1 is exact."""
    gu, iu, pos = _pairs(g, i)
    N = A.shape[1]
    workbound.charge(workbound.float_product(len(gu), N, len(iu)) + 50 * len(pos),
                     "the float64 tier")
    with np.errstate(all="ignore"):
        Zg = Z if len(gu) == len(Z) else np.ascontiguousarray(Z[gu])
        Ai = np.ascontiguousarray(A[iu])
        mid = np.empty(len(pos))
        for start, stop, sel, local in _blocks(len(gu), len(iu), pos):
            mid[sel] = (Zg[start:stop] @ Ai.T).ravel()[local]
        zmax = float(np.abs(Zg).max()) if Zg.size else 0.0
        rad_i = up(up(gamma_up(max(N, 1)) * up(zmax * abs_row_sums_upper(Ai)))
                   + n_eta_up(N))
        rad = rad_i[pos % len(iu)]
        signed = sig * mid
        # a NaN entry (overflow met inf - inf) leaves the minimum without a lower bound
        lo = safe_min_lower(down(signed - rad))
        hi = safe_min_upper(up(signed + rad))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return Enclosure(Fraction(lo), Fraction(hi))


def _arb_min(A: np.ndarray, Z: np.ndarray, g: np.ndarray, i: np.ndarray, sig: np.ndarray,
             prec: int) -> Enclosure | None:
    gu, iu, pos = _pairs(g, i)
    workbound.charge(workbound.arb_product(len(gu), A.shape[1], len(iu), prec)
                     + 5000 * len(pos), f"the arb tier at {prec} bits")
    cols = len(iu)

    def entries() -> Iterator[tuple[Any, float]]:
        At = arbutil.matrix(np.ascontiguousarray(A[iu].T))
        for start, stop, sel, local in _blocks(len(gu), cols, pos):
            Yb = arbutil.matrix(np.ascontiguousarray(Z[gu[start:stop]])) * At
            for q, s in zip(local.tolist(), sig[sel].tolist(), strict=True):
                yield Yb[q // cols, q % cols], s

    with arbutil.precision(prec):  # the generator runs inside: every block at prec bits
        ends = arbutil.signed_min(entries())
    return None if ends is None else Enclosure(*ends)


def _exact_min(A: np.ndarray, Z: np.ndarray, g: np.ndarray, i: np.ndarray,
               sig: np.ndarray) -> Enclosure:
    gu, iu, pos = _pairs(g, i)
    workbound.charge(workbound.exact_chain(Z[gu], A[iu].T) + 1000 * len(pos), "the exact tier")
    MA, ea = dyadic.to_int_matrix(np.ascontiguousarray(A[iu].T))
    best: Fraction | None = None
    for start, stop, sel, local in _blocks(len(gu), len(iu), pos):
        if not len(sel):
            continue
        # each block has its own power of two, so blocks compare as exact rationals
        MZ, ez = dyadic.to_int_matrix(np.ascontiguousarray(Z[gu[start:stop]]))
        ent = (MZ * MA).entries()
        low = min(int(s) * int(ent[q])
                  for q, s in zip(local.tolist(), sig[sel].tolist(), strict=True))
        val = Fraction(low) * dyadic.pow2(ez + ea)
        best = val if best is None else min(best, val)
    if best is None:  # no pairs: the caller never asks (every facet has p labels)
        raise ValueError("no (witness, row) pair to evaluate")
    return Enclosure(best, best)
