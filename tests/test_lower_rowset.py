"""rowset certificates: exact differential checks, a float64 trap, refused inputs, soundness
against the exact oracle and verified upper witnesses, the store and the replayer.

The exact reference here is pure Python Fractions with its own sign patterns (sigma_0 = +1,
sigma_i = -1 exactly when bit i - 1 of s is set), never the kernel's ``sign_patterns``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import zipfile
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from replay import replay as rp
from softrank.certify import InputError, check_bracket, check_lower, check_upper
from softrank.certify.lower.rowset import MAX_RANK, sign_patterns
from softrank.cli import main as cli_main
from softrank.exact.oracle import oracle
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store, open_store

from .helpers import (
    check_lower_any_rank,
    exact_orthant_min,
    random_attention,
    resigned_bundle,
    softmax_rows,
    tsvd_witness,
)
from .helpers import sign_patterns as patterns  # the format's words, not the kernel's
from .storefactory import forbid_array_loads, set_first_lower_rank

TIERS = ("auto", "float64", "arb", "exact")


# --- independent reference ------------------------------------------------------------------

def exact_value(A, I, Z) -> Fraction:
    """min over s, i of sigma_i(s) (A[I] z_s)_i in exact rationals (I in certificate order)."""
    return exact_orthant_min([[Fraction(float(a)) for a in A[i]] for i in I], Z)


def lp_rowset(A: np.ndarray, I) -> tuple[np.ndarray, float]:
    """Z for rows I: per sign pattern, max lambda s.t. sigma_i (A[I] z)_i >= lambda,
    -1 <= z <= 1 (HiGHS, untrusted float64); returns (Z, min lambda)."""
    I = list(I)
    M = A[I]
    N = A.shape[1]
    Z, lams = [], []
    for sig in patterns(len(I)):
        c = np.zeros(N + 1)
        c[-1] = -1.0
        A_ub = np.hstack([-(np.array(sig, dtype=float)[:, None] * M), np.ones((len(I), 1))])
        res = linprog(c, A_ub=A_ub, b_ub=np.zeros(len(I)),
                      bounds=[(-1, 1)] * N + [(None, None)], method="highs")
        assert res.status == 0
        Z.append(np.clip(res.x[:N], -1.0, 1.0))
        lams.append(-res.fun)
    return np.array(Z), min(lams)


def rowset_cert(A: np.ndarray, I) -> dict:
    Z, _ = lp_rowset(A, I)
    return {"kind": "rowset", "rank": len(I), "I": np.array(I, dtype=np.int64), "Z": Z}


def assert_consistent(c, value: Fraction, t: Fraction) -> None:
    """The value enclosure contains the exact value and the status never contradicts it."""
    assert c.kind == "rowset" and c.threshold == t and c.detail["sense"] == ">"
    if c.value is not None:
        assert c.value.lo <= value <= c.value.hi
    if c.status == "holds":
        assert value > t
    elif c.status == "fails":
        assert value <= t


def plain_float_value(A, I, Z) -> float:
    """The unverified float64 evaluation a producer would use."""
    return float(np.min(np.array(patterns(len(I)), dtype=float) * (Z @ A[list(I)].T)))


def test_sign_patterns_follow_the_format():
    for p in range(1, 7):
        S = sign_patterns(p)
        assert S.shape == (1 << (p - 1), p)
        assert S.tolist() == patterns(p)
    # one of each pair +-sigma: the patterns and their negations cover {-1, 1}^p once
    allp = {tuple(s) for s in patterns(4)} | {tuple(-x for x in s) for s in patterns(4)}
    assert allp == set(itertools.product((-1, 1), repeat=4))


# --- 1. differential checks against exact Fractions ---------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_matches_exact_arithmetic_at_and_near_the_boundary(seed):
    rng = np.random.default_rng(seed)
    A = random_attention(rng, 5, 7, scale=2.0)
    p = 1 + seed % 5
    I = [int(i) for i in rng.permutation(5)[:p]]  # not sorted: sigma follows I's order
    cert = rowset_cert(A, I)
    v = exact_value(A, I, cert["Z"])
    assert v > 0
    for eps, truth in ((v * (1 - Fraction(1, 2**60)), "holds"), (v, "fails"),
                       (v * (1 + Fraction(1, 2**60)), "fails"), (v / 2, "holds"),
                       (2 * v, "fails")):
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert c.rank == p
            assert_consistent(c, v, eps)
            if tier in ("auto", "exact"):
                assert c.status == truth, (tier, eps / v)
            if tier == "exact":
                assert c.value.lo == c.value.hi == v
                assert c.tiers_run == ("exact",)
            # enclosures are tight, not merely valid: |A[I] z_s| <= 1 here
            width = c.value.hi - c.value.lo
            assert width <= {"float64": Fraction(1, 2**45)}.get(c.tier, Fraction(1, 2**100))
    # the slack is charged: eps + chi exactly at the value fails, just below it holds
    c = check_lower(A, cert, v / 2, chi=v / 2)
    assert c.status == "fails" and c.threshold == v and c.margin.hi == 0
    c = check_lower(A, cert, v / 2, chi=v / 2 - Fraction(1, 2**80), tier="exact")
    assert c.status == "holds" and c.margin.lo == Fraction(1, 2**80)


def test_float_tier_decides_comfortable_margins():
    rng = np.random.default_rng(40)
    A = random_attention(rng, 6, 8)
    cert = rowset_cert(A, [5, 1, 3])
    v = exact_value(A, [5, 1, 3], cert["Z"])
    c = check_lower(A, cert, v / 2)
    assert c.status == "holds" and c.tiers_run == ("float64",)
    c = check_lower(A, cert, 2 * v)
    assert c.status == "fails" and c.tiers_run == ("float64",)


def test_z_rows_assigned_to_the_wrong_patterns_never_hold():
    """Z's rows belong to fixed patterns: the rows of a good Z in another order (here the bit
    order reversed, p = 3: rows 1 and 2 swapped) give a value <= 0, and the kernel agrees."""
    rng = np.random.default_rng(41)
    A = random_attention(rng, 5, 7)
    I = [0, 3, 4]
    cert = rowset_cert(A, I)
    v = exact_value(A, I, cert["Z"])
    assert check_lower(A, cert, v / 2).status == "holds"
    swapped = dict(cert, Z=cert["Z"][[0, 2, 1, 3]])
    w = exact_value(A, I, swapped["Z"])
    assert w <= 0
    for tier in TIERS:
        c = check_lower(A, swapped, v / 2, tier=tier)
        assert_consistent(c, w, v / 2)
        assert c.status != "holds"
    assert check_lower(A, swapped, v / 2).status == "fails"
    # z_s serves -sigma(s) as -z_s: the negated Z has value -max(...) <= 0
    neg = dict(cert, Z=-cert["Z"])
    assert check_lower(A, neg, Fraction(1, 2**70)).status == "fails"


def test_more_rows_than_columns_never_hold():
    """p > N: A[I] has a left kernel vector y, so the pattern of y sees y . A[I] z_s = 0 and
    the value is <= 0 for every Z; the LP's best Z is refuted at every eps."""
    A = random_attention(np.random.default_rng(42), 5, 2)
    for I in ([0, 1, 2], [4, 2, 0, 3]):
        cert = rowset_cert(A, I)
        v = exact_value(A, I, cert["Z"])
        assert v <= 0
        for eps in (Fraction(1, 2**90), "1/4"):
            for tier in TIERS:
                c = check_lower_any_rank(A, cert, eps, tier=tier)
                assert_consistent(c, v, Fraction(eps))
                assert c.status != "holds"
            assert check_lower_any_rank(A, cert, eps).status == "fails"
            # through the public check such a rank is an input error (min(m, N) = 2)
            with pytest.raises(InputError) as err:
                check_lower(A, cert, eps)
            assert err.value.field == "lower.rank"


