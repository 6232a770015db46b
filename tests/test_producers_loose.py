"""The producers' claims next to the ends they found (``upper_next_*`` from alt_l1,
``lower_next_*`` from bernstein), stored by ``produce`` and shown by ``producers`` and
``audit`` on an open bracket: float64 search results, labelled as such."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from softrank.cli import main
from softrank.numfmt import sig
from softrank.witnesses import open_store
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import bernstein as bn
from softrank.witnesses.producers._common import budget_settings, row_l1, target
from softrank.witnesses.producers.altl1 import AlternatingL1
from softrank.witnesses.producers.decoder_lp import CLAIM_BUDGET

# rounding of the claims to 6 significant digits (``_common.search_claim``)
REL = 1e-5


def attention(n: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = beta * rng.standard_normal((n, d)) @ rng.standard_normal((d, n)) / np.sqrt(d)
    return softmax64(S)


def tsvd_error(A: np.ndarray, k: int) -> float:
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    return float(row_l1(A, u[:, :k] * s[:k], vt[:k]).max())


# ---------------------------------------------------------------------------- alt_l1


@pytest.mark.parametrize("descent", [None, 0.0])
def test_alt_l1_claims_the_best_fit_it_found_one_rank_below(descent):
    A, eps = attention(16, 6, 3.0, 0), Fraction(1, 4)
    with budget_settings("work", 0.05):
        w = AlternatingL1(descent_budget=descent).produce(A, eps)
    c = w.claims
    assert w.rank > 1 and c["upper_next_rank"] == w.rank - 1
    e = c["upper_next_error"]
    # at least as good as the SVD start at that rank (every run starts there or lower) ...
    assert e <= tsvd_error(A, w.rank - 1) * (1 + REL)
    # ... and not good enough, or the witness would have that rank
    assert e >= target(eps) * (1 - REL)
    assert c["upper_next_ratio"] == pytest.approx(e / 0.25, rel=REL)


def test_alt_l1_counts_the_runs_below_its_rank_and_those_that_agree():
    from softrank.witnesses.producers.altl1 import AGREE_BAND, next_rank_claims

    ends = {3: [(1.0, True), (1.0 + AGREE_BAND, True), (1.031, True), (2.0, True),
                (0.9, False)], 4: [(0.5, True)]}
    c = next_rank_claims(ends, 4, 0.5)
    # the least over every run (a short screening run's 0.9 too), the runs counted without it
    assert (c["upper_next_rank"], c["upper_next_runs"], c["upper_next_agree"]) == (3, 4, 0)
    assert c["upper_next_error"] == 0.9 and c["upper_next_ratio"] == 1.8
    del ends[3][-1]
    c = next_rank_claims(ends, 4, 0.5)
    assert (c["upper_next_runs"], c["upper_next_agree"]) == (4, 2)
    assert c["upper_next_error"] == 1.0 and c["upper_next_ratio"] == 2.0
    # only uncounted runs: the least is claimed, no counts
    c = next_rank_claims({3: [(1.2, False)]}, 4, 0.5)
    assert c["upper_next_error"] == 1.2 and "upper_next_runs" not in c
    assert next_rank_claims(ends, 6, 0.5) == {}  # no run at rank 5
    assert next_rank_claims({0: [(1.0, True)]}, 1, 0.5) == {}
    # the descent adds runs at the rank below the chain's: more runs, the least never larger
    A, eps = attention(16, 6, 3.0, 0), Fraction(1, 4)
    with budget_settings("work", 0.05):
        short = AlternatingL1(descent_budget=0.0).produce(A, eps).claims
        full = AlternatingL1().produce(A, eps).claims
    if full["upper_next_rank"] == short["upper_next_rank"]:
        assert full["upper_next_runs"] > short["upper_next_runs"]
        assert full["upper_next_error"] <= short["upper_next_error"]
    for c in (short, full):  # the least may come from a short screening run: agree may be 0
        assert 0 <= c["upper_next_agree"] <= c["upper_next_runs"]


def test_alt_l1_claims_nothing_below_rank_one():
    A = attention(16, 6, 3.0, 0)
    w = AlternatingL1().produce(A, Fraction(19, 10))  # the rank-1 SVD is within eps
    assert w.rank == 1
    assert not any(k.startswith("upper_next") for k in w.claims)


# ---------------------------------------------------------------------------- bernstein

A24 = attention(24, 8, 2.0, 0)
EPS24 = Fraction(1, 2)


def _bernstein(**kw):
    with budget_settings("work", 0.05):
        return bn.Bernstein().produce(A24, EPS24, **kw)


def test_bernstein_claims_how_near_it_came_to_the_next_rank():
    c = _bernstein()
    assert c is not None and c.kind == "bernstein"
    assert c.claims["lower_next_rank"] == c.rank + 1
    v = c.claims["lower_next_value"]
    # it missed rank p + 1: its best value there is at the descents' goal or above
    assert v >= CLAIM_BUDGET * (1 - 1e-4) * (1 - REL) and np.isfinite(v)


def test_bernstein_claims_no_next_rank_once_it_reaches_the_ceiling():
    p = _bernstein().rank
    c = _bernstein(stop_at=p)
    assert c.rank == p  # the bracket an upper witness of rank p claims is closed
    assert "lower_next_rank" not in c.claims and "lower_next_value" not in c.claims


def test_next_rank_claims_of_the_near_misses():
    W = np.eye(4)[:, :3]
    near = {3: (2.5, W)}
    assert bn.next_rank_claims(near, 3, 5, 0.5) == {"lower_next_rank": 3,
                                                    "lower_next_value": 1.25}
    assert bn.next_rank_claims(near, 3, 2, 0.5) == {}  # above the ceiling: closed
    assert bn.next_rank_claims(near, 4, 5, 0.5) == {}  # nothing tried at rank 4
    assert bn.next_rank_claims({3: (np.inf, W)}, 3, 5, 0.5) == {}


# ---------------------------------------------------------------------------- commands


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("loose")
    np.savez(base / "ops.npz", A=A24)
    st = base / "st"
    assert main(["produce", str(st), "--npz", str(base / "ops.npz"), "--npz-kind", "probs",
                 "--eps", "0.5", "--budget-scale", "0.05", "--producers", "alt_l1", "nonzero",
                 "bernstein", "--quiet"]) == 0
    return st


def _anchor(store):
    [br] = open_store(store).brackets
    return br


def test_produce_stores_both_claims_on_the_open_bracket(store):
    br = _anchor(store)
    assert br.lower is not None and br.lower.rank < br.upper.rank  # open
    c = br.claims
    assert c["upper_next_rank"] == br.upper.rank - 1
    assert c["lower_next_rank"] == br.lower.rank + 1
    assert c["upper_next_ratio"] > 1 - REL and c["lower_next_value"] > 1 - REL
    # the runs that ended at rank U - 1 and those within 3% of the best (itself included)
    assert 0 <= c["upper_next_agree"] <= c["upper_next_runs"]


def test_producers_command_shows_both_numbers(store, capsys):
    br = _anchor(store)
    capsys.readouterr()
    assert main(["producers", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [row] = doc["open_brackets"]
    assert (row["lower"], row["upper"]) == (br.lower.rank, br.upper.rank)
    up, lo = Fraction(row["upper_next_ratio"]), Fraction(row["lower_next_value"])
    assert up == br.claims["upper_next_ratio"] and lo == br.claims["lower_next_value"]
    agree, runs = br.claims["upper_next_agree"], br.claims["upper_next_runs"]
    assert (row["upper_next_agree"], row["upper_next_runs"]) == (agree, runs)
    settled = agree >= 3 and up > Fraction(103, 100)  # U - 1 probably out of reach
    assert row["likely_loose"] == ("lower" if settled else "upper" if up < lo
                                   else "lower" if lo < up else "unknown")
    assert "not proofs" in doc["open_brackets_note"]
    assert main(["producers", str(store), "--quiet"]) == 0
    text = capsys.readouterr().out
    head = text.index("Open brackets: which side is likely loose (float64 searches, not proofs)")
    lines = text[head:].splitlines()
    assert "U-1 fit/eps" in lines[1] and "L+1 value" in lines[1]
    assert lines[2].split() == [br.operator, "0.5", f"[{br.lower.rank},", f"{br.upper.rank}]",
                                f"{float(up):.4g}", f"{agree}/{runs}", f"{float(lo):.4g}",
                                row["likely_loose"]]
    assert "1 of 1 (operator, eps) brackets open" in text and "not a proof" in text


def test_audit_reports_the_open_bracket(store, tmp_path):
    br = _anchor(store)
    out = tmp_path / "o"
    assert main(["audit", str(store), "--out", str(out), "--no-figures",
                 "--no-progress"]) == 0
    rep = json.loads((out / "report.json").read_text())
    [row] = rep["open_brackets"]
    assert Fraction(row["upper_next_ratio"]) == br.claims["upper_next_ratio"]
    assert Fraction(row["lower_next_value"]) == br.claims["lower_next_value"]
    assert rep["summary"]["open_brackets"]["open"] == 1
    section = (out / "report.md").read_text().split("## Open brackets")[1]
    line = next(ln for ln in section.splitlines() if ln.startswith(f"| {br.operator} |"))
    assert line.endswith(f"| \\[{br.lower.rank}, {br.upper.rank}\\] | "
                         f"{sig(row['upper_next_ratio'], 4)} | "
                         f"{row['upper_next_agree']}/{row['upper_next_runs']} | "
                         f"{sig(row['lower_next_value'], 4)} | {row['likely_loose']} |")
