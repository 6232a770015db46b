"""Scaling properties: every verdict and every enclosure of the kernel agrees with exact
Fraction arithmetic (or is ``undecided``) when the stored factors or points are scaled by
2^e, e in [-1070, 1000], including exact cancellations such as rows (a, a) and (a, -a).

Scaling pushes the float64 tier into underflow (subnormals, products that vanish) and
overflow (products and sums beyond 2^1024, inf - inf = NaN), where the tier must abstain and
a later tier must decide.  Every exact reference is computed here with fractions.Fraction
from the exact values of the stored floats (Fraction(float) is exact), independently of the
kernel; small sizes (2 to 4 rows) keep the references cheap.  Bases come from a numpy
generator seeded by hypothesis, the exponents from hypothesis directly (with the extremes
sampled often).
"""

from __future__ import annotations

import itertools
import os
from fractions import Fraction

import numpy as np
from flint import arb, fmpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank.certify import check_lower, check_upper
from softrank.certify.intrinsic.check import check_intrinsic
from softrank.certify.intrinsic.interaction import interaction_from_logits
from softrank.certify.intrinsic.kappa import kappa_bracket
from softrank.certify.intrinsic.tau import tau_bracket
from softrank.certify.numerics.arbutil import endpoints, precision

from .helpers import bernstein_certificate, exact_orthant_min, exact_row1
from .test_lower_polytope import hull_facets, lp_witness, reference_defect, signed_rows

