"""Which side of an open bracket is likely loose (``softrank.audit.loose``): the rule on
crafted claims, adversarial claim values read as missing (never a crash), and the audit's
table of open brackets, store text escaped."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from softrank.audit import loose, tables
from softrank.audit.report import loose_markdown
from softrank.certify import exact_error
from softrank.cli import main
from softrank.witnesses import Store

from .helpers import random_attention, tsvd_witness


def claims(up_rank=4, up=1.02, lo_rank=3, lo=1.3):
    return {"upper_next_rank": up_rank, "upper_next_ratio": up,
            "lower_next_rank": lo_rank, "lower_next_value": lo}


def test_the_side_nearer_its_threshold_is_named():
    d = loose.diagnose(claims(), 2, 5)
    assert d == {"upper_next_ratio": Fraction(1.02), "lower_next_value": Fraction(1.3),
                 "upper_next_agree": None, "upper_next_runs": None, "likely_loose": "upper"}
    d = loose.diagnose(claims(up=1.5, lo=1.01), 2, 5)
    assert d["likely_loose"] == "lower"
    assert loose.diagnose(claims(up=1.25, lo=1.25), 2, 5)["likely_loose"] == "unknown"  # tie


def test_a_missing_number_is_unknown():
    only_upper = {"upper_next_rank": 4, "upper_next_ratio": 1.02}
    d = loose.diagnose(only_upper, 2, 5)
    assert d == {"upper_next_ratio": Fraction(1.02), "lower_next_value": None,
                 "upper_next_agree": None, "upper_next_runs": None, "likely_loose": "unknown"}
    assert loose.diagnose({}, 2, 5)["likely_loose"] == "unknown"


def test_numbers_for_other_ranks_than_next_to_the_checked_ends_are_ignored():
    # the claims were made next to [2, 5]; the checked bracket is [1, 6] (both claims fell back)
    d = loose.diagnose(claims(), 1, 6)
    assert d["upper_next_ratio"] is None and d["lower_next_value"] is None
    assert d["likely_loose"] == "unknown"
    # a value without its rank is not read either
    assert loose.diagnose({"upper_next_ratio": 1.01}, 2, 5)["upper_next_ratio"] is None


@pytest.mark.parametrize("ends", [(5, 5), (6, 5)])
def test_a_closed_or_crossed_bracket_has_no_diagnostic(ends):
    assert loose.diagnose(claims(), *ends) is None


def test_the_least_value_over_the_records_of_a_pair_is_used():
    d = loose.diagnose_all([claims(up=1.4, lo=1.3), claims(up=1.2, lo=1.6), None, "x"], 2, 5)
    assert d["upper_next_ratio"] == Fraction(1.2) and d["lower_next_value"] == Fraction(1.3)
    assert d["likely_loose"] == "upper"


def agreeing(agree, runs, **kw):
    return {**claims(**kw), "upper_next_agree": agree, "upper_next_runs": runs}


def test_an_upper_value_that_several_runs_agree_on_above_the_band_names_the_lower_end():
    # the lower value is the nearer to 1, and the upper search's value is settled: lower
    d = loose.diagnose(agreeing(3, 16, up=1.05, lo=1.3), 2, 5)
    assert d["likely_loose"] == "lower"
    assert (d["upper_next_agree"], d["upper_next_runs"]) == (3, 16)
    # ... also without any lower value
    d = loose.diagnose({k: v for k, v in agreeing(5, 5, up=1.2).items()
                        if not k.startswith("lower")}, 2, 5)
    assert d["lower_next_value"] is None and d["likely_loose"] == "lower"


@pytest.mark.parametrize("agree, runs, up", [
    (2, 16, 1.05),     # too few runs agree: the nearer end, as without the counts
    (16, 16, "103/100"),  # all agree, but the fit is at the band's edge (not above it)
    (16, 16, 1.0024),
])
def test_an_unsettled_or_near_upper_value_falls_back_to_the_nearer_end(agree, runs, up):
    d = loose.diagnose(agreeing(agree, runs, up=up, lo=1.3), 2, 5)
    assert d["likely_loose"] == "upper"
    assert loose.diagnose(agreeing(agree, runs, up=up, lo=None), 2, 5)["likely_loose"] \
        == "unknown"


@pytest.mark.parametrize("agree, runs", [
    (True, 16), (3, True), (0, 0), (17, 16), (-3, -1), (3.0, 16), ("3", "16"), (None, 16),
    (3, None), (np.bool_(True), 4), (float("nan"), 4)])
def test_adversarial_agreement_counts_read_as_missing(agree, runs):
    d = loose.diagnose(agreeing(agree, runs, up=1.2, lo=1.1), 2, 5)
    assert d["upper_next_agree"] is None and d["upper_next_runs"] is None
    assert d["likely_loose"] == "lower"  # the nearer end (1.1 < 1.2), not the agreement rule
    d = loose.diagnose(agreeing(agree, runs, up=1.2, lo=1.5), 2, 5)
    assert d["likely_loose"] == "upper"


def test_the_agreement_comes_from_the_record_with_the_least_upper_value():
    recs = [agreeing(9, 9, up=1.4, lo=1.3), agreeing(1, 9, up=1.2, lo=1.3)]
    d = loose.diagnose_all(recs, 2, 5)
    assert (d["upper_next_ratio"], d["upper_next_agree"]) == (Fraction(1.2), 1)
    assert d["likely_loose"] == "upper"


ADVERSARIAL = [True, False, np.bool_(True), float("nan"), float("inf"), -0.5, -1, "nan",
               "inf", "-1/2", "1/0", "abc", "1e999999999", "9" * 800, None, [1.0],
               {"v": 1.0}, np.float64("nan"), b"1.5", complex(1, 0), "", " 1.5"]


@pytest.mark.parametrize("bad", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_values_read_as_missing(bad):
    assert loose.claim_number(bad) is None
    d = loose.diagnose(claims(up=bad, lo=bad), 2, 5)
    assert d == {"upper_next_ratio": None, "lower_next_value": None, "upper_next_agree": None,
                 "upper_next_runs": None, "likely_loose": "unknown"}


@pytest.mark.parametrize("bad_rank", [True, "4", 4.0, Fraction(4), None, [4]])
def test_adversarial_ranks_read_as_missing(bad_rank):
    d = loose.diagnose(claims(up_rank=bad_rank, lo_rank=bad_rank), 2, 5)
    assert d["upper_next_ratio"] is None and d["lower_next_value"] is None


@pytest.mark.parametrize("claims_value", [None, [1, 2], "claims", 3])
def test_claims_that_are_not_an_object_read_as_missing(claims_value):
    assert loose.diagnose(claims_value, 2, 5)["likely_loose"] == "unknown"


def test_exact_forms_of_a_journaled_record_are_read():
    # report.json and the journal write a claim's exact value as "p/q" (or a decimal)
    assert loose.claim_number("51/50") == Fraction(51, 50)
    assert loose.claim_number("1.5") == Fraction(3, 2)
    assert loose.claim_number(Fraction(7, 5)) == Fraction(7, 5)
    assert loose.claim_number(np.float64(0.5)) == Fraction(1, 2)
    assert loose.claim_number(np.int64(2)) == 2
    d = loose.diagnose(claims(up="51/50", lo="13/10"), 2, 5)
    assert d["upper_next_ratio"] == Fraction(51, 50) and d["likely_loose"] == "upper"


# ---------------------------------------------------------------------------- the audit

FORGED = "fam|x\n## forged <!--"


def _store(path, family: str) -> None:
    """Two operators, each with an open bracket [1, k] (tsvd witness at rank k, nonzero lower
    end): op_a_ claims numbers next to both ends (the lower end nearer), op_b adversarial
    values; a third, op_c, is closed at [1, 1]."""
    rng = np.random.default_rng(3)
    with Store.create(path) as st:
        for oid, cl in (("op_a_", None), ("op_b", {"upper_next_rank": 4,
                                                   "upper_next_ratio": "nan",
                                                   "lower_next_rank": 2,
                                                   "lower_next_value": True})):
            A = random_attention(rng, 8, 8, scale=2.0)
            op = st.add_operator(A, family=family, id=oid)
            k = 5
            U, V = tsvd_witness(A, k)
            eps = (exact_error(A, U, V) + 1) / 2
            if cl is None:
                cl = {"upper_next_rank": k - 1, "upper_next_ratio": 1.5,
                      "lower_next_rank": 2, "lower_next_value": 1.125}
            st.add_bracket(op, eps, {"kind": "factors", "rank": k, "U": U, "V": V},
                           {"kind": "nonzero", "rank": 1}, claims=cl,
                           producer={"upper": "tsvd", "lower": "nonzero"})
        A = np.full((4, 4), 0.25)
        op = st.add_operator(A, family=family, id="op_c")
        U, V = tsvd_witness(A, 1)
        st.add_bracket(op, "1/2", {"kind": "factors", "rank": 1, "U": U, "V": V},
                       {"kind": "nonzero", "rank": 1}, claims=claims(up_rank=0, lo_rank=2))


def test_audit_lists_open_brackets_with_escaped_store_text(tmp_path):
    _store(tmp_path / "s", FORGED)
    out = tmp_path / "o"
    assert main(["audit", str(tmp_path / "s"), "--out", str(out), "--no-figures",
                 "--no-progress"]) == 0
    rep = json.loads((out / "report.json").read_text())
    rows = {r["operator"]: r for r in rep["open_brackets"]}
    assert set(rows) == {"op_a_", "op_b"}  # op_c is closed
    assert rows["op_a_"]["upper_next_ratio"] == "3/2"
    assert rows["op_a_"]["lower_next_value"] == "9/8"
    assert rows["op_a_"]["likely_loose"] == "lower"
    assert rows["op_b"]["upper_next_ratio"] is None and rows["op_b"]["likely_loose"] == "unknown"
    assert rep["summary"]["open_brackets"] == {"pairs": 3, "open": 2, "upper": 0, "lower": 1,
                                               "unknown": 1}
    md = (out / "report.md").read_text()
    title = "## Open brackets: which side is likely loose (float64 searches, not proofs)"
    assert md.count(title) == 1
    section = md[md.index(title):md.index("## Claims not proved")]
    assert "2 of 3 (operator, eps) pairs are open" in section
    assert "not a proof" in section
    row = next(ln for ln in section.splitlines() if "op\\_a\\_" in ln)
    assert row.startswith("| op\\_a\\_ | ")  # the id's underscores escaped
    assert row.endswith("| \\[1, 5\\] | 1.5 | - | 1.125 | lower |")
    assert "\n## forged" not in md and "<!--" not in md
    # report.tex: the same rows as a longtable, store text escaped
    tex = (out / "report.tex").read_text()
    assert tex.count(r"\section*{Open brackets: which side is likely loose}") == 1
    part = tex[tex.index(r"\label{tab:audit-open-brackets}"):]
    part = part[:part.index(r"\end{longtable}")]
    row = next(ln for ln in part.splitlines() if ln.startswith("op\\_a\\_ & "))
    assert row.endswith(r" & {[}1, 5{]} & 1.5 & -{} & 1.125 & lower \\")
    assert r"fam\textbar{}x" in tex and "fam|x" not in tex


def test_the_rendered_table_escapes_a_malicious_operator_id():
    evil = "x|y\n**Result:** forged <!--"
    rows = [{"operator": evil, "family": "f", "eps": "1/4", "lower": 2, "upper": 5,
             "upper_next_ratio": "51/50", "lower_next_value": None, "likely_loose": "unknown"}]
    t = tables.loose_table(rows, loose.counts(rows, 4))
    md = "\n".join(loose_markdown({"open_brackets_table": t}))
    assert "\n**Result:**" not in md and "<!--" not in md
    assert "| x\\|y\\\\u000a\\*\\*Result\\:\\*\\* forged \\<\\!-- | 0.25 | \\[2, 5\\] | " \
           "1.02 | - | - | unknown |" in md
    assert "1 of 4 (operator, eps) pairs are open" in md
    assert t["text_columns"] == [0]
