"""The shipped store examples/glazier_L1H10: a real head whose bracket only a large `nerve`
certificate closes.  The kernel proves both ends and the standalone replayer agrees."""

from __future__ import annotations

import json
from pathlib import Path

from replay import replay as rp
from softrank.cli import main

STORE = Path(__file__).resolve().parents[1] / "examples" / "glazier_L1H10"


def test_the_kernel_proves_r_eps_six(capsys):
    assert main(["check", str(STORE), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (rec,) = doc["records"]
    assert rec["lower_result"] == "proved" and rec["upper_result"] == "proved"
    assert rec["lower"] == rec["upper"] == 6
    assert rec["lower_check"]["kind"] == "nerve"


def test_the_replayer_confirms_both_ends(tmp_path, capsys):
    out = tmp_path / "glazier.zip"
    assert main(["export", str(STORE), "--out", str(out), "-q"]) == 0
    got = rp.replay(str(out))
    assert [r["replay"] for r in got["results"]] == ["holds", "holds"]
    assert got["disagreements"] == 0
