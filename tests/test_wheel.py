"""The wheel: one namespace in site-packages, proof notes inside, a working install.

Builds the wheel, installs it into a fresh venv with no repository on the path, and runs
``softrank-certify --version``, ``check`` on a copy of the example store, the README's
"check your own claims" example verbatim, then ``export`` of that example's store and the
installed replayer on the bundle: ``softrank-replay`` and the file ``softrank-certify
replayer`` writes.  Slow (a venv and an install): ``make test-wheel``.
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
    whl = zipfile.ZipFile(wheel)
    names = whl.namelist()
    top = {n.split("/")[0] for n in names}
    # softrank_replay: the replayer, apart so that running it never imports softrank
    assert top == {"softrank", "softrank_replay",
                   f"softrank_certify-{softrank.__version__}.dist-info"}, top
    assert {n for n in names if n.startswith("softrank_replay/")
            and not n.endswith((".pyc", "/"))} == {"softrank_replay/__init__.py",
                                                  "softrank_replay/cli.py",
                                                  "softrank_replay/replay.py"}
    # the installed replayer is the repository's file itself, byte for byte
    assert whl.read("softrank_replay/replay.py") == (ROOT / "replay" / "replay.py").read_bytes()
    scripts = whl.read(f"softrank_certify-{softrank.__version__}.dist-info/entry_points.txt")
    assert "softrank-replay = softrank_replay.cli:main" in scripts.decode()
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
    # the software record of a produced store digests the installed producer sources, which
    # must be the repository's own
    from softrank.software import producer_sources_sha256

    probe = "from softrank.software import producer_sources_sha256 as d; print(d())"
    done = subprocess.run([str(py), "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == producer_sources_sha256()
    work = tmp_path / "work"
    work.mkdir()
    done = run_example(str(py), str(bindir), work)
    assert done.returncode == 0, done.stderr
    assert "exit code: 0" in done.stdout
    _replay_installed(py, bindir, work)


def _replay_installed(py: Path, bindir: Path, work: Path) -> None:
    """The README's "check your own claims" store, exported and replayed by the installed
    replayer: the console script, and the file a referee gets from ``replayer --out``."""
    bundle = work / "B.zip"
    done = subprocess.run([str(bindir / "softrank-certify"), "export", "my_store", "--out",
                           str(bundle)], capture_output=True, text=True, cwd=work, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([str(bindir / "softrank-replay"), str(bundle)], capture_output=True,
                          text=True, cwd=work, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "disagreements 0" in done.stdout and "replay holds, kernel holds" in done.stdout
    ends = int(done.stdout.split(" ends; ")[0].rsplit(" ", 1)[1])
    assert ends > 0 and f"replay confirmed {ends}" in done.stdout
    # a tampered bundle is refused with exit 2 (the console script keeps replay.py's codes)
    bad = work / "bad.zip"
    bad.write_bytes(bundle.read_bytes()[:-40])
    done = subprocess.run([str(bindir / "softrank-replay"), str(bad)], capture_output=True,
                          text=True, cwd=work, timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    # what the console script loads: the standard library and the replayer, nothing of softrank
    probe = ("import sys; import softrank_replay.cli; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'softrank'))")
    done = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=work)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    # the referee's copy: written from the install, run by a bare interpreter without site
    ref = work / "referee_replay.py"
    done = subprocess.run([str(bindir / "softrank-certify"), "replayer", "--out", str(ref)],
                          capture_output=True, text=True, cwd=work)
    assert done.returncode == 0, done.stderr
    assert ref.read_bytes() == (ROOT / "replay" / "replay.py").read_bytes()
    done = subprocess.run([sys.executable, "-S", str(ref), str(bundle), "-q"],
                          capture_output=True, text=True, cwd=work, timeout=1200)
    assert done.returncode == 0 and "disagreements 0" in done.stdout, done.stderr
