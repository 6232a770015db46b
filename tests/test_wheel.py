"""The wheel: one namespace in site-packages, proof notes inside, a working install.

Builds the wheel, installs it into a fresh venv with no repository on the path, and runs
``softrank-certify --version``, ``check`` on a copy of the example store and the README's
"check your own claims" example verbatim.  Slow (a venv and an install): ``make test-wheel``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import softrank

from .test_newcomer import ROOT, run_example

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "repo"
    # build from a copy so that build/ and *.egg-info never land in the working tree
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        "demo-report", "arrays"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-qq", "--no-deps",
                           str(src), "-w", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    (whl,) = out.glob("*.whl")
    return whl


def test_wheel_claims_only_its_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"softrank", f"softrank_certify-{softrank.__version__}.dist-info"}, top
    notes = {Path(n).name for n in names if n.startswith("softrank/proofs_notes/")}
    assert {"upper.md", "rounding.md", "slack.md"} <= notes
    assert any(n.endswith("licenses/LICENSE") for n in names)


def test_fresh_venv_install_runs(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py, bindir = env_dir / "bin" / "python", env_dir / "bin"
    done = subprocess.run([str(py), "-m", "pip", "install", "-qq", str(wheel)],
                          capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cli = str(bindir / "softrank-certify")
    done = subprocess.run([cli, "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and softrank.__version__ in done.stdout
    store = tmp_path / "store"
    shutil.copytree(ROOT / "examples" / "minilm", store)
    done = subprocess.run([cli, "check", str(store), "-q"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every claim proved" in done.stdout
    work = tmp_path / "work"
    work.mkdir()
    done = run_example(str(py), str(bindir), work)
    assert done.returncode == 0, done.stderr
    assert "exit code: 0" in done.stdout
