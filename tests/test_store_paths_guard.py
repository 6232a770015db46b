"""witnesses.store.ArraysGuard: the cached-root path check gives the full check's verdicts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from softrank.certify import InputError
from softrank.witnesses import open_store
from softrank.witnesses.store import ArraysGuard, safe_member_path

from .storefactory import build_store


def _verdict(root: Path, rel: str, guard: ArraysGuard | None):
    try:
        return ("ok", safe_member_path(root, rel, "f", "src", guard))
    except InputError as err:
        return ("refused", err.reason, err.field)


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
def test_guard_verdicts_equal_the_full_check(tree, rel):
    guard = ArraysGuard(tree)
    for _ in range(2):  # the second call uses the cached root
        assert _verdict(tree, rel, guard) == _verdict(tree, rel, None)


def test_guard_refuses_what_leaves_the_store(tree):
    guard = ArraysGuard(tree)
    for rel in ("arrays/out.npz", "arrays/up.npz", "arrays/outdir/c.npz"):
        assert _verdict(tree, rel, guard)[0] == "refused"
    for rel in ("arrays/a.npz", "arrays/in.npz", "arrays/self/a.npz", "arrays/missing.npz"):
        assert _verdict(tree, rel, guard)[0] == "ok"


def test_guard_with_an_arrays_folder_symlinked_elsewhere(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.npz").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", root / "arrays")
    for rel in ("arrays/a.npz", "arrays/missing.npz"):
        v = _verdict(root, rel, ArraysGuard(root))
        assert v[0] == "refused" and "outside" in v[1]
        assert v == _verdict(root, rel, None)


def test_guard_through_a_symlinked_root(tmp_path):
    real = tmp_path / "real"
    (real / "arrays").mkdir(parents=True)
    (real / "arrays" / "a.npz").write_bytes(b"x")
    os.symlink(real, tmp_path / "link")
    root = tmp_path / "link"
    assert _verdict(root, "arrays/a.npz", ArraysGuard(root)) == ("ok", root / "arrays/a.npz")


def test_guard_sees_a_file_replaced_by_a_symlink_after_the_first_check(tree, tmp_path):
    guard = ArraysGuard(tree)
    assert _verdict(tree, "arrays/a.npz", guard)[0] == "ok"
    (tree / "arrays" / "a.npz").unlink()
    os.symlink(tmp_path / "out.npz", tree / "arrays" / "a.npz")
    assert _verdict(tree, "arrays/a.npz", guard)[0] == "refused"
    # and a folder replaced by a symlink out of the store
    assert _verdict(tree, "arrays/sub/b.npz", guard)[0] == "ok"
    (tree / "arrays" / "sub" / "b.npz").unlink()
    (tree / "arrays" / "sub").rmdir()
    os.symlink(tmp_path / "outdir", tree / "arrays" / "sub")
    (tmp_path / "outdir" / "b.npz").write_bytes(b"x")
    assert _verdict(tree, "arrays/sub/b.npz", guard)[0] == "refused"


def test_guard_of_a_relative_root_follows_the_working_directory(tmp_path, monkeypatch):
    # the same relative root names another folder after a chdir: the guard resolves again
    good, bad = tmp_path / "good", tmp_path / "bad"
    (good / "s" / "arrays").mkdir(parents=True)
    (good / "s" / "arrays" / "a.npz").write_bytes(b"x")
    (bad / "s").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", bad / "s" / "arrays")
    guard = ArraysGuard(Path("s"))
    monkeypatch.chdir(good)
    assert _verdict(Path("s"), "arrays/a.npz", guard)[0] == "ok"
    monkeypatch.chdir(bad)
    assert _verdict(Path("s"), "arrays/a.npz", guard)[0] == "refused"


def test_a_plain_store_is_checked_without_resolving_paths(tmp_path, monkeypatch):
    # the point of the guard: one realpath of the root per reader, then lstats only
    build_store(tmp_path / "s", n_ops=2)
    calls = []
    real_realpath = os.path.realpath
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: calls.append(self) or self)
    monkeypatch.setattr(os.path, "realpath",
                        lambda p, *a, **k: calls.append(p) or real_realpath(p, *a, **k))
    reader = open_store(tmp_path / "s")
    for op in reader.operators:
        op.load()
    for b in reader.brackets:
        b.load()
    assert calls == [tmp_path / "s"]
