"""Intrinsic witnesses through the store: round trip, bad input, produce -> check -> audit."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.commands._intrinsic_check import iter_intrinsic_checks
from softrank.witnesses import Store, open_store
from softrank.witnesses.intrinsic_store import INTRINSIC_FILE, IntrinsicWriter, read_intrinsic
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import intrinsic as P


def _logits(seed: int = 0, m: int = 12, n: int = 10) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((m, n)) * 2


def _store(tmp_path: Path, *, qk: bool = False) -> tuple[Path, str]:
    H = _logits()
    kw = {}
    if qk:
        rng = np.random.default_rng(5)
        Q, K = rng.standard_normal((12, 3)), rng.standard_normal((10, 3))
        H = Q @ K.T
        kw = {"Q": Q, "K": K}
    root = tmp_path / "s"
    with Store.create(root) as st:
        oid = st.add_operator(softmax64(H), family="toy", logits=H, **kw)
    return root, oid


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_round_trip_and_kernel_brackets_contain_float_claims(tmp_path):
    root, oid = _store(tmp_path)
    C = P.interaction_float(None, open_store(root).operator(oid).load()["logits"])
    # 5 CPU s, not 0.5: the searches end within 0.1 s here but failed at 0.5 with the clock
    # run 20 times fast (a slow machine); a budget they do not use costs nothing
    wit = {r: P.rank_witness(C, r, budget=5.0) for r in (1, 2)}
    with IntrinsicWriter(open_store(root)) as w:
        for r, rw in wit.items():
            w.add(oid, "rank", rw.arrays, rank=r, eps=("1/4", "0.35"), claims=rw.claims)
    recs = read_intrinsic(open_store(root))
    assert [r.rank for r in recs] == [1, 2]
    assert recs[0].eps == (Fraction(1, 4), Fraction(7, 20))
    back = recs[1].load()
    for k, v in wit[2].arrays.items():
        assert np.array_equal(back[k], v) and back[k].dtype == v.dtype
    results = {r["rank"]: r for r in iter_intrinsic_checks(open_store(root))}
    for r, rw in wit.items():
        k, t = results[r]["kappa"], results[r]["tau"]
        lo, hi = Fraction(k["lo"]), Fraction(k["hi"])
        assert lo <= hi and float(hi / lo) < 1 + 1e-6
        assert float(lo) <= rw.claims["kappa_upper"] * (1 + 1e-9)
        assert Fraction(t["lo"]) <= Fraction(t["hi"])
        assert len(results[r]["profiles"]) == 2
    # r = 1 closes exactly: kappa = osc(x) osc(y) / 4
    assert float(Fraction(results[1]["kappa"]["hi"]) / Fraction(results[1]["kappa"]["lo"])) \
        <= 1 + 1e-9


def test_old_stores_stay_valid_and_have_no_intrinsic_records(tmp_path):
    root, _ = _store(tmp_path)
    assert not (root / INTRINSIC_FILE).exists()
    assert read_intrinsic(open_store(root)) == []
    assert list(iter_intrinsic_checks(open_store(root))) == []


@pytest.mark.parametrize("name", ["X", "Y", "b", "G", "a", "c", "lam", "mu", "M", "D1", "D2"])
def test_nan_in_any_witness_names_the_field_and_writes_nothing(tmp_path, name):
    root, oid = _store(tmp_path)
    C = P.interaction_float(None, open_store(root).operator(oid).load()["logits"])
    arrays = dict(P.rank_witness(C, 2, budget=0.3).arrays)
    arrays.setdefault("M", np.zeros((12, 10)))
    arrays.setdefault("D1", np.ones(12))
    arrays.setdefault("D2", np.ones(10))
    bad = arrays[name].copy()
    bad.flat[0] = np.nan
    arrays[name] = bad
    before = _files(root)
    w = IntrinsicWriter(open_store(root))
    with pytest.raises(InputError) as err:
        w.add(oid, "rank", arrays, rank=2)
    assert err.value.field == f"{oid}.r2.{name}"
    assert "NaN" in str(err.value)
    w.close()
    assert _files(root) - before <= {INTRINSIC_FILE}
    assert read_intrinsic(open_store(root)) == []


def test_singular_gauge_and_too_large_rank_are_refused(tmp_path):
    root, oid = _store(tmp_path)
    C = P.interaction_float(None, open_store(root).operator(oid).load()["logits"])
    arrays = dict(P.rank_witness(C, 2, budget=0.3).arrays)
    w = IntrinsicWriter(open_store(root))
    sing = dict(arrays, G=np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(InputError, match="singular") as err:
        w.add(oid, "rank", sing, rank=2)
    assert err.value.field.endswith(".G")
    X, Y = P.truncate(C, 10)
    with pytest.raises(InputError, match="larger than the factors") as err:
        w.add(oid, "rank", {"X": np.hstack([X, X[:, :1]]), "Y": np.hstack([Y, Y[:, :1]])},
              rank=11)
    with pytest.raises(InputError, match="axis 1"):
        w.add(oid, "rank", arrays, rank=3)  # X has 2 columns, r = 3 declared
    assert not list((root / "arrays").glob("*.intrinsic.npz"))


def test_singular_gauge_on_disk_is_an_input_error_naming_the_field(tmp_path, capsys):
    root, oid = _store(tmp_path)
    C = P.interaction_float(None, open_store(root).operator(oid).load()["logits"])
    with IntrinsicWriter(open_store(root)) as w:
        w.add(oid, "rank", P.rank_witness(C, 2, budget=0.3).arrays, rank=2)
    rec = read_intrinsic(open_store(root))[0]
    arrs = rec.load()
    arrs["G"] = np.zeros((2, 2))
    np.savez(rec.path, **arrs)  # tampered: the record's sha256 no longer matches
    assert main(["check", str(root), "--quiet"]) == 2
    assert "sha256" in capsys.readouterr().err
    # a consistent record (sha updated) with a singular gauge: still refused, naming G
    import hashlib

    lines = (root / INTRINSIC_FILE).read_text().splitlines()
    doc = json.loads(lines[0])
    doc["sha256"] = hashlib.sha256(rec.path.read_bytes()).hexdigest()
    (root / INTRINSIC_FILE).write_text(json.dumps(doc) + "\n")
    assert main(["check", str(root), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{oid}.r2.G" in err and "singular" in err


def test_zero_entries_without_logits_refused_before_anything_is_written(tmp_path, capsys):
    A = softmax64(_logits())
    A[3, 4] = 0.0
    A /= A.sum(axis=1, keepdims=True)
    np.savez(tmp_path / "probs.npz", probs=A)
    out = tmp_path / "out"
    rc = main(["produce", str(out), "--npz", str(tmp_path / "probs.npz"), "--npz-kind",
               "probs", "--eps", "0.25", "--producers", "tsvd", "--intrinsic-ranks", "1",
               "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "visible interaction" in err and ".A" in err
    assert not out.exists()


def test_rank_larger_than_factors_refused_by_produce(tmp_path, capsys):
    np.savez(tmp_path / "l.npz", logits=_logits())
    out = tmp_path / "out"
    rc = main(["produce", str(out), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
               "--producers", "tsvd", "--intrinsic-ranks", "2", "11", "--quiet"])
    assert rc == 2
    assert "larger than the factors" in capsys.readouterr().err
    assert not out.exists()


def test_q_and_k_round_trip_and_native_record(tmp_path):
    root, oid = _store(tmp_path, qk=True)
    op = open_store(root).operator(oid)
    arrs = op.load()
    assert arrs["Q"].shape == (12, 3) and arrs["K"].shape == (10, 3)
    with pytest.raises(InputError, match="together"):
        Store.open(root).add_operator(arrs["A"], family="toy", id="x", Q=arrs["Q"])
    nw = P.native_witness(arrs["Q"], arrs["K"])
    with IntrinsicWriter(open_store(root)) as w:
        w.add(oid, "native", {k: nw[k] for k in ("centre_q", "weights_q", "centre_k",
                                                 "weights_k")})
    res = list(iter_intrinsic_checks(open_store(root)))
    g = res[0]["Gamma"]
    lo, hi = Fraction(g["lo"]), Fraction(g["hi"])
    assert lo <= Fraction(nw["rad_q"] * nw["rad_k"]) * (1 + Fraction(1, 10**9))
    assert float(hi / lo) < 1 + 1e-9


def test_produce_check_audit_on_a_tiny_store(tmp_path, capsys):
    H = np.stack([_logits(s) for s in range(2)])
    np.savez(tmp_path / "l.npz", logits=H)
    out = tmp_path / "s"
    assert main(["produce", str(out), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
                 "--producers", "tsvd", "keyset", "--intrinsic-ranks", "1", "2",
                 "--intrinsic-budget", "0.3", "--quiet"]) == 0
    capsys.readouterr()
    before = [b.id for b in open_store(out).brackets]
    assert len(read_intrinsic(open_store(out))) == 4
    # resume: nothing new, nothing rewritten
    assert main(["produce", str(out), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
                 "--producers", "tsvd", "keyset", "--intrinsic-ranks", "1", "2",
                 "--quiet"]) == 0
    assert [b.id for b in open_store(out).brackets] == before
    assert len(read_intrinsic(open_store(out))) == 4
    capsys.readouterr()
    assert main(["check", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["intrinsic_summary"]["records"] == 4
    assert doc["intrinsic_summary"]["errors"] == 0
    assert all(Fraction(r["kappa"]["lo"]) > 0 for r in doc["intrinsic"])
    # the intrinsic count is part of the summary, above the result line (it came after it),
    # and the per-record lines come with -v, as the brackets' do (they came without it)
    assert main(["check", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("result: every claim proved")
    assert "  intrinsic records: 4 checked, input errors 0 (-v: one line each)" in lines[:-1]
    assert len(lines) < 12
    assert main(["check", str(out), "-v"]) == 0
    assert len(capsys.readouterr().out.splitlines()) >= len(lines) + 4
    rep = tmp_path / "rep"
    assert main(["audit", str(out), "--out", str(rep), "--no-progress"]) == 0
    md = (rep / "intrinsic.md").read_text()
    assert "| r |" in md and "l.logits.0" in md
    data = json.loads((rep / "intrinsic.json").read_text())
    assert len(data["rows"]) == 4
    assert (rep / "figures" / "intrinsic_kappa_rank.png").is_file()


@pytest.mark.parametrize("damage", ["unreadable", "one bad record"])
def test_an_intrinsic_input_error_is_in_the_audit_reports_not_only_its_exit_code(
        tmp_path, capsys, damage):
    """The audit exited 2 on a bad intrinsic.jsonl while report.json said exit_code 0 and
    report.md's Result line said every claim was proved."""
    H = _logits(3)[None]
    np.savez(tmp_path / "l.npz", logits=H)
    out = tmp_path / "s"
    assert main(["produce", str(out), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
                 "--producers", "tsvd", "--intrinsic-ranks", "1",
                 "--intrinsic-budget", "0.3", "--quiet"]) == 0
    path = out / "intrinsic.jsonl"
    if damage == "unreadable":
        path.write_text(path.read_text() + "not json\n")
    else:  # a record whose rank disagrees with its factors
        rec = json.loads(path.read_text().splitlines()[0])
        rec["rank"] = rec["rank"] + 1
        path.write_text(json.dumps(rec) + "\n")
    capsys.readouterr()
    rep = tmp_path / "rep"
    code = main(["audit", str(out), "--out", str(rep), "--no-progress", "--no-figures"])
    assert code == 2
    doc = json.loads((rep / "report.json").read_text())
    assert doc["summary"]["exit_code"] == 2
    assert doc["summary"]["intrinsic"]["errors"] >= 1
    result = next(ln for ln in (rep / "report.md").read_text().splitlines()
                  if ln.startswith("**Result:**"))
    assert "intrinsic record" in result and "could not be checked" in result
    assert "Input errors" in (rep / "intrinsic.md").read_text()
    # and on stderr, naming the file and field, not only in intrinsic.md
    err = capsys.readouterr().err
    named = "intrinsic.jsonl" if damage == "unreadable" else ".intrinsic.npz: X"
    assert "intrinsic input error" in err and named in err


