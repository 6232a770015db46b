"""Output folders may come from someone else: nothing is written through a planted symbolic
link, and this user's journal key is only trusted where only this user can change it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from softrank.audit import files as audit_files
from softrank.audit import run_audit
from softrank.audit.journal import JOURNAL_NAME, journal_secret, key_path, load_key
from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.witnesses import Store, atomic

from .storefactory import build_store

AUDIT = ["--no-figures", "--no-progress"]
VICTIM_ONE_LINE = b'{"precious": true}\n'
VICTIM_LINES = b"first line\nsecond line\nthird line\n"


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "s"
    build_store(path, n_ops=1)
    return path


def _audit(store: Path, out: Path, *extra: str) -> int:
    return main(["audit", str(store), "--out", str(out), *AUDIT, *extra])


def _victim(tmp_path: Path, data: bytes, name: str = "victim.txt") -> Path:
    victim = tmp_path / name
    victim.write_bytes(data)
    return victim


# --- the journal ---------------------------------------------------------------------------

@pytest.mark.parametrize("data", [VICTIM_ONE_LINE, VICTIM_LINES, b""])
@pytest.mark.parametrize("restart", [False, True])
def test_symlinked_journal_is_refused_and_its_target_unchanged(tmp_path, store, capsys, data,
                                                               restart):
    victim = _victim(tmp_path, data)
    out = tmp_path / "o"
    out.mkdir()
    (out / JOURNAL_NAME).symlink_to(victim)
    code = _audit(store, out, *(["--restart"] if restart else []))
    err = capsys.readouterr().err
    assert code == 2
    assert str(out / JOURNAL_NAME) in err and "--out" in err and "symbolic link" in err
    assert victim.read_bytes() == data
    assert not (out / "report.json").exists()


def test_journal_symlinked_to_the_key_leaves_the_key_alone(tmp_path, store, capsys):
    key = journal_secret()
    assert key is not None
    out = tmp_path / "o"
    out.mkdir()
    (out / JOURNAL_NAME).symlink_to(key_path())
    for extra in ((), ("--restart",)):
        assert _audit(store, out, *extra) == 2
        assert "symbolic link" in capsys.readouterr().err
        assert key_path().read_bytes() == key and journal_secret() == key


def test_hard_linked_journal_is_refused(tmp_path, store, capsys):
    victim = _victim(tmp_path, VICTIM_ONE_LINE)
    out = tmp_path / "o"
    out.mkdir()
    os.link(victim, out / JOURNAL_NAME)
    assert _audit(store, out, "--restart") == 2
    assert "hard link" in capsys.readouterr().err
    assert victim.read_bytes() == VICTIM_ONE_LINE


def test_journal_that_is_a_folder_is_refused(tmp_path, store, capsys):
    out = tmp_path / "o"
    (out / JOURNAL_NAME).mkdir(parents=True)
    assert _audit(store, out) == 2
    assert "--out" in capsys.readouterr().err


# --- report files, tables, figures ---------------------------------------------------------

def test_symlinked_report_names_are_replaced_not_followed(tmp_path, store):
    out = tmp_path / "o"
    out.mkdir()
    victims = {}
    for name in ("report.json", "report.md", "report.tex"):
        victims[name] = _victim(tmp_path, VICTIM_LINES, f"victim-{name}")
        (out / name).symlink_to(victims[name])
    assert _audit(store, out) == 1
    for name, victim in victims.items():
        assert victim.read_bytes() == VICTIM_LINES
        assert not (out / name).is_symlink() and (out / name).is_file()
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644
    assert json.loads((out / "report.json").read_text())["summary"]["brackets"] == 2


def test_symlinked_tables_folder_is_refused_before_checking(tmp_path, store, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "o"
    out.mkdir()
    (out / "tables").symlink_to(elsewhere, target_is_directory=True)
    assert _audit(store, out) == 2
    err = capsys.readouterr().err
    assert str(out / "tables") in err and "--out" in err and "symbolic link" in err
    assert list(elsewhere.iterdir()) == []
    assert not (out / JOURNAL_NAME).exists()  # refused before any bracket was checked


def test_write_public_refuses_a_folder_swapped_for_a_link_after_the_precheck(tmp_path):
    # the precheck is a convenience: every write checks its folders again
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "o"
    out.mkdir()
    audit_files.check_out_folder(out)
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InputError) as info:
        audit_files.write_public(out, "figures/brackets.png", b"png")
    assert info.value.field == "--out" and info.value.source == str(out / "figures")
    assert list(elsewhere.iterdir()) == []
    (out / "figures").unlink()
    (out / "figures").write_bytes(b"a file")  # not a folder either
    with pytest.raises(InputError):
        audit_files.write_public(out, "figures/brackets.png", b"png")


def test_symlinked_temp_name_is_never_opened(tmp_path, monkeypatch):
    # a link planted at the very temporary name the writer draws: O_EXCL | O_NOFOLLOW makes
    # the create fail, and the writer draws another name
    victim = _victim(tmp_path, VICTIM_LINES)
    out = tmp_path / "o"
    (out / "figures").mkdir(parents=True)
    draws = iter(["planted", "fresh"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(draws))
    (out / "figures" / ".brackets.png.planted.tmp").symlink_to(victim)
    audit_files.write_public(out, "figures/brackets.png", b"\x89PNG fresh")
    assert victim.read_bytes() == VICTIM_LINES
    assert (out / "figures" / "brackets.png").read_bytes() == b"\x89PNG fresh"
    assert (out / "figures" / ".brackets.png.planted.tmp").is_symlink()  # left alone


def test_figures_through_planted_links(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from softrank.audit import figures as F
    from softrank.audit import intrinsic as I

    monkeypatch.setattr(F, "FIGURES", {"brackets": F.FIGURES["brackets"]})
    out = tmp_path / "o"
    (out / "figures").mkdir(parents=True)
    victims = []
    # the final names, and the temporary name an earlier version handed to savefig
    for name in ("brackets.png", "brackets.svg", "intrinsic_kappa_rank.png",
                 "intrinsic_kappa_rank.tmp.png"):
        v = _victim(tmp_path, VICTIM_LINES, f"victim-{name}")
        (out / "figures" / name).symlink_to(v)
        victims.append(v)
    pairs = [{"operator": "o1", "family": "f", "eps": "1/4", "lower": 1, "upper": 3,
              "resolved": True}]
    F.write_figures(out, pairs, [])
    rows = [{"r": 2, "eps": "1/4", "rank_bracket": [2, 4], "kappa": {"lo": "3", "hi": "5"}}]
    assert I.write_figure(out, rows) == I.FIGURE
    assert all(v.read_bytes() == VICTIM_LINES for v in victims)
    for name in ("brackets.png", "intrinsic_kappa_rank.png"):
        p = out / "figures" / name
        assert not p.is_symlink() and p.read_bytes().startswith(b"\x89PNG")


def test_out_that_is_an_existing_file_names_the_option(tmp_path, store, capsys):
    out = _victim(tmp_path, VICTIM_LINES, "report-file")
    assert _audit(store, out) == 2
    err = capsys.readouterr().err
    assert "--out" in err and str(out) in err and "not a folder" in err
    assert "internal error" not in err and "Traceback" not in err
    assert out.read_bytes() == VICTIM_LINES


# --- stores ---------------------------------------------------------------------------------

def test_store_append_never_writes_through_links(tmp_path, store):
    (store / "operators.jsonl").rename(tmp_path / "ops")
    (store / "operators.jsonl").symlink_to(tmp_path / "ops")  # readable, and a trap to write
    before = (tmp_path / "ops").stat()
    # a record file that is a link is refused before anything is read or written
    with pytest.raises(InputError) as info:
        Store.open(store)
    assert info.value.source == str(store / "operators.jsonl")
    assert "symbolic link" in str(info.value)
    after = (tmp_path / "ops").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    (store / "operators.jsonl").unlink()
    (tmp_path / "ops").rename(store / "operators.jsonl")
    # arrays/ swapped for a link to another folder: refused, nothing written there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    st = Store.open(store)
    os.rename(store / "arrays", tmp_path / "arrays-real")
    (store / "arrays").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InputError) as info:
        st.add_operator(np.full((2, 2), 0.5), family="f", id="opx")
    assert info.value.source == str(store / "arrays") and "symbolic link" in str(info.value)
    assert list(elsewhere.iterdir()) == []


def test_write_atomic_returns_the_digest_of_what_it_wrote(tmp_path):
    import hashlib

    sha = atomic.write_text_atomic(tmp_path / "a" / "b.txt", "hello", root=tmp_path)
    assert sha == hashlib.sha256(b"hello").hexdigest()
    assert (tmp_path / "a" / "b.txt").read_text() == "hello"
    with pytest.raises(ValueError):
        atomic.write_text_atomic(tmp_path / ".." / "x", "no", root=tmp_path)


# --- the journal key -----------------------------------------------------------------------

def test_empty_key_is_replaced_and_the_run_says_so(tmp_path, store, capsys):
    out = tmp_path / "o"
    assert _audit(store, out) == 1
    key_path().write_bytes(b"")  # a truncated key: formerly never regenerated
    capsys.readouterr()
    assert _audit(store, out) == 1
    err = capsys.readouterr().err
    assert "was empty" in err and "replaced by a fresh key" in err
    assert "journal not trusted" in err  # signed under the old key
    assert len(key_path().read_bytes()) == 32
    assert stat.S_IMODE(key_path().stat().st_mode) == 0o600
    # the fresh key signs the new journal, so the next resume is trusted again
    rep = run_audit(store, out, figures=False)
    assert rep["run"]["journal_trust"] == "trusted" and rep["run"]["resumed_records"] == 2


@pytest.mark.parametrize("size", [0, 5, 31, 33])
def test_short_or_long_key_is_replaced(size):
    assert journal_secret() is not None
    key_path().write_bytes(b"k" * size)
    state = load_key()
    assert state.secret is not None and len(state.secret) == 32
    assert state.secret != b"k" * 32 and "replaced" in (state.note or "")
    assert key_path().read_bytes() == state.secret
    assert load_key() == type(state)(state.secret)  # then read quietly


def test_new_key_is_0600_in_a_0700_folder(cache_home):
    state = load_key()
    assert state.secret is not None and state.note is None
    assert stat.S_IMODE(key_path().stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path().parent.stat().st_mode) == 0o700
    assert [p.name for p in key_path().parent.iterdir()] == ["journal.key"]  # no temp left


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_writable_key_folder_is_refused_and_every_record_rechecked(tmp_path, store, capsys,
                                                                   mode):
    out = tmp_path / "o"
    assert _audit(store, out) == 1
    key_path().parent.chmod(mode)
    state = load_key()
    assert state.secret is None and "group- or world-writable" in state.note
    capsys.readouterr()
    assert _audit(store, out) == 1  # no crash: the run goes on without trusting
    err = capsys.readouterr().err
    assert "group- or world-writable" in err and "chmod 700" in err
    rep = json.loads((out / "report.json").read_text())
    assert rep["run"]["resumed_records"] == 0
    assert rep["summary"]["brackets"] == 2


def test_world_writable_cache_home_needs_the_sticky_bit(cache_home):
    cache_home.mkdir()
    cache_home.chmod(0o777)
    state = load_key()
    assert state.secret is None and "sticky" in state.note
    cache_home.chmod(0o1777)  # like /tmp: others cannot swap our folder
    assert load_key().secret is not None


def test_symlinked_key_is_refused_and_its_target_unchanged(tmp_path, store, capsys):
    real = tmp_path / "real.key"
    real.write_bytes(b"r" * 32)
    real.chmod(0o600)
    key_path().parent.mkdir(parents=True, mode=0o700)
    key_path().symlink_to(real)
    state = load_key()
    assert state.secret is None and "symbolic link" in state.note
    assert _audit(store, tmp_path / "o") == 1
    assert "symbolic link" in capsys.readouterr().err
    assert real.read_bytes() == b"r" * 32 and key_path().is_symlink()


def test_key_readable_by_others_is_refused(tmp_path):
    assert journal_secret() is not None
    key_path().chmod(0o640)
    state = load_key()
    assert state.secret is None and "readable or writable by others" in state.note


def test_key_that_is_a_folder_is_refused():
    key_path().mkdir(parents=True)
    state = load_key()
    assert state.secret is None and "not a regular file" in state.note


def test_grid_plot_replaces_a_link_at_its_name(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    victim = _victim(tmp_path, VICTIM_LINES)
    png = tmp_path / "plot.png"
    png.symlink_to(victim)
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", "2", "3", "--plot", str(png)]) == 0
    assert victim.read_bytes() == VICTIM_LINES
    assert not png.is_symlink() and png.read_bytes().startswith(b"\x89PNG")
