"""polytope certificates: exact differential checks on every tier, ties and float64 traps,
invalid facet structures (a missing, doubled or mirrored facet, a point moved off or onto a
hyperplane, a reflex vertex, a singular facet, a point exactly on a hyperplane whose rounded
normal says inside, a violation in a late block of a 4096-point polygon), refused inputs
naming the field, soundness (no rank-(p - 1) fit within eps + chi; rank-deficient labels
never hold, whatever the geometry), agreement with ``rowset`` on the cross-polytope, and chi
charged.

The references here are independent of the kernel: the value is a pure-Python Fraction
minimum over the listed facets, and the facet structure is checked with Fraction Gaussian
elimination and Counter-based ridge counts (no flint, no numpy rounding).
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.spatial import ConvexHull

from softrank.certify import InputError, check_lower, check_upper
from softrank.certify.lower.polytope import MAX_FACETS, MAX_POINTS, MAX_RANK

from .helpers import (
    check_lower_any_rank,
    exact_orthant_min,
    exact_row1,
    random_attention,
    tsvd_witness,
)
from .helpers import sign_patterns as patterns  # the format's words, not the kernel's

TIERS = ("auto", "float64", "arb", "exact")
TINY = Fraction(1, 2**60)
ONE_UP = float(np.nextafter(1.0, 2.0))


# --- independent references -----------------------------------------------------------------

def q(x) -> Fraction:
    return Fraction(float(x))


def exact_solve(M: list[list[Fraction]], b: list[Fraction]) -> list[Fraction] | None:
    """Solves M n = b by Gauss-Jordan elimination in Fractions; None when M is singular."""
    n = len(M)
    R = [list(row) + [bi] for row, bi in zip(M, b, strict=True)]
    for c in range(n):
        piv = next((r for r in range(c, n) if R[r][c] != 0), None)
        if piv is None:
            return None
        R[c], R[piv] = R[piv], R[c]
        for r in range(n):
            if r != c and R[r][c] != 0:
                f = R[r][c] / R[c][c]
                R[r] = [a - f * e for a, e in zip(R[r], R[c], strict=True)]
    return [R[i][n] / R[i][i] for i in range(n)]


def reference_defect(Y, F) -> str | None:
    """None when the facets F and their mirrors are exactly the simplicial facets of
    conv(+-Y) (the format's part 1), else one of "duplicate", "ridge", "singular", "outside"."""
    Y = np.asarray(Y, dtype=np.float64)
    k, p = Y.shape
    rows = [[int(x) for x in r] for r in np.asarray(F)]
    full = [frozenset(r) for r in rows] + [frozenset((x + k) % (2 * k) for x in r)
                                           for r in rows]
    if len(set(full)) != len(full):
        return "duplicate"
    if p == 1:
        if len(full) != 2:
            return "ridge"
    elif any(c != 2 for c in Counter(fs - {x} for fs in full for x in fs).values()):
        return "ridge"
    Yq = [[q(v) for v in row] for row in Y]
    for r in rows:
        pts = [[v if x < k else -v for v in Yq[x % k]] for x in r]
        n = exact_solve(pts, [Fraction(1)] * p)
        if n is None:
            return "singular"
        mine = {x % k for x in r}
        for j in range(k):
            if j not in mine and abs(sum((a * b for a, b in zip(n, Yq[j], strict=True)),
                                         Fraction(0))) >= 1:
                return "outside"
    return None


def reference_value(A, cert) -> Fraction:
    """min over rows r of F and points x of F_r of sigma_x (A z_r)_(I[x mod k]), exactly."""
    I = [int(i) for i in np.asarray(cert["I"])]
    k = len(I)
    Z, G = np.asarray(cert["Z"], dtype=np.float64), np.asarray(cert["G"])
    rows: dict[int, list[Fraction]] = {}
    best = None
    for r, facet in enumerate(np.asarray(cert["F"]).tolist()):
        z = [q(v) for v in Z[int(G[r])]]
        for x in facet:
            i = I[x % k]
            if i not in rows:
                rows[i] = [q(a) for a in A[i]]
            v = sum((a * b for a, b in zip(rows[i], z, strict=True)), Fraction(0))
            v = v if x < k else -v
            best = v if best is None else min(best, v)
    assert best is not None
    return best


def plain_float_value(A, cert) -> float:
    """The unverified float64 evaluation a producer would use (no rounding bounds)."""
    I, F, G = (np.asarray(cert[n]) for n in ("I", "F", "G"))
    k = len(I)
    P = np.asarray(cert["Z"])[G] @ A.T  # f x m
    vals = np.where(F < k, 1.0, -1.0) * P[np.arange(len(F))[:, None], I[F % k]]
    return float(vals.min())


def assert_consistent(c, value: Fraction, t: Fraction, p: int) -> None:
    """The enclosure contains the exact value and the status never contradicts it."""
    assert c.kind == "polytope" and c.rank == p and c.threshold == t
    assert c.detail["sense"] == ">"
    if c.value is not None:
        assert c.value.lo <= value <= c.value.hi, (c.tier, c.value, value)
    if c.status == "holds":
        assert value > t
    elif c.status == "fails":
        assert value <= t


# --- construction (untrusted float64 + qhull + HiGHS) --------------------------------------

def lp_witness(rows: np.ndarray) -> tuple[np.ndarray, float]:
    """z in [-1, 1]^N maximising min_l rows_l . z (HiGHS), clipped; and the LP's value."""
    n_lab, N = rows.shape
    res = linprog(np.r_[np.zeros(N), -1.0], A_ub=np.hstack([-rows, np.ones((n_lab, 1))]),
                  b_ub=np.zeros(n_lab), bounds=[(-1, 1)] * N + [(None, None)], method="highs")
    assert res.status == 0
    return np.clip(res.x[:N], -1.0, 1.0), -res.fun


def signed_rows(A, I, facet, k) -> np.ndarray:
    return np.array([(1.0 if x < k else -1.0) * A[int(I[x % k])] for x in facet])


def hull_facets(Y: np.ndarray) -> list[list[int]]:
    """One of each mirror pair of qhull's facets of conv(+-Y) (p >= 2), in qhull's order."""
    k = Y.shape[0]
    hull = ConvexHull(np.vstack([Y, -Y]))
    reps: list[list[int]] = []
    seen: set[frozenset] = set()
    for s in hull.simplices:
        key = frozenset(int(x) for x in s)
        if frozenset((x + k) % (2 * k) for x in key) in seen:
            continue
        seen.add(key)
        reps.append([int(x) for x in s])
    assert 2 * len(reps) == len(hull.simplices)  # qhull's facets come in mirror pairs
    return reps


def polytope_cert(A: np.ndarray, Y: np.ndarray, I, F=None) -> dict:
    """Facets from qhull (p = 1: the point of largest |y|), one LP witness per facet."""
    Y = np.asarray(Y, dtype=np.float64)
    k, p = Y.shape
    I = np.asarray(I, dtype=np.int64)
    if F is None:
        F = [[int(np.argmax(np.abs(Y[:, 0])))]] if p == 1 else hull_facets(Y)
    Z = np.array([lp_witness(signed_rows(A, I, f, k))[0] for f in F])
    return {"kind": "polytope", "rank": p, "Y": Y, "I": I, "F": np.array(F, dtype=np.int64),
            "Z": Z, "G": np.arange(len(F), dtype=np.int64)}


@functools.cache
def _instance(seed: int, p: int, vertices: bool) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(7000 + seed)
    A = random_attention(rng, 10, 8, scale=2.0)
    Y0 = A @ rng.standard_normal((8, p))
    m = A.shape[0]
    if not vertices:
        keep = list(range(m))
    elif p == 1:
        keep = [int(np.argmax(np.abs(Y0[:, 0])))]
    else:
        keep = sorted({int(v) % m for v in ConvexHull(np.vstack([Y0, -Y0])).vertices})
    cert = polytope_cert(A, Y0[keep], keep)
    assert reference_defect(cert["Y"], cert["F"]) is None, (seed, p)
    return A, cert


def instance(seed: int, p: int, vertices: bool = True) -> tuple[np.ndarray, dict]:
    """A random 10 x 8 softmax A and a polytope certificate on Y = A W (W 8 x p normal):
    Y the hull vertices of conv(+-A W) (all rows when ``vertices`` is False), labelled by
    their rows; fresh copies of the arrays on every call."""
    A, cert = _instance(seed, p, vertices)
    return A.copy(), {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in cert.items()}


def cross_cert(A: np.ndarray, I, Z: np.ndarray) -> dict:
    """The cross-polytope: Y = I_p labelled by rows I, one facet per sign pattern of the
    format (+e_i where sigma_i = +1, -e_i otherwise), Z's row s the witness of pattern s."""
    p = len(I)
    F = [[i if s == 1 else i + p for i, s in enumerate(sig)] for sig in patterns(p)]
    return {"kind": "polytope", "rank": p, "Y": np.eye(p), "I": np.asarray(I, dtype=np.int64),
            "F": np.array(F, dtype=np.int64), "Z": np.asarray(Z, dtype=np.float64),
            "G": np.arange(len(F), dtype=np.int64)}


def with_(cert: dict, **over) -> dict:
    out = dict(cert)
    out.update(over)
    return {n: v for n, v in out.items() if v is not None}


def mirror(facet, k: int) -> list[int]:
    return [(int(x) + k) % (2 * k) for x in facet]


# --- 1. the construction and the reference agree with the kernel ---------------------------

@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_constructed_certificates_hold_with_vertices_and_with_interior_points(p):
    for vertices in (True, False):
        A, cert = instance(p, p, vertices)
        k = cert["Y"].shape[0]
        assert cert["F"].shape[1] == p and cert["I"].shape == (k,)
        if vertices and p > 1:  # every hull vertex of conv(+-Y) is a point of some facet
            assert set((cert["F"] % k).ravel().tolist()) == set(range(k))
        if not vertices:
            assert k == 10
        v = reference_value(A, cert)
        assert v > 0
        c = check_lower(A, cert, v / 2)
        assert c.status == "holds" and c.tiers_run == ("float64",) and c.tier == "float64"
        assert c.precision is None and c.eps == v / 2 and c.chi == 0
        assert_consistent(c, v, v / 2, p)
        assert c.margin.lo > 0


# --- 2. differential: every tier against exact Fractions -----------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_value_matches_exact_fractions_on_every_tier(seed):
    p = 1 + seed % 4
    A, cert = instance(seed, p, vertices=seed < 4)
    v = reference_value(A, cert)
    assert v > 0
    for eps, truth in ((v / 2, "holds"), (v - v / 2**60, "holds"), (v, "fails"),
                       (v + v / 2**60, "fails"), (2 * v, "fails")):
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_consistent(c, v, eps, p)
            assert c.value is not None
            if tier in ("auto", "exact"):
                assert c.status == truth, (tier, eps / v)
            if tier == "arb" and eps != v:
                assert c.status == truth and c.precision == 128 and c.tiers_run == ("arb",)
            if tier == "float64" and eps in (v / 2, 2 * v):
                assert c.status == truth
            if tier == "exact":
                assert c.value.lo == c.value.hi == v and c.tiers_run == ("exact",)
            if tier == "auto":
                assert c.tiers_run == ("float64", "arb", "exact")[:len(c.tiers_run)]
            width = c.value.hi - c.value.lo
            assert width <= {"float64": Fraction(1, 2**40)}.get(c.tier, Fraction(1, 2**100))


@pytest.mark.parametrize("seed", [0, 5])
def test_blocked_products_give_the_same_values_on_every_tier(seed, monkeypatch):
    """The value tiers multiply witnesses by rows in blocks (memory bounded); blocks of one
    or three products must give the verdicts of a single block, enclosures that contain the
    exact value (a float product's rounding depends on its shape, and is charged a priori
    whatever it is), and the exact tier the same number."""
    import softrank.certify.lower.polytope as kernel

    A, cert = instance(seed, 3, vertices=True)
    v = reference_value(A, cert)
    whole = {tier: check_lower(A, cert, v / 2, tier=tier) for tier in TIERS}
    for size in (1, 3):
        monkeypatch.setattr(kernel, "BLOCK_ENTRIES", size)
        for tier in TIERS:
            c = check_lower(A, cert, v / 2, tier=tier)
            assert (c.status, c.tier) == (whole[tier].status, whole[tier].tier)
            assert c.value.lo <= v <= c.value.hi
            if c.tier == "exact":
                assert c.value == whole[tier].value
        assert check_lower(A, cert, v, tier="exact").status == "fails"


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_ties_fail_and_a_tiny_fraction_below_holds_only_when_proved(p):
    A, cert = instance(10 + p, p)
    v = reference_value(A, cert)
    below, above = v - Fraction(1, 2**80), v + Fraction(1, 2**80)
    for tier in TIERS:
        tie = check_lower(A, cert, v, tier=tier)
        assert_consistent(tie, v, v, p)
        assert tie.status != "holds"  # a margin of exactly 0 is not a proof
        lo = check_lower(A, cert, below, tier=tier)
        assert_consistent(lo, v, below, p)
        hi = check_lower(A, cert, above, tier=tier)
        assert_consistent(hi, v, above, p)
        if tier == "float64":  # 2^-80 is far inside the a-priori radius: never decided
            assert lo.status == hi.status == tie.status == "undecided"
        else:
            assert lo.status == "holds" and hi.status == "fails", tier
    for tier in ("auto", "exact"):
        c = check_lower(A, cert, v, tier=tier)
        assert c.status == "fails" and c.margin.hi == 0 and c.margin.lo <= 0
    assert check_lower(A, cert, below).margin.lo > 0


@pytest.mark.parametrize("d_sign", [-1, 1])
def test_plain_float_lands_on_the_wrong_side_but_the_kernel_does_not(d_sign):
    """Cross-polytope p = 2 with rows [1, 0, d, d, 0, 0] and [0, 1, 0, 0, d, d], d = +-2^-60,
    and witnesses of +-1 entries: every labelled value is exactly 1 + 2d, while any float64
    summation order gives exactly 1.0.  d < 0: plain float64 says value > t for t = 1 - 2^-60
    (and t = the exact value), which is false.  d > 0: plain float64 says value <= 1, but the
    value is 1 + 2^-59 > 1."""
    d = d_sign * 2.0**-60
    A = np.array([[1.0, 0.0, d, d, 0.0, 0.0],
                  [0.0, 1.0, 0.0, 0.0, d, d],
                  [0.25, 0.25, 0.25, 0.25, 0.0, 0.0]])
    Z = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                  [1.0, -1.0, 1.0, 1.0, -1.0, -1.0]])
    cert = cross_cert(A, [0, 1], Z)
    assert cert["F"].tolist() == [[0, 1], [0, 3]]
    v = reference_value(A, cert)
    assert v == 1 + 2 * Fraction(d)
    fv = plain_float_value(A, cert)
    assert fv == 1.0
    if d < 0:
        for t in (v, Fraction(1) - Fraction(1, 2**60)):
            assert fv > t >= v  # plain float64 is fooled here
            for tier in TIERS:
                c = check_lower(A, cert, t, tier=tier)
                assert_consistent(c, v, t, 2)
                assert c.status != "holds", (tier, t)
            assert check_lower(A, cert, t).status == "fails"
            assert check_lower(A, cert, t / 2, chi=t / 2).status == "fails"
        assert check_lower(A, cert, v - Fraction(1, 2**70)).status == "holds"
    else:
        t = Fraction(1)
        assert not fv > t and v > t  # plain float64 says fails; the value is above t
        c = check_lower(A, cert, t, tier="float64")
        assert c.status == "undecided" and c.value.lo <= v <= c.value.hi
        for tier in ("auto", "arb", "exact"):
            c = check_lower(A, cert, t, tier=tier)
            assert c.status == "holds" and c.margin.lo > 0, tier
        assert check_lower(A, cert, v).status == "fails"


