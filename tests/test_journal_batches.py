"""Group commit of the audit journal: a batch of records is written with one fsync, and
whatever a kill or a crash leaves of a batch is either reused whole-line by whole-line
(signed, complete lines), dropped (a torn last line) or refused (a corrupt earlier line)."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest

from softrank.audit import journal as J
from softrank.audit import run_audit
from softrank.audit.journal import JOURNAL_NAME, Journal, normalize
from softrank.certify.errors import InputError

from .storefactory import build_store

KEY = {"store": "/s", "store_sha256": "ab", "tier": "auto", "softrank_certify": "0"}


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    # a key of this test's own: lines are signed, so a reopened journal can be trusted
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def fsyncs(monkeypatch):
    """Counts os.fsync calls (the journal's ``_sync`` calls ``os.fsync``), still syncing."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd):
        calls.append(fd)
        return real(fd)
    monkeypatch.setattr(J.os, "fsync", counting)
    return calls


def _records(lo, hi):
    return [{"bracket": f"b{i}", "upper": i, "eps": Fraction(1, 4 + i), "note": "x" * i}
            for i in range(lo, hi)]


def _out(tmp_path) -> Path:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return out


def test_a_batch_is_written_with_one_fsync(tmp_path, fsyncs):
    out = _out(tmp_path)
    with Journal.open(out, KEY) as j:
        fsyncs.clear()  # the header's own
        before = (out / JOURNAL_NAME).stat().st_size
        got = j.append_many(_records(0, 7))
        assert len(fsyncs) == 1
        assert got == [normalize(r) for r in _records(0, 7)]
        # the lines are in the file (a second descriptor sees them) before it returns
        fd = os.open(out / JOURNAL_NAME, os.O_RDONLY)
        try:
            os.lseek(fd, before, os.SEEK_SET)
            lines = os.read(fd, 1 << 20).split(b"\n")
        finally:
            os.close(fd)
        assert lines[-1] == b"" and [json.loads(x)["bracket"] for x in lines[:-1]] == [
            f"b{i}" for i in range(7)]
        assert all("hmac" in json.loads(x) for x in lines[:-1])
        assert j.append_many([]) == [] and len(fsyncs) == 1  # nothing to write, no sync
        j.append(_records(7, 8)[0])
        assert len(fsyncs) == 2  # append is a batch of one
        assert sorted(j.records) == sorted(f"b{i}" for i in range(8))


def test_a_record_that_cannot_be_written_writes_none_of_its_batch(tmp_path):
    out = _out(tmp_path)
    with Journal.open(out, KEY) as j:
        size = (out / JOURNAL_NAME).stat().st_size
        with pytest.raises(KeyError):
            j.append_many([*_records(0, 2), {"upper": 3}])  # no bracket id
        with pytest.raises(ValueError):
            j.append_many([*_records(0, 2), {"bracket": "b9", "x": float("nan")}])
        assert (out / JOURNAL_NAME).stat().st_size == size and j.records == {}


def test_every_record_of_every_batch_survives_a_resume(tmp_path):
    out = _out(tmp_path)
    with Journal.open(out, KEY) as j:
        for lo, hi in ((0, 5), (5, 6), (6, 20)):
            j.append_many(_records(lo, hi))
    with Journal.open(out, KEY, known_ids=[f"b{i}" for i in range(25)]) as j:
        assert j.trust == "trusted" and not j.dropped_tail
        assert j.records == {r["bracket"]: normalize(r) for r in _records(0, 20)}


def _two_batches(out: Path) -> tuple[bytes, int, list[int]]:
    """Journals a batch b0-b2, then a batch b3-b7; returns the file, the offset where the
    second batch starts and the offset of the end of each of its lines."""
    with Journal.open(out, KEY) as j:
        j.append_many(_records(0, 3))
        start = (out / JOURNAL_NAME).stat().st_size
        j.append_many(_records(3, 8))
    data = (out / JOURNAL_NAME).read_bytes()
    ends = [i + 1 for i in range(start, len(data)) if data[i:i + 1] == b"\n"]
    assert len(ends) == 5 and ends[-1] == len(data)
    return data, start, ends


def test_a_crash_keeping_any_prefix_of_a_batch_keeps_its_whole_lines(tmp_path):
    """A kill (or a crash on a file system that keeps a prefix of appended data) may cut the
    batch anywhere: every complete line is reused, the torn one dropped and the file cut back
    to the last complete line, and the next batch appends cleanly."""
    out = _out(tmp_path)
    data, start, ends = _two_batches(out)
    path = out / JOURNAL_NAME
    for cut in range(start, len(data) + 1):
        path.write_bytes(data[:cut])
        whole = [e for e in ends if e <= cut]
        with Journal.open(out, KEY) as j:
            assert j.trust == "trusted"
            assert sorted(j.records) == [f"b{i}" for i in range(3 + len(whole))]
            assert j.dropped_tail == (cut not in (start, *ends))
            assert path.read_bytes() == data[:max([start, *whole])]
    # a batch cut in its fourth line, then the next batch: it appends after the whole lines
    path.write_bytes(data[:ends[2] + 9])
    with Journal.open(out, KEY) as j:
        j.append_many(_records(5, 9))
    with Journal.open(out, KEY) as j:
        assert j.trust == "trusted" and not j.dropped_tail
        assert j.records == {r["bracket"]: normalize(r) for r in _records(0, 9)}


@pytest.mark.parametrize("fill", [b"\0", b"#"])
def test_a_lost_block_inside_a_batch_refuses_the_journal(tmp_path, fill):
    """A crash on a file system that may keep a later block of a batch but not an earlier one
    (zeros or stale bytes in its place): a corrupt line before the last is refused, with the
    way out, and no record of the journal is used."""
    out = _out(tmp_path)
    data, _, ends = _two_batches(out)
    lost = bytearray(data)
    lost[ends[0] + 3:ends[2] - 5] = fill * (ends[2] - 5 - ends[0] - 3)  # b4's and b5's bytes
    (out / JOURNAL_NAME).write_bytes(bytes(lost))
    with pytest.raises(InputError, match="corrupt line 6") as err:
        Journal.open(out, KEY)
    assert "--restart" in str(err.value) and "crashed" in str(err.value)
    with Journal.open(out, KEY, restart=True) as j:
        assert j.records == {}
    with Journal.open(out, KEY) as j:
        assert j.records == {} and j.trust == "new"


def test_a_lost_block_at_the_end_of_a_batch_is_a_torn_tail(tmp_path):
    """The same loss in the last line only (zeros, then its own end) reads as a torn last
    line: dropped, the rest kept."""
    out = _out(tmp_path)
    data, _, ends = _two_batches(out)
    lost = bytearray(data)
    lost[ends[3]:ends[4] - 3] = b"\0" * (ends[4] - 3 - ends[3])
    (out / JOURNAL_NAME).write_bytes(bytes(lost))
    with Journal.open(out, KEY) as j:
        assert j.dropped_tail and j.trust == "trusted"
        assert sorted(j.records) == [f"b{i}" for i in range(7)]
    assert (out / JOURNAL_NAME).read_bytes() == data[:ends[3]]


def test_an_edited_line_of_a_batch_untrusts_the_journal(tmp_path):
    out = _out(tmp_path)
    data, _, ends = _two_batches(out)
    lines = data.split(b"\n")
    rec = json.loads(lines[5])  # b4, in the middle of the second batch
    assert rec["bracket"] == "b4"
    rec["upper"] = 99
    lines[5] = json.dumps(rec, sort_keys=True).encode()
    (out / JOURNAL_NAME).write_bytes(b"\n".join(lines))
    with Journal.open(out, KEY) as j:
        assert j.trust.startswith("untrusted") and "line 6" in j.trust
        assert j.records == {}  # none reused: every bracket is checked again


def test_the_audit_journals_each_arriving_batch_with_one_call(tmp_path, monkeypatch):
    """An audit journals per batch the executor hands over, not per record: serially one
    operator's brackets at a time here (small store: one chunk per batch), in a pool what
    finished together; the journal holds every record once either way."""
    store = tmp_path / "s"
    build_store(store, n_ops=4)
    sizes: list[int] = []
    real = Journal.append_many

    def spy(self, records):
        records = list(records)
        sizes.append(len(records))
        return real(self, records)
    monkeypatch.setattr(Journal, "append_many", spy)
    for jobs in (1, 2):
        sizes.clear()
        out = tmp_path / f"o{jobs}"
        rep = run_audit(store, out, jobs=jobs, figures=False)
        n = len(rep["records"])
        lines = (out / JOURNAL_NAME).read_text().splitlines()[1:]
        assert sorted(json.loads(x)["bracket"] for x in lines) == sorted(
            r["bracket"] for r in rep["records"])
        assert sum(sizes) == n and 0 < len(sizes) <= 4 < n
