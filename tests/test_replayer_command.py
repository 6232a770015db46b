"""``softrank-certify replayer --out FILE``: the referee's copy of replay/replay.py."""

from __future__ import annotations

import subprocess
import sys

from softrank.cli import main

from .test_newcomer import ROOT

REPLAY = ROOT / "replay" / "replay.py"


def test_writes_the_replayer_byte_for_byte(tmp_path, capsys):
    out = tmp_path / "replay_copy.py"
    assert main(["replayer", "--out", str(out)]) == 0
    assert out.read_bytes() == REPLAY.read_bytes()
    assert "sha256" in capsys.readouterr().out
    # the copy runs on its own, outside the repository, with no site-packages
    done = subprocess.run([sys.executable, "-S", str(out), "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "softrank-replay-bundle" in done.stdout


def test_refuses_an_existing_file_unless_forced(tmp_path, capsys):
    out = tmp_path / "r.py"
    out.write_text("mine")
    assert main(["replayer", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "mine"
    assert main(["replayer", "--out", str(out), "--force", "-q"]) == 0
    assert out.read_bytes() == REPLAY.read_bytes() and capsys.readouterr().out == ""
    assert main(["replayer", "--out", str(tmp_path)]) == 2
    assert "directory" in capsys.readouterr().err


def test_console_script_entry_keeps_the_exit_codes(tmp_path, monkeypatch, capsys):
    from replay import cli

    monkeypatch.setattr(sys, "argv", ["softrank-replay", str(tmp_path / "missing.zip")])
    assert cli.main() == 2
    assert "Traceback" not in capsys.readouterr().err


def test_the_console_script_names_itself_and_the_package_version(monkeypatch, capsys):
    # its --help showed "python replay/replay.py" and its --version no package version
    import softrank
    from replay import cli

    monkeypatch.setattr(sys, "argv", ["softrank-replay", "--help"])
    assert cli.main() == 0
    shown = capsys.readouterr().out
    assert "Usage:  softrank-replay BUNDLE.zip" in shown and "python replay/replay.py" not in shown
    monkeypatch.setattr(sys, "argv", ["softrank-replay", "--version"])
    assert cli.main() == 0
    assert f"softrank-certify {softrank.__version__}" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["replay.py", "--help"])
    from replay import replay as rp

    assert rp.main(["--help"]) == 0  # the file on its own keeps its own usage
    assert "python replay/replay.py" in capsys.readouterr().out
