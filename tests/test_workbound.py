"""Bounded work on accepted input (proofs_notes/workbound.md).

Every hostile input class ends quickly: a kernel check over its work limit is ``undecided``
with a reason starting "work limit" (never a hang, never a wrong verdict), the oracle's
budget covers every step, and a declared-huge image file is refused before allocation.
The hostile inputs are built at reduced scale with the limit lowered, so the tests are fast.
"""

from __future__ import annotations

import io
import json
import struct
import time
import zipfile

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from softrank.certify import check_bracket, check_lower, check_upper
from softrank.certify.lower.polytope import column_scaled, sphere_defect
from softrank.certify.numerics import workbound
from softrank.cli import main

from .helpers import exact_row1, random_attention, tsvd_witness
from .storefactory import build_store

LIMITED = workbound.WORK_LIMIT


def hull_facets(Y: np.ndarray) -> np.ndarray:
    """One of each mirror pair of qhull's facets of conv(+-Y)."""
    k = Y.shape[0]
    reps, seen = [], set()
    for s in ConvexHull(np.vstack([Y, -Y])).simplices:
        key = frozenset(int(x) for x in s)
        if frozenset((x + k) % (2 * k) for x in key) in seen:
            continue
        seen.add(key)
        reps.append([int(x) for x in s])
    return np.array(reps, dtype=np.int64)


def sphere_points(p: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((k, p))
    return Y / np.linalg.norm(Y, axis=1, keepdims=True)


def polytope_cert(Y: np.ndarray, F: np.ndarray, N: int) -> dict:
    """A certificate whose sphere part is right; its witnesses are zero (value 0), so the
    check can only fail on the value, after the whole sphere part ran."""
    k, p = Y.shape
    return {"kind": "polytope", "rank": p, "Y": Y, "I": np.arange(k, dtype=np.int64) % 2,
            "F": F, "Z": np.zeros((1, N)), "G": np.zeros(len(F), dtype=np.int64)}


# --- the estimator ------------------------------------------------------------------------

def test_bits_read_the_exponent_spread_without_exact_work():
    assert workbound.bits(np.array([[1.0, 0.5, 0.0]])) == 54
    assert workbound.bits(np.zeros((2, 2))) == 1
    X = np.ones((3, 3))
    X[1, 1] = 5e-324  # the smallest subnormal: exponent -1073
    assert workbound.bits(X) == 53 + 1 + 1073
    # the bound really bounds the integers dyadic.to_int_matrix builds
    from softrank.certify.numerics import dyadic

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5, 4)) * 2.0 ** rng.integers(-900, 900, size=(5, 4))
    M, _ = dyadic.to_int_matrix(Z)
    assert max(abs(int(v)).bit_length() for v in M.entries()) <= workbound.bits(Z)


def test_meter_refuses_a_phase_before_it_runs_and_meters_nest():
    with workbound.metered(100) as m:
        workbound.charge(60, "a")
        with pytest.raises(workbound.WorkLimit, match="^work limit: b"):
            workbound.charge(41, "b")
        assert m.spent == 60  # the refused phase is not charged
        with workbound.metered() as inner:  # no limit given: the record's meter
            assert inner is m
    with workbound.metered(5) as own:
        assert own.limit == 5
    assert workbound.parse_max_work("6e10") == 60_000_000_000
    for bad in ("-1", "1.5", "x", "1e400000"):
        with pytest.raises(Exception, match="--max-work"):
            workbound.parse_max_work(bad)


# --- polytope: the subnormal coordinate -----------------------------------------------------

