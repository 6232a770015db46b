"""The fast sphere path of the polytope kernel (verified float normals, packed-key ridge
counts, the two-pass prefilter) against the all-exact path and the pure-Python reference.

The fast path may only spare exact work: on every certificate, valid or broken, it must
return the same verdict as ``sphere_defect(..., exact_normals=True)`` (every normal solved in
exact rationals) and as the reference of ``test_lower_polytope``; and where it reports a float
ball for a normal, the exact normal must lie inside it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from softrank.certify import check_lower
from softrank.certify.lower.polytope import (
    _normal_balls,
    _row_keys,
    _run_lengths,
    sphere_defect,
)

from .test_lower_polytope import exact_solve, hull_facets, q, reference_defect


def _exact_normal(P: np.ndarray) -> list[Fraction] | None:
    return exact_solve([[q(x) for x in row] for row in P], [Fraction(1)] * P.shape[0])


def _random_matrices(rng: np.random.Generator, p: int) -> list[np.ndarray]:
    """Well and badly conditioned, exactly singular and float-overflowing p x p matrices."""
    out = []
    for cond_exp in (0, 4, 8, 12, 15, 17):
        U, _ = np.linalg.qr(rng.standard_normal((p, p)))
        V, _ = np.linalg.qr(rng.standard_normal((p, p)))
        out.append((U * np.logspace(0, -cond_exp, p)) @ V.T)
    S = rng.integers(-3, 4, (p, p)).astype(np.float64)
    if p >= 2:
        S[-1] = S[0] + S[1] if p >= 3 else 2.0 * S[0]  # exactly singular, exact in floats
    out.append(S)
    out.append(rng.standard_normal((p, p)) * 2.0 ** -1060)  # normals overflow float64
    out.append(rng.standard_normal((p, p)) * 2.0 ** 1000)
    near = np.ones((p, p)) + np.eye(p) * 2.0 ** -52  # det 2^-52 (p - 1) ... > 0: exact only
    out.append(near)
    return out


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_normal_balls_enclose_the_exact_normal(p):
    rng = np.random.default_rng(500 + p)
    mats = _random_matrices(rng, p) + _random_matrices(rng, p)
    nt, e = _normal_balls(np.array(mats))
    decided = 0
    for P, n_f, e_f in zip(mats, nt, e, strict=True):
        n = _exact_normal(P)
        if not np.isfinite(e_f):
            continue  # left to the exact solve: nothing is claimed
        decided += 1
        assert n is not None, "a finite radius claims a nonsingular matrix"
        assert e_f >= 0
        assert max(abs(x - q(y)) for x, y in zip(n, n_f, strict=True)) <= q(e_f)
    assert decided >= 6  # the well-conditioned ones are decided in float


def test_normal_balls_leave_singular_and_overflowing_facets_to_the_exact_solve():
    P = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 0.0]],
                  [[2.0 ** -1070, 0.0], [0.0, 2.0 ** -1070]], [[np.inf, 0.0], [0.0, 1.0]],
                  [[np.nan, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    nt, e = _normal_balls(P)
    assert not np.any(np.isfinite(e[:5]))
    assert e[5] == 0.0 or (np.isfinite(e[5]) and e[5] < 1e-15)
    assert np.array_equal(nt[5], [1.0, 1.0])


def test_packed_keys_identify_rows():
    rng = np.random.default_rng(3)
    for base, cols in ((2, 1), (7, 3), (170, 8), (8192, 12), (8192, 11)):
        S = rng.integers(0, base, (400, cols))
        S[200:] = S[:200][rng.permutation(200)]  # every row twice ...
        S[399] = S[0]  # ... and one three times
        counts = _run_lengths(_row_keys(S, base))
        _, ref = np.unique(S, axis=0, return_counts=True)
        assert np.array_equal(np.sort(counts), np.sort(ref))
        assert counts.sum() == len(S)


def _hull_cert(rng: np.random.Generator, k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    Y = rng.standard_normal((k, p))
    keep = sorted({int(v) % k for v in ConvexHull(np.vstack([Y, -Y])).vertices})
    Y = Y[keep]
    return Y, np.array(hull_facets(Y), dtype=np.int64)


def _verdict(defect: str | None) -> str | None:
    if defect is None:
        return None
    for key, words in (("duplicate", "same points"), ("ridge", "ridge"),
                       ("singular", "hyperplane missing 0"), ("outside", "strictly inside")):
        if words in defect:
            return key
    raise AssertionError(defect)


@pytest.mark.parametrize("p", [2, 3, 4, 5])
def test_fast_and_exact_sphere_paths_agree(p):
    """Random hulls; then each edited: a point scaled by 1 +- 2^-s (s = 8 .. 52, so it
    crosses or nears its neighbours' hyperplanes by tiny margins), a point copied, a facet
    dropped or doubled, a point collapsed onto a multiple of another (singular facets).
    The fast verdict, the all-exact verdict and the reference agree every time."""
    rng = np.random.default_rng(900 + p)
    seen = set()
    for trial in range(6):
        Y, F = _hull_cert(rng, 12 + 3 * trial, p)
        k = len(Y)
        cases = [(Y, F)]
        for s in (8, 20, 35, 45, 52):
            for sign in (1.0, -1.0):
                Yb = Y.copy()
                Yb[rng.integers(k)] *= 1.0 + sign * 2.0 ** -s
                cases.append((Yb, F))
        Yb = Y.copy()
        Yb[0] = Yb[1]
        cases.append((Yb, F))
        Yb = Y.copy()
        Yb[int(F[0, 0]) % k] = 2.0 * Y[int(F[0, 1]) % k]  # facet 0 singular
        cases.append((Yb, F))
        cases.append((Y, F[1:]))
        cases.append((Y, np.vstack([F, F[-1:]])))
        for Yc, Fc in cases:
            fast = _verdict(sphere_defect(Yc, Fc))
            slow = _verdict(sphere_defect(Yc, Fc, exact_normals=True))
            assert fast == slow, (trial, fast, slow)
            if k <= 24:
                ref = reference_defect(Yc, Fc)  # its own order of facets and defects
                assert (fast is None) == (ref is None), (trial, fast, ref)
            seen.add(fast)
    assert {None, "outside", "ridge", "duplicate"} <= seen


def test_an_ill_conditioned_facet_goes_to_the_exact_solve():
    """y1 = (1, 1), y2 = (1, 1 + 2^-52): the facet {y2, -y1} has the normal
    (-1 - 2^53, 2^53) (not a float), and float64 cannot prove B nonsingular; the exact
    solve decides it.  A third point just inside (accepted) or on (refused) a facet."""
    y1, y2 = [1.0, 1.0], [1.0, 1.0 + 2.0 ** -52]
    Y = np.array([y1, y2])
    F = np.array([[0, 1], [1, 2]])  # the parallelogram's edges {y1, y2}, {y2, -y1}
    P = np.where(F[:, :, None] < 2, Y[F % 2], -Y[F % 2])
    _, e = _normal_balls(P)
    assert not np.all(np.isfinite(e))  # some facet left to the exact path
    assert sphere_defect(Y, F) is None and reference_defect(Y, F) is None
    for y3, ok in (([0.5, 0.5], True), ([1.0, 1.0 + 2.0 ** -51], False),
                   ([0.0, 2.0 ** -60], True), ([1.0, 1.0], False)):
        Y3 = np.vstack([Y, [y3]])
        F3 = F + (F >= 2)  # mirror indices move up by one
        assert (reference_defect(Y3, F3) is None) == ok
        assert (sphere_defect(Y3, F3) is None) == ok
        assert (sphere_defect(Y3, F3, exact_normals=True) is None) == ok


@pytest.mark.parametrize("p", [6, 8])
def test_larger_hulls_agree_with_the_exact_path(p):
    """p = 6 and 8 hulls (hundreds to thousands of facets, ranks the reference is too slow
    for): fast and all-exact verdicts agree on the hull and on a vertex pushed out or pulled
    in by 2^-30 relative (which breaks some facet, by the exact path)."""
    rng = np.random.default_rng(40 + p)
    Y, F = _hull_cert(rng, 14 if p == 8 else 18, p)
    assert sphere_defect(Y, F) is None
    assert sphere_defect(Y, F, exact_normals=True) is None
    broke = 0
    for j in range(0, len(Y), 3):
        for f in (1.0 + 2.0 ** -30, 1.0 - 2.0 ** -30, 0.5):
            Yb = Y.copy()
            Yb[j] *= f
            fast = sphere_defect(Yb, F)
            slow = sphere_defect(Yb, F, exact_normals=True)
            assert (fast is None) == (slow is None), (j, f, fast, slow)
            broke += fast is not None
    assert broke > 0


def test_a_certificate_with_few_witnesses_holds_or_fails_as_the_exact_tier():
    """The value's float64 radius (from |z| <= 1) against the exact tier on a shared-witness
    certificate: same status at thresholds just below and above the exact value."""
    rng = np.random.default_rng(11)
    A = np.abs(rng.standard_normal((12, 9)))
    A /= A.sum(axis=1, keepdims=True)
    W = rng.standard_normal((9, 3))
    Y0 = A @ W
    keep = sorted({int(v) % 12 for v in ConvexHull(np.vstack([Y0, -Y0])).vertices})
    Y = Y0[keep]
    F = np.array(hull_facets(Y), dtype=np.int64)
    k = len(Y)
    P = np.where(F[:, :, None] < k, Y[F % k], -Y[F % k])
    n = np.linalg.solve(P, np.ones((len(F), 3, 1)))[..., 0]
    Z = n @ W.T
    Z /= np.abs(Z).max(axis=1, keepdims=True)
    Z = np.clip(Z, -1.0, 1.0)
    cert = {"kind": "polytope", "rank": 3, "Y": Y, "I": np.array(keep), "F": F, "Z": Z,
            "G": np.arange(len(F))}
    exact = check_lower(A, cert, "1/1000", tier="exact").value
    assert exact is not None and exact.lo == exact.hi
    v = exact.lo
    for t, want in ((v * Fraction(999, 1000), "holds"), (v, "fails"),
                    (v * Fraction(1001, 1000), "fails")):
        for tier in ("float64", "auto", "exact"):
            c = check_lower(A, cert, t, tier=tier)
            if tier == "float64" and c.status == "undecided":
                continue  # float64 may stay undecided at a margin of 0
            assert c.status == want, (t, tier, c.status)
            assert c.value.lo <= v <= c.value.hi
