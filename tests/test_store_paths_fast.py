"""witnesses.store.safe_member_path: the lstat walk below the root gives the full resolve's
verdicts, and nothing is cached between calls."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from softrank.certify import InputError
from softrank.witnesses import open_store, store
from softrank.witnesses.store import safe_member_path

from .storefactory import build_store


def _verdict(root: Path, rel: str):
    try:
        return ("ok", safe_member_path(root, rel, "f", "src"))
    except InputError as err:
        return ("refused", err.reason, err.field)


def _full_verdict(root: Path, rel: str, monkeypatch):
    """The verdict of the full resolve alone (the lstat walk switched off)."""
    with monkeypatch.context() as m:
        m.setattr(store, "_no_symlink_below", lambda root, rel: False)
        return _verdict(root, rel)


@pytest.fixture
def tree(tmp_path):
    """A store-like root with plain files, a subfolder and symlinks inside and out."""
    root = tmp_path / "s"
    (root / "arrays" / "sub").mkdir(parents=True)
    (root / "arrays" / "a.npz").write_bytes(b"x")
    (root / "arrays" / "sub" / "b.npz").write_bytes(b"x")
    (root / "store.json").write_text("{}")
    (tmp_path / "out.npz").write_bytes(b"x")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "c.npz").write_bytes(b"x")
    os.symlink(root / "arrays" / "a.npz", root / "arrays" / "in.npz")
    os.symlink("a.npz", root / "arrays" / "in_rel.npz")
    os.symlink(tmp_path / "out.npz", root / "arrays" / "out.npz")
    os.symlink("../store.json", root / "arrays" / "up.npz")
    os.symlink(root / "arrays", root / "arrays" / "self")
    os.symlink(tmp_path / "outdir", root / "arrays" / "outdir")
    os.symlink(root / "arrays" / "loop1", root / "arrays" / "loop2")
    os.symlink(root / "arrays" / "loop2", root / "arrays" / "loop1")
    os.symlink(root / "arrays" / "a.npz", root / "arrays" / "notdir")
    return root


RELS = ["arrays/a.npz", "arrays/sub/b.npz", "arrays/sub", "arrays/missing.npz",
        "arrays/nodir/x.npz", "arrays/in.npz", "arrays/in_rel.npz", "arrays/out.npz",
        "arrays/up.npz", "arrays/self/a.npz", "arrays/outdir/c.npz", "arrays/loop1",
        "arrays/notdir/x.npz", "arrays/a.npz/x", "arrays/../store.json", "store.json",
        "/etc/passwd"]


@pytest.mark.parametrize("rel", RELS)
def test_fast_verdicts_equal_the_full_resolve(tree, rel, monkeypatch):
    assert _verdict(tree, rel) == _full_verdict(tree, rel, monkeypatch)


def test_what_leaves_the_store_is_refused(tree):
    for rel in ("arrays/out.npz", "arrays/up.npz", "arrays/outdir/c.npz"):
        assert _verdict(tree, rel)[0] == "refused"
    for rel in ("arrays/a.npz", "arrays/in.npz", "arrays/self/a.npz", "arrays/missing.npz"):
        assert _verdict(tree, rel)[0] == "ok"


def test_an_arrays_folder_symlinked_elsewhere(tmp_path, monkeypatch):
    root = tmp_path / "s"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.npz").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", root / "arrays")
    for rel in ("arrays/a.npz", "arrays/missing.npz"):
        v = _verdict(root, rel)
        assert v[0] == "refused" and "outside" in v[1]
        assert v == _full_verdict(root, rel, monkeypatch)


def test_a_symlinked_root_is_followed(tmp_path):
    real = tmp_path / "real"
    (real / "arrays").mkdir(parents=True)
    (real / "arrays" / "a.npz").write_bytes(b"x")
    os.symlink(real, tmp_path / "link")
    root = tmp_path / "link"
    assert _verdict(root, "arrays/a.npz") == ("ok", root / "arrays/a.npz")


def test_nothing_is_cached_between_calls(tree, tmp_path, monkeypatch):
    assert _verdict(tree, "arrays/a.npz")[0] == "ok"
    (tree / "arrays" / "a.npz").unlink()
    os.symlink(tmp_path / "out.npz", tree / "arrays" / "a.npz")
    assert _verdict(tree, "arrays/a.npz")[0] == "refused"
    # a folder replaced by a symlink out of the store
    assert _verdict(tree, "arrays/sub/b.npz")[0] == "ok"
    (tree / "arrays" / "sub" / "b.npz").unlink()
    (tree / "arrays" / "sub").rmdir()
    os.symlink(tmp_path / "outdir", tree / "arrays" / "sub")
    (tmp_path / "outdir" / "b.npz").write_bytes(b"x")
    assert _verdict(tree, "arrays/sub/b.npz")[0] == "refused"
    # a root symlink pointed at another folder: the new target's arrays/ is what counts
    good, bad = tmp_path / "good", tmp_path / "bad"
    (good / "arrays").mkdir(parents=True)
    (good / "arrays" / "a.npz").write_bytes(b"x")
    (bad / "arrays").mkdir(parents=True)
    os.symlink(tmp_path / "out.npz", bad / "arrays" / "a.npz")
    os.symlink(good, tmp_path / "root")
    assert _verdict(tmp_path / "root", "arrays/a.npz")[0] == "ok"
    (tmp_path / "root").unlink()
    os.symlink(bad, tmp_path / "root")
    assert _verdict(tmp_path / "root", "arrays/a.npz")[0] == "refused"
    # a relative root after a change of directory
    monkeypatch.chdir(good.parent)
    assert _verdict(Path("good"), "arrays/a.npz")[0] == "ok"
    assert _verdict(Path("bad"), "arrays/a.npz")[0] == "refused"


def test_a_plain_store_is_read_without_resolving_paths(tmp_path, monkeypatch):
    # the point of the lstat walk: no full resolve for a store without symlinks
    build_store(tmp_path / "s", n_ops=2)
    calls = []
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: calls.append(self) or self)
    reader = open_store(tmp_path / "s")
    for op in reader.operators:
        op.load()
    for b in reader.brackets:
        b.load()
    assert calls == []


@pytest.mark.parametrize("name", ["store.json", "operators.jsonl", "brackets.jsonl"])
def test_record_files_linked_out_of_the_store_are_refused(tmp_path, name):
    """A record file that is a symbolic link (here to a copy of the store's own file outside
    it, so that its contents alone would pass) is refused naming the file; it is not read."""
    root = tmp_path / "s"
    build_store(root)
    outside = tmp_path / f"outside.{name}"
    outside.write_bytes((root / name).read_bytes())
    (root / name).unlink()
    os.symlink(outside, root / name)
    with pytest.raises(InputError) as err:
        open_store(root)
    assert "symbolic link" in err.value.reason and err.value.source == str(root / name)
    from softrank.audit.journal import store_digest
    with pytest.raises(InputError):
        store_digest(root)


def test_a_record_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    root = tmp_path / "s"
    build_store(root)
    (root / "brackets.jsonl").unlink()
    os.mkfifo(root / "brackets.jsonl")
    with pytest.raises(InputError) as err:
        open_store(root)
    assert "regular file" in err.value.reason


def test_one_writer_at_a_time_and_temps_of_an_interrupted_one_removed(tmp_path):
    """Two writers each rewrite the record files from their own records, so the later one
    dropped the other's brackets; a killed writer's temporary files stayed for good."""
    from softrank.witnesses import Store

    root = tmp_path / "s"
    build_store(root)
    first = Store.open(root)
    with pytest.raises(InputError) as err:
        Store.open(root)
    assert "another writer" in err.value.reason and err.value.source == str(root)
    first.close()
    # what write_atomic leaves when killed between create and rename, and look-alikes
    left = [root / "arrays" / ".x.npz.0123456789ab.tmp", root / ".brackets.jsonl.abcdef012345.tmp"]
    kept = [root / "arrays" / ".x.npz.tmp", root / "arrays" / "notes.0123456789ab.tmp"]
    for p in left + kept:
        p.write_bytes(b"partial")
    (tmp_path / "target").write_bytes(b"keep")
    os.symlink(tmp_path / "target", root / "arrays" / ".y.npz.0123456789ab.tmp")
    with Store.open(root) as again:
        assert again.operator_ids
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)
    assert not (root / "arrays" / ".y.npz.0123456789ab.tmp").is_symlink()
    assert (tmp_path / "target").read_bytes() == b"keep"  # the link went, not its target
    fresh = Store.create(tmp_path / "new")
    with pytest.raises(InputError):
        Store.open(tmp_path / "new")
    fresh.close()
    Store.open(tmp_path / "new").close()


def test_a_file_system_without_folder_locks_is_written_unlocked(tmp_path, monkeypatch):
    from softrank.witnesses import Store

    def no_lock(fd, op):
        raise OSError(9, "Bad file descriptor")  # what NFS's emulated flock gives a folder

    monkeypatch.setattr(store.fcntl, "flock", no_lock)
    root = tmp_path / "s"
    build_store(root)
    temp = root / "arrays" / ".x.npz.0123456789ab.tmp"
    temp.write_bytes(b"partial")
    with Store.open(root) as st:
        assert st.operator_ids
    assert temp.exists()  # without the lock it may be another writer's
