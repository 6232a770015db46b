"""The standard-library replayer on ``polytope`` lower certificates (replay/replay.py).

Certificates are built here with scipy (the hull of +-A W and one LP witness per facet) and
decided by the kernel (``check_lower``); the replayer's own exact check must agree with it on
every verdict and on the exact value: holding certificates, ties and near-ties with the
threshold, every kind of broken sphere, and malformed arrays (refused as BundleError, as the
kernel refuses them as InputError).  The last tests go through a store, a bundle and the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.spatial import ConvexHull

from replay import replay as rp
from softrank.certify import InputError, check_lower
from softrank.cli import main as cli_main
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store

from .helpers import forged_lower_array, random_attention, softmax_rows, tsvd_witness

ROOT = Path(__file__).resolve().parents[1]
ONE_UP = float(np.nextafter(1.0, 2.0))


# --- building certificates (kernel side: numpy, scipy) ---------------------------------------

def polytope_certificate(A: np.ndarray, W: np.ndarray) -> dict:
    """The facets of conv(+-A W) (one of each mirror pair), labelled by the rows of A, with
    the LP witness max tau s.t. sigma a_i . z >= tau on the facet's labels, |z| <= 1."""
    p = W.shape[1]
    Y = A @ W
    keep = sorted({int(v) % len(Y) for v in ConvexHull(np.vstack([Y, -Y])).vertices})
    Y, I = Y[keep], np.array(keep, dtype=np.int64)
    k = len(I)
    simplices = {tuple(sorted(map(int, s))) for s in ConvexHull(np.vstack([Y, -Y])).simplices}
    mirror = {s: tuple(sorted((x + k) % (2 * k) for x in s)) for s in simplices}
    assert set(mirror.values()) == simplices  # the hull is centrally symmetric
    F = np.array(sorted(s for s in simplices if s < mirror[s]), dtype=np.int64)
    N = A.shape[1]
    Z = np.zeros((len(F), N))
    for r, facet in enumerate(F):
        rows = np.array([A[I[x % k]] * (1.0 if x < k else -1.0) for x in facet])
        res = linprog(np.r_[np.zeros(N), -1.0], A_ub=np.hstack([-rows, np.ones((p, 1))]),
                      b_ub=np.zeros(p), bounds=[(-1, 1)] * N + [(None, None)], method="highs")
        assert res.status == 0
        Z[r] = np.clip(res.x[:N], -1.0, 1.0)
    return {"kind": "polytope", "rank": p, "Y": Y, "I": I, "F": F, "Z": Z,
            "G": np.arange(len(F), dtype=np.int64)}


def exact_value(A: np.ndarray, c: dict) -> Fraction:
    """min over facets r and points x of r of sigma_x (A z_r)_(I[x mod k]), in Fractions."""
    k = len(c["I"])
    return min((1 if x < k else -1) * sum((Fraction(a) * Fraction(z) for a, z in
                                           zip(A[c["I"][x % k]], c["Z"][c["G"][r]],
                                               strict=True)), Fraction(0))
               for r, facet in enumerate(c["F"]) for x in facet)


def _case(seed: int, p: int, m: int = 20, N: int = 10) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    A = random_attention(rng, m, N)
    return A, polytope_certificate(A, rng.normal(size=(N, p)))


def _with(c: dict, **kw) -> dict:
    return {**c, **kw}


def _replay_end(A: np.ndarray, c: dict, eps: Fraction, kernel: str,
                chi: Fraction = Fraction(0), dtypes: dict | None = None) -> dict:
    """rp.replay_end on an in-memory end record (arrays as the bundle stores them)."""
    blobs: dict[str, bytes] = {}

    def ref(name):
        X = np.asarray(c[name])
        dt = (dtypes or {}).get(name, "<i8" if X.dtype.kind in "iu" else "<f8")
        X = np.ascontiguousarray(X, dtype=dt)
        blobs[f"arrays/{name}.bin"] = X.tobytes()
        return {"file": f"arrays/{name}.bin", "dtype": dt, "shape": list(X.shape)}

    m, N = A.shape
    ops = {"op": {"A": rp.dyadic(A.tolist()), "shape": (m, N), "chi": chi}}
    end = {"operator": "op", "eps": str(eps), "kind": "polytope", "rank": c["rank"],
           "kernel": kernel, "certificate": {n: ref(n) for n in "YIFZG" if n in c}}
    return rp.replay_end(end, ops, blobs, "ends[0]")