E_MIN, E_MAX = -1070, 1000
# modest by default (the file runs in well under a minute); SCALING_EXAMPLES=500 for a long hunt
PROPERTY = settings(max_examples=int(os.environ.get("SCALING_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TIERS = ("float64", "arb", "auto")

exps = st.one_of(st.integers(E_MIN, E_MAX),
                 st.sampled_from([E_MIN, -1074 + 60, -1022, -540, 0, 520, 960, E_MAX]))
nonpos_exps = st.one_of(st.integers(E_MIN, 0), st.sampled_from([E_MIN, -1022, -60, 0]))
seeds = st.integers(0, 2**32 - 1)


# --- exact references (pure Python Fractions) ------------------------------------------------

def Q(x: float) -> Fraction:
    return Fraction(float(x))


def qmat(M: np.ndarray) -> list[list[Fraction]]:
    return [[Q(x) for x in row] for row in np.atleast_2d(M)]


def matmul(P: list[list[Fraction]], R: list[list[Fraction]]) -> list[list[Fraction]]:
    cols = list(zip(*R, strict=True))
    return [[sum((a * b for a, b in zip(row, col, strict=True)), Fraction(0)) for col in cols]
            for row in P]


def inf_norm(P: list[list[Fraction]]) -> Fraction:
    return max(sum((abs(x) for x in row), Fraction(0)) for row in P)


def eye_minus(P: list[list[Fraction]]) -> list[list[Fraction]]:
    return [[Fraction(int(i == j)) - x for j, x in enumerate(row)] for i, row in enumerate(P)]


def scaled(M: np.ndarray, e: int) -> np.ndarray:
    """M 2^e rounded to float64 (exact unless it underflows; |M| < 2^4 never overflows)."""
    return np.ldexp(np.asarray(M, dtype=np.float64), int(e))


def clip_exp(e: int) -> int:
    return max(E_MIN, min(E_MAX, e))


def around(v: Fraction, extra: Fraction) -> list[Fraction]:
    """Thresholds at and around an exact value v (all > 0): the tie itself, a hair on either
    side, half and double; ``extra`` when none is positive."""
    if v <= 0:
        return [extra]
    return [v, v - v / 2**60, v + v / 2**60, v / 2, 2 * v]


def assert_agrees(c, value: Fraction | None, truth: bool | None, *, decided: bool) -> None:
    """The enclosure contains the exact value; a decided verdict is the exact one; ``decided``
    demands a verdict (tiers that end in exact arithmetic)."""
    if value is not None and c.value is not None:
        assert c.value.lo <= value <= c.value.hi, (c.tiers_run, c.value, value)
    if truth is not None:
        if c.status == "holds":
            assert truth, (c, value)
        elif c.status == "fails":
            assert not truth, (c, value)
        else:
            assert c.status == "undecided" and not decided, (c, value)


# --- upper witnesses -------------------------------------------------------------------------

@PROPERTY
@given(seed=seeds, ea=exps, eu=exps, ev=exps, mode=st.sampled_from(["plain", "cancel", "fit"]))
def test_upper_check_agrees_with_exact_error(seed, ea, eu, ev, mode) -> None:
    rng = np.random.default_rng(seed)
    m, N, k = int(rng.integers(2, 4)), int(rng.integers(2, 5)), 2
    A = scaled(rng.standard_normal((m, N)), ea)
    if mode == "cancel":  # U V = u v - u v = 0 exactly; fl(U V) may overflow to inf - inf
        u, v = rng.standard_normal((m, 1)), rng.standard_normal((1, N))
        U, V = scaled(np.hstack([u, u]), eu), scaled(np.vstack([v, -v]), ev)
    elif mode == "fit":  # U V close to A: the error is a tiny fraction of |A|
        uu, s, vt = np.linalg.svd(rng.standard_normal((m, N)), full_matrices=False)
        U, V = scaled(uu[:, :k] * s[:k], eu), scaled(vt[:k], clip_exp(ea - eu))
        A = U @ V + scaled(rng.standard_normal((m, N)), clip_exp(ea - 40))
        if not np.isfinite(A).all():
            A = scaled(rng.standard_normal((m, N)), ea)
    else:
        U, V = scaled(rng.standard_normal((m, k)), eu), scaled(rng.standard_normal((k, N)), ev)
    value = exact_row1(A, (U, V))
    for eps in around(value, Fraction(2) ** int(rng.integers(-1074, 1000))):
        for tier in TIERS:
            c = check_upper(A, U, V, eps, tier=tier)
            assert_agrees(c, value, value <= eps, decided=tier == "auto")


# --- nonzero and frobenius_tail --------------------------------------------------------------

@PROPERTY
@given(seed=seeds, ea=exps, cancel=st.booleans())
def test_nonzero_agrees_with_exact_row_norm(seed, ea, cancel) -> None:
    rng = np.random.default_rng(seed)
    m, N = int(rng.integers(2, 4)), int(rng.integers(2, 5))
    base = rng.standard_normal((m, N))
    if cancel:  # entries +-1.5 2^1023-ish: row sums overflow float64
        base = np.sign(base) * 1.75
    A = scaled(base, ea if not cancel else 1022)
    value = max(sum((abs(x) for x in row), Fraction(0)) for row in qmat(A))
    for eps in around(value, Fraction(1, 2**1000)):
        for tier in TIERS:
            c = check_lower(A, {"kind": "nonzero", "rank": 1}, eps, tier=tier)
            assert_agrees(c, value, value > eps, decided=tier == "auto")


def _sigma2_sq_tests(A: np.ndarray) -> tuple[Fraction, Fraction]:
    """(F, D2) with sigma_1^2 + sigma_2^2 = F and sigma_1^2 sigma_2^2 = D2 for a 2 x N A, so
    sigma_2^2 is the smaller root of x^2 - F x + D2."""
    Aq = qmat(A)
    G = matmul(Aq, [list(c) for c in zip(*Aq, strict=True)])  # A A^T, 2 x 2
    return G[0][0] + G[1][1], G[0][0] * G[1][1] - G[0][1] * G[1][0]


def _le_root(x: Fraction, F: Fraction, D2: Fraction) -> bool:
    """x <= sigma_2^2 (the smaller root of p(x) = x^2 - F x + D2)."""
    return x <= 0 or (2 * x <= F and x * x - F * x + D2 >= 0)


def _ge_root(x: Fraction, F: Fraction, D2: Fraction) -> bool:
    """x >= sigma_2^2."""
    return 2 * x >= F or x * x - F * x + D2 <= 0


@PROPERTY
@given(seed=seeds, ea=exps, L=st.sampled_from([1, 2]), rank_one=st.booleans())
def test_frobenius_tail_agrees_with_exact_singular_values(seed, ea, L, rank_one) -> None:
    rng = np.random.default_rng(seed)
    N = int(rng.integers(2, 4))
    base = rng.standard_normal((2, N))
    if rank_one:  # rows (a, a, ...) and (a, -a, ...) style cancellations: sigma_2 exactly 0
        base = np.vstack([base[0], 2 * base[0]])
    A = scaled(base, ea)
    F, D2 = _sigma2_sq_tests(A)
    with precision(128):  # thresholds near the tail: eps ~ sqrt(tail / 2), from arb
        Fb, Db = (arb(fmpq(x.numerator, x.denominator)) for x in (F, D2))
        tail = Fb if L == 1 else (Fb - (Fb * Fb - 4 * Db).sqrt()) / 2
        try:
            near = endpoints((tail / 2).sqrt())[0] if tail > 0 else Fraction(0)
        except ValueError:  # F^2 - 4 D2 rounded below 0: sigma_1 = sigma_2, use the midpoint
            near = endpoints((Fb / 4).sqrt())[0]
    cands = [near, near * (1 + Fraction(1, 2**60)), near / 4, Fraction(1, 7)]
    for eps in cands:
        if eps <= 0:
            continue
        T = 2 * eps * eps  # m (eps + chi)^2 with m = 2
        truth = (F > T) if L == 1 else not _ge_root(T, F, D2)
        for tier in ("float64", "arb", "auto", "exact"):
            c = check_lower(A, {"kind": "frobenius_tail", "rank": L}, eps, tier=tier)
            assert_agrees(c, F if L == 1 else None, truth, decided=False)
            if L == 2 and c.value is not None:
                assert _le_root(c.value.lo, F, D2) and _ge_root(c.value.hi, F, D2), c.value


# --- decoder, submatrix, bernstein -----------------------------------------------------------

@PROPERTY
@given(seed=seeds, ea=exps, ed=exps, ew=exps, coupled=st.booleans(), ex=exps,
       cancel=st.booleans())
def test_decoder_agrees_with_exact_value(seed, ea, ed, ew, coupled, ex, cancel) -> None:
    rng = np.random.default_rng(seed)
    p, m, N = int(rng.integers(1, 3)), 3, 3
    A0, D0, W0 = (rng.standard_normal(s) for s in ((m, N), (p, m), (N, p)))
    if cancel:  # rows a and -a of A under equal columns of D: D A cancels them exactly
        A0[1], D0[:, 1] = -A0[0], D0[:, 0]
    try:
        X0 = np.linalg.inv(D0 @ A0 @ W0)
    except np.linalg.LinAlgError:  # the cancellation can make D A W singular
        X0 = np.full((p, p), np.inf)
    if not np.isfinite(X0).all() or np.abs(X0).max() > 8:
        X0 = rng.standard_normal((p, p))
    A, D, W = scaled(A0, ea), scaled(D0, ed), scaled(W0, ew)
    X = scaled(X0, clip_exp(-(ea + ed + ew)) if coupled else ex)
    Aq, Dq, Wq, Xq = map(qmat, (A, D, W, X))
    delta = inf_norm(eye_minus(matmul(Xq, matmul(matmul(Dq, Aq), Wq))))
    xd, wn = inf_norm(matmul(Xq, Dq)), inf_norm(Wq)
    cert = {"kind": "decoder", "rank": p, "D": D, "W": W, "X": X}
    tie = (1 - delta) / (xd * wn) if delta < 1 and xd * wn > 0 else Fraction(0)
    for eps in around(tie, Fraction(1, 2**int(rng.integers(1, 1074)))):
        value = delta + xd * wn * eps
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_agrees(c, value, value < 1, decided=tier == "auto")


@PROPERTY
@given(seed=seeds, ea=exps, coupled=st.booleans(), ex=exps)
def test_submatrix_agrees_with_exact_value(seed, ea, coupled, ex) -> None:
    rng = np.random.default_rng(seed)
    p, m, N = int(rng.integers(1, 3)), 3, 4
    A0 = rng.standard_normal((m, N))
    rows = rng.choice(m, size=p, replace=False)
    cols = rng.choice(N, size=p, replace=False)
    M0 = A0[np.ix_(rows, cols)]
    X0 = np.linalg.inv(M0) if abs(np.linalg.det(M0)) > 1e-3 else rng.standard_normal((p, p))
    A = scaled(A0, ea)
    X = scaled(X0, clip_exp(-ea) if coupled else ex)
    Xq, Mq = qmat(X), qmat(A[np.ix_(rows, cols)])
    delta, xn = inf_norm(eye_minus(matmul(Xq, Mq))), inf_norm(Xq)
    cert = {"kind": "submatrix", "rank": p, "rows": rows, "cols": cols, "X": X}
    tie = (1 - delta) / xn if delta < 1 and xn > 0 else Fraction(0)
    for eps in around(tie, Fraction(1, 2**int(rng.integers(1, 1074)))):
        value = delta + xn * eps
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_agrees(c, value, value < 1, decided=tier == "auto")


@PROPERTY
@given(seed=seeds, ea=exps, coupled=st.booleans(), ep=exps, cancel=st.booleans())
def test_bernstein_agrees_with_exact_value(seed, ea, coupled, ep, cancel) -> None:
    rng = np.random.default_rng(seed)
    p, m, N = int(rng.integers(1, 3)), 3, 4
    A0 = rng.standard_normal((m, N))
    base = bernstein_certificate(A0, rng.standard_normal((N, p)))
    P0 = base["P"]
    if cancel:  # rows a and -a of A under equal columns of P: P A cancels them exactly
        A0[1] = -A0[0]
        P0 = P0.copy()
        P0[:, 1] = P0[:, 0]
    A = scaled(A0, ea)
    P = scaled(P0, clip_exp(-ea) if coupled else ep)
    W = base["W"]
    Aq, Pq, Wq = qmat(A), qmat(P), qmat(W)
    R = matmul(Pq, matmul(Aq, Wq))
    delta = inf_norm([[x - w for x, w in zip(r, wr, strict=True)]
                      for r, wr in zip(R, Wq, strict=True)])
    pn = inf_norm(Pq)
    cert = dict(base, P=P)
    tie = (1 - delta) / pn if delta < 1 and pn > 0 else Fraction(0)
    for eps in around(tie, Fraction(1, 2**int(rng.integers(1, 1074)))):
        value = delta + pn * eps
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_agrees(c, value, value < 1, decided=tier == "auto")


# --- rowset, rowmix, polytope ----------------------------------------------------------------

def _orthant_z(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One witness per sign pattern of the format: the LP witness of the signed rows (or a
    random one), as a float array in [-1, 1]."""
    p = rows.shape[0]
    Z = []
    for s in range(1 << (p - 1)):
        sig = np.array([1.0] + [-1.0 if (s >> (i - 1)) & 1 else 1.0 for i in range(1, p)])
        try:
            z, _ = lp_witness(sig[:, None] * rows)
        except AssertionError:
            z = rng.uniform(-1, 1, rows.shape[1])
        Z.append(z)
    return np.array(Z)


@PROPERTY
@given(seed=seeds, ea=exps, ez=nonpos_exps, cancel=st.booleans())
def test_rowset_agrees_with_exact_orthant_minimum(seed, ea, ez, cancel) -> None:
    rng = np.random.default_rng(seed)
    p, m, N = int(rng.integers(1, 4)), 4, 4
    A0 = rng.standard_normal((m, N))
    if cancel:  # rows (a, a, ...) against (a, -a, ...) witnesses, near the float maximum
        A0 = np.sign(A0) * 1.5
    I = rng.choice(m, size=p, replace=False)
    Z = scaled(_orthant_z(A0[I], rng), ez)
    A = scaled(A0, ea if not cancel else 1022)
    value = exact_orthant_min([[Q(a) for a in A[i]] for i in I], Z)
    cert = {"kind": "rowset", "rank": p, "I": I, "Z": Z}
    for eps in around(value, Fraction(1, 2**int(rng.integers(1, 1074)))):
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_agrees(c, value, value > eps, decided=tier == "auto")


@PROPERTY
@given(seed=seeds, ea=exps, ed=nonpos_exps, ez=nonpos_exps)
def test_rowmix_agrees_with_exact_orthant_minimum(seed, ea, ed, ez) -> None:
    rng = np.random.default_rng(seed)
    p, m, N = int(rng.integers(1, 4)), 4, 3
    A0 = rng.standard_normal((m, N))
    D0 = rng.standard_normal((p, m))
    D0 = D0 / np.abs(D0).sum(axis=1, keepdims=True)
    D = scaled(D0, ed)
    for i in range(p):  # the kernel demands l1 <= 1 exactly; halving is exact
        while sum(abs(Q(x)) for x in D[i]) > 1:
            D[i] = D[i] / 2
    Z = scaled(_orthant_z(D0 @ A0, rng), ez)
    A = scaled(A0, ea)
    value = exact_orthant_min(matmul(qmat(D), qmat(A)), Z)
    cert = {"kind": "rowmix", "rank": p, "D": D, "Z": Z}
    for eps in around(value, Fraction(1, 2**int(rng.integers(1, 1074)))):
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_agrees(c, value, value > eps, decided=tier == "auto")


def _polytope_value(A: np.ndarray, I: np.ndarray, F: np.ndarray, Z: np.ndarray) -> Fraction:
    k = len(I)
    best = None
    for facet, z in zip(F.tolist(), Z, strict=True):
        zq = [Q(v) for v in z]
        for x in facet:
            v = sum((Q(a) * b for a, b in zip(A[int(I[x % k])], zq, strict=True)), Fraction(0))
            v = v if x < k else -v
            best = v if best is None else min(best, v)
    assert best is not None
    return best


@PROPERTY
@given(seed=seeds, ea=exps, ey=exps, ez=nonpos_exps)
def test_polytope_agrees_with_exact_value(seed, ea, ey, ez) -> None:
    rng = np.random.default_rng(seed)
    m, N, k = 4, 4, int(rng.integers(2, 5))
    A0 = rng.standard_normal((m, N))
    Y0 = rng.standard_normal((k, 2))
    F = np.array(hull_facets(Y0), dtype=np.int64)
    I = rng.integers(0, m, size=k)
    Z0 = np.array([lp_witness(signed_rows(A0, I, f, k))[0] for f in F.tolist()])
    A, Y, Z = scaled(A0, ea), scaled(Y0, ey), scaled(Z0, ez)
    cert = {"kind": "polytope", "rank": 2, "Y": Y, "I": I, "F": F, "Z": Z,
            "G": np.arange(len(F))}
    defect = reference_defect(Y, F)  # scaling into subnormals may move the points
    value = None if defect is not None else _polytope_value(A, I, F, Z)
    for eps in around(value or Fraction(0), Fraction(1, 2**int(rng.integers(1, 1074)))):
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            if defect is not None:
                assert c.status == "fails" and c.value is None
            else:
                assert_agrees(c, value, value > eps, decided=tier == "auto")


# --- intrinsic: tau and kappa ----------------------------------------------------------------

def _exact_C(H: np.ndarray) -> list[list[Fraction]]:
    Fq = qmat(H)
    m, n = len(Fq), len(Fq[0])
    r = [sum(row) / n for row in Fq]
    c = [sum(Fq[i][j] for i in range(m)) / m for j in range(n)]
    g = sum(r) / m
    return [[Fq[i][j] - r[i] - c[j] + g for j in range(n)] for i in range(m)]


def _exact_q(E: list[list[Fraction]]) -> Fraction:
    """q(E) as the maximum cycle mean of w(j, l) = max_i (E_ij - E_il), brute force."""
    n = len(E[0])
    w = [[max(row[j] - row[l] for row in E) for l in range(n)] for j in range(n)]
    best = Fraction(0)
    for size in range(1, n + 1):
        for cyc in itertools.permutations(range(n), size):
            if cyc[0] == min(cyc):
                best = max(best, sum(w[cyc[t]][cyc[(t + 1) % size]] for t in range(size)) / size)
    return best


def _tau_ball(q: Fraction) -> tuple[Fraction, Fraction]:
    with precision(128):
        return endpoints(2 * (arb(fmpq(q.numerator, q.denominator)) / 4).tanh())


def _factors(rng, m: int, n: int, r: int, ex: int, ey: int, mode: str):
    if mode == "cancel" and r == 2:  # X rows (x, x), Y rows (y, -y): X Y^T = 0 exactly
        x, y = rng.standard_normal((m, 1)), rng.standard_normal((n, 1))
        return scaled(np.hstack([x, x]), ex), scaled(np.hstack([y, -y]), ey)
    if mode == "twin" and r == 2:  # X = Y with rows (a, a), (a, -a): T = 2 a^2 I
        X = np.array([[1.0, 1.0], [1.0, -1.0]] + [[0.5, 0.25]] * (m - 2))
        return scaled(X, ex), scaled(X[:n] if n <= m else rng.standard_normal((n, 2)), ex)
    return scaled(rng.standard_normal((m, r)), ex), scaled(rng.standard_normal((n, r)), ey)


@PROPERTY
@given(seed=seeds, ex=exps, ey=exps, mode=st.sampled_from(["plain", "cancel", "twin", "fit"]),
       with_b=st.booleans(), with_rows=st.booleans())
def test_tau_brackets_contain_the_exact_q_and_tau(seed, ex, ey, mode, with_b, with_rows) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    r = int(rng.integers(1, min(m, n) + 1))
    H = rng.standard_normal((m, n)) * 2
    C = interaction_from_logits(H)
    if mode == "fit":  # T close to C: the regime where q is small and the float tier matters
        U, s, Vt = np.linalg.svd(C.mid)
        X, Y = scaled(U[:, :r] * s[:r], ex), scaled(Vt[:r].T, clip_exp(-ex))
    else:
        X, Y = _factors(rng, m, n, r, ex, ey, mode)
    Cq = _exact_C(H)
    Xq, Yq = qmat(X), qmat(Y)
    E = [[Cq[i][j] - sum((a * b for a, b in zip(Xq[i], Yq[j], strict=True)), Fraction(0))
          for j in range(n)] for i in range(m)]
    q = _exact_q(E)
    t_lo, t_hi = _tau_ball(q)
    size = int(rng.integers(1, n + 1))
    cyc = rng.permutation(n)[:size]
    rows = rng.integers(0, m, size=size) if with_rows else None
    b = scaled(rng.standard_normal(n), int(rng.integers(-60, 60))) if with_b else None
    for tier in TIERS:
        res = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows, tier=tier)
        assert res.q.lo <= q and (res.q.hi is None or q <= res.q.hi), (tier, res.q, q)
        assert res.tau.lo <= t_hi and (res.tau.hi is None or t_lo <= res.tau.hi)
    eps = Fraction(int(rng.integers(1, 200)), 100)
    chk = check_intrinsic(C, {"X": X, "Y": Y, "cycle": cyc, "b": b}, eps, r)
    if chk.profile.status == "applicable":
        assert t_lo < eps  # tau < eps is not contradicted by the exact tau
    elif chk.profile.status == "not applicable":
        assert t_hi >= eps


def _range_sq(P: list[list[Fraction]]) -> Fraction:
    """max_i ||P_i - c||^2 for c the exact midrange centre: rad(P)^2 <= this."""
    cols = list(zip(*P, strict=True))
    c = [(max(col) + min(col)) / 2 for col in cols]
    return max(sum(((x - y) ** 2 for x, y in zip(row, c, strict=True)), Fraction(0))
               for row in P)


@PROPERTY
@given(seed=seeds, ex=exps, ey=exps, mode=st.sampled_from(["plain", "cancel", "twin"]),
       r=st.sampled_from([1, 2]))
def test_kappa_bracket_agrees_with_exact_bounds(seed, ex, ey, mode, r) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    X, Y = _factors(rng, m, n, r, ex, ey, mode)
    Xq, Yq = qmat(X), qmat(Y)
    T = matmul(Xq, [list(c) for c in zip(*Yq, strict=True)])
    rect_vals = {(i, k, j, l): abs(T[i][j] - T[i][l] - T[k][j] + T[k][l]) / 4
                 for i, k in itertools.combinations(range(m), 2)
                 for j, l in itertools.combinations(range(n), 2)}
    best_rect = max(rect_vals.values())  # kappa >= every rectangle value
    upper_sq = _range_sq(Xq) * _range_sq(Yq)  # kappa^2 <= this (identity gauge)
    i, k, j, l = list(rect_vals)[int(rng.integers(len(rect_vals)))]
    M = np.zeros((m, n))
    M[i, j], M[i, l], M[k, j], M[k, l] = 1.0, -1.0, -1.0, 1.0
    D1, D2 = np.zeros(m), np.zeros(n)
    D1[[i, k]], D2[[j, l]] = 2.0, 2.0  # [[2I, -B], [-B^T, 2I]] is PSD for ||B||_2 = 2
    lam, mu = rng.uniform(0.1, 1.0, m), rng.uniform(0.1, 1.0, n)
    kb = kappa_bracket(X, Y, rects=[[i, k, j, l]], M=M, D1=D1, D2=D2, lam=lam, mu=mu)
    assert kb.hi is not None and kb.hi >= best_rect
    assert kb.lo * kb.lo <= upper_sq
    if r == 1:  # kappa of a rank-one x y^T is range(x) range(y) / 4 exactly
        exact = (max(Xq)[0] - min(Xq)[0]) * (max(Yq)[0] - min(Yq)[0]) / 4
        assert kb.lo <= exact <= kb.hi