def test_perturbed_witnesses_near_the_boundary_never_hold_where_plain_float_would():
    """Dyadic 2^-45 perturbations of LP witnesses on a p = 3 instance: whenever the plain
    float64 minimum exceeds the exact one, t = the exact value is a trap; the kernel must
    never say holds there, and auto says fails."""
    A, cert0 = instance(20, 3)
    rng = np.random.default_rng(21)
    traps = 0
    for _ in range(60):
        Z = np.clip(cert0["Z"] + rng.integers(-2**10, 2**10, size=cert0["Z"].shape) * 2.0**-45,
                    -1.0, 1.0)
        cert = with_(cert0, Z=Z)
        v = reference_value(A, cert)
        fv = plain_float_value(A, cert)
        if not Fraction(fv) > v:
            continue
        traps += 1
        for tier in TIERS:
            c = check_lower(A, cert, v, tier=tier)
            assert_consistent(c, v, v, 3)
            assert c.status != "holds", tier
        assert check_lower(A, cert, v).status == "fails"
    assert traps >= 10, traps  # the trap is exercised


@pytest.mark.parametrize("seed", range(4))
def test_enclosures_with_wild_scales_subnormals_and_overflow(seed):
    """A across 2^-600 .. 2^600 and witnesses down to subnormals on a random hull (arb's
    128-bit products are then inexact, so its mirror-sign endpoints matter); seed 3: entries
    near 1e308 whose float64 sums overflow.  Every tier that reports a value encloses the
    exact one, and auto decides."""
    rng = np.random.default_rng(600 + seed)
    m, N, p = 4, 5, 2 + seed % 2
    A = rng.standard_normal((m, N)) * 2.0 ** rng.integers(-600, 600, size=(m, N))
    Y = rng.standard_normal((7, p))
    F = np.array(hull_facets(Y), dtype=np.int64)
    f = len(F)
    Z = rng.uniform(-1, 1, size=(f, N)) * 2.0 ** rng.integers(-1070, 1, size=(f, N))
    Z[0, 0] = 5e-324  # the smallest subnormal
    if seed == 3:
        A = np.full((m, N), 1.5e308) * np.sign(rng.standard_normal((m, N)))
        Z = np.ones((f, N))
        Z[:, 0] = -1.0
    cert = {"kind": "polytope", "rank": p, "Y": Y, "I": rng.integers(0, m, size=7), "F": F,
            "Z": Z, "G": np.arange(f)}
    assert reference_defect(Y, F) is None
    v = reference_value(A, cert)
    eps_list = [Fraction(1, 2**70), Fraction(10) ** -300]
    if v > 0:
        eps_list += [v, v - v / 2**60]
    for eps in eps_list:
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_consistent(c, v, eps, p)
            if tier in ("auto", "exact"):
                assert c.status == ("holds" if v > eps else "fails")
    if seed == 3:  # float64 cannot form the sums: it reports nothing rather than a wrong value
        c = check_lower(A, cert, Fraction(1, 2), tier="float64")
        assert c.value is None and c.status == "undecided" and c.tiers_run == ("float64",)


