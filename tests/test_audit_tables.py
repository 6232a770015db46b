"""Unit tests of the audit's pure parts: grouping, statistics, cells, journal, chunk plans."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from itertools import product

import numpy as np
import pytest

from softrank.audit import parse_budgets
from softrank.audit import tables as T
from softrank.audit.journal import JOURNAL_NAME, Journal, normalize
from softrank.certify.errors import InputError

# ------------------------------------------------------------------ predicates and statistics


def test_is_resolved_matches_the_definition_with_exact_tenths():
    for U, L, full in product(range(0, 41), range(0, 41), (1, 9, 10, 19, 20, 30, 256)):
        want = (U <= 2 * L) or (U - L <= 2) or (Fraction(U - L) <= Fraction(full, 10))
        assert T.is_resolved(U, L, full) is want, (U, L, full)


@pytest.mark.parametrize(("U", "L", "full", "want"), [
    (4, 2, 1000, True),     # U = 2L exactly
    (5, 2, 29, False),      # gap 3 > 2.9
    (5, 2, 30, True),       # gap 3 = 30/10 exactly
    (3, 0, 29, False),      # L = 0 is never within a factor 2; gap 3 > 2 and > 2.9
    (3, 0, 30, True),       # ... but 3 <= 30/10
    (2, 0, 1000, True),     # gap 2
    (57, 11, 256, False),   # BERT-like median bracket: 46 > 25.6
])
def test_is_resolved_boundaries(U, L, full, want):
    assert T.is_resolved(U, L, full) is want


def test_verdicts_partition_the_budgets():
    for k, U, L in product(range(0, 12), range(0, 12), range(0, 12)):
        v = T.verdict(k, U, L)
        assert v == ("feasible" if k >= U else "impossible" if k < L else "unresolved")


def test_exact_median_and_infinity():
    assert T.median([Fraction(x) for x in (3, 1, 2)]) == 2
    assert T.median([Fraction(x) for x in (4, 1, 2, 3)]) == Fraction(5, 2)
    assert T.median([Fraction(1), None, Fraction(3)]) == 3
    assert T.median([Fraction(1), None]) is None
    assert T.median([None, None, Fraction(1)]) is None
    assert T.median([Fraction(1, 3), Fraction(1, 2)]) == Fraction(5, 12)
    with pytest.raises(ValueError):
        T.median([])


@pytest.mark.parametrize(("q", "places", "want"), [
    (Fraction(17, 8), 2, "2.13"), (Fraction(-17, 8), 2, "-2.13"), (Fraction(1, 3), 2, "0.33"),
    (Fraction(0), 2, "0.00"), (Fraction(19991, 200), 1, "100.0"), (Fraction(7), 0, "7"),
    (Fraction(1, 1000), 2, "0.00"), (Fraction(2, 3) * 100, 1, "66.7"),
])
def test_fmt_decimal_rounds_half_away_from_zero(q, places, want):
    assert T.fmt_decimal(q, places) == want


@pytest.mark.parametrize(("eps", "want"), [
    ("1/4", "0.25"), ("3/8", "0.375"), ("1/10", "0.1"), ("3/20", "0.15"), ("7/20", "0.35"),
    ("1/2", "0.5"), ("1/3", "1/3"), ("1/100", "0.01"), ("1/1024", "0.0009765625"),
])
def test_fmt_eps_is_exact(eps, want):
    assert T.fmt_eps(eps) == want
    if "/" not in want:
        assert Fraction(want) == Fraction(eps)


def test_markdown_and_tex_escaping():
    t = {"title": "x_y eps", "columns": ["Family", "eps", "Shape", "n"],
         "rows": [["a|b_c & 50%", "0.25", "3 x 4", "inf"]]}
    md = T.markdown_table(t)
    assert "a\\|b\\_c \\& 50%" in md and md.count("\n") == 2
    tex = T.latex_table(t, "tab:x")
    assert r"a\textbar{}b\_c \& 50\%" in tex and r"3$\times$4" in tex and r"$\infty$" in tex
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"$\varepsilon$" in tex


def test_a_star_after_a_row_break_stays_text():
    """After \\\\ a "*" is read as the starred row break: a family "*b" printed as "b"."""
    t = {"title": "t", "columns": ["Family", "n"], "rows": [["a", "1"], ["*b", "2"]]}
    tex = T.latex_table(t, "tab:x")
    assert "{*}b" in tex and "\\\\\n*" not in tex and "\\\\*" not in tex


def test_parse_budgets():
    assert parse_budgets("32,8,16,8") == [8, 16, 32]
    assert parse_budgets(" 4 ") == [4]
    for bad in ("", "0,8", "-1", "8,x", "1.5", ",".join(map(str, range(1, 66)))):
        with pytest.raises(InputError):
            parse_budgets(bad)


# ------------------------------------------------------------------ grouping and cells


def rec(bracket, op, eps, L, U, *, family="f", shape=(20, 20), uo="proved", lo="proved"):
    return {"bracket": bracket, "operator": op, "family": family, "eps": eps,
            "shape": list(shape), "upper": U, "lower": L, "upper_result": uo,
            "lower_result": lo, "upper_claim": U, "lower_claim": L}


def test_group_pairs_takes_max_lower_and_min_upper_over_producers():
    records = [
        rec("b3", "op1", "1/4", 2, 9),
        rec("b1", "op1", "1/4", 5, 12, uo="undecided"),
        rec("b2", "op1", "1/4", 5, 9, lo="does_not_hold"),   # ties: the first bracket id wins
        rec("b4", "op1", "1/2", 0, 3, lo="absent"),
        {"bracket": "b5", "operator": "op2", "family": "f", "eps": "1/4", "shape": [20, 20],
         "error": "bad"},
    ]
    pairs = T.group_pairs(records, [4, 8])
    assert [(p["operator"], p["eps"]) for p in pairs] == [("op1", "1/4"), ("op1", "1/2")]
    p, q = pairs
    assert (p["lower"], p["upper"], p["lower_from"], p["upper_from"]) == (5, 9, "b1", "b2")
    assert p["brackets"] == ["b1", "b2", "b3"] and p["ratio"] == "9/5" and p["resolved"]
    assert p["budgets"] == {"4": "impossible", "8": "unresolved"}
    assert q["ratio"] is None and q["budgets"] == {"4": "feasible", "8": "feasible"}
    # record order does not matter
    assert T.group_pairs(records[::-1], [4, 8]) == pairs


def test_inconsistent_pair_is_flagged():
    pairs = T.group_pairs([rec("a", "o", "1/4", 7, 9), rec("b", "o", "1/4", 1, 5)], [8])
    assert pairs[0]["lower"] == 7 and pairs[0]["upper"] == 5 and not pairs[0]["consistent"]


def test_group_cells_from_first_principles():
    rng = np.random.default_rng(5)
    records = []
    truth = {}
    for i in range(7):
        fam = "A" if i < 4 else "B"
        L = int(rng.integers(0, 6))
        U = L + int(rng.integers(0, 9))
        records.append(rec(f"b{i}", f"o{i}", "1/4", L, U, family=fam,
                           uo=["proved", "does_not_hold", "refuted"][i % 3],
                           lo=["proved", "undecided", "absent", "refuted"][i % 4]))
        truth[f"o{i}"] = (fam, L, U)
    records.append({"bracket": "b9", "operator": "o9", "family": "A", "eps": "1/4",
                    "shape": [20, 20], "error": "x"})
    pairs = T.group_pairs(records, [3])
    groups = T.summarize_groups(pairs, records, [3])
    assert [(g["family"], g["eps"]) for g in groups] == [("A", "1/4"), ("B", "1/4"),
                                                          (None, "1/4")]
    tabs = T.build_tables(groups, [3])
    for g, row, crow in zip(groups, tabs["brackets"]["rows"], tabs["claims"]["rows"],
                            strict=True):
        sel = [v for v in truth.values() if g["family"] in (None, v[0])]
        Ls = sorted(L for _, L, _ in sel)
        Us = sorted(U for _, _, U in sel)
        n = len(sel)

        def med(xs, n=n):
            return Fraction(xs[(n - 1) // 2] + xs[n // 2], 2)

        ratios = sorted((Fraction(U, L) if L else None for _, L, U in sel),
                        key=lambda x: (x is None, x or 0))
        mid = ratios[(n - 1) // 2], ratios[n // 2]
        res = sum((U <= 2 * L) or (U - L <= 2) or (10 * (U - L) <= 20) for _, L, U in sel)
        assert row[3] == str(n)
        assert row[4] == T.fmt_decimal(Fraction(100 * res, n), 1) + "%"
        assert row[5] == T.fmt_median(str(med(Ls)))
        assert row[6] == T.fmt_median(str(med(Us)))
        want_ratio = "inf" if None in mid else T.fmt_decimal((mid[0] + mid[1]) / 2, 2)
        assert row[7] == want_ratio
        recs = [r for r in records if g["family"] in (None, r["family"]) and "error" not in r]
        assert crow[2] == str(len(recs) + (g["family"] != "B"))   # the error record is in A
        # columns: U proved, does not hold, undecided, refuted; L the same and absent
        assert crow[3] == str(sum(r["upper_result"] == "proved" for r in recs))
        assert crow[4] == str(sum(r["upper_result"] == "does_not_hold" for r in recs))
        assert crow[6] == str(sum(r["upper_result"] == "refuted" for r in recs))
        assert crow[9] == str(sum(r["lower_result"] == "undecided" for r in recs))
        assert crow[10] == str(sum(r["lower_result"] == "refuted" for r in recs))
        assert crow[11] == str(sum(r["lower_result"] == "absent" for r in recs))
        assert crow[12] == str(int(g["family"] != "B"))


class _Counted(list):
    """A list that counts the passes over it."""
    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def test_groups_are_formed_in_one_pass_not_one_per_key():
    # every (family, eps) key scanned every pair and record: a store of 20,000 brackets, each
    # at its own eps, took 193 s in audit; the groups must equal the plain filter's
    records = [rec(f"b{i}", f"o{i % 7}", f"1/{4 + i % 41}", i % 3, 3 + i % 5,
                   family="AB"[i % 2]) for i in range(400)]
    pairs = T.group_pairs(records, [3])
    want = T.summarize_groups(pairs, records, [3])
    _Counted.passes = 0
    got = T.summarize_groups(_Counted(pairs), _Counted(records), [3])
    assert got == want and len(got) == 41 * 3
    assert _Counted.passes < 10  # per key it would be at least 2 x 123
    for g in got:
        sel = [r for r in records if r["eps"] == g["eps"] and g["family"] in (None, r["family"])]
        assert g["records"] == len(sel)


def test_records_with_only_the_older_words_are_read():
    """A record written before ``*_result`` existed (an earlier journal, report.json) is
    counted under the newer words: confirmed -> proved, refuted -> does not hold (it only
    ever meant the check's inequality), weakened -> undecided."""
    old = [{"bracket": f"b{i}", "operator": f"o{i}", "family": "f", "eps": "1/4",
            "shape": [20, 20], "upper": 5, "lower": 1, "upper_claim": 5, "lower_claim": 2,
            "upper_outcome": uo, "lower_outcome": "weakened"}
           for i, uo in enumerate(["confirmed", "refuted", "refuted"])]
    groups = T.summarize_groups(T.group_pairs(old, [3]), old, [3])
    assert groups[0]["ends"]["upper"]["proved"] == 1
    assert groups[0]["ends"]["upper"]["does_not_hold"] == 2
    assert groups[0]["ends"]["upper"]["refuted"] == 0
    assert groups[0]["ends"]["lower"]["undecided"] == 3
    assert not T.all_proved(old)


# ------------------------------------------------------------------ journal


KEY = {"store": "/s", "store_sha256": "ab", "tier": "auto", "softrank_certify": "0"}


def _records(n):
    return [{"bracket": f"b{i}", "upper": i, "eps": Fraction(1, 4)} for i in range(n)]


def test_journal_round_trip_and_normalization(tmp_path):
    with Journal.open(tmp_path, KEY) as j:
        for r in _records(3):
            out = j.append(r)
            assert out["eps"] == "1/4"   # Fractions become exact strings, as on reread
    with Journal.open(tmp_path, KEY) as j:
        assert sorted(j.records) == ["b0", "b1", "b2"] and not j.dropped_tail
        assert j.records["b2"] == normalize(_records(3)[2])


@pytest.mark.parametrize("tail", [b'{"bracket": "b3", "up', b'{"bracket": "b3"', b"x\n"])
def test_journal_drops_a_torn_last_line_and_appends_cleanly(tmp_path, tail):
    with Journal.open(tmp_path, KEY) as j:
        for r in _records(3):
            j.append(r)
    path = tmp_path / JOURNAL_NAME
    good = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(tail)
    with Journal.open(tmp_path, KEY) as j:
        assert sorted(j.records) == ["b0", "b1", "b2"] and j.dropped_tail
        assert path.read_bytes() == good  # truncated back to the last complete line
        j.append({"bracket": "b3"})
    with Journal.open(tmp_path, KEY) as j:
        assert sorted(j.records) == ["b0", "b1", "b2", "b3"]


def test_journal_with_torn_header_starts_afresh(tmp_path):
    (tmp_path / JOURNAL_NAME).write_bytes(b'{"format": "softrank-au')
    with Journal.open(tmp_path, KEY) as j:
        assert j.records == {}
    assert json.loads((tmp_path / JOURNAL_NAME).read_text().splitlines()[0])["store"] == "/s"


def test_journal_refuses_corruption_other_stores_and_unknown_brackets(tmp_path):
    with Journal.open(tmp_path, KEY) as j:
        for r in _records(3):
            j.append(r)
    path = tmp_path / JOURNAL_NAME
    for change in ({"store_sha256": "cd"}, {"tier": "exact"}, {"store": "/t"}):
        with pytest.raises(InputError, match="another run"):
            Journal.open(tmp_path, {**KEY, **change})
    with pytest.raises(InputError, match="not in the store"):
        Journal.open(tmp_path, KEY, known_ids=["b0", "b1"])
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"garbage"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match="corrupt line 3"):
        Journal.open(tmp_path, KEY)
    with Journal.open(tmp_path, {**KEY, "tier": "exact"}, restart=True) as j:
        assert j.records == {}
    with Journal.open(tmp_path, {**KEY, "tier": "exact"}) as j:
        assert j.records == {}


