"""``softrank-certify diff``: pure comparison of record lists, report and store inputs, bad
input."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction

import pytest

from softrank.audit import run_audit
from softrank.cli import main
from softrank.commands.diff import compare, format_text

from .test_audit import build_known_store


def rec(bid, op, eps, L, U, up="proved", lo="proved", family="f"):
    return {"bracket": bid, "operator": op, "family": family, "eps": eps, "shape": [16, 16],
            "lower": L, "upper": U, "upper_result": up, "lower_result": lo}


BASE = [rec("a1", "A", "1/4", 3, 5), rec("a2", "A", "1/4", 2, 6),
        rec("b1", "B", "1/4", 4, 4), rec("b2", "B", "3/8", 2, 9)]


def test_identical_records_change_nothing():
    res = compare(BASE, [dict(r) for r in reversed(BASE)], [4, 8])
    assert res["changed"] == [] and res["pairs_compared"] == 3
    assert format_text(res) == ["0 of 3 (operator, eps) pairs changed"]


def test_bracket_verdict_and_claim_changes_are_named_per_pair():
    new = [dict(r) for r in BASE]
    new[0] = rec("a1", "A", "1/4", 3, 16, up="does_not_hold")  # U of pair (A, 1/4) rises 5 -> 6
    res = compare(BASE, new, [4, 5, 8])
    assert [(c["operator"], c["eps"]) for c in res["changed"]] == [("A", "1/4")]
    c = res["changed"][0]
    assert c["changes"] == ["bracket", "verdicts", "claims"]
    assert (c["old"]["upper"], c["new"]["upper"]) == (5, 6)
    assert c["verdicts"] == {"5": ["feasible", "unresolved"]}
    assert c["claims"] == [{"bracket": "a1", "end": "upper", "old": "proved",
                            "new": "does_not_hold"}]
    assert "a1 upper proved -> does not hold" in format_text(res)[0]


def test_claim_change_without_bracket_change_is_still_named():
    new = [dict(r) for r in BASE]
    new[1] = rec("a2", "A", "1/4", 2, 16, up="weakened")  # a1 still gives U = 5
    res = compare(BASE, new, [4, 8])
    assert [c["changes"] for c in res["changed"]] == [["claims"]]


def test_added_removed_and_error_records():
    new = [r for r in BASE if r["operator"] != "B" or r["eps"] != "3/8"]
    new.append(rec("c1", "C", "1/4", 1, 2))
    new.append({"bracket": "b1", "operator": "B", "eps": "1/4", "error": "bad"})
    new = [r for r in new if not (r["bracket"] == "b1" and "error" not in r)]
    res = compare(BASE, new, [4])
    got = {(c["operator"], c["eps"]): c["changes"] for c in res["changed"]}
    assert got == {("B", "1/4"): ["bracket", "claims"], ("B", "3/8"): ["removed", "claims"],
                   ("C", "1/4"): ["added", "claims"]}
    b = next(c for c in res["changed"] if c["operator"] == "B" and c["eps"] == "1/4")
    assert b["new"] is None and b["claims"][0]["new"] == "error"
    c = next(c for c in res["changed"] if c["operator"] == "C")
    assert c["claims"][0]["old"] == "absent record" and c["old"] is None


def test_eps_spelled_differently_is_the_same_pair():
    new = [dict(r, eps="0.25") if r["eps"] == "1/4" else dict(r) for r in BASE]
    assert compare(BASE, new, [4])["changed"] == []


@pytest.fixture(scope="module")
def known_audit(tmp_path_factory):
    base = tmp_path_factory.mktemp("diff")
    store = base / "store"
    build_known_store(store)
    out = base / "audit"
    run_audit(store, out, budgets=(4, 8, 12), figures=False, bootstrap_resamples=50)
    return store, out


def test_report_against_store_and_store_against_store(known_audit, capsys):
    store, out = known_audit
    assert main(["diff", str(out / "report.json"), str(store), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["old"]["kind"] == "report" and res["new"]["kind"] == "store"
    assert res["changed"] == [] and res["budgets"] == [4, 8, 12]
    assert main(["diff", str(store), str(store), "--tier", "exact"]) == 0
    assert capsys.readouterr().out.strip().endswith("pairs changed")


def test_bad_inputs_exit_2(known_audit, tmp_path, capsys):
    store, out = known_audit
    assert main(["diff", str(tmp_path / "nope"), str(out)]) == 2
    not_report = tmp_path / "x.json"
    not_report.write_text('{"format": "something-else"}')
    assert main(["diff", str(not_report), str(out)]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "softrank-audit-report", "records": [{"bracket": 1}]}')
    assert main(["diff", str(broken), str(out)]) == 2
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe not json")
    assert main(["diff", str(garbage), str(out)]) == 2
    err = capsys.readouterr().err
    assert "input error" in err and "records" in err


def test_records_that_are_input_errors_are_exit_2_even_when_unchanged(known_audit, tmp_path,
                                                                      capsys):
    """A store whose every bracket file lost its digest gave "0 of N pairs changed", exit 0,
    against itself: an unchanged input error is still an input error (exit 2, named)."""
    store, _ = known_audit
    bad = tmp_path / "bad"
    shutil.copytree(store, bad)
    recs = [json.loads(x) for x in (bad / "brackets.jsonl").read_text().splitlines()]
    for r in recs:
        r["sha256"] = "0" * 64
    (bad / "brackets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    capsys.readouterr()
    assert main(["diff", str(bad), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "input error" in err and "sha256" in err and "exit 2" in err
    assert main(["diff", str(store), str(bad)]) == 2
    assert main(["diff", str(store), str(store)]) == 0


@pytest.mark.parametrize("eps", ["1e999999999", "1/" + "9" * 5000, "1/0"])
def test_an_eps_that_would_expand_to_a_billion_digits_is_refused(known_audit, tmp_path,
                                                                  capsys, eps):
    # eleven characters that Fraction() would expand to 10**999999999 (minutes, gigabytes)
    _, out = known_audit
    doc = json.loads((out / "report.json").read_text())
    doc["records"][0]["eps"] = eps
    hostile = tmp_path / "report.json"
    hostile.write_text(json.dumps(doc))
    assert main(["diff", str(out), str(hostile)]) == 2
    assert "records" in capsys.readouterr().err


def _hostile(out, tmp_path, edit, name="report.json"):
    doc = json.loads((out / "report.json").read_text())
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _first_pair_bracket(doc):
    r = doc["records"][0]
    return r, [x for x in doc["records"] if x["operator"] == r["operator"]]


def test_one_eps_spelled_two_ways_cannot_hide_a_changed_bracket(known_audit, tmp_path, capsys):
    """Rows were grouped by the eps text: a report with "1/4" and "0.25" for one operator made
    two rows of one key, the later hiding the earlier, and a changed bracket read as none."""
    _, out = known_audit

    def split(doc):
        recs = doc["records"]
        key = next(k for k in sorted({(r["operator"], r["eps"]) for r in recs})
                   if sum((r["operator"], r["eps"]) == k for r in recs) >= 2
                   and all(r.get("upper") for r in recs if (r["operator"], r["eps"]) == k))
        first, second = [r for r in recs if (r["operator"], r["eps"]) == key][:2]
        first["upper"] = min(r["upper"] for r in recs if (r["operator"], r["eps"]) == key) - 1
        recs.remove(second)
        second["eps"] = str(float(Fraction(second["eps"])))  # the same exact number
        recs.append(second)

    hostile = _hostile(out, tmp_path, split)
    assert main(["diff", str(out), str(hostile), "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert [c["changes"] for c in res["changed"]] == [["bracket"]]


def test_a_bracket_id_twice_is_refused(known_audit, tmp_path, capsys):
    _, out = known_audit

    def dup(doc):
        r = doc["records"][0]
        doc["records"].insert(0, dict(r, upper_result="does_not_hold",
                                      lower_result="does_not_hold"))

    assert main(["diff", str(out), str(_hostile(out, tmp_path, dup))]) == 2
    err = capsys.readouterr().err
    assert "appears twice" in err and "records[1].bracket" in err


@pytest.mark.parametrize("bad", ["b\\u001b", "op0 ", "", "a" * 129, "-lead"])
def test_ids_outside_the_store_rule_are_refused(known_audit, tmp_path, capsys, bad):
    _, out = known_audit
    hostile = _hostile(out, tmp_path, lambda d: d["records"][0].update(operator=bad))
    assert main(["diff", str(out), str(hostile)]) == 2
    assert "records[0].operator" in capsys.readouterr().err


def test_a_changed_claimed_rank_is_a_change(known_audit, tmp_path, capsys):
    _, out = known_audit

    def rerank(doc):
        r = next(x for x in doc["records"] if isinstance(x.get("upper_check"), dict))
        r["upper_check"]["rank"] = r["upper_check"]["rank"] + 3

    assert main(["diff", str(out), str(_hostile(out, tmp_path, rerank)), "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert [c["changes"] for c in res["changed"]] == [["claims"]]


def test_report_size_budgets_and_links_are_refused_before_work(known_audit, tmp_path, capsys):
    _, out = known_audit
    many = _hostile(out, tmp_path, lambda d: d["options"].update(budgets=list(range(1, 66))))
    assert main(["diff", str(out), str(many)]) == 2
    assert "options.budgets" in capsys.readouterr().err
    assert main(["diff", str(out), str(out), "--budgets", ",".join(map(str, range(1, 66)))]) == 2
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    assert main(["diff", str(out), str(big), "--max-json", "1"]) == 2
    assert "--max-json" in capsys.readouterr().err
    folder = tmp_path / "linked"
    folder.mkdir()
    (folder / "report.json").symlink_to(out / "report.json")
    assert main(["diff", str(out), str(folder)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert main(["diff", str(out), str(out)]) == 0


def test_the_same_operator_id_on_another_shape_is_a_change():
    new = [dict(r, shape=[32, 32]) if r["operator"] == "B" else dict(r) for r in BASE]
    res = compare(BASE, new, [4])
    assert {(c["operator"], c["eps"]): c["changes"] for c in res["changed"]} == {
        ("B", "1/4"): ["operator"], ("B", "3/8"): ["operator"]}


def test_a_store_folder_with_a_report_in_it_is_refused(known_audit, tmp_path, capsys):
    """Read as a report, a report.json planted in a store folder stood in for the recheck of
    the store's brackets (a changed claim read as "0 changed", exit 0)."""
    import shutil

    store, out = known_audit
    planted = tmp_path / "store"
    shutil.copytree(store, planted)
    shutil.copy(out / "report.json", planted / "report.json")
    assert main(["diff", str(out), str(planted)]) == 2
    err = capsys.readouterr().err
    assert "both report.json and store.json" in err
    # naming the file compares the report, and the text output says what each side was
    assert main(["diff", str(out), str(planted / "report.json")]) == 0
    assert "old is a report" in capsys.readouterr().err


@pytest.mark.parametrize("mib", ["1000000", "99999999999999", "0", "-3"])
def test_max_json_out_of_range_is_a_usage_error(known_audit, capsys, mib):
    _, out = known_audit
    assert main(["diff", str(out), str(out), "--max-json", mib]) == 2
    assert "--max-json" in capsys.readouterr().err


def test_a_large_max_json_reads_only_the_file(known_audit, capsys):
    _, out = known_audit
    assert main(["diff", str(out), str(out), "--max-json", "4096"]) == 0
