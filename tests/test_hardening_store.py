"""Hostile stores: the JSON reader, file paths and array headers refuse before any harm."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank.certify import InputError
from softrank.cli import main
from softrank.witnesses import Store, jsonexact, npzsafe, open_store

from .storefactory import build_store


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _write(path: Path, recs: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _store_with(tmp_path: Path, jsonl: str, key: str, value) -> Path:
    """A one-operator store whose first record of ``jsonl`` has ``key`` set to ``value``."""
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / jsonl
    recs = _lines(p)
    recs[0][key] = value
    _write(p, recs)
    return tmp_path / "s"


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- JSON reader


def test_duplicate_keys_are_refused():
    with pytest.raises(ValueError, match="duplicate key 'eps'"):
        jsonexact.loads('{"eps": "0.5", "eps": "0.1"}')


def test_deep_nesting_is_refused_without_recursion_error():
    text = "[" * 3000 + "]" * 3000
    with pytest.raises(ValueError, match="nesting deeper"):
        jsonexact.loads(text)
    # brackets inside strings do not count
    assert jsonexact.loads(json.dumps({"s": "[" * 3000})) == {"s": "[" * 3000}
    assert jsonexact.nesting_depth('{"a": [[1], {"b": [2]}]}') == 4


def test_unterminated_strings_are_vetted_in_one_pass():
    # the vetting scan once retried the closing quote from every quote of an unterminated
    # string: 200 KB of escaped quotes took minutes, a few MB would take hours; these 4 MB
    # pass in one scan (and the parser then refuses them)
    text = "[" * 70 + '"' + '\\"' * 2_000_000
    assert jsonexact.nesting_depth(text) == 70
    assert jsonexact.nesting_depth('"a"a' * 500_000 + "\\") == 0
    with pytest.raises(ValueError):
        jsonexact.loads(text)
    # a string's brackets never count, closed or not; the brackets before it do
    assert jsonexact.nesting_depth('[{"k": "[[["}, "]]]') == 2


def test_huge_integers_and_numbers_are_refused():
    with pytest.raises(ValueError, match="too many digits"):
        jsonexact.loads("1" * 5000)
    with pytest.raises(ValueError, match="too many digits"):
        jsonexact.loads("1e-5000")


def test_numbers_expanding_far_past_their_text_are_refused():
    # each "1e-3999" is 7 characters and a 4,000-digit rational
    assert jsonexact.loads("1e-3999") == Fraction(1, 10**3999)
    bomb = "[" + ",".join(["1e-3999"] * 1000) + "]"
    with pytest.raises(ValueError, match="expanding to more digits"):
        jsonexact.loads(bomb)
    with pytest.raises(ValueError, match="expanding to more digits"):
        jsonexact.loads('{"claims": {"a": 1e-2000, "b": 1e-2000, "c": 1e-2000}}')
    # what Python writes for float64 values reads, extreme ones included
    rng = np.random.default_rng(5)
    xs = [float(v) for v in rng.standard_normal(20_000) * 10.0 ** rng.integers(-30, 30, 20_000)]
    xs += [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308] * 4
    assert jsonexact.loads(json.dumps(xs)) == [Fraction(repr(x)) for x in xs]  # as spelled
    assert jsonexact.loads(json.dumps({"n": list(range(10**5))}))["n"][-1] == 10**5 - 1


def test_a_store_line_of_expanding_numbers_is_an_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = _lines(p)
    text = json.dumps(recs[0])[:-1] + ', "claims": {"x": [' + ",".join(["1e-3999"] * 50) + "]}}"
    p.write_text(text + "\n")
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "expanding to more digits" in err and "line 1" in err


def test_raw_line_separator_does_not_split_a_record(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "operators.jsonl"
    recs = _lines(p)
    recs[0]["family"] = "a\u2028b\u2029c"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    assert "\u2028" in p.read_text()
    r = open_store(tmp_path / "s")
    assert r.operators[0].family == "a\u2028b\u2029c"


def test_duplicate_key_in_store_is_an_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    line = p.read_text().splitlines()[0]
    p.write_text(line[:-1] + ', "eps": "0.999"}\n')
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "duplicate key" in err and "brackets.jsonl" in err


def test_deeply_nested_record_is_an_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = _lines(p)
    text = json.dumps(recs[0])[:-1] + ', "claims": {"x": ' + "[" * 3000 + "]" * 3000 + "}}"
    p.write_text(text + "\n")
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "nesting" in err and "line 1" in err


@pytest.mark.parametrize("version", ["1.0", "true", '"1"'])
def test_version_must_be_the_integer_one(tmp_path, version):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "store.json"
    p.write_text(p.read_text().replace('"version": 1', f'"version": {version}'))
    with pytest.raises(InputError, match="unsupported version") as e:
        open_store(tmp_path / "s")
    assert e.value.field == "version"


@pytest.mark.parametrize("value", [5, None, "A", [1], {"A": 1}, ["A", "A"]])
def test_bad_operator_arrays_field(tmp_path, capsys, value):
    _store_with(tmp_path, "operators.jsonl", "arrays", value)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "line 1.arrays" in err and "operators.jsonl" in err


@pytest.mark.parametrize("kind", [["factors"], {"a": 1}, 3, None])
def test_unhashable_or_bad_kind(tmp_path, capsys, kind):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = _lines(p)
    recs[0]["upper"]["kind"] = kind
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "upper.kind" in err


def test_beta_error_names_the_file(tmp_path):
    _store_with(tmp_path, "operators.jsonl", "beta", "abc")
    with pytest.raises(InputError) as e:
        open_store(tmp_path / "s")
    assert e.value.source and e.value.source.endswith("operators.jsonl")
    assert e.value.field == "line 1.beta"


# ---------------------------------------------------------------------------- paths


@pytest.mark.parametrize("bad", ["../../elsewhere/x.npz", "/etc/passwd", "arrays/../store.json",
                                 "arrays/./x.npz", "x.npz", "arrays\\x.npz", "arrays/",
                                 "C:/x.npz", "arrays//x.npz", "arrays/b\ud800.npz",
                                 "arrays/" + "x" * 300 + ".npz"])
def test_paths_outside_arrays_are_refused_before_opening(tmp_path, bad):
    _store_with(tmp_path, "brackets.jsonl", "file", bad)
    with pytest.raises(InputError, match="refused") as e:
        open_store(tmp_path / "s")
    assert e.value.field == "line 1.file"


def test_sha_mismatch_on_foreign_file_leaks_nothing(tmp_path, capsys):
    # the attack: point a record at a file elsewhere and read its digest prefix in the error
    build_store(tmp_path / "s", n_ops=1)
    secret = tmp_path / "secret.npz"
    secret.write_bytes(b"PK top secret")
    p = tmp_path / "s" / "operators.jsonl"
    recs = _lines(p)
    recs[0]["file"] = "../secret.npz"
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert code == 2 and digest[:12] not in err and "refused" in err


def test_symlink_leaving_the_store_is_refused(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    arrays = tmp_path / "s" / "arrays"
    rec = _lines(tmp_path / "s" / "operators.jsonl")[0]
    target = tmp_path / "outside.npz"
    (tmp_path / "s" / rec["file"]).rename(target)
    os.symlink(target, tmp_path / "s" / rec["file"])
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "outside the store" in err
    # a symlink inside arrays/ pointing inside arrays/ is fine
    (tmp_path / "s" / rec["file"]).unlink()
    target.rename(arrays / "real.npz")
    os.symlink(arrays / "real.npz", tmp_path / "s" / rec["file"])
    assert open_store(tmp_path / "s").operators[0].load()["A"].shape == (8, 8)


def test_arrays_folder_symlinked_elsewhere_is_refused(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    (tmp_path / "s" / "arrays").rename(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", tmp_path / "s" / "arrays")
    with pytest.raises(InputError, match="outside the store"):
        open_store(tmp_path / "s")


# ---------------------------------------------------------------------------- npz headers


def _npy_header(shape, descr="<f8") -> bytes:
    d = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    pad = 64 - (10 + len(d) + 1) % 64
    d = d + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d


def _zip(members: dict[str, bytes], compress=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _replace_operator_file(store: Path, data: bytes) -> None:
    p = store / "operators.jsonl"
    recs = _lines(p)
    (store / recs[0]["file"]).write_bytes(data)
    recs[0]["sha256"] = hashlib.sha256(data).hexdigest()
    _write(p, recs)


def test_tiny_npz_declaring_a_huge_shape_is_refused_before_allocation(tmp_path, capsys):
    data = _zip({"A.npy": _npy_header((200000, 200000))})
    assert len(data) < 400
    build_store(tmp_path / "s", n_ops=1)
    _replace_operator_file(tmp_path / "s", data)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "header declares" in err and ".npz" in err


def test_declared_shape_must_match_the_record(tmp_path, capsys):
    X = np.zeros((9, 8))
    data = _zip({"A.npy": _npy_header(X.shape) + X.tobytes()})
    build_store(tmp_path / "s", n_ops=1)
    _replace_operator_file(tmp_path / "s", data)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "differs from record shape" in err


def test_bad_dtype_in_operator_file_is_blamed_on_the_operator_file(tmp_path, capsys):
    X = np.zeros((8, 8), dtype=np.int64)
    data = _zip({"A.npy": _npy_header(X.shape, "<i8") + X.tobytes()})
    build_store(tmp_path / "s", n_ops=1)
    op_file = _lines(tmp_path / "s" / "operators.jsonl")[0]["file"]
    _replace_operator_file(tmp_path / "s", data)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "dtype" in err and op_file in err
    assert all(op_file in line for line in err.splitlines() if "dtype" in line)


@pytest.mark.parametrize("descr", ["|O", "[('a', '<f8')]", "<U4", "|V8", "<M8[s]"])
def test_object_structured_and_exotic_dtypes_are_refused(tmp_path, descr):
    hdr = _npy_header((1,), descr) if descr[0] != "[" else \
        _npy_header((1,), "<f8").replace(b"'<f8'", descr.encode())
    with pytest.raises(InputError, match="refused|header"):
        npzsafe.read_npz_bytes(_zip({"A.npy": hdr + b"\0" * 16}), "x.npz")


def test_deflate_bomb_is_refused_from_the_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(npzsafe, "RATIO_FLOOR", 1 << 16)
    zeros = np.zeros((1000, 1000))
    data = _zip({"A.npy": _npy_header(zeros.shape) + zeros.tobytes()})
    assert len(data) < len(zeros.tobytes()) // 500
    with pytest.raises(InputError, match="decompression bomb"):
        npzsafe.read_npz_bytes(data, "bomb.npz")


def test_size_cap_applies_to_declared_sizes(tmp_path, monkeypatch):
    X = np.ones((64, 64))
    data = _zip({"A.npy": _npy_header(X.shape) + X.tobytes()})
    monkeypatch.setenv("SOFTRANK_MAX_ARRAY_BYTES", str(10_000))
    with pytest.raises(InputError, match="cap"):
        npzsafe.read_npz_bytes(data, "big.npz")
    monkeypatch.setenv("SOFTRANK_MAX_ARRAY_BYTES", str(1 << 20))
    out = npzsafe.read_npz_bytes(data, "big.npz")
    assert np.array_equal(out["A"], X) and out["A"].flags.writeable


def test_corrupt_member_data_is_an_input_error():
    X = np.arange(64.0).reshape(8, 8)
    raw = _zip({"A.npy": _npy_header(X.shape) + X.tobytes()}, compress=zipfile.ZIP_STORED)
    i = raw.find(X.tobytes()[8:16])
    bad = raw[:i] + b"\xff" * 8 + raw[i + 8:]  # CRC no longer matches
    with pytest.raises(InputError, match="CRC"):
        npzsafe.read_npz_bytes(bad, "crc.npz")


def test_member_names_must_be_distinct_npy(tmp_path):
    X = np.ones((2, 2))
    for members in ({"A.txt": b"x"}, {"dir/A.npy": _npy_header(X.shape) + X.tobytes()}):
        with pytest.raises(InputError, match="distinct"):
            npzsafe.read_npz_bytes(_zip(members), "n.npz")


def test_bracket_array_shapes_checked_against_ranks(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = _lines(p)
    recs[0]["upper"]["rank"] = 10**9  # U would be 8 x 10^9 if allocated from the record
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    # refused from the record alone: no 8 x 8 matrix has a rank above 8
    assert code == 2 and "op0-t.upper.rank" in err and "exceeds min(m, N) = 8" in err
    recs[0]["upper"]["rank"] = 7  # fits the shape, but the stored U has 5 columns
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "upper.U" in err and "differs" in err


def test_valid_store_still_reads_exactly(tmp_path):
    exp = build_store(tmp_path / "s", n_ops=1)
    r = open_store(tmp_path / "s")
    for br in r.brackets:
        up, lo = br.load()
        assert up["U"].shape == (8, exp[br.id]["rank"]) and lo == {"kind": "nonzero", "rank": 1}
        assert br.eps == Fraction(exp[br.id]["eps"])


# ---------------------------------------------------------------------------- intrinsic records


def _intrinsic(store: Path, file: str, sha: str, arrays=("X", "Y")) -> None:
    rec = {"id": "op0.r1", "operator": "op0", "kind": "rank", "rank": 1, "file": file,
           "sha256": sha, "arrays": list(arrays)}
    _write(store / "intrinsic.jsonl", [rec])


@pytest.mark.parametrize("bad", ["/etc/passwd", "../../../etc/passwd", "arrays/../store.json"])
def test_intrinsic_file_outside_the_store_is_refused_before_opening(tmp_path, capsys, bad):
    build_store(tmp_path / "s", n_ops=1)
    _intrinsic(tmp_path / "s", bad, "0" * 64)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "refused" in err and "intrinsic.jsonl" in err
    assert "file has" not in err  # no digest of a foreign file is shown


def test_intrinsic_members_are_refused_before_allocation(tmp_path, capsys):
    # a member the record does not list, and a listed one whose declared shape is not m x r:
    # both refused from the npy header, before the member's data is read
    cases = (({"junk.npy": _npy_header((4, 4)) + bytes(128)}, "'junk' is not listed"),
             ({"X.npy": _npy_header((9, 1)) + bytes(72)}, "expected ('m', 'r') = 8 there"))
    for i, (members, why) in enumerate(cases):
        store = tmp_path / f"s{i}"
        build_store(store, n_ops=1)
        data = _zip(members)
        (store / "arrays" / "op0.r1.npz").write_bytes(data)
        _intrinsic(store, "arrays/op0.r1.npz", hashlib.sha256(data).hexdigest())
        code, _, err = _run(capsys, "check", str(store))
        assert code == 2 and why in err and "op0.r1.npz" in err


# ---------------------------------------------------------------------------- long numbers


@pytest.mark.parametrize("eps", ["1" * 60000 + "/1", "1/" + "3" * 5000, "-" + "7" * 4000 + "/2"])
def test_a_rational_string_too_long_is_an_input_error(tmp_path, capsys, eps):
    _store_with(tmp_path, "brackets.jsonl", "eps", eps)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and "line 1.eps" in err and "13000 bits" in err


def test_leading_zeros_do_not_count_against_the_digit_limit():
    from softrank.certify.rationals import to_rational
    assert to_rational("0" * 9000 + "1/" + "0" * 5000 + "2") == Fraction(1, 2)


def test_api_refuses_a_long_rational_with_an_input_error():
    from softrank.certify import check_upper
    A = np.eye(2)
    with pytest.raises(InputError, match="bits"):
        check_upper(A, A, np.eye(2), "1" * 5000 + "/3")


def test_audit_survives_a_lone_surrogate_in_a_family(tmp_path, capsys):
    _store_with(tmp_path, "operators.jsonl", "family", "a\ud800b")
    code = main(["audit", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--no-figures",
                 "--no-progress"])
    assert code in (0, 1)
    md = (tmp_path / "o" / "report.md").read_text()
    assert "\ud800" not in md and "a\\\\ud800b" in md  # shown as text: a\\ud800b, escaped


# ---------------------------------------------------------------------------- who is blamed


def test_a_nan_in_the_operator_names_the_operator_file(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    rec = _lines(tmp_path / "s" / "operators.jsonl")[0]
    path = tmp_path / "s" / rec["file"]
    with np.load(path) as z:
        arrs = dict(z)
    arrs["A"][0, 0] = np.nan
    np.savez(path, **arrs)
    p = tmp_path / "s" / "operators.jsonl"
    recs = _lines(p)
    recs[0]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and f"{rec['file']}: A:" in err
    assert "br" not in err.split(": A:")[0].rsplit("/", 1)[-1]  # not a bracket file


def test_a_nonzero_claim_above_rank_1_names_the_record(tmp_path):
    _store_with(tmp_path, "brackets.jsonl", "lower", {"kind": "nonzero", "rank": 2})
    with pytest.raises(InputError) as e:
        open_store(tmp_path / "s")
    assert e.value.source.endswith("brackets.jsonl") and e.value.field == "line 1.lower.rank"


@pytest.mark.parametrize("name", ["store.json", "operators.jsonl", "brackets.jsonl"])
def test_a_record_file_that_is_a_folder_names_the_file(tmp_path, capsys, name):
    build_store(tmp_path / "s", n_ops=1)
    (tmp_path / "s" / name).unlink()
    (tmp_path / "s" / name).mkdir()
    with pytest.raises(InputError, match="is not a regular file") as got:
        open_store(tmp_path / "s")
    assert got.value.source.endswith(name)
    assert main(["check", str(tmp_path / "s"), "-q"]) == 2
    err = capsys.readouterr().err
    assert name in err and "not a regular file" in err


@pytest.mark.parametrize("value", [7, 1.5, ["alt_l1"], {"a": 1}, True])
def test_a_producer_name_that_is_not_a_string_is_refused(tmp_path, capsys, value):
    """Reports group brackets by producer name: 7 and "7" would read as one producer."""
    store = _store_with(tmp_path, "brackets.jsonl", "producer", {"upper": value})
    with pytest.raises(InputError, match="producer name") as got:
        open_store(store)
    assert got.value.field.endswith("producer.upper")
    assert main(["producers", str(store)]) == 2
    assert "producer.upper" in capsys.readouterr().err
    _store_with(tmp_path / "ok", "brackets.jsonl", "producer", {"upper": "7", "lower": None})
    assert open_store(tmp_path / "ok" / "s").brackets[0].producer["upper"] == "7"


# ------------------------------------------- free counts of the topological kinds, bounded


def _topological_store(path: Path, kind: str) -> None:
    from softrank.witnesses import Store

    from .helpers import random_attention, tsvd_witness
    from .test_lower_nerve import cert_of, cross_tops, sign_witnesses
    from .test_lower_polytope import cross_cert

    A = random_attention(np.random.default_rng(3), 8, 8)
    U, V = tsvd_witness(A, 7)
    if kind == "polytope":
        low = cross_cert(A, [0, 1], np.array([[1.0] * 8, [1.0, -1.0] * 4]))
    else:
        T = cross_tops([0, 1], 8)
        low = cert_of(T, sign_witnesses(T, 8, 8))
    with Store.create(path, description="bounded counts") as st:
        st.add_operator(A, family="t", id="op")
        st.add_bracket("op", "1/4", {"kind": "factors", "rank": 7, "U": U, "V": V}, low, id="b")


@pytest.mark.parametrize("kind,name,rows,bound", [
    ("polytope", "lower.Y", 4097, "<= 4096"), ("polytope", "lower.I", 4097, "<= 4096"),
    ("polytope", "lower.F", 100_001, "<= 100000"), ("polytope", "lower.G", 100_001, "<= 100000"),
    ("nerve", "lower.T", 200_001, "<= 200000"), ("nerve", "lower.G", 200_001, "<= 200000")])
def test_counts_a_file_chooses_are_bounded_by_the_kernel_limits_before_allocation(
        tmp_path, capsys, kind, name, rows, bound):
    # these kinds leave their point, facet and top counts to the file; a header past the
    # kernel's limit is refused from the header (the message is the store's shape check, not
    # the kernel's count check, which would run only after the array was allocated)
    _topological_store(tmp_path / "s", kind)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = _lines(p)
    f = tmp_path / "s" / recs[0]["file"]
    with np.load(f, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    old = arrays[name]
    rng = np.random.default_rng(0)  # not zeros: a zero stream would be refused as a bomb
    arrays[name] = rng.integers(0, 2, size=(rows, *old.shape[1:])).astype(old.dtype)
    np.savez_compressed(f, **arrays)
    recs[0]["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    _write(p, recs)
    code, _, err = _run(capsys, "check", str(tmp_path / "s"))
    assert code == 2 and name in err and "differs from the record's" in err and bound in err


@pytest.mark.parametrize("kind", ["polytope", "nerve"])
def test_topological_kinds_within_the_bounds_still_read(tmp_path, capsys, kind):
    _topological_store(tmp_path / "s", kind)
    code, out, err = _run(capsys, "check", "--json", str(tmp_path / "s"))
    assert code in (0, 1) and "input error" not in err
    assert json.loads(out)["records"][0]["lower_check"]["kind"] == kind


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs procfs")
def test_a_file_whose_size_lies_is_read_only_up_to_the_cap():
    # procfs reports size 0 whatever a file holds: the cap must bound the read itself
    with pytest.raises(InputError, match="longer than the cap of 100 bytes") as e:
        npzsafe.read_npz(Path("/proc/self/maps"), None, cap=100)
    assert e.value.source == "/proc/self/maps"
    with pytest.raises(InputError, match="cannot read") as e:  # reading it is an I/O error
        npzsafe.read_npz(Path("/proc/self/mem"), None)
    assert e.value.source == "/proc/self/mem"


@pytest.mark.parametrize("beta", ["0", "-3/2"])
def test_a_beta_not_positive_is_refused_naming_the_record(tmp_path, beta):
    """It used to pass the reader and fail at each load, named against the array file."""
    from .helpers import factors_nonzero_store

    factors_nonzero_store(tmp_path / "s", n_ops=1, size=4, seed=0)
    p = tmp_path / "s" / "operators.jsonl"
    recs = _lines(p)
    recs[0]["beta"] = beta
    _write(p, recs)
    with pytest.raises(InputError) as e:
        open_store(tmp_path / "s")
    assert e.value.source.endswith("operators.jsonl") and e.value.field == "line 1.beta"
    assert "positive" in e.value.reason


def test_the_writer_refuses_a_beta_not_positive(tmp_path):
    from softrank.witnesses import Store

    L = np.zeros((3, 3))
    with Store.create(tmp_path / "w") as st, pytest.raises(InputError, match="positive"):
        st.add_operator(np.full((3, 3), 1 / 3), family="f", logits=L, beta="0")


def test_an_array_that_deflates_like_a_bomb_is_stored_readable(tmp_path):
    """A constant matrix past RATIO_FLOOR deflates about 1000:1, which the reader refuses as
    a decompression bomb: the writer stores it uncompressed, so the store reads back (the
    writer made stores its own reader refused)."""
    A = np.zeros((3000, 3000))  # 72 MB, above RATIO_FLOOR; deflates about 1027:1
    assert A.nbytes > npzsafe.RATIO_FLOOR
    with Store.create(tmp_path / "s") as st:
        st.add_operator(A, family="flat", id="flat")
    reader = open_store(tmp_path / "s")
    op = reader.operator("flat")
    with zipfile.ZipFile(op.path) as z:
        assert not any(npzsafe.looks_like_bomb(i) for i in z.infolist())
    assert np.array_equal(op.load()["A"], A)


def test_withdrawn_operators_leave_the_records_before_their_files(tmp_path, monkeypatch):
    """``withdraw_added`` rewrites the records before it unlinks an array file: a record
    flushed earlier (a 30 s flush during a slow read of inputs) must not outlive its file
    if the run stops in between (it unlinked first and flushed on close)."""
    with Store.create(tmp_path / "s") as st:
        st.add_operator(np.full((2, 2), 0.5), family="f", id="kept")
    st = Store.open(tmp_path / "s")
    st.flush_seconds = 0.0  # every addition flushed at once, as after a slow read
    st.add_operator(np.full((3, 3), 1 / 3), family="f", id="new")
    assert "new" in (tmp_path / "s" / "operators.jsonl").read_text()
    real_unlink, seen = os.unlink, []

    def spy(name, *args, **kwargs):
        seen.append((name, (tmp_path / "s" / "operators.jsonl").read_text()))
        return real_unlink(name, *args, **kwargs)

    monkeypatch.setattr("softrank.witnesses.store.os.unlink", spy)
    assert st.withdraw_added() == ["new"]
    assert seen and all('"new"' not in text for _, text in seen)
    st.close()
    assert [o.id for o in open_store(tmp_path / "s").operators] == ["kept"]


def test_a_failed_withdrawal_leaves_the_writer_consistent(tmp_path, monkeypatch):
    """A flush that fails inside withdraw_added (a full disk) left the operator in the
    writer's shapes and added list while its record was gone; now the writer's state is
    updated whole first, and the store still closes and opens."""
    import errno as errno_mod

    with Store.create(tmp_path / "s") as st:
        st.add_operator(np.full((2, 2), 0.5), family="f", id="kept")
    st = Store.open(tmp_path / "s")
    st.add_operator(np.full((3, 3), 1 / 3), family="f", id="new")
    real_flush = Store.flush

    def full_disk(self):
        raise OSError(errno_mod.ENOSPC, "No space left on device")

    monkeypatch.setattr(Store, "flush", full_disk)
    with pytest.raises(OSError):
        st.withdraw_added()
    assert st.operator_ids == ["kept"] and "new" not in st._op_shapes and not st._added
    monkeypatch.setattr(Store, "flush", real_flush)
    st.close()
    with Store.open(tmp_path / "s") as again:
        assert again.operator_ids == ["kept"]
