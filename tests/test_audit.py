"""End-to-end tests of ``softrank-certify audit`` on a store whose outcomes are known.

The store holds truncated-SVD witnesses at ranks whose exact row-l1 error (certify.exact_error)
is below eps (true claims) and above it (false on purpose), Frobenius-tail lower claims that
hold and ones that fail (singular values from float64, used only where the gap to the
threshold is far beyond their error), and nonzero claims that hold and one that fails.
Every expectation below is derived from these first-principles truths, never from the audit.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from importlib import metadata
from pathlib import Path
from statistics import median

import numpy as np
import pytest

from softrank.audit import VOLATILE_KEY, run_audit
from softrank.audit.executors import plan_chunks
from softrank.audit.journal import JOURNAL_NAME
from softrank.certify import exact_error
from softrank.cli import main
from softrank.witnesses import Store, open_store
from softrank.words import RESULTS

ROOT = Path(__file__).resolve().parents[1]
EPS = (Fraction(1, 4), Fraction(3, 8))
BUDGETS = (4, 8, 12)


def softmax(H: np.ndarray) -> np.ndarray:
    H = H - H.max(axis=1, keepdims=True)
    E = np.exp(H)
    return E / E.sum(axis=1, keepdims=True)


def exact_row_l1_norm(A: np.ndarray) -> Fraction:
    return max(sum((abs(Fraction(float(x))) for x in row), Fraction(0)) for row in A)


def build_known_store(path: Path, *, with_false: bool = True, with_error: bool = False
                      ) -> dict[str, dict]:
    """Writes the store; returns {bracket id: truth} with everything a report must say."""
    rng = np.random.default_rng(11)
    st = Store.create(path, description="audit test store")
    truth: dict[str, dict] = {}

    def add(oid, fam, A, eps, upper, lower, producer):
        m, N = A.shape
        full = min(m, N)
        bid = st.add_bracket(oid, eps, upper, lower, producer={"method": producer})
        err = exact_error(A, upper["U"], upper["V"])
        norm = exact_row_l1_norm(A)
        t = {"family": fam, "operator": oid, "eps": eps, "shape": (m, N), "full": full,
             "producer": producer,
             "upper_claim": upper["rank"], "upper_true": err <= eps,
             "lower_kind": lower["kind"] if lower else None,
             "lower_claim": lower["rank"] if lower else None}
        if lower is None:
            t["lower_true"] = None
        elif lower["kind"] == "nonzero":
            t["lower_true"] = norm > eps
        else:
            s = np.linalg.svd(A, compute_uv=False)
            tail = float((s[lower["rank"] - 1:] ** 2).sum())
            thr = m * float(eps) ** 2
            assert abs(tail - thr) > 1e-9 * thr, "too close to decide from float64 sigmas"
            t["lower_true"] = tail > thr
        t["U"] = upper["rank"] if t["upper_true"] else full
        # an end that is not proved (or not claimed) falls back to what the kernel proves on
        # the spot: L = 1 exactly when ||A||_row1 > eps (B = 0 too far), U = min(m, N) (B = A)
        t["L"] = lower["rank"] if t["lower_true"] else int(norm > eps)
        t["upper_outcome"] = "confirmed" if t["upper_true"] else "refuted"
        t["lower_outcome"] = ("absent" if lower is None else
                              "confirmed" if t["lower_true"] else "refuted")
        # a false inequality refutes a claim only when the other proved end contradicts it
        t["upper_result"] = ("proved" if t["upper_true"] else
                             "refuted" if upper["rank"] < t["L"] else "does_not_hold")
        t["lower_result"] = ("absent" if lower is None else "proved" if t["lower_true"] else
                             "refuted" if lower["rank"] > t["U"] else "does_not_hold")
        truth[bid] = t

    specs = [("alpha", 16, 16, 3.0), ("alpha", 16, 16, 2.0), ("beta", 12, 20, 2.5)]
    for i, (fam, m, N, scale) in enumerate(specs):
        A = softmax(scale * rng.standard_normal((m, N)))
        oid = st.add_operator(A, family=fam, id=f"{fam}{i}")
        u, s, vt = np.linalg.svd(A)

        def factors(k, u=u, s=s, vt=vt):
            return {"kind": "factors", "rank": k, "U": u[:, :k] * s[:k], "V": vt[:k].copy()}

        full = min(m, N)
        errs = {k: exact_error(A, factors(k)["U"], factors(k)["V"]) for k in range(1, full + 1)}
        tails = {j: float((s[j - 1:] ** 2).sum()) for j in range(1, full + 1)}
        for eps in EPS:
            k = min(k for k in errs if errs[k] <= eps)
            L = max(j for j in tails if tails[j] > m * float(eps) ** 2)
            add(oid, fam, A, eps, factors(k), {"kind": "frobenius_tail", "rank": L}, "tsvd")
            if with_false:
                add(oid, fam, A, eps, factors(k - 1), {"kind": "frobenius_tail", "rank": L + 1},
                    "optimist")
            add(oid, fam, A, eps, factors(min(k + 1, full)),
                {"kind": "nonzero", "rank": 1} if i != 1 else None, "nz")
    if with_false:
        # row l1 norm about 0.2: B = 0 (rank-1 zero factors) is within 1/4 but not within 1/8,
        # and the nonzero claim fails at 1/4 but holds at 1/8
        A = 0.2 * softmax(rng.standard_normal((8, 8)))
        oid = st.add_operator(A, family="gamma", id="gamma3")
        zero = {"kind": "factors", "rank": 1, "U": np.zeros((8, 1)), "V": np.zeros((1, 8))}
        for eps in (Fraction(1, 4), Fraction(1, 8)):
            add(oid, "gamma", A, eps, zero, {"kind": "nonzero", "rank": 1}, "zero")
    if with_error:
        A = softmax(rng.standard_normal((6, 6)))
        oid = st.add_operator(A, family="alpha", id="alpha9")
        bad = {"kind": "factors", "rank": 2, "U": np.zeros((6, 2)), "V": np.zeros((2, 5))}
        bid = st.add_bracket(oid, EPS[0], bad, None, producer={"method": "broken"})
        truth[bid] = {"family": "alpha", "operator": oid, "eps": EPS[0], "error": True}
    st.close()
    return truth


# ------------------------------------------------------------------ expected tables


def fmt_eps(q: Fraction) -> str:
    return {Fraction(1, 4): "0.25", Fraction(3, 8): "0.375", Fraction(1, 8): "0.125"}[q]


def dec(q: Fraction, places: int) -> str:
    with localcontext() as ctx:
        ctx.prec = 60
        d = Decimal(q.numerator) / Decimal(q.denominator)
        return str(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def med_cell(xs: list[int]) -> str:
    m = median(Fraction(x) for x in xs)
    return str(m.numerator) if m.denominator == 1 else dec(m, 1)


def expected_pairs(truth: dict[str, dict]) -> dict[tuple[str, Fraction], dict]:
    pairs: dict[tuple[str, Fraction], dict] = {}
    for t in truth.values():
        if t.get("error"):
            continue
        key = (t["operator"], t["eps"])
        p = pairs.setdefault(key, {"family": t["family"], "shape": t["shape"],
                                   "full": t["full"], "L": 0, "U": t["full"]})
        p["L"] = max(p["L"], t["L"])
        p["U"] = min(p["U"], t["U"])
    # tightened across eps: the largest L proved at any eps' >= eps, the smallest U at any
    # eps' <= eps, over the same operator's records
    for (op, eps), p in pairs.items():
        same = [t for t in truth.values() if not t.get("error") and t["operator"] == op]
        p["L*"] = max(t["L"] for t in same if t["eps"] >= eps)
        p["U*"] = min(t["U"] for t in same if t["eps"] <= eps)
    return pairs


def expected_rows(truth: dict[str, dict]) -> dict[str, list[list[str]]]:
    pairs = expected_pairs(truth)
    keys = []
    for eps in sorted({t["eps"] for t in truth.values()}):
        fams = sorted({t["family"] for t in truth.values() if t["eps"] == eps})
        keys += [(f, eps) for f in fams] + ([(None, eps)] if len(fams) > 1 else [])
    brackets, claims, budgets = [], [], []
    for fam, eps in keys:
        ps = [p for (op, e), p in pairs.items() if e == eps and fam in (None, p["family"])]
        ts = [t for t in truth.values() if t["eps"] == eps and fam in (None, t["family"])]
        cell = "all families" if fam is None else fam  # the aggregate row's label
        ok = [t for t in ts if not t.get("error")]
        n = len(ps)
        res = sum(p["U"] <= 2 * p["L"] or p["U"] - p["L"] <= 2 or 10 * (p["U"] - p["L"])
                  <= p["full"] for p in ps)
        ratios = sorted(Fraction(p["U"], p["L"]) if p["L"] else float("inf") for p in ps)
        mr = median(ratios)
        shapes = ", ".join(f"{m} x {N}" for m, N in sorted({t["shape"] for t in ok}))
        brackets.append([cell, fmt_eps(eps), shapes, str(n), dec(Fraction(100 * res, n), 1) + "%",
                         med_cell([p["L"] for p in ps]), med_cell([p["U"] for p in ps]),
                         "inf" if mr == float("inf") else dec(mr, 2)])
        uo = Counter(t["upper_result"] for t in ok)
        lo = Counter(t["lower_result"] for t in ok)
        claims.append([cell, fmt_eps(eps), str(len(ts)), str(uo["proved"]),
                       str(uo["does_not_hold"]), "0", str(uo["refuted"]), str(lo["proved"]),
                       str(lo["does_not_hold"]), "0", str(lo["refuted"]), str(lo["absent"]),
                       str(len(ts) - len(ok))])
        # the budget table counts verdicts on the brackets tightened across eps
        tight = [(p["L*"], p["U*"]) for p in ps]
        for k in BUDGETS:
            v = Counter("feasible" if k >= U else "impossible" if k < L else
                        "unresolved" for L, U in tight)
            budgets.append([cell, fmt_eps(eps), str(k), str(n)] +
                           [dec(Fraction(100 * v[x], n), 1) + "%"
                            for x in ("feasible", "impossible", "unresolved")])
    producers = []
    for end in ("upper", "lower"):
        per = defaultdict(Counter)
        for t in truth.values():
            if not t.get("error") and t[f"{end}_result"] != "absent":
                per[t["producer"]][t[f"{end}_result"]] += 1
        for name in sorted(per):
            c = per[name]
            producers.append([end, name, str(sum(c.values())), str(c["proved"]),
                              str(c["does_not_hold"]), str(c["undecided"]),
                              str(c["refuted"])])
    return {"brackets": brackets, "claims": claims, "budgets": budgets, "producers": producers}


def _italic_aggregates(rows: list[list[str]]) -> list[list[str]]:
    """The rows as report.md shows them: the aggregate row's label in italics."""
    return [["*all families*", *r[1:]] if r[0] == "all families" else r for r in rows]