# --- 3. invariances: the same certificate written differently -------------------------------

def test_rewritings_of_a_certificate_keep_its_exact_value():
    """Points within a facet reordered; representatives swapped for their mirrors (witness
    negated); Y's rows permuted (F re-indexed); witnesses shared and Z's rows permuted; A's
    rows duplicated with labels spread over the copies: the exact value is unchanged, and
    the kernel's exact tier reports the reference value every time."""
    A, cert = instance(30, 3, vertices=False)
    k, f = cert["Y"].shape[0], len(cert["F"])
    v = reference_value(A, cert)
    rng = np.random.default_rng(31)
    variants: list[tuple[np.ndarray, dict]] = []
    F = np.array([rng.permutation(r) for r in cert["F"]])
    variants.append((A, with_(cert, F=F)))
    swap = rng.random(f) < 0.5
    F2 = np.where(swap[:, None], (cert["F"] + k) % (2 * k), cert["F"])
    Z2 = np.where(swap[:, None], -cert["Z"], cert["Z"])
    variants.append((A, with_(cert, F=F2, Z=Z2)))
    perm = rng.permutation(k)  # new point j is old point perm[j]
    inv = np.argsort(perm)
    F3 = inv[cert["F"] % k] + k * (cert["F"] >= k)
    variants.append((A, with_(cert, Y=cert["Y"][perm], I=cert["I"][perm], F=F3)))
    zperm = rng.permutation(f)  # Z's row s is old row zperm[s]
    variants.append((A, with_(cert, Z=cert["Z"][zperm], G=np.argsort(zperm))))
    A2 = np.vstack([A, A])
    I2 = cert["I"] + A.shape[0] * (rng.random(k) < 0.5)
    variants.append((A2, with_(cert, I=I2)))
    for tier in TIERS:
        for B, c2 in variants:
            assert reference_value(B, c2) == v
            assert reference_defect(c2["Y"], c2["F"]) is None
            c = check_lower(B, c2, v / 2, tier=tier)
            assert c.status == "holds" and c.value.lo <= v <= c.value.hi
            if tier == "exact":
                assert c.value.lo == v
    # two facets sharing one witness row (LP over both facets' labels; row r2 unused)
    for r1, r2 in itertools.combinations(range(f), 2):
        z = lp_witness(np.vstack([signed_rows(A, cert["I"], cert["F"][r], k)
                                  for r in (r1, r2)]))[0]
        Zs, Gs = cert["Z"].copy(), np.arange(f)
        Zs[r1], Gs[r2] = z, r1
        shared = with_(cert, Z=Zs, G=Gs)
        w = reference_value(A, shared)
        if w > 0:
            break
    assert w > 0
    for tier in TIERS:
        c = check_lower(A, shared, w / 2, tier=tier)
        assert_consistent(c, w, w / 2, 3)
        assert c.status == "holds"
    assert check_lower(A, shared, w, tier="exact").value.lo == w


