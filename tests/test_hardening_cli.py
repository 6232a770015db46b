"""The CLI's exit-code contract under attack: a crash is exit 3, never a verdict; bad input is
exit 2 naming file and field; closed pipes and Ctrl-C end quietly."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank import certify
from softrank.certify import check_lower, check_upper
from softrank.cli import main
from softrank.numfmt import sci
from softrank.witnesses import Store

from .storefactory import build_store

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from softrank.cli import main; sys.exit(main())"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


# ---------------------------------------------------------------------------- exit 3


def test_internal_error_is_exit_3_without_traceback(tmp_path, capsys, monkeypatch):
    build_store(tmp_path / "s", n_ops=1)

    def broken(*a, **k):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(certify, "check_bracket", broken)
    code, out, err = _run(capsys, "check", tmp_path / "s")
    assert code == 3
    assert "internal error: ZeroDivisionError: simulated bug" in err
    assert "Traceback" not in err and "--debug" in err
    code, _, err = _run(capsys, "check", tmp_path / "s", "--debug")
    assert code == 3 and "Traceback" in err
    code, _, err = _run(capsys, "--debug", "check", tmp_path / "s")
    assert code == 3 and "Traceback" in err


def test_recursion_is_input_error_not_verdict(capsys, monkeypatch, tmp_path):
    build_store(tmp_path / "s", n_ops=1)

    def deep(*a, **k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(certify, "check_bracket", deep)
    code, _, err = _run(capsys, "check", tmp_path / "s")
    assert code == 2 and "nested too deeply" in err


@pytest.mark.parametrize("name, shown_as", [(5, None), ("some/file.npz", "some/file.npz: "),
                                             (b"raw/name", "raw/name: ")])
def test_an_os_error_names_a_file_never_a_descriptor(capsys, monkeypatch, tmp_path, name,
                                                     shown_as):
    build_store(tmp_path / "s", n_ops=1)

    def fails(*a, **k):  # os.fdopen's errors carry the descriptor number as filename
        raise IsADirectoryError(21, "Is a directory", name)

    monkeypatch.setattr(certify, "check_bracket", fails)
    code, _, err = _run(capsys, "check", tmp_path / "s")
    assert code == 2
    if shown_as is None:
        assert err.strip() == "softrank-certify: input error: Is a directory"
    else:
        assert f"input error: {shown_as}Is a directory" in err


def test_audit_out_at_existing_file_or_unwritable_place(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = _run(capsys, "audit", tmp_path / "s", "--out", f, "--no-figures",
                        "--no-progress")
    assert code == 2 and "input error" in err and "Traceback" not in err
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        code, _, err = _run(capsys, "audit", tmp_path / "s", "--out", ro / "x", "--no-figures",
                            "--no-progress")
        assert code == 2 and "input error" in err


def test_produce_onto_a_file_or_from_npy(tmp_path, capsys):
    A = np.full((3, 3), 1 / 3)
    np.savez(tmp_path / "x.npz", A=A)
    np.save(tmp_path / "x.npy", A)
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = _run(capsys, "produce", f, "--npz", tmp_path / "x.npz", "--quiet")
    assert code == 2 and "not a folder" in err
    code, _, err = _run(capsys, "produce", tmp_path / "st", "--npz", tmp_path / "x.npy",
                        "--quiet")
    assert code == 2 and "not an .npz archive" in err and "x.npy" in err


def test_produce_npz_size_cap_and_bad_header(tmp_path, capsys, monkeypatch):
    np.savez(tmp_path / "x.npz", A=np.full((16, 16), 1 / 16))
    monkeypatch.setenv("SOFTRANK_MAX_ARRAY_BYTES", "100")
    code, _, err = _run(capsys, "produce", tmp_path / "st", "--npz", tmp_path / "x.npz",
                        "--quiet")
    assert code == 2 and "cap" in err and not (tmp_path / "st").exists()


def test_huge_eps_digits_in_a_frobenius_claim(tmp_path, capsys):
    # eps = 1e-3000 makes the claim threshold m eps^2 a 6000-digit denominator
    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    recs[0]["eps"] = "1e-3000"
    recs[0]["lower"] = {"kind": "frobenius_tail", "rank": 2}
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, out, err = _run(capsys, "check", tmp_path / "s", "--json")
    assert code == 1 and "Traceback" not in err
    rec = {r["bracket"]: r for r in json.loads(out)["records"]}[recs[0]["id"]]
    assert rec["lower_result"] == "proved"  # a rank-6 truncation leaves a positive tail
    # the witness misses eps = 1e-3000; its claim k = 5 is not below the proved L = 2
    assert rec["upper_result"] == "does_not_hold"


def test_chi_beyond_float_range_prints():
    from softrank.commands.check import format_line

    q = Fraction(10) ** 400 * 3
    assert sci(q) == "3.00e+400" and sci(Fraction(1, 10**400)) == "1.00e-400"
    assert sci(-Fraction(2) ** 1100).startswith("-1.36e+331")
    rec = {"bracket": "b", "operator": "o", "eps": "1/4", "lower_claim": 1, "lower": 1,
           "lower_result": "proved", "upper_claim": 2, "upper": 2,
           "upper_result": "does_not_hold", "chi": str(q), "resolved": True}
    assert "chi<=3.00e+400" in format_line(rec)
    from softrank.audit.provenance import methods_text

    m = {"requested_tier": "auto", "chi": {"positive": 1, "operators": 1, "max": str(q)},
         **{k: {"checks": 0} for k in ("upper", "lower", "nonzero")}}
    assert any("3.00e+400" in line for line in methods_text(m))


# ---------------------------------------------------------------------------- oracle


def test_oracle_json_numbers_are_exact_decimals(tmp_path, capsys):
    cell = tmp_path / "c.json"
    cell.write_text('{"matrix": [["3/10","0"],["0","3/10"]], "eps": 0.3, "mode": "unrestricted"}')
    code, out, _ = _run(capsys, "oracle", cell, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["eps"] == "3/10" and doc["rank"] == 0  # the zero matrix is within exactly 3/10


@pytest.mark.parametrize("text", ['{"matrix": [["1"]], "eps": 0.' + "1" * 5000 + "}",
                                  '{"matrix": [["1"]], "eps": "1/4", "eps": "1/2"}',
                                  '{"matrix": ' + "[" * 3000 + "]" * 3000 + ', "eps": "1/4"}',
                                  '{"matrix": [["1"]], "eps": "1/4", "mode": ["x"]}',
                                  '{"matrix": [["1/' + "7" * 5000 + '"]], "eps": "1/4"}'])
def test_oracle_hostile_cells_are_input_errors(tmp_path, capsys, text):
    cell = tmp_path / "c.json"
    cell.write_text(text)
    code, _, err = _run(capsys, "oracle", cell)
    assert code == 2 and "c.json" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- cost guards


def test_grid_cost_guard_by_work(capsys):
    t0 = time.monotonic()
    code, _, err = _run(capsys, "grid", "--r", "1", "--eps", "1/4", "--L", "400")
    assert code == 2 and "too costly" in err and time.monotonic() - t0 < 5
    # a costly eps (long denominator) is refused on a size L^r alone would allow
    code, _, err = _run(capsys, "grid", "--r", "2", "--eps", "1/" + "7" * 300, "--L", "30")
    assert code == 2 and "too costly" in err
    assert _run(capsys, "grid", "--r", "1", "--eps", "1/4", "--L", "3")[0] == 0
    # arithmetic on 13,000-bit numbers costs more per bit than on small ones: this run was
    # priced at 2% of the limit and took 69 s; the same eps on a smaller grid still runs
    tiny = "1/" + str(10**3900)
    code, _, err = _run(capsys, "grid", "--r", "2", "--eps", tiny, "--L", "6")
    assert code == 2 and "too costly" in err
    assert _run(capsys, "grid", "--r", "2", "--eps", tiny, "--L", "3", "--json")[0] == 0


def test_gauge_cost_guard(capsys):
    t0 = time.monotonic()
    code, _, err = _run(capsys, "gauge", "--t", "1e-3000")
    assert code == 2 and "too costly" in err and time.monotonic() - t0 < 5
    code, _, err = _run(capsys, "gauge", "--beta", "1e-3000", "--t", "1")
    assert code == 2 and "beta" in err
    code, _, err = _run(capsys, "gauge", "--t", *["1"] * 65)
    assert code == 2 and "--t" in err


# ---------------------------------------------------------------------------- Check truth


def test_check_has_no_truth_value():
    A = np.eye(2)
    chk = check_upper(A, np.zeros((2, 0)), np.zeros((0, 2)), "1/2")
    assert chk.status == "fails" and not chk.holds
    with pytest.raises(TypeError, match="read .status"):
        assert chk  # the old behaviour: passes on a false claim
    with pytest.raises(TypeError):
        bool(check_lower(A, {"kind": "nonzero", "rank": 1}, "1/2"))
    # the record of a bracket still serialises every end (no truthiness inside)
    res = certify.check_bracket(A, "1/2", {"kind": "factors", "rank": 0, "U": np.zeros((2, 0)),
                                           "V": np.zeros((0, 2))}, None)
    assert res.to_json()["upper_check"]["status"] == "fails"


# ---------------------------------------------------------------------------- signals


def test_closed_pipe_exits_141_quietly(tmp_path):
    build_store(tmp_path / "s", n_ops=3)
    for argv in (["check", str(tmp_path / "s")],
                 ["grid", "--r", "1", "--eps", "1/4", "--L", *map(str, range(2, 40)), "--json"]):
        proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env())
        assert proc.stdout is not None and proc.stderr is not None
        # as `| head` does once it has read enough; closing before the command writes its
        # first line (it is still importing) makes the race with a short output impossible
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141, err
        assert "Traceback" not in err and "BrokenPipe" not in err and err.count("\n") <= 1


def test_ctrl_c_during_parallel_audit_prints_one_line(tmp_path):
    # 12 operators at 1 s a record: the run cannot finish in the moments between the test
    # seeing two records and sending Ctrl-C even on a loaded machine (at 6 x 0.3 s it once
    # did, and a run that ends normally exits 1 with nothing on stderr)
    build_store(tmp_path / "s", n_ops=12)
    driver = (
        "import signal, sys, time\n"
        # a job started in the background by a non-interactive shell (`make test &`, nohup)
        # inherits SIGINT ignored, and Python keeps it so: restore what a terminal gives
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import softrank.audit.journal as J\n"
        "orig = J.Journal.append_many\n"
        "def slow(self, records):\n"  # a slow parent: the workers wait idle on their queue
        "    records = list(records)\n"
        "    time.sleep(1.0 * len(records))\n"  # 1 s a record, whatever the batch
        "    return orig(self, records)\n"
        "J.Journal.append_many = slow\n"
        "from softrank.cli import main\n"
        f"sys.exit(main(['audit', {str(tmp_path / 's')!r}, '--out', {str(tmp_path / 'o')!r},"
        " '--jobs', '2', '--no-figures', '--no-progress']))\n")
    proc = subprocess.Popen([sys.executable, "-c", driver], env=_env(), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = tmp_path / "o" / "journal.jsonl"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists() and journal.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert text.strip().splitlines() == ["softrank-certify: interrupted"]


def test_frobenius_tail_beyond_the_float_range_is_not_a_crash():
    # ||A||_F^2 = 32 * 2^1022 overflows float64 (fsum raised OverflowError before); the rank-1
    # matrix has an empty tail, so the claim is false: never "holds", never a traceback
    A = np.full((4, 8), 2.0**511)
    A[:, ::2] *= -1
    chk = check_lower(A, {"kind": "frobenius_tail", "rank": 2}, "1/4")
    assert chk.status in ("fails", "undecided")


def test_huge_eps_digits_through_the_api(tmp_path):
    # run_audit without the CLI (and so in a process whose int-to-str limit is the default)
    from softrank.audit import run_audit

    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    recs[0]["eps"] = "1e-3000"
    recs[0]["lower"] = {"kind": "frobenius_tail", "rank": 2}
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(4300)
    try:
        rep = run_audit(tmp_path / "s", tmp_path / "o", figures=False)
    finally:
        sys.set_int_max_str_digits(max(before, sys.get_int_max_str_digits()))
    assert rep["summary"]["exit_code"] == 1 and rep["summary"]["input_errors"] == 0


# ---------------------------------------------------------------------------- exit codes agree


@pytest.mark.parametrize("cmd", ["check", "audit"])
def test_jobs_and_scheduler_exclude_each_other(tmp_path, capsys, cmd):
    build_store(tmp_path / "s", n_ops=1)
    extra = ["--out", tmp_path / "o"] if cmd == "audit" else []
    with pytest.raises(SystemExit) as e:
        main([cmd, str(tmp_path / "s"), *map(str, extra), "--jobs", "2", "--scheduler",
              "tcp://127.0.0.1:1"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("address", ["notanaddress", "tcp://256.0.0.1:x"])
def test_a_bad_scheduler_address_is_an_input_error(tmp_path, capsys, address):
    build_store(tmp_path / "s", n_ops=1)
    code, _, err = _run(capsys, "check", tmp_path / "s", "--scheduler", address)
    assert code == 2 and "--scheduler" in err and "internal error" not in err


def test_a_server_that_is_not_a_scheduler_is_an_input_error(tmp_path, capsys):
    # its answer read as a Dask frame asked for exabytes: MemoryError, which exited 3
    pytest.importorskip("distributed")
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def answer() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            with c:
                try:
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        build_store(tmp_path / "s", n_ops=1)
        address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
        code, _, err = _run(capsys, "check", tmp_path / "s", "--scheduler", address)
    finally:
        stop.set()
        t.join()
        srv.close()
    assert code == 2 and "--scheduler" in err and "internal error" not in err, err


@pytest.mark.parametrize("error", [AssertionError(), MemoryError(), KeyError("op")])
def test_any_failure_to_build_the_client_is_the_addresses_fault(tmp_path, capsys, monkeypatch,
                                                               error):
    # a server that is not a scheduler fails distributed's frame reading however its bytes
    # happen to arrive: an empty AssertionError (seen when the reply came in pieces) exited 3
    distributed = pytest.importorskip("distributed")

    class Refusing:
        def __init__(self, *args, **kwargs):
            raise error

    monkeypatch.setattr(distributed, "Client", Refusing)
    build_store(tmp_path / "s", n_ops=1)
    code, _, err = _run(capsys, "check", tmp_path / "s", "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and "--scheduler" in err and "internal error" not in err, err
    assert type(error).__name__ in err


def test_an_unwritable_export_target_is_refused_before_the_run(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    (tmp_path / "afile").write_text("x")
    for target in (tmp_path / "afile" / "x.zip", tmp_path / "nodir" / "x.zip", tmp_path):
        code, out, err = _run(capsys, "check", tmp_path / "s", "--export", target)
        assert code == 2 and "--export" in err
        assert "exit 0" not in out and "checked" not in out  # refused before any check
    code, _, err = _run(capsys, "export", tmp_path / "s", "--out", tmp_path / "afile" / "b.zip")
    assert code == 2 and "--out" in err


def test_an_existing_export_target_is_replaced_only_when_regular_and_forced(tmp_path, capsys):
    """The atomic write replaces whatever is at the bundle's name: an existing file is kept
    unless --force (it was overwritten, exit 0), and a FIFO, a device or a link never is
    (/dev/null, run as root, became a regular file)."""
    build_store(tmp_path / "s", n_ops=1)
    kept = tmp_path / "notes.txt"
    kept.write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(kept)
    for cmd, opt in (("export", "--out"), ("check", "--export")):
        code, out, err = _run(capsys, cmd, tmp_path / "s", opt, kept)
        assert code == 2 and "exists (use --force" in err and "checked" not in out
        assert kept.read_text() == "mine"
        for other in (tmp_path / "fifo", tmp_path / "link"):
            code, _, err = _run(capsys, cmd, tmp_path / "s", opt, other, "--force")
            assert code == 2 and "not a regular file" in err
        assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
        assert (tmp_path / "link").is_symlink() and kept.read_text() == "mine"
    code, _, _ = _run(capsys, "export", tmp_path / "s", "--out", kept, "--force")
    assert code == 1 and zipfile.is_zipfile(kept)  # the store holds one false claim


def test_export_exit_code_is_checks(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)  # one of its two upper claims is false
    code, _, _ = _run(capsys, "export", tmp_path / "s", "--out", tmp_path / "b.zip")
    assert code == 1 and (tmp_path / "b.zip").is_file()
    code, _, _ = _run(capsys, "check", tmp_path / "s")
    assert code == 1


def test_summary_line_states_exit_2_for_an_intrinsic_input_error(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)
    rec = {"id": "op0.r1", "operator": "op0", "kind": "rank", "rank": 1,
           "file": "arrays/none.npz", "sha256": "0" * 64, "arrays": ["X", "Y"]}
    (tmp_path / "s" / "intrinsic.jsonl").write_text(json.dumps(rec) + "\n")
    # make every bracket claim true, so only the intrinsic record is wrong
    lines = (tmp_path / "s" / "brackets.jsonl").read_text().splitlines()
    (tmp_path / "s" / "brackets.jsonl").write_text(
        "".join(ln + "\n" for ln in lines if '"op0-t"' in ln))
    code, out, _ = _run(capsys, "check", tmp_path / "s")
    assert code == 2 and "(exit 2)" in out and "exit 0" not in out


def test_a_huge_wrong_typed_value_gives_a_short_error_naming_file_and_field(tmp_path, capsys):
    """An eps that is a 100,000-element list: exit 2, the file and field named, and the quoted
    value cut (the whole repr would be a 300 kB line)."""
    build_store(tmp_path / "s", n_ops=1)
    path = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    recs[0]["eps"] = [0] * 100_000
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, out, err = _run(capsys, "check", tmp_path / "s")
    assert code == 2 and not out.strip()
    assert "brackets.jsonl" in err and ".eps" in err and "characters cut" in err
    assert len(err) < 1000


def test_a_cut_reason_is_not_cut_again_when_the_error_is_relocated():
    from softrank.certify.errors import InputError

    err = InputError("bad value " + "7" * 10_000 + " is too long", field="eps")
    moved = err.at(source="s/brackets.jsonl", field_prefix="line 3")
    assert moved.reason == err.reason and len(err.reason) < 500
    assert err.reason.endswith("is too long") and err.reason.count("characters cut") == 1
    assert str(moved) == f"s/brackets.jsonl: line 3.eps: {err.reason}"
    short = InputError("x" * 420, field="f")
    assert short.reason == "x" * 420  # under the cut threshold: untouched


def test_paths_named_by_the_user_are_escaped_where_shown(tmp_path, capsys):
    # an out folder or store named after a hostile store (``audit --out "$STORE.audit"``)
    # must not drive the terminal: audit, its resume line and produce print them escaped
    evil = "evil\x1b]0;owned\x07\x1b[2J\r\u202eX"
    A = np.full((3, 3), 1 / 3)
    np.savez(tmp_path / "x.npz", A=A)
    store, out = tmp_path / evil, tmp_path / (evil + ".audit")
    code, o, e = _run(capsys, "produce", store, "--npz", tmp_path / "x.npz", "--producers",
                      "tsvd", "--eps", "1/4")
    assert code == 0 and "\\u001b]0;owned" in o
    assert not any(c in o + e for c in "\x1b\x07\r\u202e"), o + e
    for _ in range(2):  # the second run resumes from the journal and says so
        code, o, e = _run(capsys, "audit", store, "--out", out, "--no-figures",
                          "--no-progress")
        assert code in (0, 1) and "report written to" in o
    assert "resuming" in e
    for text in (o, e):
        assert not any(c in text for c in "\x1b\x07\r\u202e"), text


def test_usage_errors_and_the_grid_plot_path_are_escaped(tmp_path, capsys):
    evil = "x\x1b[2J\x07\u202e"
    for argv in (["gauge", evil], [evil], ["produce", "st", "--npz-kind", evil]):
        with pytest.raises(SystemExit) as ex:
            main(argv)
        _, err = capsys.readouterr()
        assert ex.value.code == 2 and "error:" in err
        assert not any(c in err for c in "\x1b\x07\u202e"), err
    pytest.importorskip("matplotlib")
    plot = tmp_path / (evil + ".png")
    code, out, _ = _run(capsys, "grid", "--r", "1", "--eps", "1/4", "--L", "3", "--plot", plot)
    assert code in (0, 1) and "plot saved to" in out and plot.exists()
    assert not any(c in out for c in "\x1b\x07\u202e"), out


def test_an_oracle_cell_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, capsys):
    # a FIFO with no writer used to block the read before the budget's clock could stop it
    fifo = tmp_path / "cell.fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        code, _, err = _run(capsys, "oracle", path, "--budget", "1")
        assert code == 2 and "not a regular file" in err and str(path) in err


def test_export_of_a_store_without_brackets_writes_nothing_and_exits_1(tmp_path, capsys):
    """check says "nothing was checked" (exit 1) on a store without brackets; export wrote
    a bundle of no ends and exited 0."""
    with Store.create(tmp_path / "s") as st:
        st.add_operator(np.full((2, 2), 0.5), family="f", id="op0")
    code, _, err = _run(capsys, "export", tmp_path / "s", "--out", tmp_path / "b.zip")
    assert code == 1 and "no brackets" in err and not (tmp_path / "b.zip").exists()
    assert _run(capsys, "check", tmp_path / "s")[0] == 1


@pytest.mark.parametrize("planted", ["file", "fifo"])
def test_a_target_that_appears_during_the_run_is_not_replaced(tmp_path, capsys, monkeypatch,
                                                             planted):
    """The target was checked before the checks only, and the rename at the end replaced a
    FIFO or a file made meanwhile: now the write itself never replaces one without --force
    (a hard link, which fails on an existing name), and a FIFO not even with it."""
    import softrank.commands.export as ex

    build_store(tmp_path / "s", n_ops=1)
    target = tmp_path / "b.zip"
    real = ex.iter_checks

    def planting(*args, **kwargs):
        yield from real(*args, **kwargs)
        if planted == "fifo":
            os.mkfifo(target)
        else:
            target.write_text("mine")

    monkeypatch.setattr(ex, "iter_checks", planting)
    for force in ([], ["--force"]):
        if target.exists() or target.is_symlink():
            target.unlink()
        code, _, err = _run(capsys, "export", tmp_path / "s", "--out", target, *force)
        if planted == "file" and force:
            assert code == 1 and zipfile.is_zipfile(target)  # a regular file, and --force
            continue
        assert code == 2 and "--out" in err
        assert (stat.S_ISFIFO(os.lstat(target).st_mode) if planted == "fifo"
                else target.read_text() == "mine")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_check_export_of_a_store_without_brackets_writes_no_bundle(tmp_path, capsys):
    with Store.create(tmp_path / "s") as st:
        st.add_operator(np.full((2, 2), 0.5), family="f", id="op0")
    code, _, err = _run(capsys, "check", tmp_path / "s", "--export", tmp_path / "b.zip")
    assert code == 1 and "no bundle written" in err and not (tmp_path / "b.zip").exists()


def test_a_bundle_is_written_where_hard_links_are_refused(tmp_path, capsys, monkeypatch):
    """On a filesystem without hard links (vfat: EPERM) the no-replace write looks the name
    up and renames into it; an existing target is still refused, naming the option."""
    import errno as errno_mod

    def no_links(*args, **kwargs):
        raise OSError(errno_mod.EPERM, "Operation not permitted")

    build_store(tmp_path / "s", n_ops=1)
    monkeypatch.setattr("softrank.witnesses.atomic.os.link", no_links)
    code, _, err = _run(capsys, "export", tmp_path / "s", "--out", tmp_path / "b.zip")
    assert code == 1 and zipfile.is_zipfile(tmp_path / "b.zip"), err
    code, _, err = _run(capsys, "check", tmp_path / "s", "--export", tmp_path / "b.zip")
    assert code == 2 and "--export" in err and "exists" in err


def test_check_export_names_its_own_option_and_a_fifo_is_not_advised_force(
        tmp_path, capsys, monkeypatch):
    import softrank.commands.check as ck

    build_store(tmp_path / "s", n_ops=1)
    target = tmp_path / "b.zip"
    real = ck.iter_checks

    def planting(*args, **kwargs):
        yield from real(*args, **kwargs)
        os.mkfifo(target)

    monkeypatch.setattr(ck, "iter_checks", planting)
    code, out, err = _run(capsys, "check", tmp_path / "s", "--export", target)
    assert code == 2 and "--export" in err and "--out" not in err
    assert "not a regular file" in err and "use --force" not in err
    assert "result:" not in out  # the failed export is not preceded by a verdict line
    assert stat.S_ISFIFO(os.lstat(target).st_mode)


def test_check_export_on_intrinsic_records_only_is_not_exit_0(tmp_path, capsys):
    """No bracket, so no bundle: check --export said exit 0 and wrote nothing."""
    from .test_display_rounding import _big_store

    root = _big_store(tmp_path, 1.0)
    code, out, err = _run(capsys, "check", root, "--export", tmp_path / "b.zip")
    assert code == 1 and "no bundle written" in err and not (tmp_path / "b.zip").exists()
    assert "(exit 1)" in out and "every claim proved" not in out


@pytest.mark.parametrize(("error", "code", "said"), [
    (MemoryError(), 3, "internal error while starting: MemoryError"),
    (ImportError("failed to map segment"), 3, "internal error while starting: ImportError"),
    (KeyboardInterrupt(), 130, "interrupted"),
])
def test_a_failure_while_starting_is_never_a_verdict_code(monkeypatch, capsys, error, code,
                                                          said):
    # the imports and the parser ran outside every handler: a process short of memory ended
    # in a traceback and exit 1, the code of "a claim not proved"
    from softrank import cli

    def broken() -> None:
        raise error

    monkeypatch.setattr(cli, "_parser", broken)
    assert cli.main(["check", "somewhere"]) == code
    assert said in capsys.readouterr().err
