"""nerve certificates: the derived chains against an independent pure-Python derivation, exact
differential values on every tier, ties and a float64 trap, invalid certificates (not a
cycle, an even 0-chain, a witness that does not serve, refused inputs naming the field,
sizes refused before allocation, the work limit), the standalone replayer's agreement, and
soundness against exact fits and the exact oracle on small cells.

References here are independent of the kernel: values are pure-Python Fraction minima and the
chains are derived with Counters of label tuples (no numpy).
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from replay import replay as rp
from softrank.certify import InputError, check_lower, check_upper
from softrank.certify.lower import nerve as kn
from softrank.witnesses.producers import nerve as pn

from .helpers import exact_row1, random_attention, tsvd_witness

TIERS = ("auto", "float64", "arb", "exact")


def cross_tops(rows: list[int], m: int) -> np.ndarray:
    """The 2^(p-1) sign patterns on ``rows`` with the first sign +: the quotient of the
    cross-polytope's boundary, an odd cycle."""
    p = len(rows)
    out = []
    for tail in itertools.product((0, 1), repeat=p - 1):
        out.append([rows[0]] + [r + m * b for r, b in zip(rows[1:], tail, strict=True)])
    return np.array(out, dtype=np.int64)


def sign_witnesses(T: np.ndarray, m: int, N: int) -> np.ndarray:
    Z = np.zeros((len(T), N))
    for q, top in enumerate(T):
        for x in top:
            Z[q, x % m] = 1.0 if x < m else -1.0
    return Z


def near_identity(n: int, delta: float = 0.125) -> np.ndarray:
    """(1 - delta) I + delta / n J: rows are probability vectors, exact in float64."""
    return (1 - delta) * np.eye(n) + delta / n


def cert_of(T: np.ndarray, Z: np.ndarray, G: np.ndarray | None = None) -> dict:
    p = T.shape[1]
    return {"kind": "nerve", "rank": p, "T": T, "Z": Z,
            "G": np.arange(len(T)) if G is None else G}


def reference_value(A: np.ndarray, cert: dict) -> Fraction:
    m = A.shape[0]
    best = None
    for top, g in zip(cert["T"].tolist(), cert["G"].tolist(), strict=True):
        z = [Fraction(float(x)) for x in cert["Z"][g]]
        for x in top:
            s = 1 if x < m else -1
            v = s * sum(Fraction(float(a)) * zz for a, zz in zip(A[x % m], z, strict=True))
            best = v if best is None else min(best, v)
    return best


def reference_chains_ok(T: list[list[int]], m: int) -> bool:
    """The chain conditions, derived with Counters of sorted label tuples."""
    c = {tuple(sorted(t, key=lambda x: x % m)) for t in T}
    while len(next(iter(c))) > 1:
        cnt = Counter(s[:x] + s[x + 1:] for s in c for x in range(len(s)))
        bd = {f for f, n in cnt.items() if n % 2}
        if any(tuple((x + m) % (2 * m) for x in f) not in bd for f in bd):
            return False
        c = {f for f in bd if f[0] < m}
        if not c:
            return False
    return len(c) % 2 == 1


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_cross_polytope_quotient_holds_with_its_exact_value(p):
    n = 7
    A = near_identity(n)
    T = cross_tops(list(range(p)), n)
    cert = cert_of(T, sign_witnesses(T, n, n))
    v = reference_value(A, cert)
    assert reference_chains_ok(T.tolist(), n)
    for tier in TIERS:
        c = check_lower(A, cert, v - Fraction(1, 2**70), tier=tier)
        assert c.value.lo <= v <= c.value.hi, tier
        if tier != "float64":
            assert c.status == "holds", tier
        tie = check_lower(A, cert, v, tier=tier)
        assert tie.status != "holds", tier
    assert check_lower(A, cert, v).status == "fails"
    r = rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(cert["Z"].tolist()),
                       cert["G"].tolist(), v - Fraction(1, 2**70))
    assert r == ("holds", v)
    assert rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(cert["Z"].tolist()),
                          cert["G"].tolist(), v)[0] == "fails"