@pytest.mark.parametrize("seed", range(4))
def test_enclosures_with_wild_scales_subnormals_and_overflow(seed):
    """A across 2^-600 .. 2^600 (seed 3: entries near 1e308, whose float64 sums overflow) and
    Z entries down to subnormals: every tier that reports a value encloses the exact one, and
    auto decides it."""
    rng = np.random.default_rng(600 + seed)
    m, N, p = 4, 5, 2 + seed % 2
    A = rng.standard_normal((m, N)) * 2.0 ** rng.integers(-600, 600, size=(m, N))
    Z = rng.uniform(-1, 1, size=(1 << (p - 1), N)) * 2.0 ** rng.integers(-1070, 1, size=(
        1 << (p - 1), N))
    Z[0, 0] = 5e-324  # the smallest subnormal
    if seed == 3:
        A = np.full((m, N), 1.5e308) * np.sign(rng.standard_normal((m, N)))
        Z = np.ones((1 << (p - 1), N))
        Z[:, 0] = -Z[:, 0]
    I = list(range(p))
    cert = {"kind": "rowset", "rank": p, "I": np.array(I), "Z": Z}
    v = exact_value(A, I, Z)
    eps_list = [Fraction(1, 2**70), Fraction(10) ** -300]
    if v > 0:
        eps_list += [v, v - v / 2**60]
    for eps in eps_list:
        for tier in TIERS:
            c = check_lower(A, cert, eps, tier=tier)
            assert_consistent(c, v, eps)
            if tier in ("auto", "exact"):
                assert c.status == ("holds" if v > eps else "fails")
    if seed == 3:  # float64 cannot form the sums: it reports nothing rather than a wrong value
        c = check_lower(A, cert, Fraction(1, 2), tier="float64")
        assert c.value is None and c.status == "undecided"


