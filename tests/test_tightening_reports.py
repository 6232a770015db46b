"""Brackets tightened across eps in ``check`` and ``audit``: a store whose per-eps brackets
are loose but tighten.

Operator ``blk`` is three 2 x 2 blocks of 1/2 (rank 3, every entry exact in float64):
* at eps 0.35 a submatrix certificate (rows = cols = 0, 2, 4, M = I/2, X = 2 I: the value
  ||I - XM||_inf + ||X||_inf eps = 0.7 < 1) proves L = 3, with exact rank-6 factors (U = 6);
* at eps 0.25 a nonzero claim (L = 1) with the same rank-6 factors (U = 6);
* at eps 0.15 exact rank-3 factors (U = 3) and no lower claim (L = 1, the nonzero fallback).
So per eps no bracket is closed, and tightened every one is [3, 3]: L from the 0.35 bracket,
U from the 0.15 bracket.  Operator ``one`` (2 x 2 of 1/2, eps 0.25) is closed per eps by
rank-1 factors and its nonzero fallback.  Every expectation below is derived here from these
facts, not read off the program.  Bracket ids hold '_' and '.', which Markdown and LaTeX
must escape.
"""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank.audit import tightening
from softrank.audit.report import build_report, report_latex, report_markdown
from softrank.audit.tables import group_pairs
from softrank.cli import main
from softrank.witnesses import Store

E15, E25, E35 = Fraction(15, 100), Fraction(25, 100), Fraction(35, 100)
LO, MID, UP, ONE = "b_lo.35", "b_mid.25", "b_up.15", "c_one.25"


def _blocks() -> np.ndarray:
    A = np.zeros((6, 6))
    for b in range(3):
        A[2 * b:2 * b + 2, 2 * b:2 * b + 2] = 0.5
    return A


def build_tightening_store(path: Path) -> Path:
    A = _blocks()
    U3 = A[:, [0, 2, 4]].copy()  # A = U3 V3 exactly: V3 sums the two columns of a block
    V3 = np.zeros((3, 6))
    for b in range(3):
        V3[b, 2 * b:2 * b + 2] = 1.0
    full = {"kind": "factors", "rank": 6, "U": A.copy(), "V": np.eye(6)}
    sub = {"kind": "submatrix", "rank": 3, "rows": np.array([0, 2, 4]),
           "cols": np.array([0, 2, 4]), "X": 2.0 * np.eye(3)}
    B = np.full((2, 2), 0.5)
    with Store.create(path, description="tightening test store") as st:
        st.add_operator(A, family="blocks", id="blk")
        st.add_bracket("blk", "7/20", full, sub, id=LO)
        st.add_bracket("blk", "1/4", full, {"kind": "nonzero", "rank": 1}, id=MID)
        st.add_bracket("blk", "3/20", {"kind": "factors", "rank": 3, "U": U3, "V": V3},
                       None, id=UP)
        st.add_operator(B, family="single", id="one")
        st.add_bracket("one", "1/4", {"kind": "factors", "rank": 1, "U": B[:, :1].copy(),
                                      "V": np.ones((1, 2))}, None, id=ONE)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return build_tightening_store(tmp_path_factory.mktemp("tight") / "store")


# what the facts above give
OWN = {LO: (3, 6), MID: (1, 6), UP: (1, 3), ONE: (1, 1)}
TIGHT = {LO: (3, 3), MID: (3, 3), UP: (3, 3), ONE: (1, 1)}


