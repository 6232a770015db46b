"""The replayer binds every end to its bracket, escapes what it prints and bounds its work
(replay/replay.py: plan(), shown(), main()).

Bundles are written here by hand (a zip with a manifest, bundle.json and raw arrays), so each
test states exactly the records a hostile bundle could hold; each hostile class is reproduced
at a small scale, with the caps lowered through the replayer's own command-line options.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from replay import replay as rp

from .test_replay_polytope import _case

ESC = "\x1b"


def _ref(arrays: dict[str, bytes], X) -> dict:
    X = np.asarray(X)
    dt = "<i8" if X.dtype.kind in "iu" else "<f8"
    data = np.ascontiguousarray(X, dtype=dt).tobytes()
    name = f"arrays/{hashlib.sha256(data).hexdigest()}.bin"
    arrays[name] = data
    return {"file": name, "dtype": dt, "shape": list(X.shape)}


def _write(path: Path, operators: list[dict], ends: list[dict], arrays: dict[str, bytes]) -> Path:
    """A bundle as export writes one: manifest (sizes, sha256) + bundle.json + arrays."""
    files = dict(arrays)
    files["bundle.json"] = json.dumps({"format": rp.FORMAT, "version": rp.VERSION,
                                       "operators": operators, "ends": ends}).encode()
    man = {"format": rp.FORMAT, "version": rp.VERSION,
           "files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                     for n, b in files.items()}}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(man))
        for n, b in files.items():
            z.writestr(n, b)
    return path


def _op(arrays: dict, oid: str, A) -> dict:
    return {"id": oid, "shape": list(np.shape(A)), "A": _ref(arrays, A), "chi": "0"}


def _upper(arrays: dict, bracket: str, op: str, A, eps: str = "1/10", **kw) -> dict:
    """A true upper end: B = A itself, as U = A and V = I (rank N)."""
    A = np.asarray(A, dtype=float)
    cert = {"U": _ref(arrays, A), "V": _ref(arrays, np.eye(A.shape[1]))}
    return {"bracket": bracket, "operator": op, "eps": eps, "end": "upper", "kind": "factors",
            "rank": A.shape[1], "kernel": "holds", "certificate": cert, **kw}


def _submatrix(arrays: dict, bracket: str, op: str, n: int, eps: str = "1/10", **kw) -> dict:
    """A rank-n submatrix certificate with X = I on the rows and columns 0..n-1: it holds on
    the identity (value = eps < 1)."""
    cert = {"rows": _ref(arrays, np.arange(n)), "cols": _ref(arrays, np.arange(n)),
            "X": _ref(arrays, np.eye(n))}
    return {"bracket": bracket, "operator": op, "eps": eps, "end": "lower",
            "kind": "submatrix", "rank": n, "kernel": "holds", "certificate": cert, **kw}


def _run(path: Path, capsys, *opts: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = rp.main([str(path), *opts])
    out = capsys.readouterr()
    return code, out.out, out.err


RANK_ONE = np.full((6, 6), 1 / 6)
ZWSP = "\u200b"


# --- 1: one operator and one eps per bracket -----------------------------------------------

def test_a_bracket_whose_ends_name_two_operators_is_refused(tmp_path, capsys):
    """The forged bracket: b0's upper end (rank-6 factors) on a rank-1 matrix op0 and its lower
    end (a rank-6 submatrix certificate) on the identity op1.  Each end holds on its own
    operator; together they would read as r_eps(b0) = 6.  Exit 2 naming b0."""
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", RANK_ONE), _op(arrays, "op1", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", RANK_ONE), _submatrix(arrays, "b0", "op1", 6)]
    code, out, err = _run(_write(tmp_path / "forged.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == ""  # no verdict at all
    assert "bracket b0 names operator op1" in err and "operator op0 " in err
    assert "one operator and one eps" in err
    # the same two ends, each in its own bracket, replay: each line names its operator
    ends[1]["bracket"] = "b1"
    code, out, err = _run(_write(tmp_path / "apart.zip", ops, ends, arrays), capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("bracket b0 upper factors rank 6 on operator op0 eps 1/10:")
    assert lines[1].startswith("bracket b1 lower submatrix rank 6 on operator op1 eps")
    assert all("replay holds, kernel holds" in x for x in lines[:2])


@pytest.mark.parametrize("twin", ["op0" + ZWSP, "op0 ", " op0", "op0\u00a0", "o" * 129, ""])
def test_an_operator_id_a_store_cannot_write_is_refused(tmp_path, capsys, twin):
    """Ids that print like another (an invisible or trailing character, a space) or run on
    for pages: a store writes [A-Za-z0-9][A-Za-z0-9._-]{0,127} only, and so must a bundle."""
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", RANK_ONE), _op(arrays, twin, np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", RANK_ONE), _submatrix(arrays, "b1", twin, 6)]
    code, out, err = _run(_write(tmp_path / "twin.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and "operators[1]: needs a unique id" in err
    ops[1]["id"] = ends[1]["operator"] = "op1"
    ends[1]["bracket"] = "b1 "  # a bracket id with a trailing space
    code, out, err = _run(_write(tmp_path / "label.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and "ends[1].bracket: needs a bracket id" in err


def test_a_bracket_whose_ends_name_two_eps_is_refused(tmp_path, capsys):
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6), eps="3/10"),
            _submatrix(arrays, "b0", "op0", 6, eps="0.3")]  # the same rational: accepted
    assert _run(_write(tmp_path / "same.zip", ops, ends, arrays), capsys)[0] == 0
    ends[1]["eps"] = "0.30000000001"
    code, out, err = _run(_write(tmp_path / "two.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and "ends[1]: bracket b0" in err and "eps 3/10" in err


@pytest.mark.parametrize("edit,field", [
    ({"end": "Upper"}, "ends[0].end"),
    ({"end": "lower"}, "ends[0].end"),  # factors are an upper end
    ({"end": None}, "ends[0].end"),
    ({"kind": "submatrix"}, "ends[0].end"),  # an upper end is factors
    ({"kind": "nonsense"}, "ends[0].kind"),
    ({"bracket": None}, "ends[0].bracket"),
    ({"bracket": ""}, "ends[0].bracket"),
    ({"bracket": ["b0"]}, "ends[0].bracket"),
])
def test_end_labels_come_from_a_closed_set(tmp_path, capsys, edit, field):
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [{**_upper(arrays, "b0", "op0", np.eye(6)), **edit}]
    code, out, err = _run(_write(tmp_path / "b.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and field in err, err


def test_two_ends_of_one_label_and_kind_in_a_bracket_are_refused(tmp_path, capsys):
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6)), _upper(arrays, "b0", "op0", np.eye(6))]
    code, out, err = _run(_write(tmp_path / "b.zip", ops, ends, arrays), capsys)
    assert code == 2 and "ends[1]: bracket b0 has a second upper end" in err
    # a claimed lower end and the nonzero fallback beside it are two kinds: accepted
    ends[1] = {"bracket": "b0", "operator": "op0", "eps": "1/10", "end": "lower",
               "kind": "nonzero", "rank": 1, "kernel": "holds", "certificate": None}
    ends.append(_submatrix(arrays, "b0", "op0", 6))
    assert _run(_write(tmp_path / "c.zip", ops, ends, arrays), capsys)[0] == 0


# --- 2: everything printed is escaped; the summary is the last line --------------------------

def test_labels_cannot_forge_lines_or_drive_the_terminal(tmp_path, capsys):
    published = "ab" * 32
    fake = (f"\nbundle (manifest sha256 {published}): 9 ends; kernel proved 9, replay "
            f"confirmed 9; disagreements 0\n{ESC}[2K{ESC}[1A")
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0" + fake, "op0", np.eye(6)),
            _submatrix(arrays, "b0" + fake, "op0", 6)]
    code, out, err = _run(_write(tmp_path / "fake.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and "ends[0].bracket: needs a bracket id" in err
    assert published not in err and ESC not in err and err.count("\n") == 1
    op = "op\u202e0" + ZWSP + "\ufe0f\u2028"
    ops = [_op(arrays, op, np.eye(6))]
    ends = [_upper(arrays, "b0", op, np.eye(6)), _submatrix(arrays, "b0", op, 6)]
    code, out, err = _run(_write(tmp_path / "op.zip", ops, ends, arrays), capsys)
    assert code == 2 and out == "" and "operators[0]: needs a unique id" in err
    for bad in (ESC, "\u202e", ZWSP, "\ufe0f", "\u2028", "\r"):
        assert bad not in out + err
    # a valid bundle: one line per end, then the summary with the manifest's own digest
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6)), _submatrix(arrays, "b0", "op0", 6)]
    path = _write(tmp_path / "ok.zip", ops, ends, arrays)
    code, out, err = _run(path, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(ends) + 1
    digest = hashlib.sha256(zipfile.ZipFile(path).read("manifest.json")).hexdigest()
    assert lines[-1].startswith(f"bundle (manifest sha256 {digest}): 2 ends; kernel proved 2")
    assert rp.main([str(path), "--json"]) == 0
    text = capsys.readouterr().out
    assert text.isascii() and json.loads(text)["results"][0]["operator"] == "op0"


def test_error_messages_are_escaped(tmp_path, capsys):
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6), kind=f"{ESC}[31mfactors\n")]
    code, out, err = _run(_write(tmp_path / "e.zip", ops, ends, arrays), capsys)
    assert code == 2 and ESC not in err and "\\u001b[31mfactors\\u000a" in err
    assert err.count("\n") == 1  # one line


def test_shown_makes_every_invisible_character_visible():
    assert rp.shown("a\nb\x00c\x7f\u0085\u00a0\u200b\u202e\u2066\ufeff\ufe0f\U000e0001") == (
        "a\\u000ab\\u0000c\\u007f\\u0085\\u00a0\\u200b\\u202e\\u2066\\ufeff\\ufe0f\\U000e0001")
    assert rp.shown("op-0.T64 é 中") == "op-0.T64 é 中"  # printable text is kept
    assert rp.shown("a\\u000a") == "a\\\\u000a" != rp.shown("a\n")  # one-to-one
    assert rp.shown("\ud800") == "\\ud800"  # a lone surrogate (JSON "\ud800") prints


# --- 3: caps on the work, checked before any array is decoded -------------------------------

def _shared(tmp_path: Path, n: int) -> Path:
    """n operators that all point at one stored array, one true upper end each."""
    arrays: dict[str, bytes] = {}
    A = np.eye(6)
    ops = [_op(arrays, f"op{i}", A) for i in range(n)]
    ends = [_upper(arrays, f"b{i}", f"op{i}", A) for i in range(n)]
    assert len(arrays) == 1  # A, U = A and V = I: one member
    return _write(tmp_path / f"shared{n}.zip", ops, ends, arrays)


def test_operator_and_end_counts_are_capped(tmp_path, capsys):
    path = _shared(tmp_path, 40)
    assert _run(path, capsys, "--quiet")[0] == 0  # the defaults take it
    code, out, err = _run(path, capsys, "--max-operators", "39")
    assert code == 2 and out == "" and "bundle.json.operators: 40 records" in err
    assert "--max-operators" in err
    code, out, err = _run(path, capsys, "--max-ends=39")
    assert code == 2 and out == "" and "bundle.json.ends: 40 records" in err


def test_a_shared_array_counts_once_per_use(tmp_path, capsys, monkeypatch):
    """The 726 KB bundle of 200,000 operators pointing at one array, at 1/5000 scale: 36
    elements stored, 40 x (A + U + V) = 40 x 108 decoded, one 64-bit word each."""
    path = _shared(tmp_path, 40)
    s = rp.replay(str(path))
    assert s["estimate"]["words"] == 40 * 3 * 36
    decoded = []
    real = rp.array
    monkeypatch.setattr(rp, "array", lambda *a, **k: decoded.append(1) or real(*a, **k))
    code, out, err = _run(path, capsys, "--max-words", str(40 * 3 * 36 - 1))
    assert code == 2 and out == "" and "64-bit words decoded 4.32e+03" in err
    assert "(--max-words)" in err and not decoded  # refused before any array is decoded


def test_wide_numbers_count_their_words(tmp_path, capsys):
    """A shared array whose floats spread from 5e-324 to 1e300 decodes to ~2100-bit integers:
    each element counts 34 words, so its memory is bounded too."""
    arrays: dict[str, bytes] = {}
    A = np.eye(6)
    A[0, 1], A[1, 0] = 5e-324, 1e300
    ops = [_op(arrays, f"op{i}", A) for i in range(10)]
    ends = [{"bracket": f"b{i}", "operator": f"op{i}", "eps": "1/10", "end": "lower",
             "kind": "nonzero", "rank": 1, "kernel": "holds", "certificate": None}
            for i in range(10)]
    path = _write(tmp_path / "wide.zip", ops, ends, arrays)
    digest, doc, blobs = rp.read_bundle(str(path))
    words = rp.plan(doc, blobs, {k: 10 ** 30 for k in rp.LIMITS})[1]["words"]
    assert words == 10 * 36 * (1 + (997 + 1073 + 53) // 64)  # frexp exponents 997, -1073
    M, _ = rp.dyadic(A.tolist())
    assert max(abs(v).bit_length() for r in M for v in r) <= 997 + 1073 + 53
    assert _run(path, capsys, "--max-words", str(words - 1))[0] == 2


def test_dyadic_is_exact_on_every_scale():
    """M 2^e equals the floats exactly: subnormals, huge values, signs and zeros mixed."""
    rng = np.random.default_rng(4)
    vals = rng.standard_normal(60) * 2.0 ** rng.integers(-1074, 1000, 60)
    rows = [list(map(float, vals[:30])), [5e-324, -0.0, 0.0, 1.7976931348623157e308] * 7 +
            list(map(float, vals[30:32]))]
    M, e = rp.dyadic(rows)
    for r, mr in zip(rows, M, strict=True):
        for x, v in zip(r, mr, strict=True):
            assert rp.Fraction(v) * rp.Fraction(2) ** e == rp.Fraction(x)
    assert rp.dyadic([[0.0, -0.0]]) == ([[0, 0]], 0)


def test_many_ends_are_refused_by_the_work_estimate(tmp_path, capsys):
    path = _shared(tmp_path, 40)
    work = rp.replay(str(path))["estimate"]["work"]
    assert work > 40 * 6 ** 3  # at least the products U V
    code, out, err = _run(path, capsys, "--max-work", str(work - 1))
    assert code == 2 and out == "" and "estimated work" in err and "--max-work" in err
    assert re.search(r"largest part is (operators|ends)\[\d+\]", err)
    assert _run(path, capsys, "--max-work", str(work))[0] == 0


def test_a_tiny_polytope_coordinate_is_refused_before_the_elimination(tmp_path, capsys):
    """One coordinate of every point scaled by 2^-1000 (a linear map: the same facets, the same
    verdict) makes every integer point about 1050 bits wide and every facet normal a
    determinant of p such rows; with a subnormal coordinate at full size (p = 12, 4096
    points, 100,000 facets) that is about 40 minutes per end.  The estimate reads the
    exponent spread of Y and refuses it at once, naming the end."""
    A, c = _case(1, 5)

    def bundle(path: Path, Y) -> Path:
        arrays: dict[str, bytes] = {}
        cert = {n: _ref(arrays, Y if n == "Y" else c[n]) for n in "YIFZG"}
        end = {"bracket": "b0", "operator": "op0", "eps": "1/1000", "end": "lower",
               "kind": "polytope", "rank": 5, "kernel": "holds", "certificate": cert}
        return _write(path, [_op(arrays, "op0", A)], [end], arrays)

    clean = bundle(tmp_path / "clean.zip", c["Y"])
    Y = np.array(c["Y"], dtype=float)
    Y[:, -1] *= 2.0 ** -1000
    hostile = bundle(tmp_path / "hostile.zip", Y)
    w_clean = rp.replay(str(clean))["estimate"]["work"]
    s = rp.replay(str(hostile))  # under the defaults: the same facets, the same verdict
    assert [r["replay"] for r in s["results"]] == ["holds"]
    assert s["estimate"]["work"] > 20 * w_clean
    cap = str(5 * w_clean)
    assert _run(clean, capsys, "--max-work", cap)[0] == 0
    t = time.perf_counter()
    code, out, err = _run(hostile, capsys, "--max-work", cap)
    assert code == 2 and out == "" and "largest part is ends[0]" in err
    assert time.perf_counter() - t < 5


def test_bits_bound_the_integers_dyadic_makes():
    for X in ([[1.0, 2.0 ** -60], [3.0, 0.0]], [[5e-324, 1e300]], [[0.0]], [[-1.5, 7.25]]):
        M, _ = rp.dyadic(X)
        width = max(abs(v).bit_length() for r in M for v in r)
        data = np.asarray(X, dtype="<f8").tobytes()
        assert width <= rp._bits(data, "<f8") <= width + 53
    assert rp._bits(np.array([-5, 3], "<i8").tobytes(), "<i8") == 3


def test_bits_bound_aligned_differences_and_products():
    """Entries all near 2^-1000 make narrow integers, but aligning them with entries near 1
    (dsub: A - U V) shifts the latter by 1000 bits: the width counts from 2^0."""
    tiny = [[2.0 ** -1000, 3 * 2.0 ** -1001]]
    one = [[1.0, 0.75]]
    b_tiny = rp._bits(np.asarray(tiny, "<f8").tobytes(), "<f8")
    b_one = rp._bits(np.asarray(one, "<f8").tobytes(), "<f8")
    assert b_tiny >= 1000
    for X, Y in ((one, tiny), (tiny, one), (tiny, tiny)):
        D = rp.dsub(rp.dyadic(X), rp.dyadic(Y))
        assert max(abs(v).bit_length() for r in D[0] for v in r) <= b_one + b_tiny + 1
    P = rp.dmul(rp.dyadic(tiny), rp.dyadic([[2.0 ** 900], [1.0]]))
    assert max(abs(v).bit_length() for r in P[0] for v in r) <= b_tiny + 900 + 53 + 1


@pytest.mark.parametrize("bad", [["--max-work", "0"], ["--max-work", "1e9"], ["--max-work"],
                                 ["--max-ends=-3"], ["--max-nothing", "5"]])
def test_cap_options_need_positive_integers(tmp_path, capsys, bad):
    path = _shared(tmp_path, 2)
    assert _run(path, capsys, *bad)[0] == 2


def test_help_states_the_default_caps(capsys):
    assert rp.main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name, value in rp.LIMITS.items():
        assert re.search(rf"--max-{name} \((default )?{value}\)", text), name


@pytest.mark.parametrize("edit", [{"dtype": ["<f8"]}, {"file": ["arrays/x.bin"]},
                                  {"dtype": {"a": 1}}])
def test_unhashable_reference_fields_are_exit_2_not_an_internal_error(tmp_path, capsys, edit):
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6))]
    ends[0]["certificate"]["V"] = {**ends[0]["certificate"]["V"], **edit}
    code, out, err = _run(_write(tmp_path / "u.zip", ops, ends, arrays), capsys)
    assert code == 2 and "ends[0].V: bad array reference" in err, err


def test_a_bad_last_end_prints_no_verdict_for_the_earlier_ones(tmp_path, capsys):
    """Exit 2 means no verdict was printed: the ends replay first, the lines come after, so a
    shape error in the last end (a rank that disagrees with its arrays) leaves stdout empty."""
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6)), _op(arrays, "op1", np.eye(6))]
    good = [_upper(arrays, "b0", "op0", np.eye(6)), _submatrix(arrays, "b0", "op0", 3)]
    bad = _submatrix(arrays, "b1", "op1", 3)
    bad["rank"] = 4  # rows, cols and X hold 3
    path = _write(tmp_path / "late.zip", ops, [*good, bad], arrays)
    code, out, err = _run(path, capsys)
    assert code == 2 and out == "" and "ends[2]" in err
    code, out, _ = _run(_write(tmp_path / "ok.zip", ops, good, arrays), capsys)
    assert code == 0 and out.count("replay holds") == 2  # the same ends alone print


def test_words_held_at_once_are_bounded_before_decoding(tmp_path, capsys, monkeypatch):
    """Operators replay one at a time, so memory is the largest operator with one of its
    ends (--max-held), not the bundle: ten 6 x 6 operators hold 36 + 72 words at once."""
    arrays: dict[str, bytes] = {}
    ops, ends = [], []
    for i in range(10):
        A = np.eye(6) + i  # distinct arrays, one word per element
        ops.append(_op(arrays, f"op{i}", A))
        ends.append(_upper(arrays, f"b{i}", f"op{i}", A))
    path = _write(tmp_path / "held.zip", ops, ends, arrays)
    digest, doc, blobs = rp.read_bundle(str(path))
    est = rp.plan(doc, blobs, {k: 10 ** 30 for k in rp.LIMITS})[1]
    assert est["held"] == 36 + 36 + 36 and est["words"] == 10 * 108
    decoded = []
    real = rp.array
    monkeypatch.setattr(rp, "array", lambda *a, **k: decoded.append(1) or real(*a, **k))
    code, out, err = _run(path, capsys, "--max-held", "107")
    assert code == 2 and out == "" and "(--max-held)" in err and "ends[0]" in err
    assert not decoded  # refused before any array is decoded
    assert _run(path, capsys, "--max-held", "108")[0] == 0


# --- archives a review found mishandled -------------------------------------------------------

def _valid(tmp_path: Path) -> Path:
    arrays: dict[str, bytes] = {}
    ops = [_op(arrays, "op0", np.eye(6))]
    ends = [_upper(arrays, "b0", "op0", np.eye(6)), _submatrix(arrays, "b0", "op0", 6)]
    return _write(tmp_path / "ok.zip", ops, ends, arrays)


def _rewrite(src: Path, dst: Path, **how) -> Path:
    """dst: src's members written again with zipfile's keyword arguments ``how``."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w", **how) as b:
        for i in a.infolist():
            b.writestr(i.filename, a.read(i.filename))
    return dst


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_members_that_inflate_in_whole_chunks_are_refused(tmp_path, capsys, method):
    # zipfile inflates bzip2 and LZMA a compressed chunk at a time, past the size asked for:
    # 1.3 KB of bzip2 once asked for gigabytes
    path = _rewrite(_valid(tmp_path), tmp_path / "m.zip", compression=method)
    code, out, err = _run(path, capsys)
    assert code == 2 and out == "" and "only stored and deflated members" in err


