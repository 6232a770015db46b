"""CLI: softrank-certify oracle / grid / gauge (exit codes, JSON, errors naming file+field)."""

from __future__ import annotations

import json
import sys

import pytest

from softrank.cli import main


def _cell(tmp_path, name="cell.json", **doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_oracle_decided_and_json(tmp_path, capsys):
    path = _cell(tmp_path, matrix=[["1/2", "1/2"], ["1/2", "1/2"]], eps="1/4",
                 mode="unrestricted")
    assert main(["oracle", path]) == 0
    assert "r_eps = 1 (decided)" in capsys.readouterr().out
    assert main(["oracle", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rank"] == 1 and out["decided"] and out["witness"]["rank"] == 1


def test_oracle_stochastic_gap(tmp_path, capsys):
    path = _cell(tmp_path, matrix=[["1", "0"], ["1/2", "1/2"]], eps="1/3", mode="stochastic")
    assert main(["oracle", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rank"] == 2 and out["lower_certificate"]["kind"] == "rank-one-refutation"
    assert out["rank_one_search"]["farkas_nodes"]


def test_oracle_bracket_exit_1(tmp_path, capsys):
    rows = [[22, 22, 20, 23, 21], [20, 21, 20, 22, 23], [21, 23, 20, 21, 20],
            [21, 23, 22, 21, 23], [21, 20, 21, 23, 21]]
    mat = [[f"{x}/{sum(r)}" for x in r] for r in rows]
    path = _cell(tmp_path, matrix=mat, eps="1/50")
    code = main(["oracle", path, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["decided"] else 1)
    # the default budget closes it ([3, 3] by a nerve chain); with no time for the optional
    # steps the bracket stays open: exit 1, and the note says why
    code = main(["oracle", path, "--json", "--budget", "0"])
    out = json.loads(capsys.readouterr().out)
    assert not out["decided"] and code == 1
    assert any("budget" in n for n in out["notes"])
    # this 5 x 5 cell is beyond the complete rank-one search
    assert main(["oracle", path, "--complete"]) == 2
    assert "too large" in capsys.readouterr().err


@pytest.mark.parametrize("doc,field", [
    ({"eps": "1/4"}, "matrix"),
    ({"matrix": [["1", "x"]], "eps": "1/4"}, "matrix[0][1]"),
    ({"matrix": [["1", "0"]], "eps": "5/4"}, "eps"),
    ({"matrix": [["1", "0"]], "eps": "1/4", "mode": "doubly"}, "mode"),
    ({"matrix": [["1", "0"], ["1"]], "eps": "1/4"}, "matrix[1]"),
    ({"matrix": [["1"]], "eps": "1/4", "rank": 3}, "rank"),
])
def test_oracle_bad_input(tmp_path, capsys, doc, field):
    path = _cell(tmp_path, **doc)
    assert main(["oracle", path]) == 2
    err = capsys.readouterr().err
    assert path in err and field in err


def test_oracle_missing_and_broken_file(tmp_path, capsys):
    assert main(["oracle", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["oracle", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_grid_table_and_plot(tmp_path, capsys):
    png = tmp_path / "grid.png"
    args = ["grid", "--r", "2", "--eps", "1/4", "--L", "3", "5", "8", "12", "20"]
    assert main([*args, "--json", "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000
    rows = json.loads(capsys.readouterr().out)
    assert [r["r_eps"] for r in rows] == [9, 25, 64, 144, 400]
    assert [round(r["kappa_value"], 4) for r in rows] == [12.2411, 48.9643, 149.9533,
                                                          370.2928, 1104.7578]
    assert all(r["rank_C"] == 2 for r in rows)
    assert main(["grid", "--r", "2", "--eps", "1/4", "--L", "3", "5", "8"]) == 0
    out = capsys.readouterr().out
    for v in ("12.2411", "48.9643", "149.9533"):
        assert v in out


def test_grid_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = main(["grid", "--r", "1", "--eps", "1/4", "--L", "2", "--plot",
                 str(tmp_path / "x.png")])
    assert code == 2 and "matplotlib is required" in capsys.readouterr().err


def test_grid_bad_eps(capsys):
    assert main(["grid", "--r", "2", "--eps", "0", "--L", "3"]) == 2
    assert "--eps:" in capsys.readouterr().err
    assert main(["grid", "--r", "0", "--eps", "1/4", "--L", "3"]) == 2
    assert "--r:" in capsys.readouterr().err
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", "1"]) == 2
    assert "--L:" in capsys.readouterr().err
    assert main(["gauge", "--beta", str(2**3000), "--t", "1"]) == 2
    assert "--beta:" in capsys.readouterr().err


def test_gauge_table(capsys):
    assert main(["gauge", "--beta", "1", "--t", "0", "2", "5", "10", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["Gamma"] for r in rows] == ["1", "5", "26", "101"]
    assert all(r["kappa"] == "1" and r["A_unchanged"] for r in rows)
    assert main(["gauge", "--beta", "beta", "--t", "2"]) == 0
    assert "5*beta" in capsys.readouterr().out
    assert main(["gauge", "--beta", "-1"]) == 2


@pytest.mark.parametrize("name,rank", [("gap_unrestricted", 1), ("gap_stochastic", 2),
                                       ("identity_2x2", 2)])
def test_fixture_cells(capsys, name, rank):
    from pathlib import Path

    path = Path(__file__).parent / "data" / "cells" / f"{name}.json"
    assert main(["oracle", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rank"] == rank and out["witness"]["rank"] == rank


def test_oracle_prints_a_long_exact_value_short_and_json_whole(tmp_path, capsys):
    # a 10 x 10 cell's exact error printed as a fraction of about 450 digits
    eps = f"{10**70 + 1}/{4 * 10**70}"
    path = _cell(tmp_path, matrix=[["1/2", "1/2"], ["1/2", "1/2"]], eps=eps)
    assert main(["oracle", path]) == 0
    out = capsys.readouterr().out
    assert "eps = 0.250000000000 (rounded down to 12 digits; the exact value has 143" in out
    assert max(len(line) for line in out.splitlines()) < 200
    assert main(["oracle", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["eps"] == eps