def test_rank_one_sphere_is_two_points():
    """p = 1: the facet is the point of largest |y| (either sign, either representative)."""
    A, cert = instance(40, 1, vertices=False)
    k = cert["Y"].shape[0]
    j = int(cert["F"][0, 0])
    v = reference_value(A, cert)
    assert check_lower(A, cert, v - TINY).status == "holds"
    mirrored = with_(cert, F=np.array([[j + k]]), Z=-cert["Z"])
    assert reference_value(A, mirrored) == v
    assert check_lower(A, mirrored, v - TINY, tier="exact").value.lo == v
    flipped = with_(cert, Y=-cert["Y"])  # the sign of Y does not matter
    assert check_lower(A, flipped, v - TINY).status == "holds"
    other = (j + 1) % k  # not the largest |y|: the listed point is not a facet
    c = check_lower(A, with_(cert, F=np.array([[other]])), TINY)
    assert c.status == "fails" and c.value is None and "strictly inside" in c.detail["reason"]
    c = check_lower(A, with_(cert, F=np.array([[j], [other]]), G=np.array([0, 0])), TINY)
    assert c.status == "fails" and c.value is None and "rank-1" in c.detail["reason"]
    c = check_lower(A, with_(cert, F=np.array([[j], [j + k]]), G=np.array([0, 0])), TINY)
    assert c.status == "fails" and c.value is None and "same points" in c.detail["reason"]
    # a second point of the same |y| (with the same or the opposite sign) is on the facet
    for s in (1.0, -1.0):
        Y2 = np.vstack([cert["Y"], s * cert["Y"][j:j + 1]])
        c = check_lower(A, with_(cert, Y=Y2, I=np.r_[cert["I"], 0]), TINY)
        assert c.status == "fails" and c.value is None
        assert "strictly inside" in c.detail["reason"]


# --- 4. invalid facet structures ------------------------------------------------------------

def _drop(cert: dict, r: int) -> dict:
    keep = [i for i in range(len(cert["F"])) if i != r]
    return with_(cert, F=cert["F"][keep], Z=cert["Z"][keep], G=np.arange(len(keep)))


def _append(cert: dict, facet, z: np.ndarray) -> dict:
    """Lists ``facet`` once more, with its own witness row z (so the value test still
    passes: the defect is the structure alone)."""
    q = len(cert["Z"])
    return with_(cert, F=np.vstack([cert["F"], np.asarray(facet)[None, :]]),
                 Z=np.vstack([cert["Z"], z[None, :]]), G=np.r_[cert["G"], q])


def _replace_by_mirror(cert: dict) -> dict:
    """Facet 1 replaced by the mirror of facet 0 (witness -z_0)."""
    F, Z = cert["F"].copy(), cert["Z"].copy()
    F[1] = mirror(F[0], cert["Y"].shape[0])
    Z[cert["G"][1]] = -Z[cert["G"][0]]
    return with_(cert, F=F, Z=Z)


def _zero_point(cert: dict) -> dict:
    Y = cert["Y"].copy()
    Y[int(cert["F"][0, 0]) % len(Y)] = 0.0
    return with_(cert, Y=Y)


def _insert_point(cert: dict, y: np.ndarray, label: int) -> dict:
    """Appends point y as index k (mirror indices x >= k move to x + 1)."""
    k = cert["Y"].shape[0]
    F = cert["F"] + (cert["F"] >= k)
    return with_(cert, Y=np.vstack([cert["Y"], y[None, :]]), I=np.r_[cert["I"], label], F=F)


def _moved(cert: dict, factor: float) -> dict:
    """Y[j] scaled by ``factor`` for the first j where that puts a point outside (or onto)
    some listed facet's hyperplane, by the reference."""
    for j in range(cert["Y"].shape[0]):
        Y = cert["Y"].copy()
        Y[j] *= factor
        if reference_defect(Y, cert["F"]) == "outside":
            return with_(cert, Y=Y)
    raise AssertionError("no point could be moved off its facets")


STRUCTURE_EDITS = {
    "dropped facet 0": (lambda c: _drop(c, 0), "ridge", "ridge"),
    "dropped last facet": (lambda c: _drop(c, len(c["F"]) - 1), "ridge", "ridge"),
    "doubled facet": (lambda c: _append(c, c["F"][-1], c["Z"][c["G"][-1]]), "duplicate",
                      "same points"),
    "doubled facet reordered": (lambda c: _append(c, c["F"][-1][::-1], c["Z"][c["G"][-1]]),
                                "duplicate", "same points"),
    "facet and its mirror": (lambda c: _append(c, mirror(c["F"][0], c["Y"].shape[0]),
                                               -c["Z"][c["G"][0]]), "duplicate", "same points"),
    "facet replaced by another's mirror": (_replace_by_mirror, "duplicate", "same points"),
    "vertex pushed out": (lambda c: _moved(c, 3.0), "outside", "strictly inside"),
    "vertex pulled in": (lambda c: _moved(c, 0.25), "outside", "strictly inside"),
    "duplicated vertex": (lambda c: _insert_point(c, c["Y"][int(c["F"][0, 0]) % len(c["Y"])],
                                                  int(c["I"][0])), "outside", "strictly inside"),
    "mirrored vertex": (lambda c: _insert_point(c, -c["Y"][int(c["F"][0, 0]) % len(c["Y"])],
                                                int(c["I"][1])), "outside", "strictly inside"),
    "vertex scaled to zero": (_zero_point, "singular", "hyperplane missing 0"),
}


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("name", list(STRUCTURE_EDITS))
def test_invalid_facet_structures_fail_without_a_value(name, p):
    """Each edit leaves witnesses that would pass the value test at eps 2^-60; the kernel
    must still fail, with value None and a reason naming the defect (the reference agrees
    the structure is wrong)."""
    A, cert = instance(50 + p, p, vertices=False)  # interior points too: room to move
    assert check_lower(A, cert, TINY).status == "holds"
    edit, ref, words = STRUCTURE_EDITS[name]
    bad = edit(cert)
    assert reference_defect(bad["Y"], bad["F"]) == ref
    assert reference_value(A, bad) > TINY  # the witnesses alone would pass
    for tier in TIERS:
        c = check_lower(A, bad, TINY, tier=tier)
        assert c.status == "fails" and c.value is None and c.margin is None, (tier, c)
        assert c.kind == "polytope" and c.rank == p and c.threshold == TINY
        reason = c.detail["reason"]
        assert isinstance(reason, str) and reason
        assert words in reason, reason


@pytest.mark.parametrize("p,seed", [(2, 123), (3, 120), (4, 120)])
def test_a_reflex_vertex_is_refused(p, seed):
    """Only hull vertices, one pulled in to a quarter: the listed facets still close up,
    but the points beyond some facet's hyperplane are now other facets' own points (there
    are no interior points), so every point of every facet must be tested against every
    other facet."""
    A, cert = instance(seed, p)
    k = cert["Y"].shape[0]
    assert set((cert["F"] % k).ravel().tolist()) == set(range(k))
    for j in range(k):
        Y = cert["Y"].copy()
        Y[j] *= 0.25
        bad = with_(cert, Y=Y)
        assert reference_defect(Y, cert["F"]) == "outside"
        c = check_lower(A, bad, TINY)
        assert c.status == "fails" and c.value is None, (j, c)
        assert "strictly inside" in c.detail["reason"]