def both(A: np.ndarray, c: dict, eps: Fraction, chi: Fraction = Fraction(0)):
    """(kernel Check, replay result) for one certificate at eps (+ chi)."""
    kc = check_lower(A, c, eps, chi=chi)
    return kc, _replay_end(A, c, eps, kc.status, chi)


# --- agreement on holding certificates and at the threshold ----------------------------------

@pytest.mark.parametrize("seed,p", [(0, 2), (1, 2), (2, 3), (3, 3), (4, 4)])
def test_a_holding_certificate_replays_with_the_exact_value(seed, p):
    A, c = _case(seed, p)
    v = exact_value(A, c)
    assert v > 0 and len(c["F"]) >= p  # an LP witness always exists (z = W n)
    kc, r = both(A, c, v / 2)
    assert kc.status == "holds" and r["replay"] == "holds" and r["agrees"], r
    assert Fraction(r["value"]) == v and v in kc.value


@pytest.mark.parametrize("seed,p", [(5, 2), (6, 3)])
def test_at_just_above_and_just_below_the_threshold(seed, p):
    A, c = _case(seed, p)
    v = exact_value(A, c)
    tiny = Fraction(1, 2**80)
    for eps, want in ((v, "fails"), (v - tiny, "holds"), (v + tiny, "fails")):
        kc, r = both(A, c, eps)
        assert kc.status == r["replay"] == want and r["agrees"], (eps, r)
        assert Fraction(r["value"]) == v and v in kc.value
    # the slack chi is added to eps: t = eps + chi, so the tie moves with it
    chi = Fraction(3, 2**60)
    for eps, want in ((v - chi, "fails"), (v - chi - tiny, "holds")):
        kc, r = both(A, c, eps, chi)
        assert kc.status == r["replay"] == want and r["agrees"], (eps, r)


def test_a_certificate_can_list_interior_points_and_share_witnesses():
    """Points that are not vertices of the hull are allowed (strictly inside every facet);
    one witness row may serve several facets (G with repeats, q < f)."""
    A, c = _case(7, 3)
    Y = np.vstack([c["Y"], c["Y"][:2].mean(axis=0) / 4])  # a point deep inside
    k = len(c["I"])  # point j + k (the mirror of j) becomes j + k + 1
    c2 = _with(c, Y=Y, I=np.r_[c["I"], 0], F=np.where(c["F"] >= k, c["F"] + 1, c["F"]))
    v = exact_value(A, c2)
    kc, r = both(A, c2, v / 2)
    assert kc.status == r["replay"] == "holds" and Fraction(r["value"]) == v
    G = c["G"].copy()
    G[1] = G[0]  # facet 1 uses facet 0's witness: usually worse, never malformed
    c3 = _with(c, G=G)
    v3 = exact_value(A, c3)
    kc, r = both(A, c3, Fraction(1, 10**6))
    assert kc.status == r["replay"] and r["agrees"] and Fraction(r["value"]) == v3


# --- broken spheres: the kernel's "fails" with value None, and the replayer's ----------------

def _drop(c: dict, r: int) -> dict:
    keep = np.delete(np.arange(len(c["F"])), r)
    return _with(c, F=c["F"][keep], Z=c["Z"][keep], G=np.arange(len(keep), dtype=np.int64))


def _append(c: dict, facet) -> dict:
    return _with(c, F=np.vstack([c["F"], facet]), G=np.r_[c["G"], 0])


