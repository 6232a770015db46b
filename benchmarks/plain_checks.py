"""Plain float64 evaluations of every check's inequality: UNTRUSTED, a timing baseline only.

Each function computes, in float64 with numpy's rounding and nothing else, the quantity the
kernel (``certify/``) decides for one end of a bracket, and compares it with the threshold:
what an unvalidated recheck of a store would do.  No rounding is bounded, no Arb ball or exact
rational is formed, the operator slack chi is not charged (eps itself is the threshold) and a
margin of one ulp counts as much as a large one, so a "holds" here proves nothing.  The
benchmarks (``bench_corpus.py``) time the kernel against these functions;
``tests/test_plain_checks.py`` checks that they compute the same statements (their values lie
near the kernel's enclosures, and their verdicts agree where the kernel's margin is large).

Statements (proofs_notes/<note>; t = eps here, the kernel uses eps - chi / eps + chi):

* upper ``factors`` (upper.md): ||A - U V||_row1 <= eps;
* ``nonzero`` (lower_nonzero.md): ||A||_row1 > eps;
* ``frobenius_tail`` (lower_frobenius.md): sum_{i >= L} sigma_i(A)^2 > m eps^2;
* ``decoder`` (lower_decoder.md): ||I - X D A W||_inf + ||X D||_inf ||W||_inf eps < 1;
* ``submatrix`` (lower_decoder.md): the same with M = A[rows][:, cols], ||X D|| = ||X||, ||W|| = 1;
* ``bernstein`` (bernstein.md): W[J, :] = I and ||P A W - W||_inf + ||P||_inf eps < 1;
* ``rowset`` (rowset.md): min over patterns s and rows i of sigma_i(s) (A[I] z_s)_i > eps;
* ``rowmix`` (rowset.md): rows of D of l1 norm <= 1 and the same on the rows of D A;
* ``polytope`` (polytope.md): the facets F and their mirrors are distinct, every ridge lies in
  exactly two of them, every other point y has |n . y| < 1 for the facet's normal n (one
  batched float solve), and min over facets and their points of sigma (A z_F)_i > eps.

Structural conditions the kernel proves exactly (W[J, :] = I, |Z| <= 1, row norms of D, the
sphere) are evaluated here in float too, since a recheck that skipped them would not be
checking the statement; input parsing (shapes, NaN, index ranges) is not repeated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class Plain:
    """A plain float64 evaluation: ``value`` compared with ``threshold`` by ``sense``.

    ``value`` is NaN when a structural condition failed (``holds`` is then False and
    ``reason`` says which)."""

    kind: str
    value: float
    threshold: float
    sense: str  # "<=" (upper), "<" (decoder-like) or ">" (the others)
    holds: bool
    reason: str = ""


def row_l1(M: np.ndarray) -> float:
    """Returns the float64 max_i sum_j |M_ij| (0 for an empty matrix)."""
    return float(np.abs(M).sum(axis=1).max()) if M.size else 0.0


def _below_one(kind: str, value: float) -> Plain:
    return Plain(kind, value, 1.0, "<", bool(value < 1.0))


def _above(kind: str, value: float, t: float) -> Plain:
    return Plain(kind, value, t, ">", bool(value > t))


def _broken(kind: str, threshold: float, sense: str, reason: str) -> Plain:
    return Plain(kind, float("nan"), threshold, sense, False, reason)


def _f64(X: np.ndarray) -> np.ndarray:
    """float64 (stores may hold float32 arrays: their products are formed in float64)."""
    return np.asarray(X, dtype=np.float64)


def upper(A: np.ndarray, U: np.ndarray, V: np.ndarray, eps: float | Fraction) -> Plain:
    """Returns the plain evaluation of ||A - U V||_row1 <= eps."""
    e = float(eps)
    value = row_l1(_f64(A) - _f64(U) @ _f64(V))
    return Plain("factors", value, e, "<=", bool(value <= e))


def decoder_value(A: np.ndarray, D: np.ndarray, W: np.ndarray, X: np.ndarray,
                  eps: float) -> float:
    """Returns the float64 ||I - X D A W||_inf + ||X D||_inf ||W||_inf eps."""
    M = D @ A @ W
    return row_l1(np.eye(X.shape[0]) - X @ M) + row_l1(X @ D) * row_l1(W) * eps


def sign_patterns(p: int) -> np.ndarray:
    """The 2^(p-1) x p sign patterns in the format's order (witnesses/FORMAT.md): row s has
    sigma_0 = +1 and sigma_i = -1 exactly when bit i - 1 of s is set."""
    s = np.arange(1 << (p - 1), dtype=np.int64)[:, None]
    bits = (s >> np.arange(p - 1, dtype=np.int64)[None, :]) & 1
    return np.hstack([np.ones((len(s), 1)), 1.0 - 2.0 * bits])


def orthant_min(rows: np.ndarray, Z: np.ndarray) -> float:
    """Returns the float64 min over s and i of sigma_i(s) (rows z_s)_i."""
    return float((sign_patterns(rows.shape[0]) * (Z @ rows.T)).min())


def _row_counts(S: np.ndarray, base: int) -> np.ndarray:
    """Returns how often each distinct row of S (integers in [0, base)) occurs: one sort of
    the rows packed into int64 keys where they fit, else a lexsort."""
    bits = max(1, (base - 1).bit_length())
    if bits * S.shape[1] <= 62:
        key = np.zeros(len(S), dtype=np.int64)
        for c in range(S.shape[1]):
            key = (key << bits) | S[:, c]
        _, counts = np.unique(key, return_counts=True)
        return counts
    W = S[np.lexsort(S.T[::-1])]
    starts = np.flatnonzero(np.r_[True, np.any(W[1:] != W[:-1], axis=1)])
    return np.diff(np.r_[starts, len(W)])


def sphere_defect(Y: np.ndarray, F: np.ndarray) -> str | None:
    """Returns None when, in float64, the facets F and their mirrors look like the simplicial
    facets of conv(+-Y) (distinct, every ridge in exactly two, every other point strictly
    inside each facet's hyperplane), else a short reason."""
    k, p = Y.shape
    full = np.sort(np.vstack([F, (F + k) % (2 * k)]), axis=1)
    if np.any(_row_counts(full, 2 * k) != 1):
        return "repeated facet"
    if p > 1:
        ridges = np.vstack([np.delete(full, c, axis=1) for c in range(p)])
        if np.any(_row_counts(ridges, 2 * k) != 2):
            return "a ridge not in exactly two facets"
    elif len(full) != 2:
        return "a rank-1 sphere has one facet and its mirror"
    P = np.where(F[:, :, None] < k, Y[F % k], -Y[F % k])
    try:
        n = np.linalg.solve(P, np.ones((len(F), p, 1)))[..., 0]
    except np.linalg.LinAlgError:
        return "singular facet"
    inside = np.abs(Y @ n.T) < 1.0  # k x f
    inside[F % k, np.arange(len(F))[:, None]] = True  # the facet's own points
    if not inside.all():
        return "a point outside a facet's hyperplane"
    return None


def lower(A: np.ndarray, certificate: Mapping, eps: float | Fraction) -> Plain:
    """Returns the plain evaluation of a lower certificate ({"kind", "rank", arrays...}, as
    ``certify.check_lower`` takes it) at threshold eps."""
    kind, L = certificate["kind"], int(certificate["rank"])
    c = {n: (_f64(x) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else x)
         for n, x in certificate.items()}
    e = float(eps)
    A = _f64(A)
    if kind == "nonzero":
        return _above(kind, row_l1(A), e)
    if kind == "frobenius_tail":
        s = np.linalg.svd(A, compute_uv=False)
        return _above(kind, float(np.sum(s[L - 1:] ** 2)), A.shape[0] * e * e)
    if kind == "decoder":
        return _below_one(kind, decoder_value(A, c["D"], c["W"], c["X"], e))
    if kind == "submatrix":
        M = A[np.ix_(np.asarray(c["rows"]), np.asarray(c["cols"]))]
        X = c["X"]
        return _below_one(kind, row_l1(np.eye(L) - X @ M) + row_l1(X) * e)
    if kind == "bernstein":
        W, P = c["W"], c["P"]
        if not np.array_equal(W[np.asarray(c["J"])], np.eye(L)):
            return _broken(kind, 1.0, "<", "W[J, :] is not the identity")
        return _below_one(kind, row_l1(P @ (A @ W) - W) + row_l1(P) * e)
    if kind in ("rowset", "rowmix"):
        Z = c["Z"]
        if not np.all(np.abs(Z) <= 1.0):
            return _broken(kind, e, ">", "|Z| > 1")
        if kind == "rowset":
            rows = A[np.asarray(c["I"])]
        else:
            D = c["D"]
            if np.abs(D).sum(axis=1).max() > 1.0:
                return _broken(kind, e, ">", "a row of D of l1 norm above 1")
            rows = D @ A
        return _above(kind, orthant_min(rows, Z), e)
    if kind == "polytope":
        Y, I, F, Z, G = (np.asarray(c[n]) for n in ("Y", "I", "F", "Z", "G"))
        F = F.astype(np.int64)
        if not np.all(np.abs(Z) <= 1.0):
            return _broken(kind, e, ">", "|Z| > 1")
        defect = sphere_defect(Y, F)
        if defect is not None:
            return _broken(kind, e, ">", defect)
        k = len(I)
        iu, inv = np.unique(I, return_inverse=True)  # only the labelling rows of A
        V = Z @ A[iu].T  # witnesses x distinct rows
        vals = V[G.astype(np.int64)[:, None], inv.ravel()[F % k]]
        return _above(kind, float((vals * np.where(F < k, 1.0, -1.0)).min()), e)
    raise ValueError(f"no plain evaluation for lower kind {kind!r}")