def test_column_scaling_keeps_facets_and_defects():
    Y = sphere_points(3, 40, 1)
    F = hull_facets(Y)
    tiny = Y.copy()
    tiny[:, 0] *= 2.0 ** -1060  # subnormal first coordinate, same combinatorics
    assert np.all(np.abs(column_scaled(tiny)[:, 0]) <= 1.0)
    assert np.array_equal(np.ldexp(column_scaled(tiny)[:, 1:], 0), tiny[:, 1:])
    assert sphere_defect(Y, F) is None and sphere_defect(tiny, F) is None
    # a defect is the same defect at either scale: a point moved outside one facet
    bad = Y.copy()
    bad[F[0][0] % 40] *= 1.5
    bad_tiny = bad.copy()
    bad_tiny[:, 0] *= 2.0 ** -1060
    d = sphere_defect(bad, F)
    assert d is not None and sphere_defect(bad_tiny, F) == d
    # a column whose scaling would round is left alone (exactness is checked)
    odd = np.array([[2.0 ** 1000, 1.0], [5e-324, 1.0]])
    assert np.array_equal(column_scaled(odd)[:, 0], odd[:, 0])


def test_subnormal_polytope_p4_k300_is_fast_under_the_default_limit():
    """The reported case: p = 4, k = 300, one subnormal coordinate (14 s before; the twin of
    normal scale 0.8 s).  Now the facets are solved at normal scale."""
    Y = sphere_points(4, 300, 1)
    F = hull_facets(Y)
    Y[:, 0] *= 2.0 ** -1060
    rng = np.random.default_rng(2)
    A = random_attention(rng, 4, 6)
    t0 = time.monotonic()
    c = check_lower(A, polytope_cert(Y, F, 6), "1/4")
    assert time.monotonic() - t0 < 30
    assert c.status == "fails" and c.value is not None  # the sphere part passed
    assert "reason" not in c.to_json()


def test_spread_polytope_ends_undecided_at_the_limit_quickly():
    """Exponents spread within every column (column scaling cannot help): the facet solves
    are priced from the bits before they start and refused at a lowered limit."""
    Y = sphere_points(6, 30, 1)
    F = hull_facets(Y)
    rng = np.random.default_rng(3)
    Y = Y * 2.0 ** rng.integers(-500, 500, size=Y.shape)
    A = random_attention(rng, 6, 6)  # rank 6 needs min(m, N) >= 6
    t0 = time.monotonic()
    c = check_lower(A, polytope_cert(Y, F, 6), "1/4", max_work=10**8)
    assert time.monotonic() - t0 < 10
    assert c.status == "undecided" and c.value is None
    assert c.detail["reason"].startswith(LIMITED) and c.to_json()["reason"].startswith(LIMITED)
    assert "normals" in c.detail["reason"]


def test_overflowing_normals_price_every_pair():
    """A point with a subnormal coordinate inside a normal column: the normals may leave
    float range, so every point-facet pair is exact; the pairs are priced (from the solved
    normals' bits) before they run."""
    Y = sphere_points(3, 60, 4)
    F = hull_facets(Y)
    Y[:, 2] *= 2.0 ** -1070
    Y[0, 2] = 1.0  # one normal entry keeps the column's scale: the others stay subnormal
    A = random_attention(np.random.default_rng(5), 4, 6)
    cert = polytope_cert(Y, F, 6)
    price = workbound.solve_facets(len(F), 3, workbound.bits(column_scaled(Y)))
    c = check_lower(A, cert, "1/4", max_work=price + 5 * 10**6)
    assert c.status == "undecided" and c.detail["reason"].startswith(LIMITED)
    assert "point-facet comparisons" in c.detail["reason"]
    # with the default limit the same certificate is decided (its value part fails)
    assert check_lower(A, cert, "1/4").status == "fails"


# --- upper, lower, bracket: exact tiers at the limit ----------------------------------------

def _exact_forced_upper(seed: int = 0):
    """A witness with exponents spread over the float range, eps exactly at its error: only
    the exact tier decides (the error equals eps: holds)."""
    rng = np.random.default_rng(seed)
    A = random_attention(rng, 12, 10)
    U, V = tsvd_witness(A, 4)
    U[0, 0] = 2.0 ** -1070
    V[1, 1] = 1e-300
    err = exact_row1(A, (U, V))
    return A, U, V, err