def _far(c: dict) -> dict:
    Y = c["Y"].copy()
    Y[0] *= 10.0  # far outside: some listed facet no longer supports conv(+-Y)
    return _with(c, Y=Y)


def _mirror(c: dict) -> np.ndarray:
    k = len(c["I"])
    return (c["F"][0] + k) % (2 * k)


DEFECTS = {
    "dropped facet": (lambda c: _drop(c, 0), "ridge"),
    "dropped last facet": (lambda c: _drop(c, -1), "ridge"),
    "duplicated facet": (lambda c: _append(c, c["F"][0]), "same points"),
    "duplicated as its mirror": (lambda c: _append(c, _mirror(c)), "same points"),
    "far point": (_far, "not strictly inside"),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
@pytest.mark.parametrize("seed,p", [(8, 2), (9, 3)])
def test_a_broken_sphere_fails_in_both(name, seed, p):
    A, c = _case(seed, p)
    edit, reason = DEFECTS[name]
    bad = edit(c)
    kc, r = both(A, bad, Fraction(1, 10**6))
    assert kc.status == "fails" and kc.value is None and reason in kc.detail["reason"]
    assert r["replay"] == "fails" and r["value"] is None and r["agrees"], r
    # the same witnesses prove the intact certificate at that eps
    assert both(A, c, Fraction(1, 10**6))[1]["replay"] == "holds"


def _diamond(Y, F, I=(0, 1), Z=((1.0, 0.0), (0.0, 1.0)), G=(0, 1)) -> dict:
    """A hand-made rank-2 certificate (A is the 2 x 2 identity below)."""
    return {"kind": "polytope", "rank": 2, "Y": np.array(Y, dtype=np.float64),
            "I": np.array(I, dtype=np.int64), "F": np.array(F, dtype=np.int64),
            "Z": np.array(Z, dtype=np.float64), "G": np.array(G, dtype=np.int64)}


def test_hand_made_diamond_singular_facet_and_a_point_on_a_facet():
    A = np.eye(2)
    # conv(+-e1, +-e2): points 0 = e1, 1 = e2, 2 = -e1, 3 = -e2; facets {0,1}, {1,2} (+ mirrors)
    good = _diamond([[1.0, 0.0], [0.0, 1.0]], [[0, 1], [1, 2]], Z=((1.0, 1.0), (-1.0, 1.0)))
    kc, r = both(A, good, Fraction(1, 2))
    assert kc.status == r["replay"] == "holds" and Fraction(r["value"]) == 1
    kc, r = both(A, good, Fraction(1))  # the value is exactly 1: a tie fails
    assert kc.status == r["replay"] == "fails" and Fraction(r["value"]) == 1
    # a singular facet: its two points lie on one line through 0 (ridges still pair up)
    sing = _with(good, Y=np.array([[1.0, 0.0], [2.0, 0.0]]))
    kc, r = both(A, sing, Fraction(1, 2))
    assert "hyperplane missing 0" in kc.detail["reason"]
    assert r["replay"] == "fails" and r["value"] is None and r["agrees"]
    assert rp.solve_facet([[1, 0], [2, 0]]) is None
    # a third point exactly on facet {0, 1}'s line x + y = 1: not strictly inside, fails
    on = _diamond([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], [[0, 1], [1, 3]], I=(0, 1, 0),
                  Z=((1.0, 1.0), (-1.0, 1.0)))
    kc, r = both(A, on, Fraction(1, 2))
    assert "not strictly inside" in kc.detail["reason"]
    assert r["replay"] == "fails" and r["value"] is None and r["agrees"]
    # one ulp inside the line: the same facets now hold
    inside = _with(on, Y=np.array([[1.0, 0.0], [0.0, 1.0], [0.5, np.nextafter(0.5, 0)]]))
    kc, r = both(A, inside, Fraction(1, 2))
    assert kc.status == r["replay"] == "holds" and r["agrees"]


def test_rank_one_is_one_facet_and_its_mirror():
    A = np.array([[0.75, 0.25], [0.5, 0.5], [0.125, 0.875]])
    Y = np.array([[2.0], [1.0], [-0.5]])
    c = {"kind": "polytope", "rank": 1, "Y": Y, "I": np.array([0, 1, 2]),
         "F": np.array([[0]]), "Z": np.array([[1.0, -1.0]]), "G": np.array([0])}
    kc, r = both(A, c, Fraction(1, 4))
    assert kc.status == r["replay"] == "holds" and Fraction(r["value"]) == Fraction(1, 2)
    for bad in (_with(c, F=np.array([[1]])),  # |Y[0] / Y[1]| = 2: point 0 is outside
                _with(c, F=np.array([[0], [1]]), G=np.array([0, 0])),  # four facets
                _with(c, F=np.array([[0], [3]]), G=np.array([0, 0])),  # a facet twice
                _with(c, Y=np.array([[2.0], [-2.0], [1.0]])),  # point 1 = -point 0: a tie
                _with(c, Y=np.array([[0.0], [0.0], [0.0]]))):  # singular
        kc, r = both(A, bad, Fraction(1, 4))
        assert kc.status == r["replay"] == "fails" and r["value"] is None and r["agrees"]


@pytest.mark.parametrize("p", [1, 2, 5, 8, 12])
def test_solve_facet_agrees_with_fractions(p):
    rng = np.random.default_rng(p)
    for trial in range(20):
        B = rng.integers(-2**40, 2**40, size=(p, p)).tolist()
        if trial % 4 == 1:
            B[rng.integers(p)] = [0] * p  # singular
        elif trial % 4 == 2 and p > 1:
            B[0] = [3 * x - 5 * y for x, y in zip(B[1], B[-1], strict=True)]  # dependent
        elif trial % 4 == 3:
            B = [r[:1] + [0] * (p - 1) if j < 2 else r for j, r in enumerate(B)]  # pivoting
        got = rp.solve_facet(B)
        n = _fraction_solve(B)
        if n is None:
            assert got is None
        else:
            u, d = got
            assert [Fraction(x, d) for x in u] == n
            assert abs(d) == abs(_det(B))


def _fraction_solve(B):
    p = len(B)
    M = [[Fraction(x) for x in r] + [Fraction(1)] for r in B]
    for c in range(p):
        piv = next((r for r in range(c, p) if M[r][c]), None)
        if piv is None:
            return None
        M[c], M[piv] = M[piv], M[c]
        for r in range(p):
            if r != c:
                f = M[r][c] / M[c][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c], strict=True)]
    return [M[i][p] / M[i][i] for i in range(p)]