def _polygon(k: int) -> tuple[np.ndarray, dict]:
    """A = Y = k points on the upper unit half-circle (2k-gon conv(+-Y)), labelled by
    themselves; facet r = {r, r + 1} (the last one {k - 1, k}, ending at -Y[0]); witness the
    facet's normal scaled to max-norm 1, so every labelled value is 1 / ||n||_inf."""
    th = np.pi * np.arange(k) / k
    Y = np.c_[np.cos(th), np.sin(th)]
    F = np.array([[r, r + 1] for r in range(k - 1)] + [[k - 1, k]], dtype=np.int64)
    P = np.vstack([Y, -Y])
    Z = np.array([n / np.abs(n).max() for n in (np.linalg.solve(P[f], np.ones(2)) for f in F)])
    return Y, {"kind": "polytope", "rank": 2, "Y": Y, "I": np.arange(k), "F": F, "Z": Z,
               "G": np.arange(k)}


def test_many_facets_in_several_blocks():
    """k = 4095 polygon points plus one extra point (k = 4096 = MAX_POINTS), 4095 facets:
    the (point, facet) pairs are checked in blocks.  The extra point sits at the midpoint
    of facet r's edge scaled by 1 -+ 2^-40: inside, the certificate holds; outside, it
    violates facet r alone (by about 1e-12; every other facet clears it by far more), so
    the reason must name exactly that facet and point, in the first or the last block."""
    k = MAX_POINTS - 1
    A, cert = _polygon(k)
    for r, s in ((3500, -1), (100, 1), (3500, 1)):
        y = (cert["Y"][r] + cert["Y"][r + 1]) / 2 * (1 + s * 2.0**-40)
        c = check_lower(A, _insert_point(cert, y, 0), "1/4")
        if s < 0:
            assert c.status == "holds" and c.value.lo > Fraction(1, 2)
        else:
            assert c.status == "fails" and c.value is None
            assert c.detail["reason"].startswith(f"facet {r}: point {k} "), c.detail["reason"]


def test_singular_facets_fail():
    """Cross-polytope p = 2 (facets {e1, e2}, {e1, -e2}) with the second point moved onto
    the line through the first and 0, or to 0: the facet's points do not span a hyperplane
    missing 0.  Also p = 3 with one point in the plane of two others."""
    A = np.eye(3)
    good = cross_cert(A, [0, 1], np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]))
    assert check_lower(A, good, "1/2").status == "holds"
    for y1 in ([2.0, 0.0], [-0.5, 0.0], [0.0, 0.0]):
        bad = with_(good, Y=np.array([[1.0, 0.0], y1]))
        assert reference_defect(bad["Y"], bad["F"]) == "singular"
        for tier in TIERS:
            c = check_lower(A, bad, TINY, tier=tier)
            assert c.status == "fails" and c.value is None
            assert "hyperplane missing 0" in c.detail["reason"], c.detail["reason"]
    # p = 3: the octahedron's combinatorics with e3 moved to e1 + e2 (ridges still close
    # up; the facets through it are singular)
    W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    Z3 = np.array(patterns(3), dtype=np.float64)
    octa = cross_cert(np.eye(3), [0, 1, 2], Z3)
    assert check_lower(np.eye(3), octa, "1/2").status == "holds"
    bad = with_(octa, Y=W)
    assert reference_defect(W, bad["F"]) == "singular"
    c = check_lower(np.eye(3), bad, TINY)
    assert c.status == "fails" and c.value is None
    assert "hyperplane missing 0" in c.detail["reason"]


@pytest.mark.parametrize("y,ok", [
    ([0.5, 0.5], False),                    # on the facet {e1, e2}: not strictly inside
    ([0.5, -0.5], False),                   # on {e1, -e2}
    ([-0.5, -0.5], False),                  # on the mirror facet: |n . y| = 1
    ([0.75, 0.75], False),                  # outside
    ([1.0, 0.0], False),                    # a copy of e1
    ([0.5, 0.5 + 2.0**-53], False),         # n . y = 1 + 2^-53
    ([0.5, 0.5 - 2.0**-54], True),          # n . y = 1 - 2^-54: float64 rounds it to 1
    ([1 - 2.0**-53, 0.0], True),
    ([0.25, -0.25], True),
    ([0.0, 0.0], True),
])
def test_extra_points_on_or_near_a_hyperplane_are_decided_exactly(y, ok):
    """An extra point (not on any facet) of the p = 2 cross-polytope: accepted iff
    |n . y| < 1 for every facet normal, exactly; the float64 prefilter cannot decide the
    near-1 cases, so they reach the exact comparison.  Also scaled by 3 and 5 (normals 1/3,
    1/5 are not floats: the rounded normal alone can put a point on the hyperplane inside),
    by 2^-1070 (subnormal Y: the normals overflow float64) and by 2^1000; a scale is used
    only where every scaled point is exact."""
    A = np.eye(3)
    base = cross_cert(A, [0, 1], np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]))
    Y1 = np.vstack([np.eye(2), np.array(y)[None, :]])
    scales = [s for s in (1.0, 3.0, 5.0, 2.0**-1070, 2.0**1000)
              if all(q(x * s) == q(x) * q(s) for x in Y1.ravel())]
    assert 1.0 in scales and 2.0**1000 in scales  # subnormals cannot hold every point
    for scale in scales:
        Y = Y1 * scale
        cert = _insert_point(with_(base, Y=np.eye(2) * scale), np.array(y) * scale, 2)
        assert np.array_equal(cert["Y"], Y)
        assert (reference_defect(cert["Y"], cert["F"]) is None) == ok
        for tier in ("auto", "float64", "exact"):
            c = check_lower(A, cert, "1/2", tier=tier)
            if ok:
                assert c.status == "holds" and c.value.lo <= 1 <= c.value.hi, (scale, tier)
            else:
                assert c.status == "fails" and c.value is None, (scale, tier)
                assert "strictly inside" in c.detail["reason"]


def test_points_on_a_hyperplane_with_a_non_float_normal_are_refused():
    """Y = 49 I_2: the normals are (1/49, +-1/49), not floats, and 49 fl(1/49) < 1.  The
    points (49/16, 735/16) and (49/16, -735/16) lie exactly on facet hyperplanes, yet the
    float64 dot product with the rounded normal is 1 - 2^-53 in every summation order, with
    or without FMA: only the ball radius (or the exact comparison) refuses them.  One ulp
    inside is accepted."""
    A = np.eye(3)
    base = cross_cert(A, [0, 1], np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]))
    base = with_(base, Y=49.0 * np.eye(2))
    nf = q(float(Fraction(1, 49)))
    for y, ok in (([3.0625, 45.9375], False), ([3.0625, -45.9375], False),
                  ([3.0625, float(np.nextafter(45.9375, 0.0))], True),
                  ([-3.0625, float(np.nextafter(-45.9375, 0.0))], True)):
        a, b = q(abs(y[0])) * nf, q(abs(y[1])) * nf
        if not ok:
            assert (q(abs(y[0])) + q(abs(y[1]))) / 49 == 1
            # every rounding of the dot product with the rounded normal lands below 1
            for v in (q(float(a)) + q(float(b)), a + q(float(b)), q(float(a)) + b, a + b):
                assert float(v) < 1.0
        cert = _insert_point(base, np.array(y), 2)
        assert (reference_defect(cert["Y"], cert["F"]) is None) == ok
        for tier in ("auto", "exact"):
            c = check_lower(A, cert, "1/2", tier=tier)
            if ok:
                assert c.status == "holds", (y, tier)
            else:
                assert c.status == "fails" and c.value is None, (y, tier)
                assert "strictly inside" in c.detail["reason"]