def test_json_members_are_capped_before_parsing(tmp_path, capsys):
    path = _valid(tmp_path)
    size = zipfile.ZipFile(path).getinfo("bundle.json").file_size
    code, out, err = _run(path, capsys, "--max-json", str(size - 1))
    assert code == 2 and out == "" and "bundle.json" in err and "--max-json" in err
    assert _run(path, capsys, "--max-json", str(size))[0] == 0


def test_corrupt_members_are_input_errors_not_crashes(tmp_path, capsys):
    path = _valid(tmp_path)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("bundle.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for k, bit in ((start + 5, 0x10), (start + 40, 0x01)):  # inside the deflate stream
        bad = bytearray(raw)
        bad[k] ^= bit
        (tmp_path / "bad.zip").write_bytes(bytes(bad))
        code, out, err = _run(tmp_path / "bad.zip", capsys)
        assert code == 2 and out == "" and "replay: bundle rejected" in err
    # a member name flagged UTF-8 that is not: zipfile raises while reading the directory
    with zipfile.ZipFile(tmp_path / "u.zip", "w") as z:
        z.writestr("\u00e9.bin", b"x")
    (tmp_path / "u.zip").write_bytes((tmp_path / "u.zip").read_bytes()
                                     .replace("\u00e9".encode(), b"\xff\xfe"))
    code, out, err = _run(tmp_path / "u.zip", capsys)
    assert code == 2 and out == "" and "not a readable zip archive" in err


def test_a_version_zipfile_does_not_know_is_an_input_error(tmp_path, capsys):
    # a "version needed to extract" above 6.3 in the central directory: zipfile raises
    # NotImplementedError while reading it (it was an internal error, exit 3)
    path = _valid(tmp_path)
    raw = bytearray(path.read_bytes())
    cd = raw.index(b"PK\x01\x02")
    raw[cd + 6] = 64  # version needed: 6.4
    (tmp_path / "v.zip").write_bytes(bytes(raw))
    code, out, err = _run(tmp_path / "v.zip", capsys)
    assert code == 2 and out == "" and "not a readable zip archive" in err


def test_a_directory_longer_than_its_entry_count_is_refused_before_zipfile_reads_it(
        tmp_path, capsys, monkeypatch):
    # the end record says 1 entry, the directory holds many more: zipfile walks the
    # directory's bytes and built every entry (5 million: 1.9 GB) before the count was read
    name = b"a"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
    ent = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0,
                      0, 0, 0, 0, 0) + name
    n = 3000
    cd = ent * n
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(cd), len(local), 0)
    (tmp_path / "cd.zip").write_bytes(local + cd + end)
    monkeypatch.setattr(rp, "MAX_MEMBERS", 100)  # 100 entries of 256 bytes: 25,600 < 141,000
    built = []
    real = zipfile.ZipFile
    monkeypatch.setattr(rp.zipfile, "ZipFile", lambda *a, **k: built.append(1) or real(*a, **k))
    code, out, err = _run(tmp_path / "cd.zip", capsys)
    assert code == 2 and out == "" and "central directory of" in err
    assert not built
    monkeypatch.setattr(rp, "MAX_MEMBERS", 1000)  # within the byte bound: the count refuses
    code, out, err = _run(tmp_path / "cd.zip", capsys)
    assert code == 2 and "more than 1000 archive members" in err


def test_the_replayer_takes_the_ids_a_store_writes():
    """The replayer keeps its own copy of the store's id rule (it imports nothing from the
    package): the two patterns must stay one."""
    from softrank.witnesses import store

    assert rp._ID.pattern == store._ID.pattern.removeprefix("^").removesuffix("\\Z")
    for s in ("op0", "a.b-c_9", "x" * 128, "x" * 129, "op0 ", "_a", "", "op\u200b0"):
        assert bool(rp._ID.fullmatch(s)) == bool(store._ID.match(s)), s