def _det(B):
    from sympy import Matrix

    return int(Matrix(B).det())


# --- malformed arrays: BundleError naming the field, where the kernel raises InputError -------

def _set(X, value, idx=(0, 0)):
    X = np.array(X, copy=True)
    X[idx] = value
    return X


MALFORMED = [
    (lambda c, m: _with(c, I=_set(c["I"], m, 0)), "I"),
    (lambda c, m: _with(c, I=_set(c["I"], -1, 0)), "I"),
    (lambda c, m: _with(c, I=c["I"][:-1]), "I"),
    (lambda c, m: _with(c, F=_set(c["F"], 2 * len(c["I"]))), "F"),
    (lambda c, m: _with(c, F=_set(c["F"], -1)), "F"),
    (lambda c, m: _with(c, F=_set(c["F"], c["F"][0, 1])), "F"),  # a repeated point
    (lambda c, m: _with(c, F=c["F"][:, :-1]), "F"),
    (lambda c, m: _with(c, Y=c["Y"][:, :-1]), "Y"),
    (lambda c, m: _with(c, Y=c["Y"][:0], I=c["I"][:0]), "Y"),
    (lambda c, m: _with(c, Z=_set(c["Z"], 1.5)), "Z"),
    (lambda c, m: _with(c, Z=_set(c["Z"], -ONE_UP, (1, 2))), "Z"),
    (lambda c, m: _with(c, Z=np.vstack([c["Z"], c["Z"][:1]])), "Z"),  # q > f
    (lambda c, m: _with(c, Z=c["Z"][:, :-1]), "Z"),
    (lambda c, m: _with(c, G=_set(c["G"], len(c["Z"]), 0)), "G"),
    (lambda c, m: _with(c, G=c["G"][:-1]), "G"),
    (lambda c, m: _with(c, rank=13), "rank"),
    (lambda c, m: _with(c, rank=0), "rank"),
]


