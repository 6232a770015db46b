"""Store format v1: round trip, exact numbers, and every kind of bad or tampered input."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import InputError
from softrank.witnesses import Store, jsonexact, open_store

from .storefactory import build_store


def test_round_trip_is_identical(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.random((4, 5)).astype(np.float32)
    U, V = rng.random((4, 2)), rng.random((2, 5))
    D, W, X = rng.random((2, 4)), rng.random((5, 2)), rng.random((2, 2))
    with Store.create(tmp_path / "s", description="rt") as st:
        oid = st.add_operator(A, family="fam", meta={"layer": 3})
        bid = st.add_bracket(oid, 0.1, {"kind": "factors", "rank": 2, "U": U, "V": V},
                             {"kind": "decoder", "rank": 2, "D": D, "W": W, "X": X},
                             claims={"upper_error": 0.05})
    r = open_store(tmp_path / "s")
    assert [o.id for o in r.operators] == [oid]
    op = r.operator(oid)
    assert op.family == "fam" and op.shape == (4, 5) and op.meta == {"layer": 3}
    arr = op.load()["A"]
    assert arr.dtype == np.float32 and np.array_equal(arr, A)
    (br,) = r.brackets
    assert br.id == bid and br.eps == Fraction(0.1)  # the float's exact binary value
    up, lo = br.load()
    assert up["rank"] == 2 and np.array_equal(up["U"], U) and np.array_equal(up["V"], V)
    assert lo["kind"] == "decoder" and np.array_equal(lo["X"], X)
    assert br.claims == {"upper_error": Fraction("0.05")}
    # rewriting from the reader gives the same records, byte for byte (claims and meta stay
    # JSON numbers, not "1/20" strings)
    files = ("brackets.jsonl", "operators.jsonl")
    before = [(tmp_path / "s" / f).read_bytes() for f in files]
    again = Store.open(tmp_path / "s")
    again.close()
    assert [(tmp_path / "s" / f).read_bytes() for f in files] == before
    assert open_store(tmp_path / "s").brackets[0].claims == {"upper_error": Fraction("0.05")}


def test_reopening_keeps_claims_json_cannot_hold_as_floats_exact(tmp_path):
    rng = np.random.default_rng(1)
    A = rng.random((3, 3))
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f")
        st.add_bracket(oid, "1/4", {"kind": "factors", "rank": 3, "U": A, "V": np.eye(3)},
                       claims={"fine": 0.5})
    path = tmp_path / "s" / "brackets.jsonl"
    # a foreign writer's claim beyond the float range: a plain JSON reader would give inf
    path.write_text(path.read_text().replace('"fine": 0.5', '"fine": 0.5, "huge": 1e400'))
    Store.open(tmp_path / "s").close()
    (br,) = open_store(tmp_path / "s").brackets
    assert br.claims == {"fine": Fraction(1, 2), "huge": str(10 ** 400)}  # exact, as a string


def test_json_numbers_never_pass_through_float():
    assert jsonexact.loads('{"eps": 0.1}')["eps"] == Fraction(1, 10)
    assert jsonexact.loads('[1e-400]')[0] == Fraction(1, 10**400)
    with pytest.raises(ValueError):
        jsonexact.loads('[NaN]')


def test_eps_forms_are_exact(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    lines = (tmp_path / "s" / "brackets.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    for form, want in (("1/4", Fraction(1, 4)), ("0.25", Fraction(1, 4)), (0.1, Fraction(1, 10))):
        rec["eps"] = form
        (tmp_path / "s" / "brackets.jsonl").write_text(json.dumps(rec) + "\n")
        assert open_store(tmp_path / "s").brackets[0].eps == want


def _tamper(path, fn):
    data = path.read_bytes()
    path.write_bytes(fn(data))


def test_checksum_mismatch_names_file(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    r = open_store(tmp_path / "s")
    br = r.brackets[0]
    _tamper(br.path, lambda d: d[:-1] + bytes([d[-1] ^ 1]))
    with pytest.raises(InputError) as ei:
        br.load()
    assert ei.value.field == "sha256" and str(br.path) in str(ei.value)


def test_pickle_is_never_loaded(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    r = open_store(tmp_path / "s")
    op = r.operators[0]
    op.path.write_bytes(pickle.dumps({"A": np.eye(2)}))
    lines = (tmp_path / "s" / "operators.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    import hashlib

    rec["sha256"] = hashlib.sha256(op.path.read_bytes()).hexdigest()  # a "consistent" forgery
    (tmp_path / "s" / "operators.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match="pickle") as ei:
        open_store(tmp_path / "s").operators[0].load()
    assert str(op.path) in str(ei.value)


def test_object_array_inside_npz_is_refused(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    r = open_store(tmp_path / "s")
    op = r.operators[0]
    np.savez(op.path, A=np.array([{"x": 1}], dtype=object))
    with pytest.raises(InputError):
        from softrank.witnesses.store import load_npz

        load_npz(op.path, None)


def test_truncated_file(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    r = open_store(tmp_path / "s")
    op = r.operators[0]
    data = op.path.read_bytes()
    op.path.write_bytes(data[: len(data) // 2])
    from softrank.witnesses.store import load_npz

    with pytest.raises(InputError, match="corrupt|sha256"):
        load_npz(op.path, None)
    with pytest.raises(InputError):
        op.load()


def test_truncated_jsonl_line(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    p.write_text(p.read_text()[:-20])
    with pytest.raises(InputError) as ei:
        open_store(tmp_path / "s")
    assert "brackets.jsonl" in str(ei.value) and "line" in str(ei.value)


@pytest.mark.parametrize("mutate,match", [
    (lambda r: r.update(eps="0"), "eps"),
    (lambda r: r.update(eps="-1/4"), "eps"),
    (lambda r: r.update(eps="x"), "eps"),
    (lambda r: r.update(upper={"kind": "factors", "rank": -1}), "rank"),
    (lambda r: r.update(upper={"kind": "magic", "rank": 1}), "kind"),
    (lambda r: r.update(lower={"kind": "psychic", "rank": 9}), "kind"),
    (lambda r: r.update(operator="nope"), "operator"),
    (lambda r: r.pop("sha256"), "sha256"),
])
def test_bad_bracket_records(tmp_path, mutate, match):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    mutate(recs[0])
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match=match) as ei:
        open_store(tmp_path / "s")
    assert "brackets.jsonl" in str(ei.value)


def test_header_checks(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    head = tmp_path / "s" / "store.json"
    head.write_text(json.dumps({"format": "softrank-brackets", "version": 2}))
    with pytest.raises(InputError, match="version"):
        open_store(tmp_path / "s")
    head.write_text(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(InputError, match="format"):
        open_store(tmp_path / "s")
    with pytest.raises(InputError):
        open_store(tmp_path / "missing")


def test_writer_rejects_bad_arrays(tmp_path):
    st = Store.create(tmp_path / "s")
    with pytest.raises(InputError, match="NaN"):
        st.add_operator(np.array([[np.nan, 1.0]]), family="f")
    with pytest.raises(InputError, match="float64 or float32"):
        st.add_operator(np.array([[1, 0]]), family="f")
    oid = st.add_operator(np.array([[0.5, 0.5]]), family="f")
    with pytest.raises(InputError, match="array missing"):
        st.add_bracket(oid, "1/4", {"kind": "factors", "rank": 1, "U": np.ones((1, 1))})
    with pytest.raises(InputError):
        Store.create(tmp_path / "s")  # not empty


def test_shape_mismatch_in_file_is_detected(tmp_path):
    build_store(tmp_path / "s", n_ops=1, size=6)
    p = tmp_path / "s" / "operators.jsonl"
    rec = json.loads(p.read_text())
    rec["shape"] = [6, 7]
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match="shape"):
        open_store(tmp_path / "s").operators[0].load()


def test_json_numbers_with_absurd_exponents_are_refused_fast():
    with pytest.raises(ValueError, match="too many digits"):
        jsonexact.loads('[1e-100000000]')
    from softrank.certify.rationals import to_rational

    with pytest.raises(InputError, match="digits"):
        to_rational("1e-100000000")
    assert to_rational("1e-300") == Fraction(1, 10**300)


def test_bernstein_round_trip_and_rank_checked_against_shapes(tmp_path):
    rng = np.random.default_rng(1)
    A = rng.random((4, 5))
    U, V = rng.random((4, 2)), rng.random((2, 5))
    W, P, J = rng.random((5, 2)), rng.random((5, 4)), np.array([3, 0], dtype=np.int64)
    W[J] = np.eye(2)
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f")
        st.add_bracket(oid, "1/8", {"kind": "factors", "rank": 2, "U": U, "V": V},
                       {"kind": "bernstein", "rank": 2, "W": W, "P": P, "J": J})
    (br,) = open_store(tmp_path / "s").brackets
    assert br.expected_shapes()["lower.P"] == (5, 4)
    _, lo = br.load()
    assert lo["kind"] == "bernstein" and lo["rank"] == 2
    assert np.array_equal(lo["W"], W) and np.array_equal(lo["P"], P)
    assert lo["J"].dtype == np.int64 and lo["J"].tolist() == [3, 0]
    # a record whose rank disagrees with the stored arrays is refused before allocation
    p = tmp_path / "s" / "brackets.jsonl"
    rec = json.loads(p.read_text())
    rec["lower"]["rank"] = 3
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match="shape") as ei:
        open_store(tmp_path / "s").brackets[0].load()
    assert "lower." in str(ei.value)


def test_replace_bracket_rewrites_in_place_and_refuses_unknown_ids(tmp_path):
    A = np.random.default_rng(2).random((3, 3))
    up = {"kind": "factors", "rank": 3, "U": A, "V": np.eye(3)}
    with Store.create(tmp_path / "s") as st:
        oid = st.add_operator(A, family="f")
        for name in ("a", "b", "c"):
            st.add_bracket(oid, "1/4", up, None, id=name, claims={"x": 0.5})
        st.replace_bracket("b", oid, "1/4", up, {"kind": "nonzero", "rank": 1},
                           claims={"x": 0.75})
        assert st.bracket_record("b")["claims"] == {"x": 0.75}
        with pytest.raises(InputError, match="unknown bracket"):
            st.replace_bracket("zz", oid, "1/4", up)
    brs = open_store(tmp_path / "s").brackets
    assert [b.id for b in brs] == ["a", "b", "c"]
    assert brs[1].lower.rank == 1 and brs[0].lower is None
    assert brs[1].load()[1]["kind"] == "nonzero"  # file and checksum rewritten together


def _written_ids(root) -> list[str]:
    text = (root / "brackets.jsonl").read_text()
    return [json.loads(line)["id"] for line in text.splitlines() if line]


def test_records_reach_disk_after_flush_seconds_even_below_the_count(tmp_path, monkeypatch):
    """A slow writer's records are on disk once flush_seconds have passed since the last
    flush, not only after flush_every of them; inside batch() none is written until its end."""
    import softrank.witnesses.store as store_mod

    clock = [1000.0]
    monkeypatch.setattr(store_mod.time, "monotonic", lambda: clock[0])
    root = tmp_path / "s"
    st = Store.create(root)
    assert st.flush_every == 64 and st.flush_seconds == 30.0
    A = np.eye(3)
    oid = st.add_operator(A, family="f")
    up = {"kind": "factors", "rank": 3, "U": A, "V": A}
    b1 = st.add_bracket(oid, "1/4", up)
    clock[0] += 29.0
    b2 = st.add_bracket(oid, "1/5", up)
    assert _written_ids(root) == []  # neither the count nor the time is due
    clock[0] += 1.0
    b3 = st.add_bracket(oid, "1/6", up)
    assert _written_ids(root) == [b1, b2, b3]  # 30 s after the last flush
    clock[0] += 100.0
    with st.batch():
        b4 = st.add_bracket(oid, "1/7", up)
        b5 = st.add_bracket(oid, "1/8", up)
        assert _written_ids(root) == [b1, b2, b3]  # held: the batch is not split
    assert _written_ids(root) == [b1, b2, b3, b4, b5]
    clock[0] += 1.0
    with st.batch():
        b6 = st.add_bracket(oid, "1/9", up)
    assert _written_ids(root) == [b1, b2, b3, b4, b5]  # not due: 1 s, 1 record
    st.flush_every = 2
    b7 = st.add_bracket(oid, "1/10", up)
    assert _written_ids(root) == [b1, b2, b3, b4, b5, b6, b7]  # the count is due
    st.close()
