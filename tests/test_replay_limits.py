"""The replayer on hostile bundles: every refusal is exit 2 naming the member or field, fast,
and nothing is inflated or expanded before the limits are checked (replay/replay.py)."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from replay import replay as rp
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store

from .helpers import random_attention, tsvd_witness

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """One 6 x 5 operator: a true upper end and a Frobenius tail (L = 2) the kernel proves, so
    the bundle holds a Ky Fan certificate; a second bracket whose upper claim is refuted, with a
    decoder lower end."""
    d = tmp_path_factory.mktemp("limits")
    A = random_attention(np.random.default_rng(3), 6, 5)
    s = np.linalg.svd(A, compute_uv=False)
    eps = f"{float(np.sqrt(np.sum(s[1:] ** 2) / 6) / 2):.6f}"
    U, V = tsvd_witness(A, 4)
    Us, s, Vt = np.linalg.svd(A)
    dec = {"kind": "decoder", "rank": 2, "D": Us[:, :2].T.copy(), "W": Vt[:2].T.copy(),
           "X": np.diag(1 / s[:2])}
    with Store.create(d / "store", description="limits") as st:
        oid = st.add_operator(A, family="t", id="op0")
        st.add_bracket(oid, eps, {"kind": "factors", "rank": 4, "U": U, "V": V},
                       {"kind": "frobenius_tail", "rank": 2}, id="b0")
        st.add_bracket(oid, "1/10000000", {"kind": "factors", "rank": 2, "U": U[:, :2],
                                           "V": V[:2]}, dec, id="b1")
    out = d / "bundle.zip"
    write_bundle(d / "store", list(iter_checks(d / "store")), out)
    doc = json.loads(zipfile.ZipFile(out).read("bundle.json"))
    assert any(e["kind"] == "frobenius_tail" and e["kernel"] == "holds" and e["certificate"]
               for e in doc["ends"])
    assert {e["kernel"] for e in doc["ends"]} >= {"holds", "fails"}
    return out


def _files(doc: dict) -> set[str]:
    """The members the bundle document refers to."""
    recs = doc["operators"] + doc["ends"]
    recs += [e["certificate"] for e in doc["ends"] if e.get("certificate")]
    return {v["file"] for r in recs for v in r.values() if isinstance(v, dict) and "file" in v}


def _rewrite(bundle: Path, out: Path, body: bytes | None = None,
             add: dict[str, bytes] | None = None) -> Path:
    """Copies ``bundle`` with bundle.json replaced by ``body`` and the members ``add`` added,
    dropping members a parseable new body no longer refers to, the manifest re-signed: only
    the edit itself can be objected to."""
    z = zipfile.ZipFile(bundle)
    members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    if body is not None:
        members["bundle.json"] = body
        try:
            keep = _files(json.loads(body)) | {"bundle.json"}
        except ValueError:
            keep = set(members)
        members = {n: b for n, b in members.items() if n in keep}
    members.update(add or {})
    man = json.loads(z.read("manifest.json"))
    man["files"] = {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                    for n, b in members.items()}
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        zout.writestr("manifest.json", json.dumps(man))
        for n, b in members.items():
            zout.writestr(n, b)
    return out


def _doc(bundle: Path) -> dict:
    return json.loads(zipfile.ZipFile(bundle).read("bundle.json"))


def _main(path: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = rp.main([str(path), "--quiet"])
    out = capsys.readouterr()
    return code, out.out + out.err


def _opened(monkeypatch) -> list[str]:
    """Records every archive member the replayer inflates."""
    names: list[str] = []
    real = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        names.append(getattr(name, "filename", name))
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return names


def test_the_bundle_replays(bundle, capsys):
    code, out = _main(bundle, capsys)
    assert code == 0, out
    s = rp.replay(str(bundle))
    assert s["disagreements"] == 0 and s["kernel_proved"] == s["replayed_proved"] < s["ends"]


# --- 1: rationals with huge exponents -----------------------------------------------------

def test_rational_bounds_the_exponent_before_expanding():
    for bad in ("1e4000", "1e-4000", "1e999999999", "1e-999999999", "1" * 3990 + "e11",
                "0." + "0" * 3990 + "1e-9", "1e" + "9" * 5000, "1/" + "1" * 3915):
        t0 = time.perf_counter()
        with pytest.raises(rp.BundleError, match=r"^f\.x: .*digits"):
            rp.rational(bad, "f.x")
        assert time.perf_counter() - t0 < 1
    assert rp.rational("15e-2", "f") == rp.rational("3/20", "f") == rp.rational(".15", "f")
    assert rp.rational("-12.5E-3", "f") == rp.Fraction(-1, 80)
    assert rp.rational("0e999999999", "f") == 0  # zero: no power of ten is built
    assert rp.rational("1e3913", "f") == 10 ** 3913  # 3914 digits: the limit of a part
    with pytest.raises(rp.BundleError, match="digits"):
        rp.rational("1e3914", "f")
    # written out, the same number reads the same: no extra charge for a plain integer
    assert rp.rational("1" + "0" * 3913, "f") == 10 ** 3913
    assert rp.rational("0e" + "9" * 5000, "f") == 0
    assert rp.rational("5e-" + "0" * 5000 + "1", "f") == rp.Fraction(1, 2)  # int() never sees it
    for bad in ("1_000", " 1", "1/0", "1/2/3", ".", "e5", "0x10", "nan", "inf", "\u0661"):
        with pytest.raises(rp.BundleError, match=r"^f: "):
            rp.rational(bad, "f")


def test_rational_accepts_every_string_the_kernel_reader_accepts():
    """Differential: strings near the kernel's bounds (certify/rationals.py) in both forms;
    whatever the kernel takes, the replayer takes with the same value (else a bundle of a store
    the kernel checked would not replay)."""
    from softrank.certify.errors import InputError
    from softrank.certify.rationals import to_rational

    rng = np.random.default_rng(11)

    def digits(n: int) -> str:
        return str(rng.integers(1, 10)) + "".join(map(str, rng.integers(0, 10, n - 1)))

    cases = []
    for n in (1, 50, 2500, 3913, 3914, 3915):
        cases += [digits(n) + "/" + digits(max(1, 3914 - n + 1)), "-" + digits(n) + "/7",
                  "000" + digits(n) + "/0003"]
    for n, e in ((1, 3999), (1, 4000), (2000, 1999), (2000, -1999), (3000, 500), (10, -3990),
                 (3999, 0), (4001, 0)):
        w = digits(n)
        cases += [f"{w}e{e}", f"-{w[:1]}.{w[1:]}e{e}", f"0.{'0' * 20}{w}e{e + 20}"]
    cases += [f"1e{e}" for e in (2100, 3000, 3913, 3914)] + ["1e-3912", "1e-3913"]
    taken = []
    for s in cases:
        try:
            q = to_rational(s, field="f")
        except InputError:
            continue
        taken.append(s)
        assert rp.rational(s, "f") == q, s[:40]
        # a writer spells the value str(Fraction) ("p/q", or a plain integer): both readers
        # take that back (a "1e2100" eps was once stored as 2,101 digits neither would read)
        assert to_rational(str(q), field="f") == rp.rational(str(q), "f") == q, s[:40]
    # the old 2000-character cap refused the long ones
    assert len(taken) >= 15 and max(map(len, taken)) > 3914
    assert "1e3913" in taken and "1e2100" in taken and "1e3914" not in taken


def test_a_store_with_a_2500_digit_eps_exports_a_bundle_that_replays(tmp_path, capsys):
    A = random_attention(np.random.default_rng(5), 5, 4)
    U, V = tsvd_witness(A, 4)
    eps = "0.25" + "0" * 2500 + "1"
    with Store.create(tmp_path / "store", description="long eps") as st:
        oid = st.add_operator(A, family="t", id="op0")
        st.add_bracket(oid, eps, {"kind": "factors", "rank": 4, "U": U, "V": V},
                       {"kind": "nonzero", "rank": 1}, id="b0")
    out = tmp_path / "bundle.zip"
    write_bundle(tmp_path / "store", list(iter_checks(tmp_path / "store")), out)
    doc = json.loads(zipfile.ZipFile(out).read("bundle.json"))
    assert len(doc["ends"][0]["eps"]) > 5000 and doc["ends"][0]["kernel"] == "holds"
    code, text = _main(out, capsys)
    assert code == 0, text
    s = rp.replay(str(out))
    assert s["disagreements"] == 0 and s["replayed_proved"] == s["kernel_proved"] == 2


def test_huge_eps_exponent_in_a_bundle_is_exit_2_naming_the_field(bundle, tmp_path):
    doc = _doc(bundle)
    doc["ends"][1]["eps"] = "1e999999999"
    bad = _rewrite(bundle, tmp_path / "bad.zip", json.dumps(doc).encode())
    out = subprocess.run([sys.executable, str(ROOT / "replay" / "replay.py"), str(bad)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert "ends[1].eps" in out.stderr and "digits" in out.stderr


def test_a_json_number_with_a_huge_exponent_names_the_file(bundle, tmp_path, capsys):
    body = zipfile.ZipFile(bundle).read("bundle.json")
    eps = f'"eps": {json.dumps(_doc(bundle)["ends"][0]["eps"])}'.encode()
    assert eps in body
    bad = _rewrite(bundle, tmp_path / "bad.zip", body.replace(eps, b'"eps": 1e999999999', 1))
    code, out = _main(bad, capsys)
    assert code == 2 and "bundle.json: JSON number 1e999999999 is not allowed" in out


# --- 2: archive limits, checked on the declared sizes before inflating --------------------

def test_an_unused_listed_member_is_refused_and_never_inflated(bundle, tmp_path, monkeypatch,
                                                               capsys):
    junk = np.random.default_rng(0).bytes(1 << 16)
    bad = _rewrite(bundle, tmp_path / "bad.zip", add={"arrays/unused.bin": junk})
    opened = _opened(monkeypatch)
    code, out = _main(bad, capsys)
    assert code == 2 and "arrays/unused.bin: listed in the manifest but unused" in out
    assert "arrays/unused.bin" not in opened and "bundle.json" in opened


def test_a_compression_bomb_is_refused_before_inflating(bundle, tmp_path, monkeypatch, capsys):
    """40 MiB of zeros (40 KB deflated): far above 100 bytes per archive byte; nothing is
    inflated, not even the manifest."""
    bad = _rewrite(bundle, tmp_path / "bomb.zip", add={"arrays/zeros.bin": bytes(40 << 20)})
    assert bad.stat().st_size < 1 << 20
    opened = _opened(monkeypatch)
    code, out = _main(bad, capsys)
    assert code == 2 and "arrays/zeros.bin: oversized" in out and opened == []


def test_total_size_and_member_count_limits(bundle, tmp_path, monkeypatch, capsys):
    opened = _opened(monkeypatch)
    names = zipfile.ZipFile(bundle).namelist()
    monkeypatch.setattr(rp, "MAX_MEMBERS", 3)
    built = []  # the count comes from the end record: zipfile never builds the entries
    monkeypatch.setattr(rp.zipfile, "ZipFile", lambda *a, **k: built.append(a) or 1 / 0)
    code, out = _main(bundle, capsys)
    assert code == 2 and f"{bundle}: more than 3 archive members" in out and not built
    assert len(names) > 3
    monkeypatch.undo()
    opened = _opened(monkeypatch)
    monkeypatch.setattr(rp, "MAX_MEMBERS", 100)
    size = bundle.stat().st_size
    total = np.cumsum([i.file_size for i in zipfile.ZipFile(bundle).infolist()])
    assert total[-1] > size
    monkeypatch.setattr(rp, "MAX_TOTAL", size)
    monkeypatch.setattr(rp, "RATIO_FREE", 1 << 30)
    code, out = _main(bundle, capsys)
    assert code == 2 and f"{names[int(np.argmax(total > size))]}: oversized" in out
    monkeypatch.setattr(rp, "MAX_TOTAL", bundle.stat().st_size - 1)
    code, out = _main(bundle, capsys)
    assert code == 2 and f"{bundle}: {bundle.stat().st_size} bytes, above the limit" in out
    assert opened == []


def test_a_member_larger_than_declared_is_refused(bundle, tmp_path, capsys):
    """The directory and the manifest both say 8 bytes; the member inflates to more.  (zipfile
    already stops at the declared size and fails the CRC; the replayer reads at most the
    declared size + 1 bytes either way.)"""
    name = _doc(bundle)["operators"][0]["A"]["file"]
    z = zipfile.ZipFile(bundle)
    man = json.loads(z.read("manifest.json"))
    man["files"][name] = {"bytes": 8, "sha256": hashlib.sha256(z.read(name)[:8]).hexdigest()}
    lie = tmp_path / "lie.zip"
    with zipfile.ZipFile(lie, "w", compression=zipfile.ZIP_DEFLATED) as out:
        out.writestr("manifest.json", json.dumps(man))
        for n in z.namelist():
            if n != "manifest.json":
                out.writestr(n, z.read(n))
    raw = bytearray(lie.read_bytes())
    with zipfile.ZipFile(lie) as z:
        pos, local = z.start_dir, z.getinfo(name).header_offset
    struct.pack_into("<I", raw, local + 22, 8)  # uncompressed size in the local header
    while raw[pos:pos + 4] == b"PK\x01\x02":  # ... and in the central directory
        nlen, xlen, clen = struct.unpack_from("<HHH", raw, pos + 28)
        if raw[pos + 46:pos + 46 + nlen] == name.encode():
            struct.pack_into("<I", raw, pos + 24, 8)
        pos += 46 + nlen + xlen + clen
    lie.write_bytes(bytes(raw))
    assert zipfile.ZipFile(lie).getinfo(name).file_size == 8
    code, out = _main(lie, capsys)
    assert code == 2 and name in out


# --- 3: JSON integers beyond Python's int-from-string limit ---------------------------------

@pytest.mark.parametrize("member", ["bundle.json", "manifest.json"])
def test_a_json_integer_of_5000_digits_is_exit_2_naming_the_file(bundle, tmp_path, member):
    """In a fresh process: Python's default limit of 4300 digits (softrank raises it here)."""
    huge = b"1" + b"0" * 5000
    if member == "bundle.json":
        body = zipfile.ZipFile(bundle).read("bundle.json")
        assert b'"rank": 4' in body
        bad = _rewrite(bundle, tmp_path / "bad.zip", body.replace(b'"rank": 4', b'"rank": '
                                                                   + huge, 1))
    else:
        bad = tmp_path / "bad.zip"
        with zipfile.ZipFile(bundle) as z, zipfile.ZipFile(bad, "w") as out:
            for n in z.namelist():
                b = z.read(n)
                out.writestr(n, b.replace(b'"version": 1', b'"version": ' + huge, 1)
                             if n == "manifest.json" else b)
    run = subprocess.run([sys.executable, str(ROOT / "replay" / "replay.py"), str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert f"{member}: JSON number 10000" in run.stderr and "at most 100 digits" in run.stderr


# --- 4: Ky Fan certificates whose arrays do not have the declared shapes -------------------

@pytest.mark.parametrize("name,rows", [("G", 0), ("C", 0), ("G", 2), ("C", 4)])
def test_kyfan_arrays_of_the_wrong_shape_are_exit_2_naming_the_field(bundle, tmp_path, capsys,
                                                                     name, rows):
    doc = _doc(bundle)
    i, end = next((i, e) for i, e in enumerate(doc["ends"]) if e["kind"] == "frobenius_tail")
    n = end["certificate"][name]["shape"][1]
    assert end["certificate"]["G"]["shape"] == [1, n] and end["certificate"]["C"]["shape"] == [n, n]
    data = bytes(8 * rows * n)
    ref = f"arrays/{hashlib.sha256(data).hexdigest()}.bin"
    end["certificate"][name] = {"file": ref, "dtype": "<f8", "shape": [rows, n]}
    bad = _rewrite(bundle, tmp_path / "bad.zip", json.dumps(doc).encode(), add={ref: data})
    code, out = _main(bad, capsys)
    assert code == 2, out
    assert f"ends[{i}].certificate.{name}: shape [{rows}, {n}] where" in out


@pytest.mark.parametrize("where", ["certificate", "operator"])
def test_true_in_a_shape_is_not_the_integer_1(bundle, tmp_path, capsys, where):
    """JSON true equals 1 in Python; the export writes integers, so a shape [true, n] (the
    Ky Fan G is 1 x n) or an operator shape with true is refused, as a version true is."""
    doc = _doc(bundle)
    if where == "certificate":
        end = next(e for e in doc["ends"] if e["kind"] == "frobenius_tail" and e["certificate"])
        assert end["certificate"]["G"]["shape"][0] == 1
        end["certificate"]["G"]["shape"][0] = True
    else:
        doc["operators"][0]["shape"][0] = True
    bad = _rewrite(bundle, tmp_path / "bad.zip", json.dumps(doc).encode())
    code, out = _main(bad, capsys)
    assert code == 2, out
    assert ("G: bad array reference" in out) if where == "certificate" else \
        ("operators[0]: needs" in out), out


@pytest.mark.parametrize("edit", ["repeated eps", "repeated kernel", "repeated top key",
                                  "format", "version", "version true"])
def test_a_bundle_json_the_export_could_not_have_written_is_refused(bundle, tmp_path, capsys,
                                                                      edit):
    """Repeated keys (read here as their last value, by another reader as their first) and
    another format or version in bundle.json are exit 2, not replayed (they were read)."""
    doc = _doc(bundle)
    text = json.dumps(doc)
    end = doc["ends"][0]
    if edit == "repeated eps":
        old = f'"eps": "{end["eps"]}"'
        text = text.replace(old, '"eps": "1/100", ' + old, 1)
    elif edit == "repeated kernel":
        text = text.replace('"kernel": "holds"', '"kernel": "fails", "kernel": "holds"', 1)
    elif edit == "repeated top key":
        text = '{"ends": [], ' + text[1:]
    elif edit == "format":
        text = text.replace('"format": "softrank-replay-bundle"', '"format": "not-a-bundle"')
    else:  # JSON true equals 1 in Python: the export writes the integer
        text = text.replace('"version": 1', '"version": 99' if edit == "version" else
                            '"version": true', 1)
    assert text != json.dumps(doc)
    bad = _rewrite(bundle, tmp_path / "bad.zip", text.encode())
    code, out = _main(bad, capsys)
    assert code == 2, out
    assert ("appears twice" in out) if edit.startswith("repeated") else ("version 1" in out)


# --- 5: exit codes ----------------------------------------------------------------------

def test_a_bundle_with_no_ends_is_exit_1(bundle, tmp_path, capsys):
    doc = _doc(bundle)
    doc["ends"] = []
    bad = _rewrite(bundle, tmp_path / "empty.zip", json.dumps(doc).encode())
    assert rp.replay(str(bad))["ends"] == 0
    code, out = _main(bad, capsys)
    assert code == 1 and "no ends: nothing was replayed" in out


def test_a_bundle_of_ends_the_kernel_did_not_prove_is_exit_1(bundle, tmp_path, capsys):
    """Every end agrees with the kernel, but the kernel proved none: nothing was confirmed,
    so the exit is not the one that says every proved end replays (it was 0)."""
    doc = _doc(bundle)
    doc["ends"] = [e for e in doc["ends"] if e["kernel"] != "holds"]
    assert doc["ends"]
    bad = _rewrite(bundle, tmp_path / "unproved.zip", json.dumps(doc).encode())
    s = rp.replay(str(bad))
    assert s["kernel_proved"] == 0 and s["disagreements"] == 0 and s["ends"] == len(doc["ends"])
    code, out = _main(bad, capsys)
    assert code == 1 and "the kernel proved no end" in out
    assert _main(bundle, capsys)[0] == 0  # the bundle it was cut from confirms its proofs


def test_the_summary_counts_the_ends_the_kernel_did_not_prove(bundle, capsys):
    s = rp.replay(str(bundle))
    capsys.readouterr()
    assert rp.main([str(bundle)]) == 0  # refuted ends replay as refuted: they agree
    out = capsys.readouterr().out
    assert (f"{s['ends'] - s['kernel_proved']} ends not proved by the kernel, replayed for "
            "agreement only, not as proofs") in out


# --- also: exact values beyond Python's 4300-digit int-to-str limit --------------------------

def test_exact_values_beyond_4300_digits_print(bundle, tmp_path):
    """A decoder end whose exact value has a numerator of about 4900 digits: t = eps + chi with
    coprime 2000-character denominators, and 1e300 next to 5e-324 in X, D and W.  A fresh
    process has Python's 4300-digit limit on int-to-str: the replayer must print the value,
    not crash (exit 3)."""
    doc = _doc(bundle)
    i, end = next((i, e) for i, e in enumerate(doc["ends"]) if e["kind"] == "decoder")
    for e in doc["ends"]:  # every end of the bracket: they must name one eps
        if e["bracket"] == end["bracket"]:
            e["eps"] = "1/1" + "0" * 1996 + "1"
    doc["operators"][0]["chi"] = "1" + "0" * 996 + "7/1" + "0" * 997 + "3"
    z = zipfile.ZipFile(bundle)
    add = {}
    for name, idx in (("X", [0, 1, 2, 3]), ("D", [0, 1, 6, 7]), ("W", [0, 1, 2, 3])):
        M = np.frombuffer(z.read(end["certificate"][name]["file"]), "<f8").copy()
        M[idx] = [1e300, 5e-324, 5e-324, 1e300]
        ref = f"arrays/{hashlib.sha256(M.tobytes()).hexdigest()}.bin"
        add[ref] = M.tobytes()
        end["certificate"][name]["file"] = ref
    bad = _rewrite(bundle, tmp_path / "long.zip", json.dumps(doc).encode(), add=add)
    run = subprocess.run([sys.executable, str(ROOT / "replay" / "replay.py"), str(bad),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    value = json.loads(run.stdout)["results"][i]["value"]
    assert max(len(part) for part in value.split("/")) > 4300


def test_a_closed_pipe_is_exit_141_not_an_internal_error(bundle):
    """replay.py BUNDLE | head -0: the reader is gone before the first line is written."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "replay" / "replay.py"), str(bundle)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "internal error" not in err and "Traceback" not in err


def test_help_and_short_options(bundle, capsys):
    for flag in ("--help", "-h"):
        assert rp.main([flag]) == 0
        out, err = capsys.readouterr()
        assert out.startswith("Replays a softrank-certify bundle") and "Exit codes" in out
        assert not err
    assert rp.main([str(bundle), "-q"]) == rp.main([str(bundle), "--quiet"])
    out = capsys.readouterr().out
    assert " replay " not in out.split("bundle ")[0]  # quiet: no per-end lines before the summary
    assert rp.main([str(bundle), "-x"]) == 2
    assert "Usage" in capsys.readouterr().err
    assert rp.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"replay.py: reads {rp.FORMAT} version {rp.VERSION}"


def test_two_long_eps_that_differ_past_the_cut_never_print_alike():
    # they printed as the same 40 characters and length, so a line naming two different
    # eps read as naming one
    a = "1/" + "7" * 70 + "1"
    b = "1/" + "7" * 70 + "3"
    assert rp._short(a) != rp._short(b)
    assert len(rp._short(a)) < 100
    assert rp._short("1/4") == "1/4"