def test_wrong_witnesses_and_labels_fail_through_the_value():
    """The facets are fine but a witness is negated, or one label's row is changed so that
    the exact value drops below t: fails with a value enclosing the reference."""
    A, cert = instance(60, 3)
    k = cert["Y"].shape[0]
    v = reference_value(A, cert)
    t = v / 2
    Z = cert["Z"].copy()
    Z[-1] = -Z[-1]
    neg = with_(cert, Z=Z)
    w = reference_value(A, neg)
    assert w < 0
    for tier in TIERS:
        c = check_lower(A, neg, t, tier=tier)
        assert_consistent(c, w, t, 3)
        assert c.status == "fails" and c.value is not None and "reason" not in c.detail
    # a label moved to another row: find one (point, row) whose value falls below t
    used = sorted(set((cert["F"] % k).ravel().tolist()))
    found = 0
    for j, i in itertools.product(used, range(A.shape[0])):
        if i == cert["I"][j]:
            continue
        I = cert["I"].copy()
        I[j] = i
        relabelled = with_(cert, I=I)
        w = reference_value(A, relabelled)
        if w > t:
            continue
        found += 1
        for tier in TIERS:
            c = check_lower(A, relabelled, t, tier=tier)
            assert_consistent(c, w, t, 3)
            assert c.status in (("fails", "undecided") if tier == "float64" else ("fails",))
        if found >= 3:
            break
    assert found >= 3


# --- 5. refused inputs ----------------------------------------------------------------------

def _set(X, idx, val, dtype=np.float64):
    X = np.array(X, dtype=dtype)
    X[idx] = val
    return X


@functools.lru_cache(maxsize=1)
def _base():
    A, cert = instance(70, 3)
    assert check_lower(A, cert, "1e-3").status == "holds"
    return A, cert


def _k(c) -> int:
    return c["Y"].shape[0]


def _f(c) -> int:
    return len(c["F"])


@pytest.mark.parametrize("edit,field", [
    (lambda c: with_(c, rank=13), "lower.rank"),
    (lambda c: with_(c, rank=0), "lower.rank"),
    (lambda c: with_(c, rank=True), "lower.rank"),
    (lambda c: with_(c, rank=3.0), "lower.rank"),
    (lambda c: with_(c, rank=2), "lower.Y"),  # disagrees with Y's columns
    (lambda c: with_(c, rank=4), "lower.Y"),
    (lambda c: with_(c, Y=c["Y"][:, :2]), "lower.Y"),
    (lambda c: with_(c, Y=np.hstack([c["Y"], c["Y"][:, :1]])), "lower.Y"),
    (lambda c: with_(c, Y=_set(c["Y"], (1, 2), np.nan)), "lower.Y"),
    (lambda c: with_(c, Y=_set(c["Y"], (0, 0), np.inf)), "lower.Y"),
    (lambda c: with_(c, Y=_set(c["Y"], (2, 1), -np.inf)), "lower.Y"),
    (lambda c: with_(c, Y=c["Y"].ravel()), "lower.Y"),
    (lambda c: with_(c, Y=c["Y"][:0]), "lower.Y"),
    (lambda c: with_(c, Y=c["Y"].astype(str)), "lower.Y"),
    (lambda c: with_(c, Y=None), "lower.Y"),
    (lambda c: with_(c, I=_set(c["I"], 1, 10, np.int64)), "lower.I"),  # m = 10
    (lambda c: with_(c, I=_set(c["I"], 1, -1, np.int64)), "lower.I"),
    (lambda c: with_(c, I=c["I"][:-1]), "lower.I"),
    (lambda c: with_(c, I=np.r_[c["I"], 0]), "lower.I"),
    (lambda c: with_(c, I=c["I"].astype(np.float64)), "lower.I"),
    (lambda c: with_(c, I=c["I"][None, :]), "lower.I"),
    (lambda c: with_(c, I=c["I"] > 4), "lower.I"),
    (lambda c: with_(c, I=None), "lower.I"),
    (lambda c: with_(c, F=c["F"][:, :2]), "lower.F"),
    (lambda c: with_(c, F=np.hstack([c["F"], c["F"][:, :1]])), "lower.F"),
    (lambda c: with_(c, F=c["F"].ravel()), "lower.F"),
    (lambda c: with_(c, F=c["F"][:0]), "lower.F"),
    (lambda c: with_(c, F=_set(c["F"], (1, 0), 2 * _k(c), np.int64)), "lower.F"),
    (lambda c: with_(c, F=_set(c["F"], (1, 0), -1, np.int64)), "lower.F"),
    (lambda c: with_(c, F=_set(c["F"], (2, 2), c["F"][2, 0], np.int64)), "lower.F"),
    (lambda c: with_(c, F=c["F"].astype(np.float64)), "lower.F"),
    (lambda c: with_(c, F=[list(r) for r in c["F"][:-1]] + [[0, 1]]), "lower.F"),  # ragged
    (lambda c: with_(c, F=None), "lower.F"),
    (lambda c: with_(c, Z=_set(c["Z"], (1, 3), 1.5)), "lower.Z"),
    (lambda c: with_(c, Z=_set(c["Z"], (0, 0), ONE_UP)), "lower.Z"),
    (lambda c: with_(c, Z=_set(c["Z"], (2, 7), -ONE_UP)), "lower.Z"),
    (lambda c: with_(c, Z=_set(c["Z"], (1, 3), np.nan)), "lower.Z"),
    (lambda c: with_(c, Z=_set(c["Z"], (1, 3), np.inf)), "lower.Z"),
    (lambda c: with_(c, Z=c["Z"][:, :7]), "lower.Z"),
    (lambda c: with_(c, Z=np.hstack([c["Z"], np.zeros((_f(c), 1))])), "lower.Z"),
    (lambda c: with_(c, Z=np.vstack([c["Z"], c["Z"][:1]])), "lower.Z"),  # q = f + 1
    (lambda c: with_(c, Z=c["Z"][:0]), "lower.Z"),
    (lambda c: with_(c, Z=c["Z"].ravel()), "lower.Z"),
    (lambda c: with_(c, Z=None), "lower.Z"),
    (lambda c: with_(c, G=_set(c["G"], 0, _f(c), np.int64)), "lower.G"),  # q = f
    (lambda c: with_(c, G=_set(c["G"], 0, -1, np.int64)), "lower.G"),
    (lambda c: with_(c, Z=c["Z"][:2], G=_set(np.zeros(_f(c)), 0, 2, np.int64)), "lower.G"),
    (lambda c: with_(c, G=c["G"][:-1]), "lower.G"),
    (lambda c: with_(c, G=np.r_[c["G"], 0]), "lower.G"),
    (lambda c: with_(c, G=c["G"].astype(np.float64)), "lower.G"),
    (lambda c: with_(c, G=c["G"][None, :]), "lower.G"),
    (lambda c: with_(c, G=None), "lower.G"),
    (lambda c: with_(c, X=np.eye(3)), "lower.X"),
])
def test_invalid_inputs_are_refused_naming_the_field(edit, field):
    A, cert = _base()
    for tier in ("auto", "exact"):
        with pytest.raises(InputError) as ei:
            check_lower(A, edit(cert), "1e-3", tier=tier)
        assert ei.value.field == field, str(ei.value)
        assert str(ei.value).startswith(f"{field}: ")