@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_cycle_defect_fails_without_a_value_and_the_replayer_agrees(p):
    """A top dropped (boundary not nu-invariant), every facet listed with its mirror (the
    boundary vanishes: an even, empty 0-chain), a sign changed in one top, a top moved to
    other rows, and a second copy of the sphere on other rows (two odd cycles: even)."""
    n = 9
    A = near_identity(n)
    T = cross_tops(list(range(p)), n)
    mirrored = np.vstack([T, (T + n) % (2 * n)])
    flipped = T.copy()
    flipped[-1, -1] = (flipped[-1, -1] + n) % (2 * n)
    moved = T.copy()
    moved[0] = moved[0] + p
    doubled = np.vstack([T, cross_tops(list(range(p, 2 * p)), n)])
    bad = {"dropped": T[1:], "with mirrors": mirrored, "doubled": doubled}
    if p > 1:
        bad["moved"] = moved
    if len({tuple(sorted(r)) for r in flipped.tolist()}) == len(flipped):
        bad["flipped"] = flipped
    for name, Tb in bad.items():
        assert not reference_chains_ok(Tb.tolist(), n), name
        cert = cert_of(Tb, sign_witnesses(Tb, n, n))
        for tier in TIERS:
            c = check_lower(A, cert, Fraction(1, 4), tier=tier)
            assert c.status == "fails" and c.value is None, (name, tier)
            assert "chain" in c.detail["reason"] or "invariant" in c.detail["reason"]
        r = rp.check_nerve(rp.dyadic(A.tolist()), Tb.tolist(),
                           rp.dyadic(cert["Z"].tolist()), cert["G"].tolist(), Fraction(1, 4))
        assert r == ("fails", None), name


def test_kernel_chains_agree_with_the_reference_on_random_top_sets():
    """Random sets of tops (mostly not cycles) on 6 rows: the kernel's verdict on part 1
    equals the Counter-based derivation's, and so does the replayer's."""
    rng = np.random.default_rng(3)
    m = 6
    A = near_identity(m)
    seen = Counter()
    for trial in range(300):
        p = int(rng.integers(1, 5))
        labels = set()
        for _ in range(int(rng.integers(1, 12))):
            rows = sorted(rng.choice(m, p, replace=False).tolist())
            labels.add(tuple(r + m * int(rng.integers(0, 2)) for r in rows))
        if trial % 3 == 0:  # a cross-polytope quotient on random rows, sometimes perturbed
            labels = {tuple(t) for t in cross_tops(sorted(rng.choice(m, p, replace=False)
                                                          .tolist()), m).tolist()}
            if trial % 2 and len(labels) > 1:
                labels.pop()
        T = np.array(sorted(labels), dtype=np.int64)
        ref = reference_chains_ok(T.tolist(), m)
        seen[ref] += 1
        assert (kn.chain_defect(kn.canonical(T, m), m) is None) == ref
        cert = cert_of(T, sign_witnesses(T, m, m))
        got = rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(cert["Z"].tolist()),
                             cert["G"].tolist(), Fraction(1, 4))
        assert (got[1] is not None) == ref
    assert seen[True] >= 20 and seen[False] >= 100


@pytest.mark.parametrize("d_sign", [-1, 1])
def test_plain_float_lands_on_the_wrong_side_but_the_kernel_does_not(d_sign):
    """p = 2 on rows [1, 0, d, d] and [0, 1, d, d], |d| = 2^-60, witnesses of +-1 entries:
    the labelled values are exactly 1 + 2d and 1 - 2d, so the minimum is 1 - 2^-59, while
    any float64 summation gives 1.0 for both.  For t in [1 - 2^-59, 1) plain float64 says
    holds, which is false."""
    d = d_sign * 2.0**-60
    A = np.array([[1.0, 0.0, d, d], [0.0, 1.0, d, d]])
    T = np.array([[0, 1], [0, 3]])
    Z = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, 1.0]])
    cert = cert_of(T, Z)
    v = reference_value(A, cert)
    plain = min(float(s * (A[x % 2] @ Z[g])) for g, top in enumerate(T.tolist())
                for x in top for s in [1 if x < 2 else -1])
    assert v == 1 - Fraction(1, 2**59) and plain == 1.0
    for t in (v, Fraction(1) - Fraction(1, 2**60)):
        assert plain > t >= v  # plain float64 is fooled here
        for tier in TIERS:
            assert check_lower(A, cert, t, tier=tier).status != "holds", (tier, t)
        assert check_lower(A, cert, t).status == "fails"
        assert rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(Z.tolist()),
                              [0, 1], t)[0] == "fails"
    assert check_lower(A, cert, v - Fraction(1, 2**70)).status == "holds"


def test_a_witness_that_does_not_serve_fails_through_the_value():
    n = 6
    A = near_identity(n)
    T = cross_tops([0, 1, 2], n)
    Z = sign_witnesses(T, n, n)
    Z[2, 1] = -Z[2, 1]  # the third top's witness now has the wrong sign on row 1
    cert = cert_of(T, Z)
    v = reference_value(A, cert)
    assert v < 0
    c = check_lower(A, cert, Fraction(1, 4))
    assert c.status == "fails" and c.value.lo <= v <= c.value.hi
    G = np.zeros(len(T), dtype=np.int64)  # one witness for every top: serves only the first
    c = check_lower(A, cert_of(T, sign_witnesses(T, n, n)[:1], G), Fraction(1, 4))
    assert c.status == "fails"