# --- 2. the float64 trap ----------------------------------------------------------------------

def test_plain_float_says_holds_near_the_boundary_but_the_kernel_does_not():
    """Dyadic perturbations of an LP-optimal Z (2^-45 steps): about half the draws have a
    plain float64 value above the exact one.  At t = the exact value (and at a float t just
    below the plain float value but not below the exact one) plain float64 says value > t,
    which is false; the kernel must never say holds there, and the exact tier says fails."""
    rng = np.random.default_rng(1)
    A = random_attention(rng, 5, 7)
    I = [0, 2, 4]
    Z0, _ = lp_rowset(A, I)
    traps = float_traps = 0
    for _ in range(200):
        Z = np.clip(Z0 + rng.integers(-2**10, 2**10, size=Z0.shape) * 2.0**-45, -1.0, 1.0)
        fv = plain_float_value(A, I, Z)
        v = exact_value(A, I, Z)
        if not Fraction(fv) > v:
            continue
        cert = {"kind": "rowset", "rank": 3, "I": np.array(I), "Z": Z}
        below = Fraction(float(np.nextafter(fv, -np.inf)))
        ts = [v] + ([below] if below >= v else [])
        for t in ts:
            assert fv > t >= v  # plain float64 is fooled at this threshold
            for tier in TIERS:
                c = check_lower(A, cert, t, tier=tier)
                assert c.status != "holds", (tier, t)
                assert_consistent(c, v, t)
            assert check_lower(A, cert, t, tier="exact").status == "fails"
            assert check_lower(A, cert, t).status == "fails"
            # the same threshold through the slack
            assert check_lower(A, cert, t / 2, chi=t / 2).status == "fails"
        traps += 1
        float_traps += len(ts) == 2
    assert traps >= 40 and float_traps >= 4, (traps, float_traps)  # the trap is exercised


# --- 3. refused inputs ------------------------------------------------------------------------

def _base():
    A = random_attention(np.random.default_rng(5), 5, 7)
    return A, rowset_cert(A, [4, 0, 2])


def _with(cert, **over):
    out = dict(cert)
    out.update(over)
    return {k: v for k, v in out.items() if v is not None}


def _set(Z, val, idx=(1, 3)):
    Z = np.array(Z, dtype=float)
    Z[idx] = val
    return Z


ONE_UP = float(np.nextafter(1.0, 2.0))