def test_refused_tolerances_and_limits():
    A, cert = _base()
    with pytest.raises(InputError) as ei:
        check_lower(A, cert, "1e-3", chi=-TINY)
    assert ei.value.field == "chi"
    with pytest.raises(InputError) as ei:
        check_lower(A, cert, 0)
    assert ei.value.field == "eps"
    assert MAX_RANK == 12 and MAX_POINTS == 4096
    # more facets than MAX_FACETS: refused by shape before any geometry
    many = {"kind": "polytope", "rank": 1, "Y": np.ones((1, 1)), "I": np.zeros(1, np.int64),
            "F": np.zeros((MAX_FACETS + 1, 1), np.int64), "Z": np.ones((1, 8)),
            "G": np.zeros(MAX_FACETS + 1, np.int64)}
    with pytest.raises(InputError) as ei:
        check_lower(A, many, "1/2")
    assert ei.value.field == "lower.F"
    # rank 13 is refused even with consistent arrays (the cross-polytope's first facet)
    A13 = np.eye(13)
    c13 = {"kind": "polytope", "rank": 13, "Y": np.eye(13), "I": np.arange(13),
           "F": np.arange(13)[None, :], "Z": np.ones((1, 13)), "G": np.zeros(1, np.int64)}
    with pytest.raises(InputError) as ei:
        check_lower(A13, c13, "1/2")
    assert ei.value.field == "lower.rank"
    # k = 4097 points refused; 4096 accepted (p = 1: the largest |y| is the facet)
    for k, ok in ((MAX_POINTS + 1, False), (MAX_POINTS, True)):
        Y = (np.arange(k, dtype=np.float64) + 1.0)[:, None] / k
        cert1 = {"kind": "polytope", "rank": 1, "Y": Y, "I": np.arange(k) % 10,
                 "F": np.array([[k - 1]]), "Z": np.ones((1, 8)), "G": np.zeros(1, np.int64)}
        if ok:
            c = check_lower(A, cert1, "1/2", tier="exact")
            assert c.status == "holds" and c.value.lo == reference_value(A, cert1)
        else:
            with pytest.raises(InputError) as ei:
                check_lower(A, cert1, "1/2")
            assert ei.value.field == "lower.Y"


def test_accepted_input_forms():
    """Entries exactly +-1 in Z, integer Y, narrow integer dtypes, lists, numpy ranks,
    repeated labels and unused witness rows are accepted and give the reference value."""
    A, cert = _base()
    Z = np.sign(cert["Z"])
    Z[Z == 0] = 1.0
    v = reference_value(A, with_(cert, Z=Z))
    c = check_lower(A, with_(cert, Z=Z, rank=np.int64(3), I=cert["I"].astype(np.int32),
                             F=cert["F"].astype(np.uint16), G=cert["G"].astype(np.int8)),
                    "1/1000", tier="exact")
    assert c.value.lo == v
    lists = with_(cert, Y=cert["Y"].tolist(), I=cert["I"].tolist(), F=cert["F"].tolist(),
                  Z=cert["Z"].tolist(), G=cert["G"].tolist())
    w = reference_value(A, cert)
    assert check_lower(A, lists, "1/1000", tier="exact").value.lo == w
    # integer Y: the 2-D cross-polytope with a repeated label and an unused witness row
    cross = {"kind": "polytope", "rank": 2, "Y": np.array([[2, 0], [0, 2]]),
             "I": np.array([4, 4]), "F": np.array([[0, 1], [0, 3]]),
             "Z": np.vstack([np.ones(8), np.ones(8)]), "G": np.array([1, 1])}
    c = check_lower(A, cross, "1/1000", tier="exact")
    # the two labels are the same row: a . z and -a . z cannot both be positive
    assert c.status == "fails" and c.value.lo == reference_value(A, cross) < 0


# --- 6. soundness ---------------------------------------------------------------------------