def _edit(name):
    n = 6
    T = cross_tops([0, 1, 2], n)
    cert = cert_of(T, sign_witnesses(T, n, n))
    if name == "code":
        cert["T"] = T.copy()
        cert["T"][0, 0] = 2 * n
    elif name == "same row":
        cert["T"] = T.copy()
        cert["T"][0, 1] = T[0, 0] + n
    elif name == "twice":
        cert["T"] = np.vstack([T, T[:1]])
        cert["G"] = np.arange(len(T) + 1) % len(T)
    elif name == "shape":
        cert["T"] = T[:, :2]
    elif name == "float T":
        cert["T"] = T.astype(float)
    elif name == "Z big":
        cert["Z"] = cert["Z"].copy()
        cert["Z"][0, 0] = np.nextafter(1.0, 2.0)
    elif name == "Z nan":
        cert["Z"] = cert["Z"].copy()
        cert["Z"][1, 1] = np.nan
    elif name == "Z cols":
        cert["Z"] = cert["Z"][:, :5]
    elif name == "G range":
        cert["G"] = np.arange(len(T)) + 1
    elif name == "G len":
        cert["G"] = np.arange(len(T) - 1)
    elif name == "rank":
        cert["rank"] = 13
    return near_identity(n), cert


@pytest.mark.parametrize("edit,field", [
    ("code", "lower.T"), ("same row", "lower.T"), ("twice", "lower.T"), ("shape", "lower.T"),
    ("float T", "lower.T"), ("Z big", "lower.Z"), ("Z nan", "lower.Z"), ("Z cols", "lower.Z"),
    ("G range", "lower.G"), ("G len", "lower.G"), ("rank", "lower.rank")])
def test_invalid_inputs_are_refused_naming_the_field(edit, field):
    A, cert = _edit(edit)
    with pytest.raises(InputError) as err:
        check_lower(A, cert, "1/4")
    assert err.value.field == field


def test_levels_are_sized_before_they_are_formed_and_work_is_bounded(monkeypatch):
    """A rank-12 cross-polytope (2048 tops) is decided within the default limits; a level
    past the size cap leaves the check undecided (never a verdict), as does the work limit;
    too many tops are an input error."""
    n = 12
    A = near_identity(n)
    T = cross_tops(list(range(12)), n)
    cert = cert_of(T, sign_witnesses(T, n, n))
    assert check_lower(A, cert, "1/4").status == "holds"
    assert rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(cert["Z"].tolist()),
                          cert["G"].tolist(), Fraction(1, 4))[0] == "holds"
    monkeypatch.setattr(kn, "MAX_ENTRIES", len(T) * 12 * 11 - 1)  # the first level's codes
    c = check_lower(A, cert, "1/4")
    assert c.status == "undecided" and c.detail["reason"].startswith("size limit")
    monkeypatch.setattr(rp, "NERVE_MAX_CODES", len(T) * 12 * 11 - 1)
    assert rp.check_nerve(rp.dyadic(A.tolist()), T.tolist(), rp.dyadic(cert["Z"].tolist()),
                          cert["G"].tolist(), Fraction(1, 4)) == ("undecided", None)
    monkeypatch.undo()
    c = check_lower(A, cert, "1/4", max_work=1000)
    assert c.status == "undecided" and c.detail["reason"].startswith("work limit")
    monkeypatch.setattr(kn, "MAX_TOPS", len(T) - 1)
    with pytest.raises(InputError) as err:
        check_lower(A, cert, "1/4")
    assert err.value.field == "lower.T"


def test_no_rank_deficient_fit_comes_within_a_proved_threshold():
    """A certificate the producer found on a random attention cell, proved at t: the
    truncated SVD and exact l1 fits on row spaces of p - 1 rows all stay above t."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        A = random_attention(rng, 7, 7, scale=3.0)
        for p in (2, 3):
            got = pn.certificate(A, list(range(7)), p, 0.25, float("inf"))
            if got is None:
                continue
            arrays, _ = got
            cert = {"kind": "nerve", "rank": p, **arrays}
            v = reference_value(A, cert)
            c = check_lower(A, cert, "1/4")
            assert c.status == ("holds" if v > Fraction(1, 4) else "fails")
            if c.status != "holds":
                continue
            U, V = tsvd_witness(A, p - 1)
            assert exact_row1(A, (U, V)) > Fraction(1, 4)
            assert check_upper(A, U, V, "1/4").status == "fails"
            for J in itertools.combinations(range(7), p - 1):
                Vj = A[list(J)]
                C = np.linalg.lstsq(Vj.T, A.T, rcond=None)[0].T
                assert exact_row1(A, (C, Vj)) > Fraction(1, 4)
            if p == 3:
                return
    pytest.fail("no rank-3 certificate found on 40 random cells")


def test_producer_never_claims_above_the_exact_oracle_on_small_cells():
    """Differential against the exact oracle: wherever the producer's certificate is proved,
    its rank is at most the oracle's upper end (an exact witness), on 5 x 5 cells."""
    from softrank.exact import oracle

    rng = np.random.default_rng(5)
    proved = 0
    for _ in range(12):
        A = random_attention(rng, 5, 5, scale=3.0)
        Aq = [[Fraction(float(x)) for x in row] for row in A]
        res = oracle(Aq, Fraction(1, 5))
        for p in (2, 3, 4):
            got = pn.certificate(A, list(range(5)), p, 0.2, float("inf"))
            if got is None:
                continue
            c = check_lower(A, {"kind": "nerve", "rank": p, **got[0]}, "1/5")
            if c.status == "holds":
                proved += 1
                assert p <= res.upper, (p, res.lower, res.upper)
    assert proved >= 3