@pytest.mark.parametrize("edit,field", [
    (lambda c: _with(c, rank=13), "lower.rank"),
    (lambda c: _with(c, rank=6), "lower.rank"),  # > m = 5
    (lambda c: _with(c, rank=True), "lower.rank"),
    (lambda c: _with(c, rank=0), "lower.rank"),
    (lambda c: _with(c, rank=3.0), "lower.rank"),
    (lambda c: _with(c, rank=2), "lower.I"),  # disagrees with the arrays
    (lambda c: _with(c, I=np.array([4, 4, 2])), "lower.I"),
    (lambda c: _with(c, I=np.array([4, 5, 2])), "lower.I"),
    (lambda c: _with(c, I=np.array([4, -1, 2])), "lower.I"),
    (lambda c: _with(c, I=np.array([4, 0])), "lower.I"),
    (lambda c: _with(c, I=np.array([4, 0, 2, 1])), "lower.I"),
    (lambda c: _with(c, I=np.array([4.0, 0.0, 2.0])), "lower.I"),
    (lambda c: _with(c, I=np.array([[4, 0, 2]])), "lower.I"),
    (lambda c: _with(c, Z=c["Z"][:3]), "lower.Z"),
    (lambda c: _with(c, Z=np.vstack([c["Z"], c["Z"][:1]])), "lower.Z"),
    (lambda c: _with(c, Z=c["Z"][:, :6]), "lower.Z"),
    (lambda c: _with(c, Z=np.hstack([c["Z"], np.zeros((4, 1))])), "lower.Z"),
    (lambda c: _with(c, Z=c["Z"].T), "lower.Z"),
    (lambda c: _with(c, Z=c["Z"].ravel()), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], np.nan)), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], np.inf)), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], -np.inf)), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], ONE_UP)), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], -ONE_UP, (3, 6))), "lower.Z"),
    (lambda c: _with(c, Z=_set(c["Z"], 1.5)), "lower.Z"),
    (lambda c: _with(c, Z=c["Z"] * 2.0), "lower.Z"),
    (lambda c: _with(c, Z=np.full((4, 7), 2, dtype=np.int64)), "lower.Z"),
    (lambda c: _with(c, Z=None), "lower.Z"),
    (lambda c: _with(c, I=None), "lower.I"),
    (lambda c: _with(c, X=np.eye(3)), "lower.X"),
])
def test_invalid_certificates_are_refused_naming_the_field(edit, field):
    A, cert = _base()
    assert check_lower(A, cert, "1e-3").status == "holds"  # the unedited one is fine
    for tier in ("auto", "exact"):
        with pytest.raises(InputError) as ei:
            check_lower(A, edit(cert), "1e-3", tier=tier)
        assert ei.value.field == field


def test_entries_of_exactly_one_and_numpy_integer_ranks_are_accepted():
    A, cert = _base()
    Z = np.sign(cert["Z"])
    Z[Z == 0] = 1.0  # every entry exactly +-1: the boundary of [-1, 1] is allowed
    v = exact_value(A, cert["I"], Z)
    c = check_lower(A, _with(cert, Z=Z, rank=np.int64(3), I=cert["I"].astype(np.int32)),
                    "1/1000")
    assert_consistent(c, v, Fraction(1, 1000))
    assert c.status == ("holds" if v > Fraction(1, 1000) else "fails")
    # integer Z widens exactly
    Zi = Z.astype(np.int64)
    assert check_lower(A, _with(cert, Z=Zi), "1/1000").status == c.status


def test_rank_above_the_maximum_is_refused_even_with_consistent_arrays():
    """m = 14 rows, rank 13 with 13 distinct rows and a 4096 x N Z in [-1, 1]: refused by
    MAX_RANK alone (N = 13 keeps rank 13 <= min(m, N)); rank 12 with the same kind of arrays
    is checked."""
    assert MAX_RANK == rp.ROWSET_MAX_RANK == 12  # the replayer keeps its own copy
    rng = np.random.default_rng(7)
    A = random_attention(rng, 14, 13)
    for p, ok in ((13, False), (12, True)):
        cert = {"kind": "rowset", "rank": p, "I": np.arange(p),
                "Z": rng.uniform(-1, 1, size=(1 << (p - 1), 13))}
        if ok:
            c = check_lower(A, cert, "1/1000")
            assert_consistent(c, exact_value(A, cert["I"], cert["Z"]), Fraction(1, 1000))
            assert c.status != "undecided"
        else:
            with pytest.raises(InputError) as ei:
                check_lower(A, cert, "1/1000")
            assert ei.value.field == "lower.rank"


# --- 4. soundness on small matrices -------------------------------------------------------

def _rowset_rank(A: np.ndarray, eps: Fraction, certs: dict) -> int:
    """The largest p for which some p-subset's LP certificate holds (kernel verdicts)."""
    for p in range(min(A.shape), 0, -1):
        for I in itertools.combinations(range(A.shape[0]), p):
            if check_lower(A, certs[I], eps).status == "holds":
                return p
    return 0


