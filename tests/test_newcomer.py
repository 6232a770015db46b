"""A newcomer's path: the README's own-claims example, the version, python -m softrank."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import softrank
from softrank.cli import main

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    """Returns the Python block of the README's "Check your own claims" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Check your own claims", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_is_the_shipped_example_file():
    assert readme_example() == (ROOT / "examples" / "check_your_own.py").read_text()


def run_example(python: str, bindir: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PYTHONPATH", None)
    return subprocess.run([python, "-c", readme_example()], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_readme_example_runs_and_proves(tmp_path):
    # PATH without the environment's bin folder: the README runs it as .venv/bin/python
    # without activating the environment
    done = run_example(sys.executable, "/nonexistent", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "every claim proved" in done.stdout and "exit code: 0" in done.stdout
    assert (tmp_path / "my_store" / "brackets.jsonl").is_file()
    again = run_example(sys.executable, "/nonexistent", tmp_path)
    assert again.returncode == 1 and "my_store exists already" in again.stderr
    assert "Traceback" not in again.stderr


def test_readme_api_example_runs_as_written(tmp_path):
    # it had placeholders (A = ..., U, V = ...) and an undefined k: it could not be run
    text = (ROOT / "README.md").read_text().split("## Python API", 1)[1]
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Check(holds, proved: factors rank 10 at eps 0.25")
    assert lines[1] == "holds" and lines[3] == "float64"
    assert lines[4] == "2 10 feasible impossible" and lines[5] == "proved proved"


def test_version_has_one_source(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"softrank-certify {softrank.__version__}"
    cff = (ROOT / "CITATION.cff").read_text()
    assert f'version: "{softrank.__version__}"' in cff
    from importlib.metadata import version

    assert version("softrank-certify") == softrank.__version__


@pytest.mark.parametrize("command", ["audit", "check", "diff", "export", "gauge", "grid",
                                     "oracle", "produce", "producers", "replayer"])
def test_every_command_answers_version(capsys, command):
    # `check --version` was a usage error (a store is required), `gauge --version` an
    # unrecognized argument
    with pytest.raises(SystemExit) as exc:
        main([command, "--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"softrank-certify {softrank.__version__}"


def test_python_dash_m_softrank():
    done = subprocess.run([sys.executable, "-m", "softrank", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and softrank.__version__ in done.stdout


def test_every_command_shares_quiet_and_verbose(capsys):
    from softrank.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 7
    for name, p in sub.choices.items():
        opts = {s for a in p._actions for s in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose"} <= opts, name


def test_every_package_folder_is_installed():
    """pyproject.toml lists packages explicitly (the folders are mapped under ``softrank``):
    a new subpackage that is not listed would be missing from the wheel."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    mapping = {"softrank": "softrank", "certify": "softrank.certify",
               "exact": "softrank.exact", "witnesses": "softrank.witnesses"}
    for top, name in mapping.items():
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / top).parts
            assert ".".join((name, *rel)) in listed, init
    for name, folder in conf["package-dir"].items():
        assert (ROOT / folder).is_dir(), name