def test_check_json_has_tightened_ends_citations_and_counts(store, capsys):
    assert main(["check", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    recs = {r["bracket"]: r for r in doc["records"]}
    assert set(recs) == set(OWN)
    for bid, r in recs.items():
        assert (r["lower"], r["upper"]) == OWN[bid], bid
        t = r["tightened"]
        assert (t["lower"], t["upper"]) == TIGHT[bid], bid
        assert t["consistent"] and t["closed"]
        assert t["changed"] == (OWN[bid] != TIGHT[bid])
    for bid in (LO, MID, UP):
        t = recs[bid]["tightened"]
        assert t["lower_from"] == {"bracket": LO, "eps": "7/20", "kind": "submatrix",
                                   "fallback": False}
        assert t["upper_from"] == {"bracket": UP, "eps": "3/20", "kind": "factors",
                                   "fallback": False}
    # the single pair of "one" cites itself, its L as the nonzero fallback
    assert recs[ONE]["tightened"]["lower_from"] == {"bracket": ONE, "eps": "1/4",
                                                    "kind": "nonzero", "fallback": True}
    c = doc["summary"]["tightened"]
    assert (c["pairs"], c["closed_per_eps"], c["closed"], c["changed"], c["inconsistent"]) \
        == (4, 1, 4, 3, 0)
    # within criterion (U <= 2L, U - L <= 2 or 10 (U - L) <= 6): per eps [3,6], [1,3], [1,1]
    assert (c["resolved_per_eps"], c["resolved"]) == (3, 4)
    assert doc["internal_errors"] == []


def test_check_verbose_shows_tightened_brackets_only_where_they_differ(store, capsys):
    assert main(["check", str(store), "-v"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.split()
             and ln.split()[0] in OWN}
    assert set(lines) == set(OWN)
    assert lines[UP].endswith(f"tightened [3, 3] (L from {LO} at eps 0.35 (submatrix))")
    assert lines[LO].endswith(f"tightened [3, 3] (U from {UP} at eps 0.15 (factors))")
    assert lines[MID].endswith(f"tightened [3, 3] (L from {LO} at eps 0.35 (submatrix), "
                               f"U from {UP} at eps 0.15 (factors))")
    assert "tightened" not in lines[ONE]
    assert "closed (L = U): 1 per eps, 4 after tightening across eps (3 pairs narrowed" in out
    assert "3 of 4 within the study's criterion per eps, 4 after tightening across eps" in out


def _contradicting(records: list[dict]) -> list[dict]:
    """The records with the 0.35 bracket's L raised above the U proved at 0.15: what a
    kernel bug would produce (proved ends cannot contradict)."""
    return [{**r, "lower": 5} if r["bracket"] == LO else r for r in records]


def test_check_reports_contradicting_tightened_ends_as_internal_error(store, capsys,
                                                                        monkeypatch):
    from softrank.commands import check
    from softrank.runner import iter_checks

    def bad_checks(*args, **kwargs):
        return iter(_contradicting(list(iter_checks(*args, **kwargs))))

    monkeypatch.setattr(check, "iter_checks", bad_checks)
    assert main(["check", str(store), "-v"]) == 3
    cap = capsys.readouterr()
    assert "tightened [5" not in cap.out and "[5, 3]" not in cap.out
    assert "INTERNAL ERROR" in cap.out and "exit 3" in cap.out
    assert f"L = 5 from {LO} at eps 0.35 (submatrix) > U = 3 from {UP}" in cap.err
    assert main(["check", str(store), "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["tightened"]["inconsistent"] == 3  # the three eps of blk
    assert {x["eps"] for x in doc["internal_errors"]} == {"3/20", "1/4", "7/20"}


@pytest.fixture(scope="module")
def audited(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("tight_audit") / "out"
    code = main(["audit", str(store), "--out", str(out), "--budgets", "2,3,6",
                 "--no-figures", "--resamples", "20", "--quiet"])
    return out, code


def test_report_json_counts_closures_and_budgets_on_tightened_brackets(audited):
    out, code = audited
    assert code == 0
    rep = json.loads((out / "report.json").read_text())
    s = rep["summary"]
    assert s["closed_pairs"] == 1 and s["resolved_pairs"] == 3
    t = s["tightened"]
    assert (t["closed_per_eps"], t["closed"], t["resolved"], t["changed"]) == (1, 4, 4, 3)
    # tightened [3, 3] at every eps of blk and [1, 1] for one: k = 2 is impossible for blk
    # and feasible for one, k >= 3 feasible for all
    assert t["budgets"]["2"] == {"feasible": 1, "impossible": 3, "unresolved": 0,
                                 "inconsistent": 0}
    assert t["budgets"]["3"]["feasible"] == 4 and t["budgets"]["6"]["feasible"] == 4
    pairs = {(p["operator"], Fraction(p["eps"])): p for p in rep["pairs"]}
    p = pairs[("blk", E25)]
    assert (p["lower"], p["upper"]) == (1, 6) and p["budgets"]["3"] == "unresolved"
    assert (p["tightened"]["lower"], p["tightened"]["upper"]) == (3, 3)
    assert p["tightened"]["budgets"]["3"] == "feasible"
    assert p["tightened"]["budgets"]["2"] == "impossible"
    recs = {r["bracket"]: r for r in rep["records"]}
    assert recs[MID]["tightened"]["lower_from"]["bracket"] == LO
    # the budgets table counts tightened verdicts: at eps 0.25 blocks, k = 3 all feasible
    rows = rep["tables"]["budgets"]["rows"]
    row = next(r for r in rows if r[:3] == ["blocks", "0.25", "3"])
    assert row[4:] == ["100.0%", "0.0%", "0.0%"]
    trow = next(r for r in rep["tables"]["tightened"]["rows"] if r[:2] == ["blocks", "0.25"])
    assert trow[2:] == ["1", "1", "0", "1", "0", "1"]
    g = next(g for g in rep["groups"] if (g["family"], g["eps"]) == ("blocks", "1/4"))
    assert (g["tightened"]["median_lower"], g["tightened"]["median_upper"]) == ("3", "3")
    assert rep["tables"]["tightened"]["columns"][3] == "Narrowed"


def test_per_head_csv_has_tightened_ends_and_their_sources(audited):
    out, _ = audited
    rows = list(csv.DictReader((out / "per_head.csv").read_text().splitlines()))
    by = {(r["operator"], r["eps"]): r for r in rows}
    r = by[("blk", "0.25")]
    assert (r["L"], r["U"], r["tight_L"], r["tight_U"]) == ("1", "6", "3", "3")
    assert r["tight_L_from"] == f"{LO} at eps 0.35 (submatrix)"
    assert r["tight_U_from"] == f"{UP} at eps 0.15 (factors)"
    assert by[("one", "0.25")]["tight_L_from"] == f"{ONE} at eps 0.25 (nonzero fallback)"


def test_renderings_escape_store_ids_in_citations(audited):
    out, _ = audited
    md = (out / "report.md").read_text()
    assert "b\\_lo.35 at eps 0.35 (submatrix)" in md
    assert "b_lo.35" not in md.replace("`", "")  # never unescaped in a table cell
    assert "4 after tightening across eps" in md
    # the longtable names the eps each tightened end comes from (ids: CSV and report.json)
    tex = (out / "report-per-head.tex").read_text()
    row = next(ln for ln in tex.splitlines() if ln.startswith("blk & blocks & 0.25 &"))
    assert row.split(" & ")[8:] == ["3", "3", "0.35", "0.15 \\\\"]


def test_report_shows_contradicting_tightened_ends_as_internal_error(audited):
    out, _ = audited
    rep = json.loads((out / "report.json").read_text())
    bad = _contradicting(rep["records"])
    doc = build_report(bad, store=rep["store"], tier="auto", budgets=[2, 3],
                       environment=rep["environment"], methods=rep["methods"], figures=[],
                       run=rep["run"], bootstrap=(1, 5))
    assert doc["summary"]["exit_code"] == 3
    assert doc["summary"]["tightened"]["inconsistent"] == 3
    row = next(r for r in doc["per_head_table"]["rows"] if r[0] == "blk" and r[2] == "0.15")
    assert row[8:10] == ["internal error", "internal error"]
    md = report_markdown(doc)
    assert md.count("**INTERNAL ERROR:**") == 3 and "b\\_lo.35" in md
    assert "[5, 3]" not in md and "[5, 3]" not in report_latex(doc)
    tex = report_latex(doc)
    assert "Internal error:" in tex and "b\\_lo.35" in tex and "b_lo" not in tex


def test_tightened_brackets_from_records_alone():
    """The numbers layer on hand-made records: a lower end applies at smaller eps only, an
    upper end at larger eps only, ties cite the first bracket id at the pair's own eps."""
    def rec(bid, eps, L, U, op="o"):
        return {"bracket": bid, "operator": op, "family": "f", "eps": eps, "shape": [9, 9],
                "lower": L, "upper": U, "lower_outcome": "confirmed",
                "upper_outcome": "confirmed", "lower_kind": "decoder",
                "upper_check": {"kind": "factors"}, "lower_check": {"kind": "decoder"}}

    records = [rec("a", "1/2", 4, 9), rec("b", "1/4", 2, 5), rec("c", "1/8", 1, 7),
               rec("d", "1/4", 2, 6), rec("e", "1/2", 0, 2, op="p")]
    pairs = tightening.attach(group_pairs(records, [4]), records, [4])
    t = {(p["operator"], p["eps"]): p["tightened"] for p in pairs}
    assert (t[("o", "1/8")]["lower"], t[("o", "1/8")]["upper"]) == (4, 7)
    assert (t[("o", "1/4")]["lower"], t[("o", "1/4")]["upper"]) == (4, 5)
    assert (t[("o", "1/2")]["lower"], t[("o", "1/2")]["upper"]) == (4, 5)
    assert t[("o", "1/4")]["lower_from"]["bracket"] == "a"
    assert t[("o", "1/4")]["upper_from"]["bracket"] == "b"
    assert t[("o", "1/8")]["upper_from"]["bracket"] == "c"  # nothing at smaller eps
    assert t[("o", "1/2")]["budgets"]["4"] == "unresolved"
    assert t[("p", "1/2")]["changed"] is False