def _tsvd_rank(A: np.ndarray, eps: Fraction) -> int:
    """The smallest k whose truncated SVD check_upper proves within eps (min(m, N): B = A)."""
    for k in range(1, min(A.shape)):
        U, V = tsvd_witness(A, k)
        if check_upper(A, U, V, eps).status == "holds":
            return k
    return min(A.shape)


def test_a_proved_rank_never_exceeds_a_verified_upper_end():
    """On 3 x 4 and 4 x 4 row-stochastic A the exact oracle gives an exact witness (exact
    error <= eps, exact rank, usually r_eps itself); on every A the truncated SVD gives
    kernel-verified upper ends.  The rowset search runs over every row subset at a grid of eps
    and at eps 2^-40 below each subset's exact value, where that certificate only just holds
    (kept when it is the one that sets p).  Every proved p is <= every upper end."""
    grid = (Fraction(1, 20), Fraction(1, 8), Fraction(1, 4), Fraction(1, 2))
    proved = sharp = boundary = 0
    for seed in range(6):
        rng = np.random.default_rng(3000 + seed)
        m, N = ((3, 4), (4, 4), (4, 5))[seed % 3]
        A = random_attention(rng, m, N, scale=2.0)
        Aq = [[Fraction(float(x)) for x in row] for row in A]
        certs = {I: rowset_cert(A, I) for p in range(1, min(m, N) + 1)
                 for I in itertools.combinations(range(m), p)}
        cases: list[tuple[Fraction, int | None]] = [(eps, None) for eps in grid]
        for I, cert in certs.items():
            v = exact_value(A, I, cert["Z"])
            if len(I) >= 2 and 0 < v < 1:
                e = v - Fraction(1, 2**40)
                assert check_lower(A, cert, e).status == "holds"
                assert check_lower(A, cert, v).status == "fails"
                cases.append((e, len(I)))
        for eps, size in cases:
            p = _rowset_rank(A, eps, certs)
            k = _tsvd_rank(A, eps)
            assert p <= k, (seed, eps, p, k)
            if p == 0 or (size is not None and p != size):
                continue
            proved += 1
            boundary += size is not None
            if N == 5:
                continue
            res = oracle(Aq, eps, budget=0.2)
            assert res.witness is not None and res.witness.error <= eps
            assert res.witness.rank == res.upper >= p, (seed, eps, p, res.upper)
            if res.decided:
                assert res.rank >= p
                sharp += res.rank == p
    assert proved >= 60 and boundary >= 40 and sharp >= 30, (proved, boundary, sharp)


# --- 5. the store ----------------------------------------------------------------------------

def _store_with_rowset(path, rng_seed=9):
    """A plain A (chi = 0) and a logits operator (chi > 0): rowset lower ends that hold, fail
    at the exact boundary, and fail far away; returns {bracket id: (A, lower, eps, exact
    value)}.  The logits operator has 5 rows: the row sets fit both."""
    rng = np.random.default_rng(rng_seed)
    A = random_attention(rng, 6, 7)
    logits = rng.normal(size=(5, 6)) * 2
    B = softmax_rows(logits)
    out = {}
    with Store.create(path, description="rowset test store") as st:
        for oid, M, kw in (("plain", A, {}), ("lg", B, {"logits": logits})):
            st.add_operator(M, family="t", id=oid, **kw)
            U, V = tsvd_witness(M, 4)
            up = {"kind": "factors", "rank": 4, "U": U, "V": V}
            for I in ([4, 1, 3], [0, 2], [3]):
                lo = rowset_cert(M, I)
                v = exact_value(M, I, lo["Z"])
                for tag, eps in (("in", v * Fraction(99, 100)), ("at", v), ("far", 2 * v)):
                    if oid == "lg" and tag == "at":
                        continue  # chi > 0 there: not an exact tie
                    bid = f"{oid}-{len(I)}-{tag}"
                    st.add_bracket(oid, eps, up, lo, id=bid)
                    out[bid] = (M, lo, eps, v)
    return out