def test_upper_exact_tier_is_priced_and_decides_under_the_default():
    A, U, V, err = _exact_forced_upper()
    c = check_upper(A, U, V, err)
    assert c.status == "holds" and c.tier == "exact"
    low = check_upper(A, U, V, err, max_work=workbound.float_product(12, 4, 10) + 1)
    assert low.status == "undecided" and low.detail["reason"].startswith(LIMITED)
    assert low.to_json()["reason"].startswith(LIMITED)
    # a limit of 0 refuses even the float tier; never a verdict
    zero = check_upper(A, U, V, err, max_work=0)
    assert zero.status == "undecided" and zero.value is None
    # the record says which tiers ran before the limit stopped the check
    assert c.tiers_run[0] == "float64" and len(c.tiers_run) >= 2
    assert low.tiers_run == ("float64",) and low.tier == "float64"
    assert zero.tiers_run == ()
    assert low.to_json()["tiers_run"] == ["float64"]


def test_a_lower_check_stopped_by_the_limit_names_the_tiers_it_ran():
    from .test_lower_polytope import instance, reference_value

    A, cert = instance(0, 2, vertices=True)
    v = reference_value(A, cert)  # eps = the exact value: float64 cannot decide, arb can
    full = check_lower(A, cert, v)
    assert full.status == "fails" and full.tiers_run == ("float64", "arb")
    seen = {}
    for k in range(8, 24):
        c = check_lower(A, cert, v, max_work=2**k)
        seen.setdefault((c.status, c.tiers_run), c)
    # refused before the value tiers (at the facets' normals: structure, not a tier), after
    # the float64 tier (at arb), and not refused
    assert set(seen) == {("undecided", ()), ("undecided", ("float64",)),
                         ("fails", ("float64", "arb"))}
    mid = seen[("undecided", ("float64",))]
    assert mid.tier == "float64" and mid.value is None
    assert mid.detail["reason"].startswith(LIMITED) and "arb tier" in mid.detail["reason"]
    assert "facets" in seen[("undecided", ())].detail["reason"]


def test_bracket_shares_one_meter_and_falls_back():
    A, U, V, err = _exact_forced_upper()
    up = {"kind": "factors", "rank": 4, "U": U, "V": V}
    lo = {"kind": "frobenius_tail", "rank": 2}
    full = check_bracket(A, up, lo, err)
    assert full.upper_outcome == "confirmed"
    tiny = check_bracket(A, up, lo, err, max_work=1000)
    assert tiny.upper_outcome == "weakened" and tiny.lower_outcome == "weakened"
    assert tiny.upper == 10 and tiny.lower == 0  # the fallbacks every matrix has
    js = tiny.to_json()
    assert js["upper_check"]["reason"].startswith(LIMITED)
    assert js["lower_check"]["reason"].startswith(LIMITED)
    with pytest.raises(Exception, match="max_work"):
        check_bracket(A, up, lo, err, max_work=-1)


@pytest.mark.parametrize("tier", ["arb", "exact"])
def test_lower_kinds_at_the_limit(tier):
    rng = np.random.default_rng(7)
    A = random_attention(rng, 6, 6)
    W = np.eye(6)[:, :2]
    X = np.linalg.inv(A[np.ix_([0, 1], [0, 1])])
    certs = [{"kind": "decoder", "rank": 2, "D": np.eye(6)[:2], "W": W, "X": X},
             {"kind": "submatrix", "rank": 2, "rows": np.array([0, 1]),
              "cols": np.array([0, 1]), "X": X},
             {"kind": "rowset", "rank": 2, "I": np.array([0, 1]),
              "Z": np.array([[1.0] * 6, [1.0, -1.0] * 3])},
             {"kind": "frobenius_tail", "rank": 3}]
    for cert in certs:
        free = check_lower(A, cert, "1/100", tier=tier)
        assert "reason" not in free.to_json()
        c = check_lower(A, cert, "1/100", tier=tier, max_work=1)
        assert c.status == "undecided" and c.detail["reason"].startswith(LIMITED), cert["kind"]


