"""Every behavioural claim corrected in the docs, checked against the code: README (which checks
always decide), proofs_notes/lower_decoder.md (the decoder's detail fields), proofs_notes/exact.md
(cells with two rows beyond the complete-search limit), the assumptions in check --json, and no
reference to files or issue numbers outside the repository."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np

from softrank.certify import check_lower, check_upper
from softrank.cli import main
from softrank.exact.oracle import oracle
from softrank.exact.verify import verify_result
from tests.test_svd import known_svd_matrix

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("auto", "float64", "arb", "exact")


def test_no_reference_outside_the_repository():
    pat = re.compile(r"DOMAIN\.md|issue [0-9]")
    hits = []
    for top in ("certify", "exact", "witnesses", "softrank", "proofs_notes", "benchmarks"):
        for f in (ROOT / top).rglob("*"):
            if f.is_file() and f.suffix in (".py", ".md", ".txt", ".toml", ".json"):
                for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                    if pat.search(line):
                        hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []
    assert (ROOT / "proofs_notes" / "background.md").is_file()
    bg = (ROOT / "proofs_notes" / "background.md").read_text()
    for ref in ("Eckart", "Mirsky", "Hansen", "Miyajima", "Higham", "Johansson"):
        assert ref in bg


# README: "Upper witnesses and the nonzero, decoder and submatrix certificates on stored floats
# always end holds or fails under the default tier auto ... A Frobenius-tail certificate ... at
# an exact tie ... stays undecided in every tier."

D = [Fraction(x) for x in (4, 3, 2, 1.5, 1, 0.75, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0)]


def test_readme_frobenius_tie_is_undecided_in_every_tier():
    A = known_svd_matrix(16, 16, D, seed=11 * 16 + 16)
    # tail from index 7 is 4 (1/2)^2 = 1 = m t^2 at t = 1/4: an exact tie
    for tier in TIERS:
        c = check_lower(A, {"kind": "frobenius_tail", "rank": 7}, Fraction(1, 4), tier=tier)
        assert c.status == "undecided", tier
        assert c.value.lo <= 1 <= c.value.hi


def test_readme_witness_and_nonzero_ties_are_decided_in_auto():
    A = np.array([[0.5, 0.0], [0.0, 0.5]])
    zero_u, zero_v = np.zeros((2, 1)), np.zeros((1, 2))
    # ||A - 0||_row1 = 1/2 exactly: the witness holds at eps = 1/2 and fails just below
    assert check_upper(A, zero_u, zero_v, Fraction(1, 2)).status == "holds"
    assert check_upper(A, zero_u, zero_v, Fraction(1, 2) - Fraction(1, 2**80)).status == "fails"
    # nonzero claims ||A||_row1 > eps: false at the tie, proved just below
    assert check_lower(A, {"kind": "nonzero", "rank": 1}, Fraction(1, 2)).status == "fails"
    below = Fraction(1, 2) - Fraction(1, 2**80)
    assert check_lower(A, {"kind": "nonzero", "rank": 1}, below).status == "holds"


def test_readme_decoder_boundary_is_decided_in_auto():
    # decoder = submatrix of the identity: M = I, X = I, value = 0 + 1 * 1 * t; at t = 1 the
    # strict claim value < 1 is false, and it is proved just below
    A = np.eye(3)
    cert = {"kind": "submatrix", "rank": 3, "rows": np.arange(3), "cols": np.arange(3),
            "X": np.eye(3)}
    c = check_lower(A, cert, 1)
    assert c.status == "fails" and c.value.lo == c.value.hi == 1
    assert check_lower(A, cert, 1 - Fraction(1, 2**70)).status == "holds"
    with_chi = check_lower(A, cert, Fraction(1, 2), chi=Fraction(1, 2))  # t = eps + chi = 1
    assert with_chi.status == "fails"


# proofs_notes/lower_decoder.md names detail["sense"] == "<" and detail["parts"] with delta, xd, w


def test_decoder_detail_fields_are_the_documented_ones():
    note = (ROOT / "proofs_notes" / "lower_decoder.md").read_text()
    named = set(re.findall(r'detail\["(\w+)"\]', note))
    assert named == {"sense", "parts"}
    rng = np.random.default_rng(1)
    A = np.abs(rng.standard_normal((5, 5))) + np.eye(5) * 4
    D = np.eye(2, 5)
    W = np.eye(5, 2)
    X = np.linalg.inv(D @ A @ W)
    c = check_lower(A, {"kind": "decoder", "rank": 2, "D": D, "W": W, "X": X},
                    Fraction(1, 100))
    assert set(c.detail) == named
    assert c.detail["sense"] == "<" and set(c.detail["parts"]) == {"delta", "xd", "w"}
    assert c.threshold == 1
    assert c.margin.lo == 1 - c.value.hi and c.margin.hi == 1 - c.value.lo
    for lo, hi in c.detail["parts"].values():
        assert Fraction(lo) <= Fraction(hi)


# proofs_notes/exact.md: every cell with two rows or two columns is decided, with no limit on
# its length (the thin-cell decisions), e.g. this 2 x 8 cell beyond the rank-one search limit

CELL_2x8 = [["13/94", "7/47", "1/47", "9/94", "17/94", "8/47", "13/94", "5/47"],
            ["16/91", "12/91", "19/91", "1/13", "17/91", "5/91", "10/91", "5/91"]]


def test_exact_two_by_eight_beyond_the_search_limit_is_decided():
    note = (ROOT / "proofs_notes" / "exact.md").read_text()
    assert "no limit on its length" in note
    for stochastic in (False, True):
        r = oracle(CELL_2x8, "1/5", stochastic)
        assert r.lower == r.upper
        assert verify_result(r) == []
        r = oracle(CELL_2x8, "1/5", stochastic, complete=True)  # no size refusal either
        assert r.decided


# README / reports: the assumptions are stated in check --json


def test_check_json_states_the_assumptions(tmp_path, capsys):
    from tests.storefactory import build_store

    build_store(tmp_path / "s", n_ops=1, size=6)
    code = main(["check", str(tmp_path / "s"), "--json"])
    assert code in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    items = " ".join(doc["assumptions"]["items"])
    for phrase in ("round-to-nearest", "Strassen", "Arb"):
        assert phrase in items
    rounding = (ROOT / "proofs_notes" / "rounding.md").read_text()
    assert "round-to-nearest" in rounding and "Strassen" in rounding
    assert "proofs_notes/rounding.md" in doc["assumptions"]["scope"]


# proofs_notes/bernstein.md names detail["sense"] == "<" and detail["parts"] with delta, pn


def test_bernstein_detail_fields_are_the_documented_ones():
    note = (ROOT / "proofs_notes" / "bernstein.md").read_text()
    named = set(re.findall(r'detail\["(\w+)"\]', note))
    assert named == {"sense", "parts"}
    assert "`delta`" in note and "`pn`" in note
    A = np.abs(np.random.default_rng(2).standard_normal((5, 5))) + np.eye(5) * 4
    W = np.eye(5, 2)
    P = W @ np.linalg.inv(A[:2, :2])  # rows 0, 1 of P A W: the identity up to rounding
    P = np.hstack([P, np.zeros((5, 3))])
    c = check_lower(A, {"kind": "bernstein", "rank": 2, "W": W, "P": P, "J": np.arange(2)},
                    Fraction(1, 100))
    assert set(c.detail) == named and c.status == "holds"
    assert c.detail["sense"] == "<" and set(c.detail["parts"]) == {"delta", "pn"}
    assert c.threshold == 1 and c.margin.lo == 1 - c.value.hi
    for lo, hi in c.detail["parts"].values():
        assert Fraction(lo) <= Fraction(hi)
