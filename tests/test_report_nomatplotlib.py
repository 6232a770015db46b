"""``audit`` where matplotlib cannot be imported (a meta-path blocker installed through
sitecustomize in a subprocess): it refuses before checking anything unless --no-figures is
given, and it never names files it did not write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_audit import build_known_store

BLOCKER = '''
import sys

class _NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib' (blocked for this test)")
        return None

sys.meta_path.insert(0, _NoMatplotlib())
'''


def _run(args: list[str], site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    code = "import sys; from softrank.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("nompl")
    site = base / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    store = base / "store"
    build_known_store(store, with_false=False)
    return base, site, store


def test_the_blocker_works(setup):
    _, site, _ = setup
    check = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert check.returncode != 0 and "blocked for this test" in check.stderr


def test_audit_refuses_without_matplotlib_before_any_work(setup):
    base, site, store = setup
    out = base / "refused"
    proc = _run(["audit", str(store), "--out", str(out), "--no-progress"], site)
    assert proc.returncode == 2, proc.stderr
    assert "matplotlib" in proc.stderr and "--no-figures" in proc.stderr
    assert not out.exists()  # nothing checked, nothing written


def test_audit_with_no_figures_claims_no_figures(setup):
    base, site, store = setup
    out = base / "nofig"
    proc = _run(["audit", str(store), "--out", str(out), "--no-progress", "--no-figures",
                 "--resamples", "100"], site)
    assert proc.returncode == 0, proc.stderr
    assert "figures" not in proc.stdout
    assert "also report.tex, report.json)" in proc.stdout
    rep = json.loads((out / "report.json").read_text())
    assert rep["figures"] == [] and not (out / "figures").exists()
    js = _run(["audit", str(store), "--out", str(out), "--no-progress", "--no-figures",
               "--resamples", "100", "--json"], site)
    assert js.returncode == 0 and json.loads(js.stdout)["assumptions"] == rep["assumptions"]
    md = (out / "report.md").read_text()
    assert "## Figures" not in md and "- no figures were drawn" in md and "figures/" not in md
    for f in [*rep["figures"], "report.md", "report.tex", "report.json"]:
        assert (out / f).is_file()
