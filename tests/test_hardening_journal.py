"""The audit journal is trusted only when this user signed it, and even then sampled."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from softrank.audit import run_audit, sample_size
from softrank.audit.journal import JOURNAL_NAME, journal_secret, key_path
from softrank.cli import main

from .storefactory import build_store


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _journal(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / JOURNAL_NAME).read_text().splitlines()]


def _write_journal(out: Path, lines: list[dict]) -> None:
    (out / JOURNAL_NAME).write_text("".join(json.dumps(x, sort_keys=True) + "\n"
                                            for x in lines))


def _forge_confirmed(lines: list[dict]) -> list[dict]:
    """The attack: edit every record of the journal whose upper end is not proved to read
    proved (the newer key and the older one)."""
    out = [lines[0]]
    for rec in lines[1:]:
        rec = dict(rec)
        if rec.get("upper_result") == "does_not_hold":
            rec["upper_result"] = "proved"
            rec["upper_outcome"] = "confirmed"
            rec["upper"] = rec["upper_claim"]
            rec["upper_check"] = {**rec["upper_check"], "status": "holds"}
        out.append(rec)
    return out


def test_key_lives_in_the_cache_folder_with_mode_0600(tmp_path, cache_home):
    key = journal_secret(tmp_path / "out")
    assert key is not None and len(key) == 32
    assert key_path() == cache_home / "softrank-certify" / "journal.key"
    assert stat.S_IMODE(key_path().stat().st_mode) == 0o600
    assert journal_secret() == key  # created once, then read
    key_path().chmod(0o644)  # readable by others: not a secret any more
    assert journal_secret() is None
    key_path().chmod(0o600)
    # a key inside the output folder is never used
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "out" / "cache")
    assert journal_secret(tmp_path / "out") is None


def test_edited_journal_is_rechecked_in_full(tmp_path, capsys):
    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=2)
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    lines = _journal(out)
    assert all("hmac" in x for x in lines)
    forged = _forge_confirmed(lines)
    forged[1:] = [{k: v for k, v in r.items()} for r in forged[1:]]
    _write_journal(out, forged)
    capsys.readouterr()
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "journal not trusted" in err and "HMAC does not verify" in err
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["claims_not_proved"] == 2
    assert rep["run"]["resumed_records"] == 0 and rep["run"]["journal_trust"].startswith(
        "untrusted")
    md = (out / "report.md").read_text()
    assert "every float64 claim was proved" not in md


def test_unsigned_prefilled_output_folder_is_not_reused(tmp_path, capsys):
    # a shipped store with an output folder whose journal was written elsewhere
    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=2)
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    lines = [{k: v for k, v in x.items() if k != "hmac"} for x in _forge_confirmed(
        _journal(out))]
    _write_journal(out, lines)
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    assert "carries no HMAC" in capsys.readouterr().err
    # the same journal signed under another user's key is just as untrusted
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    key_path().write_bytes(b"k" * 32)  # "another machine": the key changed
    capsys.readouterr()
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    assert "HMAC does not verify" in capsys.readouterr().err


def test_trusted_resume_says_so_and_samples(tmp_path):
    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=3)
    first = run_audit(store, out, figures=False)
    assert first["run"]["resumed_records"] == 0
    second = run_audit(store, out, figures=False, recheck_seed=7)
    run = second["run"]
    assert run["resumed_records"] == 6 and run["journal_trust"] == "trusted"
    assert run["journal_rechecked"] == sample_size(6) == 4 and run["journal_seed"] == 7
    assert second["records"] == first["records"]
    md = (out / "report.md").read_text()
    result = next(ln for ln in md.splitlines() if ln.startswith("**Result:**"))
    assert "6 of 6 records were taken from this user's signed journal" in result
    assert "4 of them rechecked" in result
    third = run_audit(store, out, figures=False, recheck=True)
    assert third["run"]["resumed_records"] == 0 and third["records"] == first["records"]
    assert "signed journal" not in (out / "report.md").read_text()


def test_sample_mismatch_rejects_the_whole_journal(tmp_path, capsys):
    # a record signed with this user's key yet wrong (a bug, or a stolen key): the sample
    # recheck must catch it and discard every journaled record
    from softrank.audit import journal as J

    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=2)
    run_audit(store, out, figures=False)
    lines = _journal(out)
    secret = journal_secret(out)
    head = {k: v for k, v in lines[0].items() if k != "hmac"}
    forged = []
    for rec in _forge_confirmed([head, *[{k: v for k, v in x.items() if k != "hmac"}
                                         for x in lines[1:]]])[1:]:
        forged.append({**rec, "hmac": J._mac(secret, head, rec)})
    _write_journal(out, [lines[0], *forged])
    rep = run_audit(store, out, figures=False, recheck_seed=1)
    err = capsys.readouterr().err
    assert "journal rejected" in err and "differs from its recheck" in err
    assert rep["run"]["resumed_records"] == 0 and rep["run"]["journal_trust"].startswith(
        "rejected")
    assert rep["summary"]["claims_not_proved"] == 2 and rep["summary"]["exit_code"] == 1
    # the rewritten journal holds the true records, signed
    again = _journal(out)
    assert sum(r.get("upper_result") == "does_not_hold" for r in again[1:]) == 2


def test_recheck_flag_ignores_the_journal(tmp_path, capsys):
    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=1)
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress"]) == 1
    capsys.readouterr()
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress",
                 "--recheck", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["resumed_records"] == 0 and doc["run"]["new_records"] == 2


@pytest.mark.parametrize("which", ["bracket", "operator"])
def test_a_journaled_record_whose_array_file_changed_is_checked_again(tmp_path, capsys, which):
    """The journal's key pins the record files, not the arrays: an array file overwritten
    after a clean audit (records unchanged) was taken from the journal unseen unless the
    random sample happened to include it, and the resumed audit exited 0."""
    from softrank.witnesses import open_store

    store, out = tmp_path / "s", tmp_path / "o"
    build_store(store, n_ops=3)
    first = run_audit(store, out, figures=False)
    assert first["summary"]["input_errors"] == 0
    reader = open_store(store)
    b = reader.brackets[0]
    rel = b.file if which == "bracket" else reader.operator(b.operator).file
    (store / rel).write_bytes(b"garbage")
    hit = {x.id for x in reader.brackets
           if x.file == rel or reader.operator(x.operator).file == rel}
    for seed in range(3):  # whatever the sample, the changed file is read again
        rep = run_audit(store, out, figures=False, recheck_seed=seed)
        assert "changed since they were checked" in capsys.readouterr().err
        assert rep["summary"]["input_errors"] == len(hit) and rep["summary"]["exit_code"] == 2
        assert {e["bracket"] for e in rep["errors"]} == hit
        assert rep["run"]["resumed_records"] == len(reader.brackets) - len(hit)