def test_journal_is_locked_while_open(tmp_path):
    with Journal.open(tmp_path, KEY):
        with pytest.raises(InputError, match="another audit"):
            Journal.open(tmp_path, KEY)
    Journal.open(tmp_path, KEY).close()


def test_journal_lines_are_synced_before_append_returns(tmp_path):
    with Journal.open(tmp_path, KEY) as j:
        j.append({"bracket": "b0"})
        # a second descriptor sees the line although the writer is still open
        fd = os.open(tmp_path / JOURNAL_NAME, os.O_RDONLY)
        try:
            assert os.read(fd, 1 << 16).count(b"\n") == 2
        finally:
            os.close(fd)


def test_a_store_string_inf_stays_text_in_latex():
    # only numbers we formatted become infinity: a family, producer or layer named "inf"
    # is text (as in Markdown), and the ratio column's "inf" is still the symbol
    t = {"title": "t", "columns": ["Family", "eps", "Median U/L"], "left": 2,
         "rows": [["inf", "0.25", "inf"]]}
    row = [ln for ln in T.latex_tabular(t).splitlines() if "0.25" in ln][0]
    assert row == r"inf & 0.25 & $\infty$ \\"
    t = {"title": "t", "columns": ["End", "Producer", "Claims"], "left": 2,
         "rows": [["upper", "inf", "3"]]}
    assert r"upper & inf & 3 \\" in T.latex_tabular(t)