# --- CLI: check and audit -------------------------------------------------------------------

def test_check_and_audit_take_max_work(tmp_path, capsys):
    store = tmp_path / "s"
    build_store(store, n_ops=2, size=6)
    assert main(["check", str(store), "--json"]) == 1  # the store holds false claims
    base = json.loads(capsys.readouterr().out)
    assert base["summary"]["work_limited"] == 0
    assert main(["check", str(store), "--json", "--max-work", "0"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["work_limited"] == doc["summary"]["brackets"] == 4
    assert all(r["upper_outcome"] == "weakened" for r in doc["records"])
    assert all(r["upper_check"]["reason"].startswith(LIMITED) for r in doc["records"])
    assert main(["check", str(store), "--max-work", "much"]) == 2
    assert "--max-work" in capsys.readouterr().err
    code = main(["audit", str(store), "--out", str(tmp_path / "r"), "--no-figures",
                 "--max-work", "0", "--resamples", "10"])
    assert code == 1
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert "--max-work 0" in rep["run"]["command"]


def test_store_reader_caps(tmp_path, capsys, monkeypatch):
    store = tmp_path / "s"
    build_store(store, n_ops=2, size=6)
    monkeypatch.setenv("SOFTRANK_MAX_BRACKETS", "3")
    assert main(["check", str(store)]) == 2
    err = capsys.readouterr().err
    assert "brackets.jsonl" in err and "line 4" in err and "SOFTRANK_MAX_BRACKETS" in err
    monkeypatch.delenv("SOFTRANK_MAX_BRACKETS")
    monkeypatch.setenv("SOFTRANK_MAX_OPERATORS", "1")
    assert main(["check", str(store)]) == 2
    assert "operators.jsonl" in capsys.readouterr().err
    monkeypatch.delenv("SOFTRANK_MAX_OPERATORS")
    monkeypatch.setenv("SOFTRANK_MAX_DECLARED_WORK", "1000")
    assert main(["check", str(store)]) == 2
    assert "SOFTRANK_MAX_DECLARED_WORK" in capsys.readouterr().err


# --- oracle: the budget covers every step ---------------------------------------------------

def test_oracle_budget_zero_on_a_big_number_cell_returns_quickly(tmp_path, capsys):
    rng = np.random.default_rng(11)
    digits = "0123456789"
    rows = [["0." + "".join(rng.choice(list(digits), size=1000)) for _ in range(6)]
            for _ in range(6)]
    cell = tmp_path / "CELL.json"
    cell.write_text(json.dumps({"matrix": rows, "eps": "1/4"}))
    t0 = time.monotonic()
    assert main(["oracle", str(cell), "--budget", "0"]) == 1  # an open bracket
    assert time.monotonic() - t0 < 30  # the minor search alone ran for minutes before
    out = capsys.readouterr().out
    assert "time budget of 0 s used up" in out and "1 <= r_eps <= 6" in out
    assert main(["oracle", str(cell), "--budget", "-1"]) == 2
    # the API: total_budget bounds every step the same way
    from softrank.exact.oracle import oracle

    t0 = time.monotonic()
    res = oracle(rows, "1/4", total_budget=0)
    assert time.monotonic() - t0 < 30 and not res.decided
    assert (res.lower, res.upper) == (1, 6) and res.witness.error == 0


def test_oracle_without_total_budget_still_runs_under_a_deadline(monkeypatch):
    # a library call that names only ``budget`` once ran the unbudgeted steps for minutes
    import importlib

    B = importlib.import_module("softrank.exact.budget")
    O = importlib.import_module("softrank.exact.oracle")

    seen = []

    def spy(A, eps, stochastic, complete, budget):
        seen.append((budget, B.remaining()))
        return "spied"

    monkeypatch.setattr(O, "_oracle", spy)
    assert O.oracle([["1/2", "1/2"]], "1/4", budget=5) == "spied"
    assert seen[0][0] == 5 and seen[0][1] <= 2 * 5 + O.DEFAULT_BUDGET
    assert O.oracle([["1/2", "1/2"]], "1/4", budget=5, total_budget=1) == "spied"
    assert seen[1][0] == 1 and seen[1][1] <= 1


# --- produce --images: the vetted reader -----------------------------------------------------

def _npy_header(shape, descr="<f8") -> bytes:
    d = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    d = d + b" " * (64 - (10 + len(d) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d


def test_produce_images_refuses_a_declared_huge_array_before_allocation(tmp_path, capsys,
                                                                         monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("img.npy", _npy_header((3, 200000, 200000)))  # 960 GB declared
    bomb = tmp_path / "images.npz"
    bomb.write_bytes(buf.getvalue())
    assert bomb.stat().st_size < 1000

    def no_load(*a, **k):
        raise AssertionError("np.load used on an images file")
    monkeypatch.setattr(np, "load", no_load)
    code = main(["produce", str(tmp_path / "out"), "--model", str(tmp_path / "nomodel"),
                 "--images", str(bomb)])
    assert code == 2
    assert "images.npz" in capsys.readouterr().err
    # a declared shape of the wrong rank is refused by name before allocation as well
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("flat.npy", _npy_header((4,)) + np.zeros(4).tobytes())
    flat = tmp_path / "flat.npz"
    flat.write_bytes(buf.getvalue())
    assert main(["produce", str(tmp_path / "out2"), "--model", str(tmp_path / "nomodel"),
                 "--images", str(flat)]) == 2
    assert "3-D" in capsys.readouterr().err


def test_images_reader_keeps_file_order(tmp_path):
    from softrank.witnesses.models import read_images

    p = tmp_path / "ok.npz"
    np.savez(p, b=np.ones((3, 2, 2), dtype=np.uint8), a=np.zeros((2, 2, 3)))
    imgs = read_images(p)
    assert [x.shape for x in imgs] == [(3, 2, 2), (2, 2, 3)]


# --- intrinsic records: priced before the kernel runs ----------------------------------------

def test_intrinsic_record_over_the_limit_is_refused_by_name(tmp_path):
    from softrank.commands._intrinsic_check import iter_intrinsic_checks
    from softrank.witnesses import Store, open_store
    from softrank.witnesses.intrinsic_store import IntrinsicWriter
    from softrank.witnesses.models import softmax64
    from softrank.witnesses.producers import intrinsic as P

    H = np.random.default_rng(0).standard_normal((12, 10)) * 2
    root = tmp_path / "s"
    with Store.create(root) as st:
        oid = st.add_operator(softmax64(H), family="toy", logits=H)
    C = P.interaction_float(None, open_store(root).operator(oid).load()["logits"])
    rw = P.rank_witness(C, 1, budget=0.5)
    with IntrinsicWriter(open_store(root)) as w:
        w.add(oid, "rank", rw.arrays, rank=1, eps=("1/4",), claims=rw.claims)
    ok = list(iter_intrinsic_checks(open_store(root)))
    assert "error" not in ok[0] and "kappa" in ok[0]
    limited = list(iter_intrinsic_checks(open_store(root), max_work=1000))
    assert limited[0]["error"].count(LIMITED) == 1 and "kappa" not in limited[0]
    assert limited[0]["id"] in limited[0]["error"]


def test_a_record_whose_slack_is_over_the_limit_ends_undecided_not_in_a_crash(tmp_path,
                                                                                  capsys):
    """Where the operator slack chi (A versus the softmax of its stored logits) could not be
    enclosed within --max-work, building the record's bracket raised TypeError (exit 3)."""
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "l.npz", logits=3 * rng.standard_normal((2, 8, 8)))
    store = tmp_path / "s"
    assert main(["produce", str(store), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
                 "--producers", "tsvd", "keyset", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["check", str(store), "--json", "--max-work", "1"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["work_limited"] == doc["summary"]["brackets"] == 2
    for r in doc["records"]:
        assert r["upper_result"] == r["lower_result"] == "undecided"
        assert (r["lower"], r["upper"]) == (0, 8)  # the ends that hold for every matrix
        assert r["upper_check"]["reason"].startswith(LIMITED)
    # with the default limit the same store is proved
    assert main(["check", str(store), "--json"]) == 0


# --- intrinsic witnesses: rectangles, gauge and PSD dual are priced before they run ----------

def test_intrinsic_witness_loops_are_priced():
    from types import SimpleNamespace

    from softrank.certify.errors import InputError as IE
    from softrank.certify.numerics import workbound as wb
    from softrank.commands._intrinsic_check import _within_limit

    rng = np.random.default_rng(0)
    small = {"rects": np.zeros((16, 4), dtype=np.int64), "G": np.eye(4), "M": None}
    assert wb.intrinsic_witness(128, 128, 4, 60, small) < 10**8  # a producer's witness
    # a review's stores: 102,400 rectangles of width 64 on 2000-bit factors ran 174 s, a
    # 64 x 64 gauge of 1130-bit entries 81 s: both now price above the default limit
    many = {"rects": np.zeros((320 * 320, 4), dtype=np.int64)}
    assert wb.intrinsic_witness(320, 320, 64, 2100, many) > wb.DEFAULT_MAX_WORK
    G = np.eye(64) + np.triu(np.full((64, 64), 1e-300), 1)
    assert wb.intrinsic_witness(64, 64, 64, 60, {"G": G}) > wb.DEFAULT_MAX_WORK
    assert wb.intrinsic_witness(8, 12_000, 1, 60, {"M": np.zeros(1)}) > wb.DEFAULT_MAX_WORK
    # the PSD dual's dense buffers: refused as memory even under a huge work limit
    rec = SimpleNamespace(id="op0.r1")
    X, Y = rng.standard_normal((8, 1)), rng.standard_normal((12_000, 1))
    with pytest.raises(IE) as err:
        _within_limit(rec, "S/intrinsic.jsonl", 8, 12_000, 1, [X, Y], 10**18,
                      {"M": np.zeros((8, 12_000))})
    assert err.value.field == "op0.r1.M" and "dense" in str(err.value)
    _within_limit(rec, "S/intrinsic.jsonl", 8, 100, 1, [X, Y[:100]], 10**18,
                  {"M": np.zeros((8, 100))})  # 108^2 * 48 bytes: accepted


def test_kappa_variance_dual_is_priced_with_its_weights_bits():
    # the variance dual was run unpriced: on 500 x 500 factors of width 2 with weights spread
    # over 2^-1000 .. 2^1000 it took 10 CPU s (700 x 700: about 20 s), beyond the record's price
    from types import SimpleNamespace

    from softrank.certify.errors import InputError as IE
    from softrank.certify.numerics import workbound as wb
    from softrank.commands._intrinsic_check import _within_limit

    rng = np.random.default_rng(1)
    narrow = rng.random(500) + 0.5
    wide = narrow * 2.0 ** rng.integers(-1000, 1000, 500)
    assert wb.intrinsic_witness(500, 500, 2, 60, {"lam": wide, "mu": wide}) > 10**10
    assert (wb.intrinsic_witness(500, 500, 2, 60, {"lam": wide, "mu": wide})
            > wb.intrinsic_witness(500, 500, 2, 60, {"lam": narrow, "mu": narrow}) > 10**9)
    # only the nonzero weights are used: a one-point support costs little
    one = np.zeros(500)
    one[3] = 1.0
    assert wb.intrinsic_witness(500, 500, 2, 60, {"lam": one, "mu": one}) < 10**7
    # a record whose dual would run past the limit is refused before it runs
    rec = SimpleNamespace(id="op0.r2")
    X, Y = rng.standard_normal((700, 2)), rng.standard_normal((700, 2))
    w7 = rng.random(700) * 2.0 ** rng.integers(-1000, 1000, 700)
    limit = wb.intrinsic_record(700, 700, 2, X, Y) + 10**10
    _within_limit(rec, "S/intrinsic.jsonl", 700, 700, 2, [X, Y], limit, {})
    with pytest.raises(IE) as err:
        _within_limit(rec, "S/intrinsic.jsonl", 700, 700, 2, [X, Y], limit,
                      {"lam": w7, "mu": w7})
    assert err.value.field == "op0.r2" and "work limit" in str(err.value)


def test_a_long_beta_and_many_eps_are_priced():
    # tau's arb rows multiply every logit by beta at two precisions: a 26,000-bit beta on
    # 96 x 96 logits took 2.4 s against 0.8 s for beta = 1, both priced at 0.97 s; and the
    # profile of every eps ran outside any price
    from fractions import Fraction
    from types import SimpleNamespace

    from softrank.certify.errors import InputError as IE
    from softrank.certify.numerics import workbound as wb
    from softrank.commands._intrinsic_check import _within_limit

    rng = np.random.default_rng(2)
    H = rng.standard_normal((96, 96)) * 2.0 ** rng.integers(-1000, -900, (96, 96))
    X, Y = np.zeros((96, 1)), np.zeros((96, 1))
    plain = wb.intrinsic_record(96, 96, 1, H, X, Y)
    assert wb.intrinsic_record(96, 96, 1, H, X, Y, beta_bits=2) < plain * 1.05
    assert wb.intrinsic_record(96, 96, 1, H, X, Y, beta_bits=26_000) > plain + 2.4 * 10**9
    rec = SimpleNamespace(id="op0.r1")
    beta = Fraction(2**12_990 + 12_345, 2**12_990 + 1)
    limit = plain + wb.profiles(1, 3) + 10**8
    _within_limit(rec, "S/intrinsic.jsonl", 96, 96, 1, [H, X, Y], limit, {},
                  beta=Fraction(1), eps=[Fraction(1, 4)])
    with pytest.raises(IE) as err:
        _within_limit(rec, "S/intrinsic.jsonl", 96, 96, 1, [H, X, Y], limit, {},
                      beta=beta, eps=[Fraction(1, 4)])
    assert err.value.field == "op0.r1" and "work limit" in str(err.value)
    many = [Fraction(1, k) for k in range(2, 2002)]
    assert wb.profiles(len(many), 30) > 2000 * 300_000  # 0.13 - 0.44 ms measured each
    with pytest.raises(IE):
        _within_limit(rec, "S/intrinsic.jsonl", 96, 96, 1, [H, X, Y], limit, {},
                      beta=Fraction(1), eps=many)


def test_oracle_budget_bounds_the_exact_simplex_of_large_stochastic_cells():
    # a 32 x 32 stochastic cell: the thin rank-one LP (about 1,000 unknowns, 3,000 rows) ran
    # 74 s past a 5 s budget before its pivots checked the deadline
    from softrank.exact.oracle import oracle

    rng = np.random.default_rng(4)
    W = rng.integers(1, 9, size=(32, 32))
    rows = [[f"{w}/{int(r.sum())}" for w in r] for r in W]
    t0 = time.monotonic()
    res = oracle(rows, "1/10", mode="stochastic", budget=1, total_budget=1)
    assert time.monotonic() - t0 < 30 and res.lower <= res.upper


@pytest.mark.parametrize("kw", [{"budget": -1}, {"budget": float("nan")},
                                {"total_budget": -5}, {"total_budget": float("nan")},
                                {"budget": "5"}, {"budget": True}])
def test_oracle_refuses_budgets_that_are_not_seconds(kw):
    from softrank.certify.errors import InputError
    from softrank.exact.oracle import oracle

    with pytest.raises(InputError) as err:
        oracle([["1/2", "1/2"], ["1/4", "3/4"]], "1/4", **kw)
    assert err.value.field in kw
