"""rowmix certificates (rows of D A, every row of D of l1 norm at most 1): exact differential
checks on every tier, a float64 trap, refused inputs (a row of D one ulp above norm 1), the
row-selection case agreeing with rowset, soundness against verified upper ends and the exact
oracle, the store, and the replayer (a tampered D rejected)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from replay import replay as rp
from softrank.certify import InputError, check_lower, check_upper
from softrank.exact.oracle import oracle
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store, open_store

from .helpers import exact_orthant_min, random_attention
from .helpers import sign_patterns as patterns
from .storefactory import forbid_array_loads, set_first_lower_rank

TIERS = ("auto", "float64", "arb", "exact")


def exact_value(A, D, Z) -> Fraction:
    """min over s, i of sigma_i(s) (D A z_s)_i in exact rationals."""
    Aq = [[Fraction(float(a)) for a in row] for row in A]
    Dq = [[Fraction(float(d)) for d in row] for row in D]
    N = len(Aq[0])
    M = [[sum((d * Aq[k][j] for k, d in enumerate(drow) if d), Fraction(0)) for j in range(N)]
         for drow in Dq]
    return exact_orthant_min(M, Z)


def mixing(rng: np.random.Generator, p: int, m: int) -> np.ndarray:
    """A random D whose rows have exact l1 norm at most 1 (checked in Fractions)."""
    D = rng.standard_normal((p, m)) * (rng.random((p, m)) < 0.5)
    D[np.arange(p), rng.choice(m, p, replace=False)] += 3.0  # one dominant query per row
    D = D / np.abs(D).sum(axis=1, keepdims=True) * (1 - 2.0**-30)
    assert all(sum(abs(Fraction(float(x))) for x in row) <= 1 for row in D)
    return D


def lp_z(M: np.ndarray) -> np.ndarray:
    """Per pattern, the z in [-1, 1]^N maximising min_i sigma_i (M z)_i (untrusted)."""
    p, N = M.shape
    Z = []
    for sig in patterns(p):
        A_ub = np.hstack([-(np.array(sig, dtype=float)[:, None] * M), np.ones((p, 1))])
        r = linprog(np.r_[np.zeros(N), -1.0], A_ub=A_ub, b_ub=np.zeros(p),
                    bounds=[(-1, 1)] * N + [(None, None)], method="highs")
        assert r.status == 0
        Z.append(np.clip(r.x[:N], -1.0, 1.0))
    return np.array(Z)


def cert(A, D, Z=None) -> dict:
    return {"kind": "rowmix", "rank": D.shape[0], "D": D, "Z": lp_z(D @ A) if Z is None else Z}


@pytest.mark.parametrize("seed", range(4))
def test_matches_exact_arithmetic_at_and_near_the_boundary(seed):
    rng = np.random.default_rng(seed)
    A = random_attention(rng, 6, 7)
    D = mixing(rng, 1 + seed % 3, 6)
    c0 = cert(A, D)
    v = exact_value(A, D, c0["Z"])
    assert v > 0
    for tier in TIERS:
        got = check_lower(A, c0, v * (1 - Fraction(1, 2**20)), tier=tier)
        assert got.value is not None and got.value.lo <= v <= got.value.hi, tier
        assert got.status in ("holds", "undecided") and got.kind == "rowmix"
    assert check_lower(A, c0, v * (1 - Fraction(1, 2**20))).status == "holds"
    assert check_lower(A, c0, v).status == "fails"  # a tie is not a proof
    assert check_lower(A, c0, v / 2, chi=v / 2).status == "fails"
    assert check_lower(A, c0, v * (1 + Fraction(1, 2**20))).status == "fails"


def test_row_selections_agree_with_rowset():
    rng = np.random.default_rng(7)
    A = random_attention(rng, 6, 8)
    I = [4, 1, 3]
    D = np.zeros((3, 6))
    D[np.arange(3), I] = 1.0
    mix = cert(A, D)
    sel = {"kind": "rowset", "rank": 3, "I": np.array(I), "Z": mix["Z"]}
    for eps in ("1/8", "1/4", "1/2"):
        a, b = check_lower(A, mix, eps, tier="exact"), check_lower(A, sel, eps, tier="exact")
        assert a.status == b.status and a.value == b.value


def test_plain_float_says_holds_near_the_boundary_but_the_kernel_does_not():
    rng = np.random.default_rng(11)
    A = random_attention(rng, 5, 7)
    D = mixing(rng, 3, 5)
    Z0 = lp_z(D @ A)
    S = np.array(patterns(3), dtype=float)
    traps = 0
    for _ in range(150):
        Z = np.clip(Z0 + rng.integers(-2**10, 2**10, size=Z0.shape) * 2.0**-45, -1.0, 1.0)
        fv = float(np.min(S * (Z @ (D @ A).T)))
        v = exact_value(A, D, Z)
        if not Fraction(fv) > v:
            continue
        c = {"kind": "rowmix", "rank": 3, "D": D, "Z": Z}
        for tier in TIERS:
            assert check_lower(A, c, v, tier=tier).status != "holds"
        assert check_lower(A, c, v, tier="exact").status == "fails"
        traps += 1
    assert traps >= 20, traps  # plain float64 was fooled that often


@pytest.mark.parametrize("edit,field", [
    (lambda A, c: {**c, "rank": 13}, "lower.rank"),
    (lambda A, c: {**c, "D": c["D"][:2]}, "lower.D"),
    (lambda A, c: {**c, "D": np.hstack([c["D"], np.zeros((3, 1))])}, "lower.D"),
    (lambda A, c: {**c, "D": np.where(np.arange(6) == 0, np.nan, c["D"])}, "lower.D"),
    (lambda A, c: {**c, "D": np.array([[0.5, float(np.nextafter(0.5, 1.0)), 0, 0, 0, 0],
                                       *c["D"][1:]])}, "lower.D"),
    (lambda A, c: {**c, "Z": c["Z"][:3]}, "lower.Z"),
    (lambda A, c: {**c, "Z": np.where(np.arange(7) == 2, float(np.nextafter(1.0, 2.0)),
                                      c["Z"])}, "lower.Z"),
    (lambda A, c: {k: v for k, v in c.items() if k != "D"}, "lower"),
])
def test_invalid_certificates_are_refused_naming_the_field(edit, field):
    rng = np.random.default_rng(5)
    A = random_attention(rng, 6, 7)
    c = cert(A, mixing(rng, 3, 6))
    with pytest.raises(InputError) as ei:
        check_lower(A, edit(A, c), "1/4")
    assert ei.value.field.startswith(field), ei.value.field


@pytest.mark.parametrize("edit,field", [
    (lambda A, c: {**c, "Z": np.where(np.arange(7) == 1, np.nan, c["Z"])}, "lower.Z"),
    (lambda A, c: {**c, "Z": c["Z"][:3]}, "lower.Z"),
    # float64 sums this row to exactly 1.0; its exact norm is 1 + 2^-60
    (lambda A, c: {**c, "D": np.array([[0.5, 0.5, 2.0 ** -60, 0, 0, 0], *c["D"][1:]])},
     "lower.D"),
    (lambda A, c: {**c, "D": np.array([[0.75, 0.5, 0, 0, 0, 0], *c["D"][1:]])}, "lower.D"),
])
@pytest.mark.parametrize("max_work", [0, 1000, None])
def test_a_malformed_certificate_is_an_input_error_under_any_work_limit(edit, field, max_work):
    # validation is not charged: a tight meter must not turn bad input into "undecided"
    rng = np.random.default_rng(5)
    A = random_attention(rng, 6, 7)
    c = cert(A, mixing(rng, 3, 6))
    with pytest.raises(InputError) as ei:
        check_lower(A, edit(A, c), "1/4", max_work=max_work)
    assert ei.value.field.startswith(field), ei.value.field


def test_row_norms_decided_exactly_next_to_one():
    from softrank.certify.lower.rowset import _row_norms_exceed_one

    rng = np.random.default_rng(8)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        D = rng.random((3, n)) * rng.choice([-1.0, 1.0], (3, n))
        D /= np.abs(D).sum(axis=1, keepdims=True)  # float64 norms near 1, exact ones either side
        D[:, 0] += rng.choice([0.0, 2.0 ** -60, -(2.0 ** -60), 2.0 ** -40]) * np.sign(D[:, 0])
        exact = max(sum(abs(Fraction(float(x))) for x in row) for row in D)
        assert _row_norms_exceed_one(D) == (exact > 1)


def test_a_row_of_norm_exactly_one_is_accepted():
    A = random_attention(np.random.default_rng(2), 4, 5)
    D = np.array([[0.5, 0.25, -0.25, 0.0], [0.0, 0.0, 0.0, 1.0]])
    c = check_lower(A, cert(A, D), "1/100", tier="exact")
    assert c.status in ("holds", "fails") and c.kind == "rowmix"


def test_a_proved_rank_never_exceeds_a_verified_upper_end():
    rng = np.random.default_rng(3)
    proofs = 0
    for trial in range(30):
        m = 3 + trial % 2
        A = random_attention(rng, m, 4)
        U, s, Vt = np.linalg.svd(A)
        Aq = [[Fraction(float(x)) for x in row] for row in A]
        for p in range(1, m + 1):
            D = mixing(rng, p, m)
            c = cert(A, D)
            v = exact_value(A, D, c["Z"])
            if v <= 0:
                continue
            eps = v * (1 - Fraction(1, 2**30))  # just holds
            assert check_lower(A, c, eps).status == "holds"
            proofs += 1
            k = next(k for k in range(0, m + 1) if k == m or
                     check_upper(A, U[:, :k] * s[:k], Vt[:k], eps).status == "holds")
            assert p <= k
            res = oracle(Aq, eps, budget=0.2)
            assert p <= res.upper  # the oracle's exact witness rank
    assert proofs >= 40, proofs


def _store(path):
    rng = np.random.default_rng(9)
    A = random_attention(rng, 5, 6)
    D = mixing(rng, 3, 5)
    c = cert(A, D)
    v = exact_value(A, D, c["Z"])
    with Store.create(path) as st:
        oid = st.add_operator(A, family="f")
        up = {"kind": "factors", "rank": 5, "U": np.eye(5), "V": A}
        st.add_bracket(oid, v * (1 - Fraction(1, 2**20)), up, c, id="holds")
        st.add_bracket(oid, v, up, c, id="tie")
    return A, c, v


def test_store_round_trip_and_replay_agree(tmp_path):
    A, c, v = _store(tmp_path / "s")
    recs = {r["bracket"]: r for r in iter_checks(tmp_path / "s")}
    assert recs["holds"]["lower_check"]["status"] == "holds"
    assert recs["tie"]["lower_check"]["status"] == "fails"
    lo = open_store(tmp_path / "s").brackets[0].load()[1]
    assert lo["kind"] == "rowmix" and np.array_equal(lo["D"], c["D"])
    out = tmp_path / "b.zip"
    write_bundle(tmp_path / "s", list(recs.values()), out)
    s = rp.replay(str(out))
    got = {r["bracket"]: r for r in s["results"] if r["kind"] == "rowmix"}
    assert set(got) == {"holds", "tie"}
    assert all(r["agrees"] for r in got.values())
    assert got["holds"]["replay"] == "holds" and got["tie"]["replay"] == "fails"
    assert Fraction(got["tie"]["value"]) == v


def test_replay_rejects_a_row_of_d_above_norm_one(tmp_path):
    A = random_attention(np.random.default_rng(4), 3, 4)
    D = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    Z = lp_z(D @ A)
    dyad = rp.dyadic(A.tolist())
    bad = rp.dyadic([[0.5, float(np.nextafter(0.5, 1.0)), 0.0], [0.0, 0.0, 1.0]])
    assert any(rp.scale(sum(map(abs, r)), bad[1]) > 1 for r in bad[0])
    assert all(rp.scale(sum(map(abs, r)), rp.dyadic(D.tolist())[1]) <= 1
               for r in rp.dyadic(D.tolist())[0])
    st, val = rp.check_rowset(dyad, None, rp.dyadic(Z.tolist()), Fraction(0),
                              D=rp.dyadic(D.tolist()))
    assert val == exact_value(A, D, Z) and st == ("holds" if val > 0 else "fails")


@pytest.mark.parametrize("rank", [40, 13])
def test_a_stored_rowmix_rank_above_12_is_refused_before_any_array(tmp_path, rank,
                                                                  monkeypatch):
    _store(tmp_path / "s")
    set_first_lower_rank(tmp_path / "s", rank)
    forbid_array_loads(monkeypatch)
    with pytest.raises(InputError) as ei:
        open_store(tmp_path / "s")
    assert ei.value.field.endswith("lower.rank")
