"""A run clears every result file of an earlier run before it checks: a run killed after that
must leave nothing of the earlier run (over a store since changed) that reads as its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from softrank.audit import files
from softrank.audit.files import STALE_FILES, clear_results


def test_every_result_name_of_an_earlier_run_is_removed_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    (out / "figures").mkdir()
    for name in (*files.RESULT_FILES, *STALE_FILES):
        (out / name).write_text("old run")
    (out / "tables" / "mine.tex").write_text("the user's own table")
    (out / "figures" / "photo.png").write_text("the user's own figure")
    (out / "journal.jsonl").write_text("{}")
    clear_results(out)
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert left == ["figures/photo.png", "journal.jsonl", "tables/mine.tex"]


def test_a_linked_subfolder_is_not_followed(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "brackets.tex").write_text("not ours")
    (out / "tables").symlink_to(elsewhere)
    clear_results(out)
    assert (elsewhere / "brackets.tex").read_text() == "not ours"


def test_the_lists_match_what_an_audit_writes(tmp_path):
    from softrank.audit import figures
    from softrank.cli import main

    assert set(figures.FIGURES) == set(files.FIGURE_NAMES)
    assert figures.FORMATS == files.FIGURE_FORMATS
    store = Path(__file__).resolve().parent.parent / "examples" / "glazier_L1H10"
    out = tmp_path / "out"
    assert main(["audit", str(store), "--out", str(out), "-q"]) in (0, 1)
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    written -= {"journal.jsonl", *files.RESULT_FILES}
    assert written and written <= set(STALE_FILES), written - set(STALE_FILES)


@pytest.mark.parametrize("name", ["tables/brackets.tex", "per_head.csv"])
def test_a_killed_rerun_leaves_no_earlier_table(tmp_path, name):
    # the order the audit follows: clear, then check; a kill in between leaves no old result
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    (out / name).write_text("L and U of an earlier store")
    clear_results(out)
    assert not (out / name).exists()


ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
MINILM = Path(__file__).resolve().parent.parent / "examples" / "minilm"


def _sigint_as_a_terminal_gives() -> None:
    # a suite started in the background by a non-interactive shell (`make test &`) runs with
    # SIGINT ignored, which its children inherit and Python keeps: the audit then ignored the
    # test's Ctrl-C and finished with exit 0 (a fresh-clone run)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _started(cmd: list[str], seconds: float) -> subprocess.Popen:
    """Returns the process of ``cmd`` (in a session of its own) ``seconds`` after its start;
    skips the test when it has already ended (nothing left to signal)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
                            start_new_session=True, preexec_fn=_sigint_as_a_terminal_gives)
    time.sleep(seconds)
    if proc.poll() is not None:
        proc.communicate()
        pytest.skip("the command ended before the signal")
    return proc


def _ended(proc: subprocess.Popen, seconds: float, what: str) -> bytes:
    """Returns the standard error of ``proc`` once it ends within ``seconds``; otherwise kills
    its process group and fails the test with ``what``."""
    try:
        return proc.communicate(timeout=seconds)[1]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(what)


def test_a_second_ctrl_c_during_a_parallel_run_still_ends_the_process(tmp_path):
    # the workers ignore SIGINT; the parent waited for their chunks in the pool's shutdown,
    # a second SIGINT there left it hung in multiprocessing's exit handler (3 of 3 times)
    proc = _started([sys.executable, "-m", "softrank", "audit", str(MINILM), "-q",
                     "--no-figures", "--jobs", "2", "--out", str(tmp_path / "out")], 3.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _ended(proc, 60, "hung after two interrupts")
    assert proc.returncode != 0  # interrupted: never read as "every claim proved"


def test_sigterm_raises_terminated_inside_the_block_and_the_old_handler_returns():
    from softrank.workers import Terminated, sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 1.0)  # pragma: no cover - the handler raises before this
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_ends_a_run_with_143_no_temporary_file_and_a_resumable_journal(tmp_path, jobs):
    # without a handler SIGTERM killed the process where it stood: exit -15, no message, and
    # the temporary file of a write under way left behind
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "softrank", "audit", str(MINILM), "-q", "--no-figures",
           "--jobs", jobs, "--out", str(out)]
    proc = _started(cmd, 4.0)
    proc.send_signal(signal.SIGTERM)
    err = _ended(proc, 60, "still running 60 s after SIGTERM")
    assert proc.returncode == 143, err
    assert b"terminated" in err
    assert not [p for p in out.rglob("*.tmp")]
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # no worker is left in the run's process group
        os.killpg(proc.pid, 0)
    again = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
                           timeout=600)
    assert again.returncode in (0, 1), again.stderr
    assert (out / "report.json").exists()


def test_a_torn_last_journal_line_is_reported_when_dropped(tmp_path, capsys):
    # it was dropped without a word: a reader of the output could not tell a resume after a
    # kill mid-write from a clean one
    from softrank.cli import main

    store = Path(__file__).resolve().parent.parent / "examples" / "glazier_L1H10"
    out = tmp_path / "out"
    first = main(["audit", str(store), "--out", str(out), "-q", "--no-figures"])
    capsys.readouterr()
    assert main(["audit", str(store), "--out", str(out), "-q", "--no-figures"]) == first
    assert "incomplete last line" not in capsys.readouterr().err
    with open(out / "journal.jsonl", "ab") as fh:
        fh.write(b'{"bracket": "br00')
    assert main(["audit", str(store), "--out", str(out), "-q", "--no-figures"]) == first
    assert "dropped an incomplete last line" in capsys.readouterr().err


def test_sigterm_to_the_parent_alone_ends_a_parallel_produce(tmp_path):
    # produce's pool waited, in its shutdown, for every operator its workers were searching:
    # `kill PID` (docker stop, a supervisor) left it running for minutes
    import numpy as np

    rng = np.random.default_rng(7)
    np.savez(tmp_path / "heads.npz", logits=rng.normal(size=(6, 96, 96)))
    proc = _started([sys.executable, "-m", "softrank", "produce", str(tmp_path / "st"),
                     "--npz", str(tmp_path / "heads.npz"), "--eps", "0.25", "--jobs", "2",
                     "-q"], 8.0)
    proc.send_signal(signal.SIGTERM)  # the parent only, not its group
    err = _ended(proc, 30, "produce --jobs 2 still running 30 s after SIGTERM")
    assert proc.returncode == 143, err
    assert err.count(b"\n") == 1 and b"terminated" in err  # one line, no worker traceback
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("workers outlived the terminated produce")


def test_an_ignored_sigterm_stays_ignored():
    # the invoker's `trap '' TERM` was overridden: the command died with 143
    from softrank.workers import sigterm_as_interrupt

    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with sigterm_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
