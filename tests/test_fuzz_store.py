"""Property-based fuzzing of the store reader and the CLI on mutated stores.

Each example copies a small valid store, applies one random mutation (record fields, types,
nesting, numbers, paths, raw bytes of a record file, bytes or contents of an array file) and
runs ``softrank-certify check --json`` in-process.  The property: the exit code is 0, 1 or 2
(3 would be an internal error, i.e. a traceback); exit 2 names a file of the store; exit 0/1
carries verdicts that agree with exact rational arithmetic (upper witnesses and nonzero lower
certificates are recomputed here with Python Fractions).

The default run is 2,000 mutated stores in total (about a minute); set
``SOFTRANK_FUZZ_EXAMPLES`` for more (or fewer).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank.cli import main
from softrank.witnesses import open_store

from .helpers import exact_row1
from .storefactory import build_store

TOTAL = int(os.environ.get("SOFTRANK_FUZZ_EXAMPLES", "2000"))
# share of the examples per mutation family (sums to 1)
SHARES = {"fields": 0.28, "text": 0.15, "paths": 0.1, "array_bytes": 0.15, "arrays": 0.2,
          "numbers": 0.1, "audit": 0.02}
RECORD_FILES = ("store.json", "operators.jsonl", "brackets.jsonl")


def _examples(name: str) -> int:
    return max(1, round(TOTAL * SHARES[name]))


def _settings(name: str):
    return settings(max_examples=_examples(name), deadline=None, derandomize=True,
                    database=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, bytes]:
    """The valid store every example starts from, as {relative path: bytes}: one 6 x 6
    operator, a true and a false rank-3 upper claim, nonzero lower claims."""
    root = tmp_path_factory.mktemp("fuzzbase") / "s"
    build_store(root, n_ops=1, size=6)
    return {str(f.relative_to(root)): f.read_bytes() for f in root.rglob("*") if f.is_file()}


_WORK: list[Path] = []


@contextlib.contextmanager
def _copy(base: dict[str, bytes]):
    # one folder per process, rewritten from memory for every example (no copytree, no
    # fsync): the fuzz budget goes into checks, not file-system work
    if not _WORK:
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        _WORK.append(Path(tempfile.mkdtemp(prefix="softrank-fuzz-", dir=shm)))
    store = _WORK[0] / "s"
    shutil.rmtree(_WORK[0], ignore_errors=True)
    (store / "arrays").mkdir(parents=True)
    for rel, data in base.items():
        (store / rel).write_bytes(data)
    yield store


def teardown_module(module) -> None:
    for d in _WORK:
        shutil.rmtree(d, ignore_errors=True)


def _run_check(store: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["check", str(store), "--json"])
        except SystemExit as e:  # argparse-level usage errors
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


_EXACT: dict[tuple, Fraction] = {}


def _exact(*arrays: np.ndarray) -> Fraction:
    """exact_row1(A) or exact_row1(A, (U, V)) in Python Fractions, memoised by content (most
    examples leave the arrays alone)."""
    xs = [np.asarray(X, dtype=np.float64) for X in arrays]
    key = tuple((X.shape, X.tobytes()) for X in xs)
    if key not in _EXACT:
        _EXACT[key] = exact_row1(xs[0], (xs[1], xs[2]) if len(xs) == 3 else None)
    return _EXACT[key]


def _verify(store: Path, doc: dict) -> None:
    """Every verdict of a clean run agrees with exact rational arithmetic."""
    reader = open_store(store)
    by_id = {b.id: b for b in reader.brackets}
    for rec in doc["records"]:
        assert "error" not in rec
        br = by_id[rec["bracket"]]
        A = reader.operator(br.operator).load()["A"]
        upper, lower = br.load()
        eps, chi = Fraction(rec["eps"]), Fraction(rec.get("chi") or 0)
        if upper is not None and rec["upper_check"]["status"] in ("holds", "fails"):
            err = _exact(A, upper["U"], upper["V"])
            assert (err <= eps - chi) == (rec["upper_result"] == "proved"), rec
            # refuted only when the proved lower end exceeds the claim
            assert (rec["upper_result"] == "refuted") == (
                err > eps - chi and upper["rank"] < rec["lower"]), rec
        if lower is not None and lower["kind"] == "nonzero" and \
                rec["lower_check"]["status"] in ("holds", "fails"):
            norm = _exact(A)
            assert (norm > eps + chi) == (rec["lower_result"] == "proved"), rec


def _assert_contract(store: Path) -> None:
    code, out, err = _run_check(store)
    assert code in (0, 1, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if code == 2:
        assert "input error" in err or "error:" in err, err
        # the message names the store or a file inside it
        assert str(store) in err or "softrank-certify check: error" in err, err
    else:
        _verify(store, json.loads(out))


# ---------------------------------------------------------------------------- strategies

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["0.25", "1/4", "1/0", "NaN", "-1", "1e-3000", "0x10", "", "A",
                     "factors", "nonzero", "frobenius_tail", "decoder", "submatrix", "bernstein",
                     "arrays/../store.json", "\u2028", "<!--", "**Result:**"]))
json_values = st.recursive(json_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=12)


DEEP = "\u0001deep\u0001"


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _set(obj, path, value, delete=False):
    if not path:
        return value
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def _mutate_fields(store: Path, data) -> None:
    """Replaces, deletes, deeply nests or adds one field of one record."""
    name = data.draw(st.sampled_from(RECORD_FILES))
    p = store / name
    if name == "store.json":
        objs, lines = [json.loads(p.read_text())], None
    else:
        lines = [ln for ln in _lines(p) if ln.strip()]
        objs = [json.loads(ln) for ln in lines]
    i = data.draw(st.integers(0, len(objs) - 1))
    obj = objs[i]
    paths = list(_paths(obj))
    path = data.draw(st.sampled_from(paths))
    action = data.draw(st.sampled_from(["replace", "delete", "nest", "add"]))
    if action == "replace" or (action == "delete" and not path):
        obj = _set(obj, path, data.draw(json_values))
    elif action == "delete":
        obj = _set(obj, path, None, delete=True)
    elif action == "nest":  # spliced in as text: a 3000-deep object would not dump
        depth = data.draw(st.sampled_from([2, 10, 70, 3000]))
        obj = _set(obj, path, DEEP)
    elif isinstance(obj, dict):
        obj[data.draw(st.text(max_size=8))] = data.draw(json_values)
    objs[i] = obj
    text = "\n".join(json.dumps(o) for o in objs) + "\n"
    if action == "nest":
        text = text.replace(json.dumps(DEEP), "[" * depth + "1" + "]" * depth)
    p.write_text(text)


@given(data=st.data())
@_settings("fields")
def test_fuzz_record_fields(base, data):
    with _copy(base) as store:
        _mutate_fields(store, data)
        _assert_contract(store)


@given(data=st.data())
@_settings("audit")
def test_fuzz_audit_reports(base, data):
    """The audit on mutated stores: exit 0/1/2 only, and a written report.md holds exactly
    one Result line, before any store text, agreeing with report.json."""
    with _copy(base) as store:
        _mutate_fields(store, data)
        out = store.parent / "out"
        buf_out, buf_err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
            code = main(["audit", str(store), "--out", str(out), "--no-figures",
                         "--no-progress", "--recheck"])
        err = buf_err.getvalue()
        assert code in (0, 1, 2) and "Traceback" not in err and "internal error" not in err
        if (out / "report.md").exists():
            lines = (out / "report.md").read_text().splitlines()
            results = [i for i, ln in enumerate(lines) if "**Result:**" in ln]
            assert results == [2], lines[:4]
            rep = json.loads((out / "report.json").read_text())
            assert rep["summary"]["exit_code"] == code
            proved = "every float64 claim was proved" in lines[2]
            assert proved == (rep["summary"]["all_proved"] and rep["summary"]["brackets"] > 0)


@given(data=st.data())
@_settings("text")
def test_fuzz_record_text(base, data):
    with _copy(base) as store:
        p = store / data.draw(st.sampled_from(RECORD_FILES))
        raw = bytearray(p.read_bytes())
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, len(raw)))
            kind = data.draw(st.sampled_from(["insert", "delete", "replace"]))
            chunk = data.draw(st.one_of(
                st.binary(min_size=1, max_size=4),
                st.sampled_from([b"\n", "\u2028".encode(), b"[", b"{", b'"', b"\\", b",",
                                 b'"eps": 0.5, ', b'"eps": "1/3", ', b"\xff\xfe", b"\x00",
                                 b"9" * 50, b"e-999999"])))
            if kind == "insert":
                raw[pos:pos] = chunk
            elif kind == "delete":
                del raw[pos:pos + len(chunk)]
            else:
                raw[pos:pos + len(chunk)] = chunk
        p.write_bytes(bytes(raw))
        _assert_contract(store)


HOSTILE_PATHS = ["../../elsewhere/x.npz", "/etc/passwd", "arrays/../store.json",
                 "arrays/./x.npz", "arrays//x.npz", "arrays/../../x", "arrays\\x.npz",
                 "arrays/nope.npz", "arrays", "arrays/", "C:/x", "arrays/link.npz",
                 "arrays/loop.npz", "arrays/dir"]


@given(data=st.data())
@_settings("paths")
def test_fuzz_paths(base, data):
    with _copy(base) as store:
        outside = store.parent / "outside.npz"
        shutil.copy(sorted((store / "arrays").iterdir())[0], outside)
        (store / "arrays" / "link.npz").symlink_to(outside)
        (store / "arrays" / "loop.npz").symlink_to(store / "arrays" / "loop.npz")
        (store / "arrays" / "dir").mkdir()
        name = data.draw(st.sampled_from(RECORD_FILES[1:]))
        p = store / name
        recs = [json.loads(ln) for ln in _lines(p) if ln.strip()]
        i = data.draw(st.integers(0, len(recs) - 1))
        recs[i]["file"] = data.draw(st.one_of(st.sampled_from(HOSTILE_PATHS),
                                              st.text(max_size=20)))
        if data.draw(st.booleans()) and recs[i]["file"] == "arrays/link.npz":
            recs[i]["sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        code, _, err = _run_check(store)
        assert code in (0, 1, 2) and "Traceback" not in err
        if recs[i]["file"] in HOSTILE_PATHS[:7] + ["arrays/link.npz", "arrays/loop.npz"]:
            assert code == 2 and "refused" in err, err


def _fix_sha(store: Path, rel: str) -> None:
    digest = hashlib.sha256((store / rel).read_bytes()).hexdigest()
    for name in RECORD_FILES[1:]:
        p = store / name
        recs = [json.loads(ln) for ln in _lines(p) if ln.strip()]
        for r in recs:
            if r.get("file") == rel:
                r["sha256"] = digest
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _array_files(store: Path) -> list[str]:
    return sorted(f"arrays/{f.name}" for f in (store / "arrays").iterdir())


@given(data=st.data())
@_settings("array_bytes")
def test_fuzz_array_bytes(base, data):
    with _copy(base) as store:
        rel = data.draw(st.sampled_from(_array_files(store)))
        raw = bytearray((store / rel).read_bytes())
        for _ in range(data.draw(st.integers(1, 6))):
            pos = data.draw(st.integers(0, len(raw) - 1))
            if data.draw(st.booleans()):
                raw[pos] = data.draw(st.integers(0, 255))
            else:
                del raw[pos:pos + data.draw(st.integers(1, 64))]
        (store / rel).write_bytes(bytes(raw))
        if data.draw(st.integers(0, 3)):  # mostly: a matching sha, so the zip is parsed
            _fix_sha(store, rel)
        _assert_contract(store)


def _npy_bytes(X: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, X, allow_pickle=False)
    return buf.getvalue()


arrays_strategy = st.one_of(
    st.tuples(st.integers(0, 8), st.integers(0, 8)).flatmap(
        lambda s: st.lists(st.one_of(st.floats(-2, 2), st.sampled_from(
            [0.0, 1e-300, 1e300, 2.0**511, -2.0**511, float("nan"), float("inf")])),
            min_size=s[0] * s[1], max_size=s[0] * s[1]).map(
            lambda v, s=s: np.array(v, dtype=np.float64).reshape(s))),
    st.sampled_from(["i8", "f4", ">f8", "u1", "c16"]).map(lambda t: np.ones((6, 3), dtype=t)),
    st.just(np.ones((6, 3, 1))), st.just(np.ones(6)))


@given(data=st.data())
@_settings("arrays")
def test_fuzz_array_contents(base, data):
    """Replaces (or perturbs) one array of a bracket or operator file with a valid npz whose
    sha256 matches: the verdicts must then be exactly right or an input error."""
    import zipfile

    with _copy(base) as store:
        rel = data.draw(st.sampled_from(_array_files(store)))
        with zipfile.ZipFile(store / rel) as zf:
            members = {n: zf.read(n) for n in zf.namelist()}
        name = data.draw(st.sampled_from(sorted(members)))
        old = np.lib.format.read_array(io.BytesIO(members[name]), allow_pickle=False)
        if data.draw(st.booleans()) and old.dtype == np.float64 and old.size:
            # a small perturbation keeps shapes, so the kernel decides
            X = old.copy()
            idx = data.draw(st.integers(0, X.size - 1))
            X.flat[idx] = data.draw(st.one_of(
                st.floats(-4, 4), st.sampled_from([np.nextafter(X.flat[idx], np.inf),
                                                   np.nextafter(X.flat[idx], -np.inf),
                                                   0.0, 1e308, -1e308])))
        else:
            X = data.draw(arrays_strategy)
        members[name] = _npy_bytes(X)
        if data.draw(st.integers(0, 5)) == 0:
            members[data.draw(st.sampled_from(["extra.npy", "upper.W.npy"]))] = _npy_bytes(X)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for n, b in members.items():
                zf.writestr(n, b)
        (store / rel).write_bytes(buf.getvalue())
        _fix_sha(store, rel)
        _assert_contract(store)


numbers_strategy = st.one_of(
    st.fractions(min_value=Fraction(-1), max_value=Fraction(3), max_denominator=10**30).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=20).map(str),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=3),
    st.integers(-3, 3),
    st.sampled_from(["1e-3000", "1e3000", "1/" + "3" * 5000, "0." + "1" * 5000, "  1/4 ",
                     "1/-4", "+0.5", "5e-1", "0", "-0.0"]))


@given(data=st.data())
@_settings("numbers")
def test_fuzz_numbers(base, data):
    """eps (and beta, shape, ranks) take every numeric form: exact verdicts or exit 2."""
    with _copy(base) as store:
        p = store / "brackets.jsonl"
        recs = [json.loads(ln) for ln in _lines(p) if ln.strip()]
        i = data.draw(st.integers(0, len(recs) - 1))
        target = data.draw(st.sampled_from(["eps", "upper.rank", "lower.rank"]))
        value = data.draw(numbers_strategy)
        if target == "eps":
            recs[i]["eps"] = value
        else:
            end, key = target.split(".")
            if recs[i].get(end) is not None:
                recs[i][end][key] = value
        text = "".join(json.dumps(r) + "\n" for r in recs)
        if isinstance(value, float) and data.draw(st.booleans()):
            # a JSON number spelled with many digits, not Python's shortest repr
            text = text.replace(json.dumps(value), f"{value:.25e}")
        p.write_text(text)
        _assert_contract(store)
