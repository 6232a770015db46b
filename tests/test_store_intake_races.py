"""Store intake under a writer racing the reader, and files of absurd size: refused with the
file named (exit 2), never a hang, a read outside the store or a MemoryError (exit 3)."""

from __future__ import annotations

import os
import shutil

import pytest

from softrank.certify import InputError
from softrank.cli import main
from softrank.witnesses import open_store, store

from .storefactory import build_store


@pytest.fixture()
def one_op(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    return tmp_path / "s"


def _swap_after_check(monkeypatch, make):
    """Runs ``make(path)`` on the array path right after ``safe_member_path`` approved it:
    what a concurrent writer can do between the check and the open."""
    real = store.safe_member_path

    def racing(root, rel, fld, src):
        path = real(root, rel, fld, src)
        make(path)
        return path

    monkeypatch.setattr(store, "safe_member_path", racing)


def test_a_link_to_outside_swapped_in_after_the_path_check_is_not_read(one_op, tmp_path,
                                                                        monkeypatch):
    outside = tmp_path / "outside.npz"
    op = open_store(one_op).operators[0]
    shutil.copy(op.path, outside)  # a valid npz: only where it lies is wrong

    def to_link(path):
        os.replace(path, tmp_path / "moved.npz")
        os.symlink(outside, path)

    _swap_after_check(monkeypatch, to_link)
    with pytest.raises(InputError, match="outside the store"):
        op.load()


def test_a_fifo_swapped_in_does_not_block_the_read(one_op, tmp_path, monkeypatch):
    op = open_store(one_op).operators[0]

    def to_fifo(path):
        os.replace(path, tmp_path / "moved.npz")
        os.mkfifo(path)

    _swap_after_check(monkeypatch, to_fifo)
    with pytest.raises(InputError, match="not a regular file"):
        op.load()  # a blocking open() here hung the run


@pytest.mark.parametrize("name", ["brackets.jsonl", "operators.jsonl", "store.json"])
def test_a_huge_sparse_record_file_is_refused_before_reading(one_op, capsys, name):
    with open(one_op / name, "r+b") as fh:
        fh.truncate(100 << 30)  # 100 GB, sparse: read whole, MemoryError and exit 3
    assert main(["check", str(one_op)]) == 2
    err = capsys.readouterr().err
    assert name in err and "above the limit" in err


def test_the_record_file_cap_is_1_gib_and_set_by_its_variable(one_op, capsys, monkeypatch):
    """A sparse 1.5 GB brackets.jsonl (44 KB on disk) was read whole under the 4 GiB cap
    (3.2 GB of memory for 1 GB); the cap is 1 GiB, SOFTRANK_MAX_RECORD_BYTES sets it, and a
    value that is not a positive integer is an input error naming the variable."""
    size = (one_op / "brackets.jsonl").stat().st_size
    monkeypatch.setenv("SOFTRANK_MAX_RECORD_BYTES", str(size - 1))
    assert main(["check", str(one_op)]) == 2
    assert "SOFTRANK_MAX_RECORD_BYTES" in capsys.readouterr().err
    monkeypatch.setenv("SOFTRANK_MAX_RECORD_BYTES", "1e9")
    assert main(["check", str(one_op)]) == 2
    assert "is not a positive integer" in capsys.readouterr().err
    monkeypatch.delenv("SOFTRANK_MAX_RECORD_BYTES")
    assert main(["check", str(one_op), "-q"]) in (0, 1)
    with open(one_op / "brackets.jsonl", "r+b") as fh:
        fh.truncate(3 << 29)
    assert main(["check", str(one_op)]) == 2
    err = capsys.readouterr().err
    assert f"above the limit of {1 << 30}" in err


def test_a_dangling_intrinsic_link_is_refused_not_ignored(one_op, tmp_path, capsys):
    os.symlink(tmp_path / "nowhere.jsonl", one_op / "intrinsic.jsonl")
    assert main(["check", str(one_op)]) == 2
    assert "intrinsic.jsonl" in capsys.readouterr().err


def test_a_link_inside_arrays_is_not_a_changed_file_but_one_outside_is(one_op, tmp_path):
    """The format allows a link that stays inside arrays/; the resume's staleness test read
    it with O_NOFOLLOW and called every such bracket changed."""
    from softrank.witnesses.store import stale_brackets

    reader = open_store(one_op)
    b = reader.brackets[0]
    target = b.path.with_name("moved_" + b.path.name)
    os.replace(b.path, target)
    os.symlink(target.name, b.path)  # relative, inside arrays/
    reader = open_store(one_op)
    assert stale_brackets(reader, reader.brackets) == []
    outside = tmp_path / "elsewhere.npz"
    shutil.copy(target, outside)
    os.unlink(b.path)
    os.symlink(outside, b.path)
    assert stale_brackets(reader, reader.brackets) == [b.id]