def _tex_aggregate(row: list[str]) -> list[str]:
    return [r"\textit{all families}", *row[1:]] if row[0] == "all families" else row


def markdown_tables(text: str) -> dict[int, list[list[str]]]:
    """Parses the numbered tables of report.md into rows of cells (header excluded)."""
    out: dict[int, list[list[str]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## Table "):
            current = int(line.split()[2].rstrip("."))
            out[current] = []
        elif line.startswith("## "):
            current = None
        elif current is not None and line.startswith("|"):
            cells = [c.strip().replace("\\|", "|")
                     for c in line.strip().strip("|").replace("\\|", "\0").split("|")]
            out[current].append([c.replace("\0", "|") for c in cells])
    return {k: rows[2:] for k, rows in out.items()}  # drop header and rule


def strip_volatile(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != VOLATILE_KEY}


def read_report(out: Path) -> dict:
    return strip_volatile(json.loads((out / "report.json").read_text()))


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    base = tmp_path_factory.mktemp("audit")
    store = base / "store"
    truth = build_known_store(store)
    out = base / "ref"
    code = main(["audit", str(store), "--out", str(out), "--budgets", "4,8,12", "--no-progress"])
    return store, truth, out, code


@pytest.fixture(scope="module")
def plain_ref(known, tmp_path_factory):
    """The uninterrupted serial audit without figures (what interrupted runs must reproduce)."""
    out = tmp_path_factory.mktemp("plain") / "ref"
    run_audit(known[0], out, budgets=BUDGETS, figures=False)
    return out


# ------------------------------------------------------------------ known outcomes


def test_known_store_truth_has_both_kinds_of_claims(known):
    _, truth, _, _ = known
    c = Counter((t["upper_true"], t["lower_true"]) for t in truth.values())
    assert c[(True, True)] and c[(False, False)] and c[(True, False)] and c[(False, True)]
    assert c[(True, None)]


def test_report_json_records_match_first_principles(known):
    store, truth, out, code = known
    rep = json.loads((out / "report.json").read_text())
    assert code == 1  # some inequalities false on purpose, no input errors
    assert rep["summary"]["exit_code"] == 1
    recs = {r["bracket"]: r for r in rep["records"]}
    assert sorted(recs) == sorted(truth)
    for bid, t in truth.items():
        r = recs[bid]
        assert (r["upper"], r["lower"]) == (t["U"], t["L"]), bid
        assert (r["upper_result"], r["lower_result"]) == (t["upper_result"],
                                                          t["lower_result"]), bid
        # the older keys keep the older words (deprecated alias)
        assert (r["upper_outcome"], r["lower_outcome"]) == (t["upper_outcome"],
                                                            t["lower_outcome"]), bid
        assert (r["upper_claim"], r["lower_claim"]) == (t["upper_claim"], t["lower_claim"])
        assert Fraction(r["eps"]) == t["eps"] and r["family"] == t["family"]
        assert r["chi"] == "0"
        assert r["upper_check"]["status"] == ("holds" if t["upper_true"] else "fails")
        # margins are exact enclosures with the sign of the truth
        m = r["upper_check"]["margin"]
        if m is not None:
            assert (Fraction(m["lo"]) >= 0) if t["upper_true"] else (Fraction(m["hi"]) < 0)
    pairs = expected_pairs(truth)
    got = {(p["operator"], Fraction(p["eps"])): p for p in rep["pairs"]}
    assert set(got) == set(pairs)
    for key, p in pairs.items():
        assert (got[key]["lower"], got[key]["upper"]) == (p["L"], p["U"]), key
    s = rep["summary"]
    n_false = sum((not t["upper_true"]) + (t["lower_true"] is False) for t in truth.values())
    assert s["brackets"] == len(truth) and s["pairs"] == len(pairs) and s["input_errors"] == 0
    assert s["claims_not_proved"] == n_false == len(rep["not_proved"])
    assert s["claims_not_confirmed"] == n_false == len(rep["not_confirmed"])
    assert all(c["reason"] for c in rep["not_proved"])  # every end not proved says why
    assert s["resolved_pairs"] == sum(
        p["U"] <= 2 * p["L"] or p["U"] - p["L"] <= 2 or 10 * (p["U"] - p["L"]) <= p["full"]
        for p in pairs.values())


def test_every_markdown_cell(known):
    _, truth, out, _ = known
    want = expected_rows(truth)
    md = markdown_tables((out / "report.md").read_text())
    assert md[1] == _italic_aggregates(want["brackets"])
    assert md[2] == _italic_aggregates(want["claims"])
    assert md[3] == _italic_aggregates(want["budgets"])
    assert md[4] == want["producers"]
    rep = json.loads((out / "report.json").read_text())
    for name in ("brackets", "claims", "budgets", "producers"):
        assert rep["tables"][name]["rows"] == want[name]
    counts = {(g["family"] or "all families", Fraction(g["eps"])): g for g in rep["groups"]}
    for row in want["claims"]:
        eps = Fraction(Decimal(row[1]))
        g = counts[(row[0], eps)]
        assert [g["ends"]["upper"][o] for o in RESULTS[:4]] == [int(x) for x in row[3:7]]
        assert [g["ends"]["lower"][o] for o in RESULTS] == [int(x) for x in row[7:12]]


def test_latex_has_the_same_cells(known):
    _, truth, out, _ = known
    tex = (out / "report-tables.tex").read_text()
    n = len(json.loads((out / "report.json").read_text())["tables"])
    assert tex.count(r"\begin{tabular}{") == n and tex.count(r"\toprule") == n
    for name in ("brackets", "claims", "budgets", "producers"):
        alone = (out / "tables" / f"{name}.tex").read_text()
        assert alone.startswith(r"\begin{tabular}") and alone.strip() in tex
    for row in expected_rows(truth)["brackets"]:
        line = " & ".join(c.replace("%", r"\%").replace(" x ", r"$\times$")
                          .replace("inf", r"$\infty$") for c in _tex_aggregate(row)) + r" \\"
        assert line in tex


def test_provenance_states_versions_tiers_and_precisions(known):
    _, _, out, _ = known
    rep = json.loads((out / "report.json").read_text())
    env = rep["environment"]
    for pkg in ("numpy", "python-flint", "mpmath", "sympy", "softrank-certify"):
        assert env[pkg] == metadata.version(pkg)
    assert env["python"] == sys.version.split()[0]
    recs = [r for r in rep["records"] if "error" not in r]
    for end in ("upper", "lower"):
        checks = [r[f"{end}_check"] for r in recs if r[f"{end}_check"]]
        m = rep["methods"][end]
        assert m["checks"] == len(checks)
        assert m["decided_by"] == dict(Counter(c["tier"] for c in checks))
        assert m["precisions_bits"] == sorted({c["precision"] for c in checks
                                               if c["precision"] is not None})
    md = (out / "report.md").read_text()
    assert f"numpy: {np.__version__}" in md and "--tier auto" in md
    assert rep[VOLATILE_KEY]["command"].startswith("softrank-certify audit ")


def test_the_producers_record_is_shown_as_written_and_escaped(known):
    from softrank.audit.escape import md
    from softrank.audit.provenance import PRODUCED_BY_MAX, produced_by
    from softrank.audit.report import report_markdown

    _, _, out, _ = known
    rep = json.loads((out / "report.json").read_text())
    assert rep["produced_by"] == []  # this store was not written by `produce`
    hostile = "<script>x</script>[l](http://e.x)"
    entry = {"budget_mode": "work", "budget_scale": "1.0",
             "software": {"softrank_certify": hostile, "producer_sources_sha256": "ab" * 32,
                          "numpy": "2.0", "scipy": 7,
                          "blas": [{"internal_api": "openblas", "version": "0.3",
                                    "architecture": "SkylakeX"}, "junk"]}}
    header = {"provenance": {"produce_budgets": [entry, "junk"] + [entry] * 20}}
    rows = produced_by(header)
    assert len(rows) == PRODUCED_BY_MAX - 1  # the bounded prefix, non-objects skipped
    assert rows[0]["blas"] == "openblas 0.3 SkylakeX" and rows[0]["scipy"] == "7"
    assert produced_by({"provenance": {"produce_budgets": "x"}}) == produced_by(None) == []
    text = report_markdown({**rep, "produced_by": rows})
    line = next(ln for ln in text.splitlines() if ln.startswith("- produced (as store.json"))
    # every bracket and angle bracket of the producer's string arrives backslash-escaped
    assert "<script>" not in text and md(hostile) in line
    assert "\\<script\\>" in md(hostile) and "\\](http" in md(hostile)
    assert "SkylakeX" in line and "ab" * 32 in line


def test_figures_are_written(known):
    _, _, out, _ = known
    rep = json.loads((out / "report.json").read_text())
    assert sorted(rep["figures"]) == sorted(f"figures/{n}.{x}" for n in ("brackets", "margins",
                                                                           "chi")
                                            for x in ("png", "svg", "pdf"))
    for f in [*rep["figures"], "report.json", "report.md", "report.tex"]:
        assert (out / f).stat().st_mode & 0o777 == 0o644  # readable by co-authors
    for f in rep["figures"]:
        data = (out / f).read_bytes()
        if f.endswith(".png"):
            assert data.startswith(b"\x89PNG") and len(data) > 5000
        elif f.endswith(".pdf"):
            assert data.startswith(b"%PDF-") and b"%%EOF" in data[-32:]
        else:
            assert ET.fromstring(data).tag.endswith("svg")


# ------------------------------------------------------------------ exit codes, bad input


def test_all_true_store_exits_0_and_input_errors_exit_2(tmp_path, capsys):
    good = tmp_path / "good"
    build_known_store(good, with_false=False)
    assert main(["audit", str(good), "--out", str(tmp_path / "o1"), "--no-figures",
                 "--no-progress"]) == 0
    bad = tmp_path / "bad"
    truth = build_known_store(bad, with_false=False, with_error=True)
    assert main(["audit", str(bad), "--out", str(tmp_path / "o2"), "--no-figures",
                 "--no-progress", "--budgets", "4,8,12"]) == 2
    assert "input error" in capsys.readouterr().err
    rep = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert rep["summary"]["input_errors"] == 1 and not rep["figures"]
    assert markdown_tables((tmp_path / "o2" / "report.md").read_text())[2] == \
        _italic_aggregates(expected_rows(truth)["claims"])


def test_usage_errors_exit_2(tmp_path, known, capsys):
    store = known[0]
    assert main(["audit", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert main(["audit", str(store), "--out", str(tmp_path / "o"), "--budgets", "0"]) == 2
    with pytest.raises(SystemExit) as ex:  # argparse's usage error
        main(["audit", str(store), "--out", str(tmp_path / "o"), "--jobs", "0"])
    assert ex.value.code == 2
    # a journal written for another store is refused, and --restart discards it
    other = tmp_path / "other"
    build_known_store(other, with_false=False)
    out = tmp_path / "o3"
    assert main(["audit", str(other), "--out", str(out), "--no-figures",
                 "--no-progress"]) == 0
    assert main(["audit", str(store), "--out", str(out), "--no-figures",
                 "--no-progress"]) == 2
    assert "another run" in capsys.readouterr().err
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress",
                 "--restart", "--budgets", "4,8,12"]) == 1
    assert read_report(out)["records"] == read_report(known[2])["records"]


def test_plan_chunks_cover_every_id_once_without_mixing_operators(known):
    reader = open_store(known[0])
    ids = [b.id for b in reader.brackets][::-1]
    ops = {b.id: b.operator for b in reader.brackets}
    for workers in (1, 2, 7):
        chunks = plan_chunks(reader, ids, workers)
        flat = [i for c in chunks for i in c]
        assert sorted(flat) == sorted(ids) and len(flat) == len(set(flat))
        assert all(len({ops[i] for i in c}) == 1 for c in chunks)
    assert plan_chunks(reader, [], 2) == []


# ------------------------------------------------------------------ interruption and resume


class Boom(Exception):
    pass


@pytest.mark.parametrize("jobs", [1, 2])
def test_injected_failure_then_resume_gives_the_same_report(known, plain_ref, tmp_path, jobs,
                                                             capsys):
    store, truth, _, _ = known
    ref = plain_ref
    out = tmp_path / "out"
    seen = []

    def boom(rec):
        seen.append(rec["bracket"])
        if len(seen) == 5:
            raise Boom

    with pytest.raises(Boom):
        run_audit(store, out, jobs=jobs, budgets=BUDGETS, on_record=boom, figures=False)
    # records are journaled a batch at a time (an operator's brackets, or what finished
    # together) before on_record sees any of them: the fifth record's whole batch is in
    lines = (out / JOURNAL_NAME).read_text().splitlines()
    done = [json.loads(x)["bracket"] for x in lines[1:]]
    assert set(seen) <= set(done) and len(done) == len(set(done)) < len(truth)
    assert not (out / "report.json").exists()
    again = []
    rep = run_audit(store, out, jobs=jobs, budgets=BUDGETS, figures=False,
                    on_record=lambda r: again.append(r["bracket"]))
    assert rep[VOLATILE_KEY]["resumed_records"] == len(done)
    assert (f"resuming: {len(done)} of {len(truth)} brackets done"
            in capsys.readouterr().err)
    assert sorted(again) == sorted(set(truth) - set(done))  # nothing redone, nothing lost
    assert read_report(out) == read_report(ref)
    # a third run finds everything journaled and only rewrites the report
    rep3 = run_audit(store, out, jobs=jobs, budgets=BUDGETS, figures=False)
    assert rep3[VOLATILE_KEY]["new_records"] == 0 and read_report(out) == read_report(ref)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigkill_of_the_audit_then_resume(known, plain_ref, tmp_path):
    store, truth, _, _ = known
    ref = plain_ref
    out = tmp_path / "out"
    driver = textwrap.dedent(f"""
        import sys, time
        import softrank.audit.executors as ex
        orig = ex.check_record
        def slow(*a, **k):
            time.sleep(0.15)  # keep the run alive long enough to be killed midway
            return orig(*a, **k)
        ex.check_record = slow
        from softrank.cli import main
        sys.exit(main(["audit", {str(store)!r}, "--out", {str(out)!r}, "--jobs", "2",
                       "--no-figures", "--no-progress"]))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-c", driver], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = out / JOURNAL_NAME
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists() and journal.read_bytes().count(b"\n") >= 1 + 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)  # the audit process only, as a batch system might
        proc.wait(timeout=30)
        # its pool workers must not outlive it (they would block on their queue forever)
        gone = time.monotonic() + 10
        while time.monotonic() < gone and _group_alive(proc.pid):
            time.sleep(0.05)
        assert not _group_alive(proc.pid), "pool workers outlived the killed audit"
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = journal.read_bytes().count(b"\n") - 1
    assert 4 <= done < len(truth)
    with open(journal, "ab") as fh:  # as if the kill had torn a line mid-write
        fh.write(b'{"bracket": "br0000')
    rep = run_audit(store, out, jobs=2, budgets=BUDGETS, figures=False)
    assert rep[VOLATILE_KEY]["resumed_records"] == done
    assert read_report(out) == read_report(ref)
    assert (out / "report.md").read_text().count("## Table") == len(read_report(ref)["tables"])


# ------------------------------------------------------------------ dask


def test_dask_local_cluster_gives_the_same_report(known, plain_ref, tmp_path):
    distributed = pytest.importorskip("distributed")
    store, ref = known[0], plain_ref
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        out = tmp_path / "dask"
        assert main(["audit", str(store), "--out", str(out), "--budgets", "4,8,12",
                     "--scheduler", cluster.scheduler_address, "--no-progress",
                     "--no-figures"]) == 1
    rep = json.loads((out / "report.json").read_text())
    assert rep[VOLATILE_KEY]["executor"] == "dask"
    assert strip_volatile(rep) == read_report(ref)


def test_scheduler_without_dask_is_an_input_error(known, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    assert main(["audit", str(known[0]), "--out", str(tmp_path / "o"), "--scheduler",
                 "tcp://127.0.0.1:1", "--no-progress"]) == 2
    assert "dask extra" in capsys.readouterr().err


def test_report_groups_records_sorted_and_stable(known):
    rep = json.loads((known[2] / "report.json").read_text())
    ids = [r["bracket"] for r in rep["records"]]
    assert ids == sorted(ids)
    per_pair = defaultdict(list)
    for r in rep["records"]:
        per_pair[(r["operator"], r["eps"])].append(r["bracket"])
    for p in rep["pairs"]:
        assert p["brackets"] == sorted(per_pair[(p["operator"], p["eps"])])


def test_logits_operator_chi_is_reported(tmp_path):
    rng = np.random.default_rng(2)
    logits = 2.0 * rng.standard_normal((10, 10))
    A = softmax(logits)
    st = Store.create(tmp_path / "s")
    oid = st.add_operator(A, family="lg", logits=logits, beta=1)
    u, s, vt = np.linalg.svd(A)
    st.add_bracket(oid, "1/4", {"kind": "factors", "rank": 10, "U": u * s, "V": vt},
                   {"kind": "nonzero", "rank": 1})
    st.close()
    rep = run_audit(tmp_path / "s", tmp_path / "o", figures=True)
    (r,) = rep["records"]
    chi = Fraction(r["chi"])
    # float64 softmax differs from the exact one by rounding only: 0 < chi << eps
    assert 0 < chi < Fraction(1, 10**12)
    assert rep["methods"]["chi"] == {"operators": 1, "positive": 1, "max": r["chi"],
                                     "records_changed": 0, "ends_changed": 0}
    assert r["upper_check"]["threshold"] == str(Fraction(1, 4) - chi)
    assert r["lower_check"]["threshold"] == str(Fraction(1, 4) + chi)
    assert "1 of 1 operators have chi > 0" in (tmp_path / "o" / "report.md").read_text()
    assert (tmp_path / "o" / "figures" / "chi.png").stat().st_size > 5000


def test_worker_refuses_a_store_that_changed_after_the_audit_started(known):
    from softrank.audit.executors import check_chunk
    from softrank.audit.journal import store_digest
    from softrank.certify.errors import InputError

    store = str(Path(known[0]).resolve())
    ids = [b.id for b in open_store(store).brackets][:2]
    recs = check_chunk((store, store_digest(store)), ids, "auto")
    assert [r["bracket"] for r in recs] == ids
    with pytest.raises(InputError, match="store changed"):
        check_chunk((store, "0" * 64), ids, "auto")


def _tightened_truth(truth: dict[str, dict], op: str, eps: str) -> list:
    """[L*, U*, L* from, U* from] of (op, eps) from the truth: the largest L proved at any
    eps' >= eps and the smallest U proved at any eps' <= eps, ties to the nearest eps and
    then the first bracket id, each cited as "<bracket> at eps <eps> (<kind>)"."""
    q = Fraction(eps)
    ts = sorted((bid, t) for bid, t in truth.items()
                if not t.get("error") and t["operator"] == op)
    lows = [(bid, t) for bid, t in ts if t["eps"] >= q]
    ups = [(bid, t) for bid, t in ts if t["eps"] <= q]
    lbid, lt = max(lows, key=lambda bt: (bt[1]["L"], q - bt[1]["eps"]))
    ubid, ut = min(ups, key=lambda bt: (bt[1]["U"], q - bt[1]["eps"]))
    lkind = (lt["lower_kind"] if lt["lower_true"] else
             "nonzero fallback" if lt["L"] >= 1 else "none fallback")
    ukind = "factors" if ut["upper_true"] else "trivial fallback"
    return [lt["L"], ut["U"], f"{lbid} at eps {fmt_eps(lt['eps'])} ({lkind})",
            f"{ubid} at eps {fmt_eps(ut['eps'])} ({ukind})"]


def test_per_head_csv_matches_the_truth(known):
    """per_head.csv: one row per (operator, eps) pair with the validated L and U, the gap and
    the kinds of the certificates behind each end, all recomputed here from the truth."""
    _, truth, out, _ = known
    pairs: dict[tuple[str, str], list[tuple[str, dict]]] = defaultdict(list)
    for bid, t in sorted(truth.items()):
        if not t.get("error"):
            pairs[(t["operator"], str(Fraction(t["eps"])))].append((bid, t))
    want = {}
    for (op, eps), ts in pairs.items():
        ubid, ut = min(ts, key=lambda bt: bt[1]["U"])  # first bracket id among ties
        lbid, lt = max(ts, key=lambda bt: bt[1]["L"])
        ukind = "factors" if ut["upper_true"] else "trivial"
        lkind = (lt["lower_kind"] if lt["lower_true"] else
                 "nonzero" if lt["L"] >= 1 else "none")
        want[(op, eps)] = [op, ut["family"], str(Fraction(eps)), lt["L"], ut["U"],
                           ut["U"] - lt["L"], ukind, lkind, *_tightened_truth(truth, op, eps)]
    rows = list(csv.reader((out / "per_head.csv").read_text().splitlines()))
    assert rows[0] == ["operator", "family", "eps", "L", "U", "gap", "upper_kind",
                       "lower_kind", "tight_L", "tight_U", "tight_L_from", "tight_U_from"]
    got = {}
    for r in rows[1:]:
        eps = str(Fraction(Decimal(r[2])) if "/" not in r[2] else Fraction(r[2]))
        got[(r[0], eps)] = [r[0], r[1], eps, int(r[3]), int(r[4]), int(r[5]), r[6], r[7],
                            int(r[8]), int(r[9]), r[10], r[11]]
    assert got == want
    assert {k[1] for k in want} and any(v[7] == "none" or v[6] == "trivial"
                                         for v in want.values())  # fallbacks are exercised
    # the longtable has the same rows, one per pair
    tex = (out / "report-per-head.tex").read_text()
    lines = [ln for ln in tex.splitlines() if " & " in ln and ln.endswith(r" \\")]
    assert len(lines) == len(want) + 2  # the header twice: first page and continued
    assert sum(ln.startswith(("alpha", "beta", "gamma")) for ln in lines) == len(want)
    assert r"\begin{longtable}" in tex and r"\endhead" in tex


@pytest.mark.parametrize("command", ["audit", "check"])
def test_records_lost_by_the_executor_end_in_an_internal_error_not_a_report(
        known, tmp_path, monkeypatch, capsys, command):
    """A worker path that drops a bracket's record (as a cluster that lost a finished task's
    result did) must not shorten the report: exit 3, and no report written."""
    from softrank.audit import executors

    real = executors.check_chunk
    victim = sorted(b.id for b in open_store(known[0]).brackets)[1]

    def dropping(store, ids, tier, *rest):
        return [r for r in real(store, ids, tier, *rest) if r["bracket"] != victim]
    monkeypatch.setattr(executors, "check_chunk", dropping)
    out = tmp_path / "o"
    args = ([command, str(known[0]), "--out", str(out), "--no-progress", "--jobs", "2"]
            if command == "audit" else [command, str(known[0]), "--json", "--jobs", "2"])
    monkeypatch.setattr(executors, "ProcessPoolExecutor", _ThreadPool)
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "records" in err and victim[:20] in err
    assert not (out / "report.json").exists()


class _ThreadPool:
    """Runs the pool executor's chunks in this process (the monkeypatched check_chunk is only
    seen here, not in spawned workers)."""

    def __init__(self, max_workers, initializer=None, initargs=()):
        from concurrent.futures import ThreadPoolExecutor
        self._pool = ThreadPoolExecutor(max_workers=max_workers)

    def submit(self, fn, *args, **kwargs):
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait=True, cancel_futures=False):
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_the_producing_environments_are_shown_counted_and_escaped(known):
    from softrank.audit.escape import md
    from softrank.audit.provenance import PRODUCED_BY_MAX, producing_environments
    from softrank.audit.report import report_markdown

    _, _, out, _ = known
    rep = json.loads((out / "report.json").read_text())
    assert rep["producing_software"]["count"] == 0  # not written by `produce`
    assert not any("numerics environment" in ln for ln in report_markdown(rep).splitlines())
    hostile = "<b>x</b>[l](http://e.x)"
    here = {"softrank_certify": "0.2.0", "numpy": "2.0", "scipy": "1.14",
            "blas": [{"internal_api": "openblas", "version": "0.3", "architecture": "Haswell"}]}
    other = {**here, "numpy": hostile}
    one = {"provenance": {"produce_budgets": [{"budget_mode": "work", "software": here}],
                          "producing_software": [here]}}
    ps = producing_environments(one)
    assert ps == {"count": 1, "shown": [{"softrank_certify": "0.2.0", "numpy": "2.0",
                                         "scipy": "1.14", "blas": "openblas 0.3 Haswell"}],
                  "more": 0, "other_than_budgets": False}
    text = report_markdown({**rep, "producing_software": ps})
    line = next(ln for ln in text.splitlines() if "numerics environment" in ln)
    assert "1 numerics environment (" in line and "bit for bit" not in line
    # a worker with other software: the caveat, every entry escaped, a long list bounded
    many = {"provenance": {**one["provenance"],
                           "producing_software": [here, other] + [{"numpy": str(i)}
                                                                  for i in range(20)]}}
    ps = producing_environments(many)
    assert ps["count"] == 22 and len(ps["shown"]) == PRODUCED_BY_MAX and ps["other_than_budgets"]
    assert ps["more"] == 22 - PRODUCED_BY_MAX
    text = report_markdown({**rep, "producing_software": ps})
    line = next(ln for ln in text.splitlines() if "numerics environment" in ln)
    assert "22 numerics environments" in line and "bit for bit only under each" in line
    assert "<b>" not in text and md(hostile) in text
    assert f"and {22 - PRODUCED_BY_MAX} more" in text
    # one environment that is not the producing command's own: the caveat too
    alone = {"provenance": {"produce_budgets": [{"software": here}],
                            "producing_software": [other]}}
    assert producing_environments(alone)["other_than_budgets"]
    assert producing_environments({"provenance": {"producing_software": "x"}})["count"] == 0
    assert producing_environments(None)["count"] == 0


def test_an_interrupted_run_leaves_no_earlier_report(known, plain_ref, tmp_path):
    """A finished report, then a run that restarts and is killed before writing its own: the
    folder must not keep the earlier report (it would read as this run's verdict)."""
    import shutil

    store, _, _, _ = known
    out = tmp_path / "out"
    shutil.copytree(plain_ref, out)
    assert (out / "report.json").exists() and (out / "report.md").exists()
    calls = []

    def boom(rec):
        calls.append(rec)
        raise Boom

    with pytest.raises(Boom):
        run_audit(store, out, budgets=BUDGETS, on_record=boom, figures=False, restart=True)
    assert calls and not any((out / n).exists() for n in ("report.json", "report.md",
                                                            "report.tex"))


def test_a_folder_in_place_of_a_report_fails_before_any_check(known, tmp_path):
    from softrank.certify.errors import InputError

    store, _, _, _ = known
    out = tmp_path / "out"
    (out / "report.md").mkdir(parents=True)
    seen = []
    with pytest.raises(InputError, match="is a folder"):
        run_audit(store, out, budgets=BUDGETS, figures=False, on_record=seen.append)
    assert not seen and not (out / "tables").exists()


@pytest.mark.parametrize("r", ["0", "100001", "99999999999999999999"])
def test_resamples_out_of_range_exit_2_before_any_check(known, tmp_path, capsys, r):
    """The bootstrap runs resamples x pairs after every check: an unbounded count ran on."""
    out = tmp_path / "o"
    assert main(["audit", str(known[0]), "--out", str(out), "--no-figures", "--resamples",
                 r]) == 2
    assert "--resamples" in capsys.readouterr().err and not out.exists()


def test_the_default_work_limit_spelled_out_resumes_the_same_journal(known, tmp_path, capsys):
    from softrank.certify.numerics.workbound import DEFAULT_MAX_WORK

    store = known[0]
    out = tmp_path / "o"
    assert main(["audit", str(store), "--out", str(out), "--no-figures",
                 "--no-progress"]) == 1
    capsys.readouterr()
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress",
                 "--max-work", str(DEFAULT_MAX_WORK)]) == 1
    assert "resuming" in capsys.readouterr().err
    # another limit is another run
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "--no-progress",
                 "--max-work", str(DEFAULT_MAX_WORK // 2)]) == 2
