"""``audit`` against a hostile output folder or store: journal size, stale journaled records,
figure sizes, the Result line and reason words (each found by a review)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from softrank.audit import figures
from softrank.audit.journal import JOURNAL_NAME
from softrank.audit.provenance import producing_environments
from softrank.audit.report import result_line
from softrank.cli import main
from softrank.words import check_reason

from .test_audit import build_known_store


def _audit(store, out, *extra):
    return main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress",
                 *extra])


def test_an_oversized_journal_is_refused_unread_and_restart_never_reads_it(tmp_path, capsys):
    store, out = tmp_path / "s", tmp_path / "o"
    build_known_store(store, with_false=False)
    out.mkdir()
    with open(out / JOURNAL_NAME, "wb") as fh:  # sparse: costs the attacker no disk
        fh.truncate(200 << 20)
    assert _audit(store, out) == 2
    err = capsys.readouterr().err
    assert "more than a journal of this store can hold" in err and "--restart" in err
    assert _audit(store, out, "--restart") == 0


def test_journaled_input_errors_are_checked_again(tmp_path, capsys):
    store, out = tmp_path / "s", tmp_path / "o"
    build_known_store(store, with_false=False)
    rec = json.loads((store / "brackets.jsonl").read_text().splitlines()[0])
    path = store / rec["file"]
    good = path.read_bytes()
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    assert _audit(store, out) == 2
    path.write_bytes(good)  # repaired: the journaled error must not be reused
    capsys.readouterr()
    assert _audit(store, out) == 0
    assert "journaled input errors are checked again" in capsys.readouterr().err
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["input_errors"] == 0
    lines = (out / JOURNAL_NAME).read_text().count("\n")
    assert _audit(store, out) == 0  # the record written after the error now stands
    assert "checked again" not in capsys.readouterr().err
    assert (out / JOURNAL_NAME).read_text().count("\n") == lines


def test_two_records_naming_one_file_are_each_compared_with_their_own_digest(tmp_path):
    store, out = tmp_path / "s", tmp_path / "o"
    build_known_store(store, with_false=False)
    lines = [json.loads(x) for x in (store / "brackets.jsonl").read_text().splitlines()]
    a, b = lines[0], lines[1]
    assert a["sha256"] != b["sha256"]
    bytes_a, bytes_b = (store / a["file"]).read_bytes(), (store / b["file"]).read_bytes()
    b["file"] = a["file"]  # both name a's file; b's digest is of other bytes
    (store / "brackets.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (store / a["file"]).write_bytes(bytes_b)  # run 1: b reads right, a is an error
    assert _audit(store, out) == 2
    (store / a["file"]).write_bytes(bytes_a)  # now a reads right and b is the error
    assert _audit(store, out) == 2
    rep = json.loads((out / "report.json").read_text())
    assert [e["bracket"] for e in rep["errors"]] == [b["id"]]


def test_figures_draw_a_bounded_number_of_panels_and_short_eps_titles():
    pairs = [{"family": f"f{i:03d}", "eps": "1/4", "operator": f"o{i}", "lower": 2,
              "upper": 3, "resolved": True} for i in range(40)]
    pairs.append({"family": "zz", "eps": str(Fraction(1, 2**12000)), "operator": "x",
                  "lower": 1, "upper": 2, "resolved": True})
    fig = figures.brackets_figure(pairs)
    assert len(fig.axes) == figures.MAX_PANELS
    assert any("17 more are in the tables" in t.get_text() for t in fig.texts)
    assert figures._eps_title("1/4") == "= 0.25"
    long = figures._eps_title(str(Fraction(1, 2**12000)))
    assert long.startswith(r"\approx") and len(long) < 30


def test_the_chi_histogram_merges_families_past_its_legend():
    recs = [{"bracket": f"b{i}", "operator": f"o{i}", "family": f"f{i:02d}", "eps": "1/4",
             "chi": "1/1000", "shape": [4, 4]} for i in range(30)]
    fig = figures.chi_figure(recs)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == figures.MAX_LEGEND and labels[-1].startswith("19 other families")


def test_the_result_line_names_bracket_input_errors():
    s = {"brackets": 4, "all_proved": False, "claims_not_proved": 0, "input_errors": 1,
         "resolved_pairs": 2, "pairs": 3, "closed_pairs": 1}
    line = result_line(s, {})
    assert "1 stored bracket could not be checked" in line


@pytest.mark.parametrize("status,word", [("undecided", "not decided"), ("fails", "false")])
def test_a_check_without_enclosure_is_not_called_false_unless_it_failed(status, word):
    chk = {"status": status, "kind": "factors", "claim": "factors end of rank 5",
           "value": None, "tier": "float64", "reason": "work limit", "threshold": "1/4"}
    assert f"factors end of rank 5: {word} (work limit)" in check_reason(chk, "upper")


def test_software_entries_equal_as_json_are_the_budgets_own():
    sw = {"numpy": "2.0", "python": "3.11"}
    head = {"provenance": {"produce_budgets": [{"software": dict(reversed(sw.items()))}],
                           "producing_software": [sw] * 3}}
    env = producing_environments(head)
    assert env["count"] == 3 and env["other_than_budgets"] is False
    head["provenance"]["producing_software"].append({"numpy": "1.26"})
    assert producing_environments(head)["other_than_budgets"] is True