@pytest.mark.parametrize("damage", ["array", "garbage", "dangling", "native"])
def test_export_and_diff_refuse_a_store_whose_intrinsic_part_check_refuses(tmp_path, capsys,
                                                                          damage):
    # check exited 2 on a flipped intrinsic array, while export wrote a bundle (exit 0) and
    # diff said "0 changed" (exit 0)
    import os
    import shutil

    np.savez(tmp_path / "l.npz", logits=np.stack([_logits(s) for s in range(2)]))
    good, bad = tmp_path / "good", tmp_path / "bad"
    assert main(["produce", str(good), "--npz", str(tmp_path / "l.npz"), "--eps", "0.25",
                 "--producers", "tsvd", "keyset", "--intrinsic-ranks", "1",
                 "--intrinsic-budget", "0.3", "--quiet"]) == 0
    shutil.copytree(good, bad)
    if damage == "array":
        rec = read_intrinsic(open_store(bad))[0]
        raw = bytearray(rec.path.read_bytes())
        raw[-20] ^= 0xFF
        rec.path.write_bytes(bytes(raw))
    elif damage == "garbage":
        (bad / "intrinsic.jsonl").write_text('{"id": "x"}\n')
    elif damage == "dangling":
        os.remove(bad / "intrinsic.jsonl")
        os.symlink("/nonexistent/intrinsic.jsonl", bad / "intrinsic.jsonl")
    else:  # well-formed, its arrays intact, but a native record needs the operator's Q and K
        rec = read_intrinsic(open_store(bad))[0]
        line = json.loads((bad / "intrinsic.jsonl").read_text().splitlines()[0])
        with np.load(rec.path) as z:
            kept = {k: z[k] for k in z.files}
        np.savez(bad / "arrays" / "native.npz", centre_q=kept[sorted(kept)[0]])
        line.update(id=line["operator"] + ".native", kind="native", arrays=["centre_q"],
                    file="arrays/native.npz",
                    sha256=hashlib.sha256((bad / "arrays" / "native.npz").read_bytes())
                    .hexdigest())
        line.pop("rank", None)
        with open(bad / "intrinsic.jsonl", "a") as fh:
            fh.write(json.dumps(line) + "\n")
    capsys.readouterr()
    assert main(["check", str(bad), "-q"]) == 2
    assert main(["check", str(bad), "-q", "--export", str(tmp_path / "c.zip")]) == 2
    assert not (tmp_path / "c.zip").exists()  # check --export wrote it
    assert main(["export", str(bad), "--out", str(tmp_path / "b.zip"), "-q"]) == 2
    assert not (tmp_path / "b.zip").exists()
    assert main(["diff", str(good), str(bad)]) == 2
    assert "intrinsic" in capsys.readouterr().err
    assert main(["diff", str(good), str(good)]) == 0  # an intact store still compares