def _row_space_fit(A: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rank-(p - 1) B = C V (rows in the row space of V) minimising ||A - B||_row1 (one
    HiGHS LP; untrusted): returns (C, V)."""
    m, N = A.shape
    r = V.shape[0]
    nc, ns = m * r, m * N
    # variables: C (m x r), S (m x N) >= |A - C V|, tau >= every row sum of S
    rows, rhs = [], []
    for i in range(m):
        for j in range(N):
            for sgn in (1.0, -1.0):
                a = np.zeros(nc + ns + 1)
                a[i * r:(i + 1) * r] = -sgn * V[:, j]
                a[nc + i * N + j] = -1.0
                rows.append(a)
                rhs.append(-sgn * A[i, j])
        a = np.zeros(nc + ns + 1)
        a[nc + i * N:nc + (i + 1) * N] = 1.0
        a[-1] = -1.0
        rows.append(a)
        rhs.append(0.0)
    c = np.zeros(nc + ns + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs),
                  bounds=[(None, None)] * nc + [(0, None)] * (ns + 1), method="highs")
    assert res.status == 0
    return res.x[:nc].reshape(m, r), V


@pytest.mark.parametrize("p", [2, 3, 4])
def test_no_rank_deficient_fit_comes_within_a_proved_threshold(p):
    """Where the kernel proves rank >= p at t (here t 2^-40 below the exact value, so the
    bound is as tight as this certificate allows), every rank-(p - 1) B has
    ||A - B||_row1 > t: the truncated SVD (exactly, and check_upper must say fails), and the
    best fits (LP) on the row spaces of the top singular vectors and of every (p - 1)-subset
    of rows (sampled for p = 4), errors computed exactly from the fits' factors."""
    A, cert = instance(80 + p, p)
    v = reference_value(A, cert)
    t = v - Fraction(1, 2**40)
    c = check_lower(A, cert, t)
    assert c.status == "holds"
    U, Vt = tsvd_witness(A, p - 1)
    assert exact_row1(A, (U, Vt)) > t
    assert check_upper(A, U, Vt, t).status == "fails"
    spaces = [Vt]
    subsets = list(itertools.combinations(range(A.shape[0]), p - 1))
    rng = np.random.default_rng(p)
    if len(subsets) > 24:
        subsets = [subsets[i] for i in rng.choice(len(subsets), 24, replace=False)]
    spaces += [A[list(J)] for J in subsets]
    best = None
    for V in spaces:
        C, V = _row_space_fit(A, V)
        err = exact_row1(A, (C, V))
        assert err > t, (float(err), float(t))
        best = err if best is None else min(best, err)
    assert best is not None and best > t


@pytest.mark.parametrize("seed", range(6))
def test_rank_deficient_labels_never_hold_whatever_the_geometry(seed):
    """The geometry Y is arbitrary (random points, not A W) and every facet takes its own
    best LP witness.  When the labelled rows span fewer than p dimensions (A with N = p - 1
    columns, or all labels drawn from p - 1 rows), B = A itself has rank < p, so by the
    theorem the exact value is <= 0 for every valid structure, and the kernel must fail at
    any t > 0.  Typically most facets alone look fine; dropping those with value <= 0 gives
    a positive minimum that only the sphere check refutes."""
    rng = np.random.default_rng(9000 + seed)
    p = 2 + seed % 3
    if seed < 3:
        A = rng.standard_normal((7, p - 1))
        labels = rng.integers(0, 7, size=9)
    else:
        A = random_attention(rng, 7, 8)
        labels = rng.choice(rng.choice(7, p - 1, replace=False), size=9)
    Y = rng.standard_normal((9, p))
    cert = polytope_cert(A, Y, labels)
    # with N = p - 1 columns the public check refuses rank p as input (p > min(m, N)); the
    # kernel's own inequality is exercised without that input check
    check = check_lower_any_rank if seed < 3 else check_lower
    if seed < 3:
        with pytest.raises(InputError) as err:
            check_lower(A, cert, TINY)
        assert err.value.field == "lower.rank"
    assert reference_defect(cert["Y"], cert["F"]) is None
    v = reference_value(A, cert)
    assert v <= 0
    for tier in TIERS:
        c = check(A, cert, TINY, tier=tier)
        assert_consistent(c, v, TINY, p)
        assert c.status != "holds"
    assert check(A, cert, TINY).status == "fails"
    # keep only the facets whose own witness is positive: a plausible-looking partial sphere
    good = [r for r, f in enumerate(cert["F"])
            if reference_value(A, with_(cert, F=cert["F"][[r]], Z=cert["Z"][[r]],
                                        G=np.zeros(1, np.int64))) > 0]
    assert 0 < len(good) < len(cert["F"])
    part = with_(cert, F=cert["F"][good], Z=cert["Z"][good], G=np.arange(len(good)))
    assert reference_value(A, part) > 0
    assert reference_defect(Y, part["F"]) == "ridge"
    for tier in TIERS:
        c = check(A, part, TINY, tier=tier)
        assert c.status == "fails" and c.value is None, c
        assert "ridge" in c.detail["reason"]


# --- 7. rowset is the cross-polytope --------------------------------------------------------

def lp_rowset(A: np.ndarray, I) -> np.ndarray:
    """Per sign pattern of the format, the LP-best z for rows I (untrusted)."""
    M = A[list(I)]
    return np.array([lp_witness(np.array(sig, dtype=np.float64)[:, None] * M)[0]
                     for sig in patterns(len(I))])


@pytest.mark.parametrize("p", [1, 2, 3])
def test_rowset_certificates_are_cross_polytope_certificates(p):
    rng = np.random.default_rng(100 + p)
    A = random_attention(rng, 10, 8)
    I = [int(i) for i in rng.permutation(10)[:p]]  # not sorted
    Z = lp_rowset(A, I)
    rs = {"kind": "rowset", "rank": p, "I": np.array(I), "Z": Z}
    pc = cross_cert(A, I, Z)
    assert reference_defect(pc["Y"], pc["F"]) is None
    v = exact_orthant_min([[q(a) for a in A[i]] for i in I], Z)
    assert v > 0 and reference_value(A, pc) == v
    for eps in (v / 2, v - Fraction(1, 2**70), v, v + Fraction(1, 2**70), 2 * v):
        for tier in ("auto", "exact"):
            a = check_lower(A, rs, eps, tier=tier)
            b = check_lower(A, pc, eps, tier=tier)
            assert a.status == b.status == ("holds" if v > eps else "fails"), (tier, eps / v)
            if tier == "exact":
                assert a.value == b.value and b.value.lo == v
        for tier in ("float64", "arb"):
            b = check_lower(A, pc, eps, tier=tier)
            assert_consistent(b, v, eps, p)
    # a rowset Z whose rows are in the wrong pattern order is a wrong polytope witness too
    if p == 3:
        bad = Z[[0, 2, 1, 3]]
        a = check_lower(A, {"kind": "rowset", "rank": 3, "I": np.array(I), "Z": bad}, v / 2,
                        tier="exact")
        b = check_lower(A, cross_cert(A, I, bad), v / 2, tier="exact")
        assert a.value == b.value and a.status == b.status


def test_rank_twelve_cross_polytope_is_accepted_and_fast():
    """p = 12 = MAX_RANK: 2048 facets; A = I_12, the witness of a facet its sign vector,
    so every labelled value is exactly 1."""
    p = MAX_RANK
    A = np.eye(p)
    S = np.array(patterns(p), dtype=np.float64)
    cert = cross_cert(A, list(range(p)), S)
    for eps, status in (("1/2", "holds"), (2, "fails")):
        c = check_lower(A, cert, eps)
        assert c.status == status and c.value.lo <= 1 <= c.value.hi
        assert c.tiers_run == ("float64",)
    # the tie goes to the exact tier directly (auto would spend seconds in arb: 24,576
    # arbutil.endpoints calls at ~0.3 ms each, against ~20 ms for the exact tier)
    c = check_lower(A, cert, 1, tier="exact")
    assert c.status == "fails" and c.value.lo == c.value.hi == 1
    # one facet dropped (and its witness): a hole in the 11-sphere
    short = with_(cert, F=cert["F"][1:], Z=S[1:], G=np.arange(len(S) - 1))
    c = check_lower(A, short, "1/2")
    assert c.status == "fails" and c.value is None and "ridge" in c.detail["reason"]


# --- 8. chi is charged ----------------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 3])
def test_chi_is_charged(p):
    A, cert = instance(110 + p, p)
    v = reference_value(A, cert)
    c = check_lower(A, cert, v / 2)
    assert c.status == "holds" and c.chi == 0 and c.threshold == v / 2
    for tier in TIERS:
        c = check_lower(A, cert, v / 2, chi=v / 4, tier=tier)
        assert c.status == "holds" and c.chi == v / 4 and c.eps == v / 2
        assert c.threshold == 3 * v / 4
        c = check_lower(A, cert, v / 2, chi=v, tier=tier)  # eps + chi = 3v/2 > value
        assert c.status == "fails" and c.threshold == 3 * v / 2
    c = check_lower(A, cert, v / 2, chi=v / 2)  # eps + chi exactly the value
    assert c.status == "fails" and c.threshold == v and c.margin.hi == 0
    c = check_lower(A, cert, v / 2, chi=v / 2 - Fraction(1, 2**80), tier="exact")
    assert c.status == "holds" and c.margin.lo == Fraction(1, 2**80)
    # eps alone below the value, eps + chi above: chi decides
    c = check_lower(A, cert, v - TINY, chi=2 * TINY)
    assert c.status == "fails"
    assert check_lower(A, cert, v - TINY).status == "holds"