# --- end to end: a store, a bundle, the replayer ----------------------------------------------

@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from softrank.export import write_bundle
    from softrank.runner import iter_checks
    from softrank.witnesses import Store

    from .helpers import softmax_rows

    d = tmp_path_factory.mktemp("nerve_replay")
    rng = np.random.default_rng(8)
    made = {}
    with Store.create(d / "store", description="nerve replay store") as st:
        for oid in ("plain", "lg"):
            logits = rng.normal(size=(8, 8)) + 6 * np.eye(8)
            A = softmax_rows(logits)
            st.add_operator(A, family="t", id=oid, **({"logits": logits} if oid == "lg"
                                                     else {}))
            U, V = tsvd_witness(A, 7)
            up = {"kind": "factors", "rank": 7, "U": U, "V": V}
            T = cross_tops([0, 1, 2, 3], 8)
            c = cert_of(T, sign_witnesses(T, 8, 8))
            v = reference_value(A, c)
            broken = cert_of(T[1:], sign_witnesses(T[1:], 8, 8))
            for tag, eps, low in (("in", v / 2, c), ("far", 2 * v, c), ("broken", v / 2, broken)):
                st.add_bracket(oid, eps, up, low, id=f"{oid}-{tag}")
                made[f"{oid}-{tag}"] = (tag, v)
    records = list(iter_checks(d / "store"))
    out = d / "bundle.zip"
    write_bundle(d / "store", records, out)
    return made, records, out


def test_store_bundle_and_replay_agree(bundle):
    made, records, path = bundle
    kernel = {r["bracket"]: r["lower_check"]["status"] for r in records}
    want = {"in": "holds", "far": "fails", "broken": "fails"}
    assert kernel == {b: want[tag] for b, (tag, _) in made.items()}
    s = rp.replay(str(path))
    got = {r["bracket"]: r for r in s["results"] if r["kind"] == "nerve"}
    assert set(got) == set(made)
    for bid, r in got.items():
        tag, v = made[bid]
        assert r["agrees"] and r["replay"] == kernel[bid], r
        assert r["value"] is None if tag == "broken" else Fraction(r["value"]) == v
    assert s["disagreements"] == 0 and s["kernel_proved"] == s["replayed_proved"] > 0


@pytest.mark.parametrize("name,dtype,value,match", [
    ("Z", "<f8", 1.5, r"Z: an entry lies outside \[-1, 1\]"),
    ("T", "<i8", 10**6, r"T: need tops of 4 labels"),
    ("T", "<i8", 9, r"T: need tops of 4 labels .* on distinct rows"),
    ("G", "<i8", 10**6, r"G: need .* witness indices"),
])
def test_a_forged_array_is_refused(bundle, tmp_path, name, dtype, value, match):
    from .helpers import forged_lower_array

    _, _, path = bundle
    forged = tmp_path / "forged.zip"
    forged_lower_array(path, forged, "plain-in", name, dtype, value)
    with pytest.raises(rp.BundleError, match=match):
        rp.replay(str(forged))
    assert rp.main([str(forged), "--quiet"]) == 2


def test_the_replayer_counts_the_derivation_in_the_memory_it_holds(bundle):
    """The label tuples of the chain derivation are priced as held words before anything is
    decoded: a limit that the arrays alone fit under refuses the bundle, naming a nerve end."""
    _, _, path = bundle
    limits = dict(rp.LIMITS, held=600)  # arrays of one end: under 200 words; tuples: 960
    with pytest.raises(rp.BundleError, match="held") as err:
        rp.replay(str(path), limits=limits)
    assert "ends[" in str(err.value)
    assert rp.replay(str(path), limits=dict(rp.LIMITS, held=2000))["disagreements"] == 0
