"""``producers``, ``grid`` and ``replayer`` on inputs a review made crash, run quadratically
or write through a link."""

from __future__ import annotations

import json
import os

import numpy as np

from softrank.cli import main
from softrank.commands.producers import compare, compare_lowers
from softrank.witnesses import Store


def test_a_reference_of_rank_0_gives_no_ratio_instead_of_a_crash(tmp_path, capsys):
    A = np.full((4, 4), 0.25)
    store = tmp_path / "s"
    with Store.create(store, description="rank 0") as st:
        op = st.add_operator(A, family="f")
        for prod in ("alt_l1", "tsvd"):  # eps 2 >= every row norm: rank 0 holds
            st.add_bracket(op, "2", upper={"kind": "factors", "rank": 0, "U": np.zeros((4, 0)),
                                           "V": np.zeros((0, 4))}, producer={"upper": prod})
    assert main(["producers", str(store), "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    text = json.dumps(doc)
    assert "alt_l1" in text and "tsvd" in text


def test_the_tables_group_rows_by_producer_in_one_pass():
    rows = [{"producer": f"p{i % 3}", "operator": f"o{i}", "eps": "1/4", "validated": 1 + i % 4,
             "status": "holds", "seconds": None, "full": 8} for i in range(12)]
    rows += [{"producer": "alt_l1", "operator": f"o{i}", "eps": "1/4", "validated": 2,
              "status": "holds", "seconds": None, "full": 8} for i in range(12)]
    t = compare(rows)
    assert {k: v["brackets"] for k, v in t.items()} == {"alt_l1": 12, "p0": 4, "p1": 4, "p2": 4}
    assert t["p1"]["median_ratio"] == 1.25  # validated 2, 1, 4, 3 over alt_l1's 2
    lows = [dict(r, kind="bernstein") for r in rows[:12]]
    tl = compare_lowers(lows, rows[12:], {"p9": {"seconds": 1, "runs": 1, "unreadable": 0}})
    assert tl["p9"]["certificates"] == 0 and tl["p0"]["certificates"] == 4


def test_grid_repeats_are_dropped_and_many_sides_refused(capsys):
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", "3", "3", "3", "--json"]) == 0
    assert [g["L"] for g in json.loads(capsys.readouterr().out)] == [3]
    sides = [str(L) for L in range(2, 80)]
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", *sides]) == 2
    assert "--L" in capsys.readouterr().err


def test_grid_sides_are_priced_together(capsys, monkeypatch):
    from softrank.exact import grid

    one = grid.grid_cost(1, 40, (1 - __import__("fractions").Fraction(1, 4)) / 8)
    monkeypatch.setattr(grid, "MAX_ROW_WORK", int(one[1] * 1.5))
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", "40", "--json"]) == 0
    capsys.readouterr()
    assert main(["grid", "--r", "1", "--eps", "1/4", "--L", "40", "39"]) == 2
    assert "together" in capsys.readouterr().err


def test_the_replayer_is_never_written_through_a_link(tmp_path, capsys):
    target = tmp_path / "target.py"
    link = tmp_path / "link.py"
    link.symlink_to(target)  # dangling
    assert main(["replayer", "--out", str(link)]) == 2
    assert not target.exists() and "exists" in capsys.readouterr().err
    assert main(["replayer", "--out", str(link), "--force"]) == 0
    assert not target.exists() and not link.is_symlink() and link.stat().st_size > 10_000
    evil = tmp_path / "a\x1b[31mb.py"
    assert main(["replayer", "--out", str(evil)]) == 0
    assert "\x1b" not in capsys.readouterr().out and os.path.exists(evil)


def test_the_replayer_refuses_a_folder(tmp_path, capsys):
    assert main(["replayer", "--out", str(tmp_path)]) == 2
    assert "directory" in capsys.readouterr().err