def test_store_round_trip_and_check_agree(tmp_path):
    made = _store_with_rowset(tmp_path / "s")
    reader = open_store(tmp_path / "s")
    brs = {b.id: b for b in reader.brackets}
    assert set(brs) == set(made)
    for bid, (M, lo, eps, v) in made.items():
        br = brs[bid]
        assert br.eps == eps and br.lower.kind == "rowset" and br.lower.rank == lo["rank"]
        p = lo["rank"]
        assert br.expected_shapes()["lower.Z"] == (1 << (p - 1), M.shape[1])
        assert br.expected_shapes()["lower.I"] == (p,)
        up, got = br.load()
        assert got["kind"] == "rowset" and got["rank"] == p
        assert got["I"].dtype == np.int64 and got["I"].tolist() == lo["I"].tolist()
        assert got["Z"].dtype == np.float64 and np.array_equal(got["Z"], lo["Z"])
        direct = check_lower(M, lo, eps)
        again = check_lower(M, got, eps)
        assert direct.status == again.status == ("holds" if v > eps else "fails")
        assert direct.value == again.value
        bc = check_bracket(M, up, got, eps)
        assert bc.lower_check.status == direct.status
        if direct.holds:
            assert bc.lower == p and bc.lower_result == "proved"
        else:  # the inequality is false; the claim is refuted only if p > the proved U
            assert bc.lower_result == ("refuted" if p > bc.upper else "does_not_hold")
            assert bc.lower <= 1
    # the store runner (slack charged for the logits operator) and the check command
    recs = {r["bracket"]: r for r in iter_checks(tmp_path / "s")}
    for bid, (_, _, eps, v) in made.items():
        r = recs[bid]
        assert "error" not in r and r["lower_kind"] == "rowset"
        lc = r["lower_check"]
        assert lc["kind"] == "rowset" and lc["sense"] == ">"
        t = eps + Fraction(r["chi"])
        assert lc["status"] == ("holds" if v > t else "fails")
        assert Fraction(lc["threshold"]) == t
        assert Fraction(lc["value"]["lo"]) <= v <= Fraction(lc["value"]["hi"])
    assert {r["lower_check"]["status"] for r in recs.values()} == {"holds", "fails"}
    assert any(Fraction(r["chi"]) > 0 for r in recs.values())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli_main(["check", str(tmp_path / "s"), "--json"])
    assert code == 1  # refuted ends
    for rec in json.loads(buf.getvalue())["records"]:
        assert rec["lower_kind"] == "rowset"
        assert rec["lower_check"]["status"] == recs[rec["bracket"]]["lower_check"]["status"]


@pytest.mark.parametrize("rank", [40, 13, 0])
def test_a_stored_rowset_rank_outside_1_to_12_is_refused_before_any_array(tmp_path, rank,
                                                                          monkeypatch):
    _store_with_rowset(tmp_path / "s")
    set_first_lower_rank(tmp_path / "s", rank)
    forbid_array_loads(monkeypatch)
    for opener in (open_store, Store.open):
        with pytest.raises(InputError) as ei:
            opener(tmp_path / "s")
        assert ei.value.field.endswith("lower.rank") and "brackets.jsonl" in str(ei.value)
    with pytest.raises(InputError) as ei:
        iter_checks(tmp_path / "s").__next__()
    assert ei.value.field.endswith("lower.rank")


def test_the_writer_refuses_a_rowset_rank_above_the_maximum(tmp_path):
    A = random_attention(np.random.default_rng(3), 3, 3)
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f")
        up = {"kind": "factors", "rank": 3, "U": A, "V": np.eye(3)}
        with pytest.raises(InputError) as ei:
            st.add_bracket(oid, "1/4", up, {"kind": "rowset", "rank": 40, "I": np.arange(3),
                                            "Z": np.zeros((4, 3))})
        assert ei.value.field == "lower.rank"
    assert open_store(tmp_path / "s").brackets == []


def test_a_stored_rank_that_disagrees_with_the_arrays_is_refused_on_load(tmp_path):
    _store_with_rowset(tmp_path / "s")
    path = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert recs[0]["lower"]["rank"] == 3
    recs[0]["lower"]["rank"] = 5  # Z would be 16 x 7: the stored one is 4 x 7
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    br = open_store(tmp_path / "s").brackets[0]
    assert br.expected_shapes()["lower.Z"] == (16, 7)
    with pytest.raises(InputError, match="shape") as ei:
        br.load()
    assert "lower." in str(ei.value)


# --- 6. the replayer --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("rowset_replay")
    made = _store_with_rowset(d / "store")
    records = list(iter_checks(d / "store"))
    out = d / "bundle.zip"
    write_bundle(d / "store", records, out)
    return made, records, out


