"""Several operators per Dask task, on a LocalCluster of 2 worker processes: fewer tasks than
operators, and the same records (check, audit) and the same store bytes (produce) as serial
runs and unbatched cluster runs; a worker killed while it runs a batch loses nothing and
journals nothing twice."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from softrank import runner
from softrank.audit import run_audit
from softrank.audit.executors import DaskExecutor, check_batch
from softrank.audit.journal import JOURNAL_NAME, store_digest
from softrank.audit.report import VOLATILE_KEY
from softrank.cli import main
from softrank.recheck import operator_chunks
from softrank.witnesses import open_store
from tests.helpers import local_cluster_client

from .helpers import factors_nonzero_store, softmax_rows

distributed = pytest.importorskip("distributed")

N_OPS = 40


def build(path: Path, n_ops: int, size: int, logits: bool) -> None:
    """``n_ops`` softmax operators of ``size`` x ``size``, two brackets each (factors +
    nonzero), the operator of record the softmax of their logits when ``logits``."""
    factors_nonzero_store(path, n_ops, size, seed=5, logits=logits, id_digits=3)


def by_id(records) -> list[dict]:
    return sorted(records, key=lambda r: r["bracket"])


@pytest.fixture(scope="module")
def client():
    with local_cluster_client() as c:
        yield c


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """40 tiny operators: the automatic K groups several per task."""
    path = tmp_path_factory.mktemp("small") / "s"
    build(path, N_OPS, 6, logits=False)
    return path, by_id(runner.iter_checks(str(path)))


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """12 operators checked in the exact tier (about 50 ms each): a task of 4 of them runs
    long enough that a worker killed at the first record is still running one."""
    path = tmp_path_factory.mktemp("slow") / "s"
    build(path, 12, 48, logits=True)
    return path, by_id(runner.iter_checks(str(path), tier="exact"))


def _run(client, path, batch):
    reader = open_store(path)
    chunks = operator_chunks(reader.brackets)
    from softrank.audit.batching import chunk_works

    ex = DaskExecutor(client, batch)
    p = str(Path(path).resolve())
    recs = list(ex.run((p, store_digest(p)), chunks, "auto", None, chunk_works(reader, chunks)))
    return ex.tasks, recs


@pytest.mark.parametrize("batch,tasks", [(None, 8), (1, N_OPS), (7, 6), (100, 1)])
def test_grouping_sends_fewer_tasks_and_the_same_records(client, small, batch, tasks):
    path, serial = small
    n, recs = _run(client, path, batch)
    # auto: 40 operators on 2 worker threads: at most 40 // (4 x 2) = 5 operators per task
    assert n == tasks
    assert len(recs) == len(serial) == 2 * N_OPS
    assert by_id(recs) == serial


def test_check_batch_is_the_chunks_one_by_one(small):
    path, _ = small
    reader = open_store(path)
    chunks = operator_chunks(reader.brackets)[:3]
    p = str(Path(path).resolve())
    ref = (p, store_digest(p))
    from softrank.audit.executors import check_chunk

    assert check_batch(ref, chunks, "auto") == [r for c in chunks
                                                for r in check_chunk(ref, c, "auto")]


def test_check_command_batch_option(client, small, capsys):
    path, serial = small
    got = {}
    for k in ("1", "3", "auto"):
        code = main(["check", str(path), "--json", "--scheduler", client.scheduler.address,
                     "--batch", k])
        assert code in (0, 1)
        doc = json.loads(capsys.readouterr().out)
        got[k] = [{x: v for x, v in r.items() if x != "tightened"} for r in doc["records"]]
    assert got["1"] == got["3"] == got["auto"] == serial


def test_audit_reports_tasks_and_the_same_records(client, small, tmp_path):
    path, serial = small
    reps = {}
    for k in (1, None):
        rep = run_audit(path, tmp_path / f"o{k}", scheduler=client, figures=False, batch=k)
        reps[k] = rep
        got = [{x: v for x, v in r.items() if x != "tightened"} for r in rep["records"]]
        assert by_id(got) == serial
    assert reps[1]["run"]["dask_tasks"] == N_OPS
    assert reps[None]["run"]["dask_tasks"] == 8
    # the whole report apart from its run provenance (times, command, tasks)
    one, auto = ({k: v for k, v in json.loads((tmp_path / o / "report.json").read_text()).items()
                  if k != VOLATILE_KEY} for o in ("o1", "oNone"))
    assert one == auto


def _kill_a_busy_worker(client) -> int | None:
    """Kills (SIGKILL) a worker process that is running a task now; returns its pid."""
    pids = client.run(os.getpid)
    busy = [a for a, keys in client.processing().items() if keys]
    if not busy:
        return None
    os.kill(pids[busy[0]], signal.SIGKILL)
    return pids[busy[0]]


def test_killed_worker_reruns_its_batch_and_journals_each_record_once(client, slow, tmp_path):
    path, serial = slow
    killed: list[int | None] = []

    def on_record(rec):
        if not killed:
            killed.append(_kill_a_busy_worker(client))

    # 12 operators, 4 per task: 3 tasks, all submitted at once; the first record arrives when
    # one task is done and the two others are running
    rep = run_audit(path, tmp_path / "o", scheduler=client, figures=False, batch=4,
                    tier="exact", on_record=on_record)
    assert killed and killed[0] is not None
    assert rep["run"]["dask_tasks"] == 3
    got = [{x: v for x, v in r.items() if x != "tightened"} for r in rep["records"]]
    assert by_id(got) == serial
    lines = (tmp_path / "o" / JOURNAL_NAME).read_text().splitlines()[1:]
    ids = [json.loads(ln)["bracket"] for ln in lines]
    assert sorted(ids) == [r["bracket"] for r in serial]  # each record journaled once
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()


def test_killed_worker_mid_batch_in_check(client, slow):
    path, serial = slow
    got, killed = [], []
    for rec in runner.iter_checks(str(path), scheduler=client, batch=4, tier="exact"):
        got.append(rec)
        if not killed:
            killed.append(_kill_a_busy_worker(client))
    assert killed and killed[0] is not None
    assert by_id(got) == serial and len(got) == len(serial)
    client.wait_for_workers(2, timeout=60)


# ------------------------------------------------------------------ produce

PRODUCE = ["--eps", "0.25", "0.35", "--producers", "tsvd", "nonzero", "frobenius_tail",
           "--quiet"]


@pytest.fixture(scope="module")
def npz(tmp_path_factory) -> Path:
    rng = np.random.default_rng(12)
    path = tmp_path_factory.mktemp("in") / "heads.npz"
    # one 3-D stack: 40 operators (an npz holds at most 64 members)
    np.savez(path, h=np.stack([softmax_rows(2 * rng.standard_normal((6, 6)))
                               for _ in range(N_OPS)]))
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    files = {"brackets.jsonl": (root / "brackets.jsonl").read_bytes(),
             "operators.jsonl": (root / "operators.jsonl").read_bytes()}
    files.update({f"arrays/{p.name}": p.read_bytes() for p in (root / "arrays").iterdir()})
    return files


@pytest.fixture
def submitted(monkeypatch):
    """Counts the produce tasks submitted to any Dask client of this process."""
    from distributed import Client

    from softrank.commands import produce as cmd

    count = {"tasks": 0, "jobs": 0}
    real = Client.submit

    def submit(self, fn, *args, **kw):
        if fn is cmd._work_batch:
            count["tasks"] += 1
            count["jobs"] += len(args[0])
        return real(self, fn, *args, **kw)

    monkeypatch.setattr(Client, "submit", submit)
    return count


def test_produce_batches_write_the_serial_bytes(client, npz, tmp_path, submitted):
    serial = tmp_path / "serial"
    assert main(["produce", str(serial), "--npz", str(npz), *PRODUCE]) in (0, 1)
    want = snapshot(serial)
    for k, tasks in (("1", N_OPS), ("6", 7), ("auto", 8)):
        submitted["tasks"] = submitted["jobs"] = 0
        out = tmp_path / f"b{k}"
        assert main(["produce", str(out), "--npz", str(npz), *PRODUCE, "--scheduler",
                     client.scheduler.address, "--batch", k]) in (0, 1)
        assert submitted == {"tasks": tasks, "jobs": N_OPS}
        got = snapshot(out)
        assert got.keys() == want.keys() and all(got[f] == want[f] for f in want), k


def test_produce_batch_without_scheduler_writes_nothing(npz, tmp_path):
    out = tmp_path / "s"
    assert main(["produce", str(out), "--npz", str(npz), *PRODUCE, "--batch", "2"]) == 2
    assert not out.exists()