@pytest.mark.parametrize("edit,field", MALFORMED)
def test_malformed_arrays_are_refused_naming_the_field(edit, field):
    A, c = _case(10, 3)
    bad = edit(c, A.shape[0])
    with pytest.raises(InputError) as ei:
        check_lower(A, bad, Fraction(1, 10**6))
    assert ei.value.field == f"lower.{field}"
    with pytest.raises(rp.BundleError, match=rf"^ends\[0\]\.{field}: "):
        _replay_end(A, bad, Fraction(1, 10**6), "holds")


def test_entries_of_exactly_one_are_accepted_and_indices_must_be_integers():
    A, c = _case(11, 2)
    Z = c["Z"].copy()
    Z[0, 0], Z[0, 1] = 1.0, -1.0
    kc, r = both(A, _with(c, Z=Z), Fraction(1, 10**6))
    assert r["agrees"] and Fraction(r["value"]) == exact_value(A, _with(c, Z=Z))
    for name in "IFG":
        with pytest.raises(rp.BundleError, match=rf"ends\[0\]\.{name}: "):
            _replay_end(A, c, Fraction(1, 10**6), "holds", dtypes={name: "<f8"})


def test_the_rank_is_checked_before_any_array_is_read():
    A, c = _case(12, 2)
    for rank in (13, 40, 0):
        with pytest.raises(rp.BundleError, match=r"ends\[0\]\.rank: a polytope"):
            _replay_end(A, {"rank": rank}, Fraction(1, 10**6), "holds")  # no arrays at all
    assert rp.ROWSET_MAX_RANK == 12 and rp.POLY_MAX_POINTS == 4096
    assert rp.POLY_MAX_FACETS == 100_000  # the replayer keeps its own copies of the bounds
    from softrank.certify.lower import polytope

    assert (polytope.MAX_RANK, polytope.MAX_POINTS, polytope.MAX_FACETS) == (
        rp.ROWSET_MAX_RANK, rp.POLY_MAX_POINTS, rp.POLY_MAX_FACETS)


# --- end to end: a store, a bundle, the replayer's CLI ---------------------------------------

def _store(path: Path) -> dict:
    """Two operators (plain A; logits, so chi > 0): holding, refuted and broken ends."""
    rng = np.random.default_rng(21)
    made = {}
    with Store.create(path, description="polytope replay store") as st:
        for oid, p in (("plain", 2), ("lg", 3)):
            logits = rng.normal(size=(16, 9)) * 2
            A = softmax_rows(logits)
            st.add_operator(A, family="t", id=oid, **({"logits": logits} if oid == "lg"
                                                     else {}))
            U, V = tsvd_witness(A, 6)
            up = {"kind": "factors", "rank": 6, "U": U, "V": V}
            c = polytope_certificate(A, rng.normal(size=(9, p)))
            v = exact_value(A, c)
            for tag, eps, low in (("in", v / 2, c), ("far", 2 * v, c),
                                  ("broken", v / 2, _drop(c, 0)),
                                  ("far-point", v / 2, _far(c))):
                bid = f"{oid}-{tag}"
                st.add_bracket(oid, eps, up, low, id=bid)
                made[bid] = (tag, v)
            if oid == "plain":
                st.add_bracket(oid, v, up, c, id="plain-at")  # an exact tie: fails
                made["plain-at"] = ("at", v)
    return made


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("polytope_replay")
    made = _store(d / "store")
    records = list(iter_checks(d / "store"))
    out = d / "bundle.zip"
    write_bundle(d / "store", records, out)
    return d / "store", made, records, out


