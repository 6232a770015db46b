"""``produce`` in work mode (the default): the same command writes byte-identical brackets
(record file and array files) with --jobs 1, --jobs 2 and on a Dask LocalCluster, also when a
worker is killed mid-run; --jobs and --scheduler exclude each other."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

from softrank.cli import main
from tests.helpers import local_cluster_client

# cheap producers: one upper search with a budget (alt_l1) and two budgeted lower searches
PRODUCERS = ["tsvd", "alt_l1", "nonzero", "bernstein", "rowset"]
ARGS = ["--eps", "0.25", "0.35", "--budget-scale", "0.05", "--producers", *PRODUCERS,
        "--quiet"]


def _softmax(L: np.ndarray) -> np.ndarray:
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def npz(tmp_path_factory) -> Path:
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("in") / "heads.npz"
    np.savez(path, **{f"h{i}": _softmax(2 * rng.standard_normal((n, n)))
                      for i, n in enumerate((6, 8, 8, 6))})
    return path


def produce(out: Path, npz: Path, *extra: str) -> int:
    return main(["produce", str(out), "--npz", str(npz), *ARGS, *extra])


def snapshot(root: Path) -> dict[str, bytes]:
    """The bytes of the bracket records and of every array file (operators' and brackets')."""
    files = {"brackets.jsonl": (root / "brackets.jsonl").read_bytes(),
             "operators.jsonl": (root / "operators.jsonl").read_bytes()}
    files.update({f"arrays/{p.name}": p.read_bytes() for p in (root / "arrays").iterdir()})
    return files


@pytest.fixture(scope="module")
def serial(tmp_path_factory, npz) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("serial") / "s"
    assert produce(out, npz, "--jobs", "1") in (0, 1)
    return snapshot(out)


def test_serial_run_is_in_work_mode_and_says_so(serial, tmp_path):
    recs = [json.loads(ln) for ln in serial["brackets.jsonl"].decode().splitlines()]
    assert len(recs) == 4 * 2 * 2  # 4 operators x 2 eps x 2 upper producers
    for r in recs:
        assert r["claims"]["budget_mode"] == "work"
        # no clock reading in a bracket record: they would differ from run to run
        assert not any(k.endswith("_seconds") for k in r["claims"])
    anchors = [r for r in recs if r["producer"]["upper"] == "alt_l1"]
    assert all("upper_work" in r["claims"] and "lower_producer_work" in r["claims"]
               for r in anchors)


def test_two_jobs_write_the_same_bytes(serial, npz, tmp_path):
    out = tmp_path / "s"
    assert produce(out, npz, "--jobs", "2") in (0, 1)
    got = snapshot(out)
    assert got.keys() == serial.keys()
    assert all(got[k] == serial[k] for k in serial)
    prov = json.loads((out / "store.json").read_text())["provenance"]["produce_budgets"]
    assert prov[0]["budget_mode"] == "work" and prov[0]["budget_scale"] == "0.05"
    # the software the brackets depend on, down to the BLAS kernels OpenBLAS chose here
    sw = prov[0]["software"]
    assert sw["numpy"] == np.__version__ and len(sw["producer_sources_sha256"]) == 64
    assert sw["blas"] and all("internal_api" in b for b in sw["blas"])
    # the two worker processes ran this machine's software: one environment, the client's
    used = json.loads((out / "store.json").read_text())["provenance"]["producing_software"]
    assert used == [sw]


def test_the_producer_digest_follows_the_sources(tmp_path, monkeypatch):
    # a copy of the witnesses package with one byte changed has another digest
    import shutil

    from softrank import software, witnesses

    src = Path(witnesses.__file__).resolve().parent
    pkg = tmp_path / "softrank" / "witnesses"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "softrank" / "__init__.py").write_text("")
    here = software.producer_sources_sha256()
    monkeypatch.setattr(witnesses, "__file__", str(pkg / "__init__.py"))
    assert software.producer_sources_sha256() == here
    altl1 = pkg / "producers" / "altl1.py"
    altl1.write_bytes(altl1.read_bytes() + b"#")
    assert software.producer_sources_sha256() != here


def test_a_resumed_run_writes_the_same_records(serial, npz, tmp_path):
    # a run killed after 5 of its 16 records (inside the second operator, between its eps):
    # the rerun searches that operator's stored eps again (the others start from their hints)
    # and writes only what is missing; every record and array file is the uninterrupted run's
    out = tmp_path / "s"
    assert produce(out, npz) in (0, 1)
    journal = out / "brackets.jsonl"
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:5]))
    assert produce(out, npz) in (0, 1)
    got = snapshot(out)
    assert got.keys() == serial.keys()
    lines = sorted(got.pop("brackets.jsonl").splitlines())
    assert lines == sorted(serial["brackets.jsonl"].splitlines())
    assert all(got[k] == serial[k] for k in got)


def test_searches_start_from_their_neighbour_eps(serial):
    # uppers from the smallest eps up, lowers from the largest down; the claims say which eps
    # left the hints a bracket's search started from
    recs = [json.loads(ln) for ln in serial["brackets.jsonl"].splitlines()]
    anchors = [r for r in recs if r["producer"]["upper"] == "alt_l1"]
    for r in anchors:
        c = r["claims"]
        if r["eps"] == "7/20":
            assert c["upper_hints_from"] == "1/4" and "lower_hints_from" not in c
        else:
            assert "upper_hints_from" not in c
            assert c.get("lower_hints_from") in (None, "7/20")
    # a fit within eps 1/4 starts the chain at 7/20 below the truncated SVD's rank or at it
    assert all(r["claims"]["chain_start"] <= r["claims"]["tsvd_rank"] for r in anchors)


def test_cpu_mode_keeps_seconds(npz, tmp_path):
    out = tmp_path / "s"
    assert produce(out, npz, "--budget-mode", "cpu") in (0, 1)
    recs = [json.loads(ln) for ln in (out / "brackets.jsonl").read_text().splitlines()]
    assert all("upper_seconds" in r["claims"] and "budget_mode" not in r["claims"]
               for r in recs)


def test_jobs_and_scheduler_exclude_each_other(npz, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        produce(tmp_path / "s", npz, "--jobs", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert e.value.code == 2
    assert not (tmp_path / "s").exists()


def test_an_unreachable_scheduler_is_a_usage_error_and_writes_nothing(npz, tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "s"
    assert produce(out, npz, "--scheduler", "not a scheduler address") == 2
    assert not out.exists()


distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with local_cluster_client() as c:
        yield c


def test_local_cluster_writes_the_serial_bytes(client, serial, npz, tmp_path):
    out = tmp_path / "s"
    assert produce(out, npz, "--scheduler", client.scheduler.address) in (0, 1)
    got = snapshot(out)
    assert got.keys() == serial.keys() and all(got[k] == serial[k] for k in serial)


def test_cluster_workers_software_is_recorded(client, npz, tmp_path):
    out = tmp_path / "c"
    assert produce(out, npz, "--scheduler", client.scheduler.address) in (0, 1)
    prov = json.loads((out / "store.json").read_text())["provenance"]
    # the LocalCluster's workers load what this process loads
    assert prov["producing_software"] == [prov["produce_budgets"][0]["software"]]


def test_a_worker_with_other_software_is_recorded_and_named(tmp_path, capsys):
    from softrank.commands.produce import _Environments
    from softrank.software import process_environment
    from softrank.witnesses import Store

    here = process_environment()
    other = {**here, "blas": [{"internal_api": "openblas", "architecture": "Haswell\x1b[2J"}]}
    store = Store.create(tmp_path / "s", description="t")
    envs = _Environments(store, here)
    for sw in (here, None, other, here, other):
        envs.note(sw)
    store.close()
    used = json.loads((tmp_path / "s" / "store.json").read_text())["provenance"]
    assert used["producing_software"] == [here, other]  # each once, in the order first seen
    err = capsys.readouterr().err
    assert err.count("warning: a worker produced brackets with other numerics software") == 1
    assert "(blas differ)" in err


def test_killed_worker_is_rescheduled_and_the_bytes_agree(client, serial, npz, tmp_path,
                                                        monkeypatch):
    from softrank.commands import produce as cmd

    pids = sorted(client.run(os.getpid).items())
    killed: list[int] = []
    real = cmd._map_dask

    def kill_after_first(jobs, scheduler, batch=None):
        # every task is submitted before the first result comes back: kill a worker then,
        # while the other tasks are queued or running on it
        assert len(jobs) == 4
        for n, item in enumerate(real(jobs, scheduler, batch)):
            if n == 0:
                killed.append(pids[0][1])
                os.kill(pids[0][1], signal.SIGKILL)
            yield item

    monkeypatch.setattr(cmd, "_map_dask", kill_after_first)
    out = tmp_path / "s"
    assert produce(out, npz, "--scheduler", client.scheduler.address) in (0, 1)
    got = snapshot(out)
    assert got.keys() == serial.keys() and all(got[k] == serial[k] for k in serial)
    client.wait_for_workers(2, timeout=60)
    assert killed and killed[0] not in client.run(os.getpid).values()


def test_resumed_cluster_run_adds_nothing(client, serial, npz, tmp_path):
    out = tmp_path / "s"
    assert produce(out, npz, "--scheduler", client.scheduler.address) in (0, 1)
    before = snapshot(out)
    assert produce(out, npz, "--scheduler", client.scheduler.address) in (0, 1)
    assert snapshot(out) == before == serial


def test_settings_are_per_thread():
    # a Dask worker runs tasks in threads: one task's budget mode never leaks into another's
    from softrank.witnesses.producers._common import budget_mode, budget_settings, clock

    seen: dict[str, str] = {}
    gate = threading.Barrier(2)

    def task(mode: str) -> None:
        with budget_settings(mode):
            gate.wait()
            clock()
            seen[mode] = budget_mode()

    ts = [threading.Thread(target=task, args=(m,)) for m in ("work", "cpu")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {"work": "work", "cpu": "cpu"}