def test_replayer_agrees_with_the_kernel(bundle):
    made, records, path = bundle
    s = rp.replay(str(path))
    kernel = {r["bracket"]: r["lower_check"]["status"] for r in records}
    got = [r for r in s["results"] if r["kind"] == "rowset"]
    assert {r["bracket"] for r in got} == set(made)
    for r in got:
        assert r["agrees"] and r["replay"] == kernel[r["bracket"]], r
        assert Fraction(r["value"]) == made[r["bracket"]][3]  # the exact min, both sides
    assert {r["replay"] for r in got} == {"holds", "fails"}
    at = [r["replay"] for r in got if r["bracket"].endswith("-at")]
    assert at == ["fails"] * 3  # the exact ties, p = 1, 2, 3
    assert s["disagreements"] == 0 and s["kernel_proved"] == s["replayed_proved"] > 0
    rp.FLINT = pytest.importorskip("flint")
    try:
        fast = rp.replay(str(path))
    finally:
        rp.FLINT = None
    assert fast["results"] == s["results"]


def _rowset_ref(path, name: str) -> dict:
    """The array reference of ``name`` (I or Z) of the end of bracket plain-3-in."""
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read("bundle.json"))
    (end,) = [e for e in doc["ends"] if e["kind"] == "rowset" and e["bracket"] == "plain-3-in"]
    return end["certificate"][name]


def test_replayer_rejects_a_tampered_z(bundle, tmp_path):
    _, _, path = bundle
    ref = _rowset_ref(path, "Z")

    def tamper(members):
        Z = np.frombuffer(members[ref["file"]], dtype="<f8").copy()
        Z[5] = 1.5
        return ref["file"], Z.tobytes()

    forged = tmp_path / "forged.zip"
    resigned_bundle(path, forged, edit_member=tamper)
    with pytest.raises(rp.BundleError, match=r"Z: an entry lies outside \[-1, 1\]"):
        rp.replay(str(forged))
    assert rp.main([str(forged), "--quiet"]) == 2
    # one ulp above 1 is refused too
    forged2 = tmp_path / "forged2.zip"
    resigned_bundle(path, forged2, edit_member=lambda mem: (ref["file"], _ulp_member(mem, ref)))
    with pytest.raises(rp.BundleError, match="outside"):
        rp.replay(str(forged2))
    # without re-signing, the sha256 list catches the same edit
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(plain, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == ref["file"]:
                data = tamper({ref["file"]: data})[1]
            zout.writestr(info.filename, data)
    with pytest.raises(rp.BundleError, match="sha256"):
        rp.replay(str(plain))


def _ulp_member(members, ref) -> bytes:
    Z = np.frombuffer(members[ref["file"]], dtype="<f8").copy()
    Z[0] = ONE_UP
    return Z.tobytes()


@pytest.mark.parametrize("edit,match", [
    (lambda e: e.update(rank=40), "a rowset certificate has rank"),
    (lambda e: e.update(rank=13), "a rowset certificate has rank"),
    (lambda e: e.update(rank=0), "a rowset certificate has rank"),
    (lambda e: e.update(rank=2), "shape"),
    (lambda e: e["certificate"]["I"].update(dtype="<f8"), "distinct"),
])
def test_replayer_rejects_a_forged_rank_or_index_vector(bundle, tmp_path, edit, match):
    _, _, path = bundle

    def edit_doc(doc):
        (end,) = [e for e in doc["ends"] if e["kind"] == "rowset"
                  and e["bracket"] == "plain-3-in"]
        edit(end)

    forged = tmp_path / "forged.zip"
    resigned_bundle(path, forged, edit_doc=edit_doc)
    with pytest.raises(rp.BundleError, match=match):
        rp.replay(str(forged))


def test_replayer_rejects_duplicate_rows(bundle, tmp_path):
    _, _, path = bundle
    ref = _rowset_ref(path, "I")

    def dup(members):
        I = np.frombuffer(members[ref["file"]], dtype="<i8").copy()
        I[1] = I[0]
        return ref["file"], I.tobytes()

    forged = tmp_path / "forged.zip"
    resigned_bundle(path, forged, edit_member=dup)
    with pytest.raises(rp.BundleError, match="distinct"):
        rp.replay(str(forged))