def test_store_bundle_and_replay_agree(bundle):
    _, made, records, path = bundle
    kernel = {r["bracket"]: r["lower_check"]["status"] for r in records}
    want = {"in": "holds", "far": "fails", "broken": "fails", "far-point": "fails",
            "at": "fails"}
    assert kernel == {b: want[tag] for b, (tag, _) in made.items()}
    s = rp.replay(str(path))
    got = {r["bracket"]: r for r in s["results"] if r["kind"] == "polytope"}
    assert set(got) == set(made)
    for bid, r in got.items():
        tag, v = made[bid]
        assert r["agrees"] and r["replay"] == kernel[bid] and r["end"] == "lower", r
        assert r["value"] is None if tag in ("broken", "far-point") else Fraction(r["value"]) == v
    assert s["disagreements"] == 0 and s["kernel_proved"] == s["replayed_proved"] > 0
    rp.FLINT = pytest.importorskip("flint")
    try:
        assert rp.replay(str(path))["results"] == s["results"]
    finally:
        rp.FLINT = None


def test_the_held_estimate_counts_the_facet_and_ridge_tuples(bundle):
    # the check holds 2f facet tuples and a Counter of their 2 f p ridges at once: a review's
    # f = 100,000, p = 12 end was estimated at 1.35 million words (135 MB) and peaked at 554 MB
    *_, path = bundle
    _, doc, blobs = rp.read_bundle(str(path))
    end = max((e for e in doc["ends"] if e["kind"] == "polytope"),
              key=lambda e: e["certificate"]["F"]["shape"][0])
    f, p = end["certificate"]["F"]["shape"][0], end["rank"]
    end["certificate"]["F"]["shape"][0] = 1000 * f  # declared only: plan() decodes nothing
    held = rp.plan(doc, blobs, {k: 10 ** 30 for k in rp.LIMITS})[1]["held"]
    assert held >= 1000 * f * (p + 2 * (1 + 3 * p))  # F's words and the tuples


def test_cli_export_and_the_replayer_script(bundle, tmp_path, capsys):
    store, _, _, path = bundle
    out = tmp_path / "cli.zip"
    assert cli_main(["export", str(store), "--out", str(out)]) == 1  # refuted ends: exit 1
    assert rp.replay(str(out))["results"] == rp.replay(str(path))["results"]
    capsys.readouterr()
    assert rp.main([str(out)]) == 0  # every kernel-proved end replays, no disagreement
    text = capsys.readouterr().out
    assert "bracket plain-in lower polytope rank 2 on operator " in text
    assert "replay holds, kernel holds" in text
    assert "DISAGREES" not in text
    # the script itself, without site-packages (no numpy, no flint, no project)
    run = subprocess.run([sys.executable, "-S", str(ROOT / "replay" / "replay.py"), str(out),
                          "--json"], capture_output=True, text=True, timeout=300, cwd="/")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["results"] == rp.replay(str(out))["results"]


@pytest.mark.parametrize("name,dtype,value,match", [
    ("Z", "<f8", 1.5, r"Z: an entry lies outside \[-1, 1\]"),
    ("F", "<i8", 10**6, r"F: need facets of 2 distinct point indices"),
    ("G", "<i8", 10**6, r"G: need .* witness indices"),
    ("I", "<i8", 16, r"I: need .* row indices < 16"),
])
def test_a_forged_array_is_refused_with_exit_2(bundle, tmp_path, name, dtype, value, match):
    _, _, _, path = bundle
    forged = tmp_path / "forged.zip"
    forged_lower_array(path, forged, "plain-in", name, dtype, value)
    with pytest.raises(rp.BundleError, match=match):
        rp.replay(str(forged))
    assert rp.main([str(forged), "--quiet"]) == 2
