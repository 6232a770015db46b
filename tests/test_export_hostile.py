"""``export`` / ``check --export`` on stores that change under it, input errors, archives the
replayer would refuse, and the Ky Fan search's work (each found by a review)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from replay import replay as rp
from softrank.certify.errors import InputError
from softrank.cli import main as cli_main
from softrank.export import bundle as bundle_mod
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store, open_store

from .helpers import softmax_rows, tsvd_witness


def _store(path, n_ops=2, m=12, n=10, onehot=False, frobenius=False):
    rng = np.random.default_rng(3)
    with Store.create(path, description="export test") as st:
        for o in range(n_ops):
            if onehot:
                A = np.zeros((m, n))
                A[np.arange(m), rng.integers(0, n, m)] = 1.0
            else:
                A = softmax_rows(rng.normal(size=(m, n)) * 2)
            oid = st.add_operator(A, family="t", id=f"op{o}")
            U, V = tsvd_witness(A, min(m, n) - 1)
            low = {"kind": "frobenius_tail", "rank": 2} if frobenius else \
                {"kind": "nonzero", "rank": 1}
            st.add_bracket(oid, "1/4", {"kind": "factors", "rank": U.shape[1], "U": U, "V": V},
                           low, id=f"op{o}-b0")


def test_records_checked_under_another_digest_are_not_bundled(tmp_path):
    store = tmp_path / "s"
    _store(store)
    digest = open_store(store).digest
    records = list(iter_checks(store, digest=digest))
    # the store is rewritten between the checks and the bundle (a review swapped a checked
    # witness for U = 0, with its sha256 updated, and the bundle said "holds" for it)
    with open(store / "brackets.jsonl", "ab") as fh:
        fh.write(b"\n")
    out = tmp_path / "b.zip"
    with pytest.raises(InputError, match="changed since its brackets were checked"):
        write_bundle(store, records, out, digest=digest)
    assert not out.exists()
    with pytest.raises(InputError, match="changed since this run read them"):
        list(iter_checks(store, digest=digest))
    with pytest.raises(InputError, match="changed"):  # the workers compare it too
        list(iter_checks(store, digest=digest, jobs=2))
    write_bundle(store, records, out, digest=open_store(store).digest)  # same records: fine
    assert rp.replay(str(out))["disagreements"] == 0


def test_a_record_the_store_does_not_hold_is_an_input_error(tmp_path):
    store = tmp_path / "s"
    _store(store)
    records = list(iter_checks(store))
    records[0] = dict(records[0], bracket="op9-b0")
    with pytest.raises(InputError, match="holds no bracket"):
        write_bundle(store, records, tmp_path / "b.zip")


def test_input_errors_are_named_and_no_bundle_is_written(tmp_path, capsys):
    store = tmp_path / "s"
    _store(store)
    victim = next((store / "arrays").glob("op1-b0*"))
    victim.write_bytes(victim.read_bytes()[:-7] + b"garbage")
    out = tmp_path / "b.zip"
    assert cli_main(["export", str(store), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no bundle is written" in err and "op1-b0" in err and not out.exists()
    assert cli_main(["check", str(store), "-q", "--export", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no bundle written" in err and "op1-b0" in err and not out.exists()


def test_frobenius_ends_without_a_certificate_are_counted_whatever_the_reason(tmp_path):
    store = tmp_path / "s"
    _store(store, frobenius=True)
    records = list(iter_checks(store))
    proved = sum(r["lower_check"]["status"] == "holds" for r in records)
    assert proved == 2
    out = tmp_path / "b.zip"
    assert write_bundle(store, records, out)["kyfan_missing"] == 0
    assert write_bundle(store, records, out, frobenius=False)["kyfan_missing"] == 2
    # a search over its work limit is skipped and counted, never a crash or a hang
    assert write_bundle(store, records, out, max_work=10)["kyfan_missing"] == 2
    s = rp.replay(str(out))
    assert s["replayed_proved"] == s["kernel_proved"] - 2


def test_compressible_arrays_are_stored_so_the_replayer_accepts_them(tmp_path, monkeypatch):
    """One-hot rows deflate far past the replayer's 100:1 ratio limit (a review's 80 KB bundle
    of 48 MiB was refused by the replayer after export said it was fine)."""
    store = tmp_path / "s"
    _store(store, n_ops=2, m=256, n=256, onehot=True)
    records = list(iter_checks(store))
    for mod in (bundle_mod, rp):  # the free allowance, scaled down to this store's size
        monkeypatch.setattr(mod, "RATIO_FREE", 4096)
    out = tmp_path / "b.zip"
    write_bundle(store, records, out)
    with zipfile.ZipFile(out) as zf:
        big = [i for i in zf.infolist() if i.file_size > 100_000]
        assert any(i.compress_type == zipfile.ZIP_STORED for i in big)  # the one-hot A
        assert all(i.compress_type == zipfile.ZIP_STORED or 50 * i.compress_size >= i.file_size
                   for i in big)
        assert sum(i.file_size for i in zf.infolist()) <= rp.MAX_RATIO * out.stat().st_size
    s = rp.replay(str(out))
    assert s["disagreements"] == 0 and s["ends"] == 4


def test_a_bundle_past_the_replayer_limits_is_refused_before_writing(tmp_path, monkeypatch):
    store = tmp_path / "s"
    _store(store)
    records = list(iter_checks(store))
    monkeypatch.setattr(bundle_mod, "MAX_MEMBER", 200)
    out = tmp_path / "b.zip"
    with pytest.raises(InputError, match="replayer's limits"):
        write_bundle(store, records, out)
    assert not out.exists()


def test_the_archive_limits_are_the_replayers():
    names = ("MAX_MEMBER", "MAX_TOTAL", "MAX_MEMBERS", "MAX_RATIO", "RATIO_FREE")
    assert [getattr(bundle_mod, n) for n in names] == [getattr(rp, n) for n in names]


def test_export_json_counts(tmp_path, capsys):
    store = tmp_path / "s"
    _store(store)
    out = tmp_path / "b.zip"
    assert cli_main(["export", str(store), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ends"] == 4 and doc["kernel_proved"] == 4 and doc["bytes"] == out.stat().st_size
