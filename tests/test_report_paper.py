"""The report as a paper needs it: report.tex is a standalone document that pdflatex compiles,
its figures are floats with captions stating what is plotted and from how many brackets, one
column wide (3.3 in, checked in the PNG and PDF headers and in \\includegraphics), and the
per-head table exists as CSV and as a longtable.  The compile test is skipped when pdflatex is
not installed (apt: texlive-latex-base texlive-latex-recommended)."""

from __future__ import annotations

import csv
import json
import re
import shutil
import struct
import subprocess
from fractions import Fraction

import pytest

from softrank.audit import run_audit
from softrank.audit.escape import csv_cell
from softrank.audit.tables import csv_text

from .reporthelpers import example_subset

pytest.importorskip("matplotlib")

OPS = ["minilm.t0.L0.H0.T64", "minilm.t0.L1.H3.T64", "minilm.t0.L4.H7.T64"]
MAX_WIDTH_IN = 3.4


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    base = tmp_path_factory.mktemp("paper")
    store = example_subset(base / "store", OPS)
    out = base / "out"
    rep = run_audit(store, out, bootstrap_resamples=100)
    return out, rep


def png_width_inches(data: bytes) -> float:
    """Width of a PNG in inches from its IHDR width and pHYs pixels per metre."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = struct.unpack(">I", data[16:20])[0]
    pos = data.find(b"pHYs")
    assert pos > 0, "PNG without pHYs: its physical size is unknown"
    ppux, _, unit = struct.unpack(">IIB", data[pos + 4:pos + 13])
    assert unit == 1  # pixels per metre
    return width / (ppux * 0.0254)


def test_report_tex_is_a_document_that_inputs_the_tables(paper):
    out, rep = paper
    tex = (out / "report.tex").read_text()
    code = [ln for ln in tex.splitlines() if not ln.startswith("%")]
    assert code[0] == r"\documentclass[10pt]{article}"
    assert r"\begin{document}" in tex and tex.rstrip().endswith(r"\end{document}")
    for name in ("report-tables.tex", "report-figures.tex", "report-per-head.tex"):
        assert rf"\input{{{name}}}" in tex
        part = (out / name).read_text()
        assert r"\documentclass" not in part and r"\begin{document}" not in part
    assert (out / "report-tables.tex").read_text().count(r"\begin{table}") == len(rep["tables"])
    assert r"\begin{figure}" not in (out / "report-tables.tex").read_text()


def test_every_figure_is_a_captioned_float_one_column_wide(paper):
    out, rep = paper
    figs = (out / "report-figures.tex").read_text()
    pdfs = [f for f in rep["figures"] if f.endswith(".pdf")]
    assert len(pdfs) == 3
    floats = re.findall(r"\\begin\{figure\}.*?\\end\{figure\}", figs, re.S)
    assert len(floats) == len(pdfs)
    m = re.search(r"\\providecommand\{\\softrankfigwidth\}\{([\d.]+)in\}", figs)
    assert m and float(m.group(1)) <= MAX_WIDTH_IN
    checked = rep["summary"]["checked"]
    for body, pdf in zip(floats, pdfs, strict=True):
        assert rf"\includegraphics[width=\softrankfigwidth]{{{pdf}}}" in body
        cap = re.search(r"\\caption\{(.*)\}\n", body).group(1)
        assert f"from the {checked} checked brackets" in cap
    # the counts in the captions are those of report.json
    c = rep["figure_counts"]
    assert f"the {c['brackets']['pairs']} (operator" in floats[0]
    assert f"of the {c['margins']['checks']} rigorous checks" in floats[1]
    assert c["margins"]["checks"] == sum(
        1 for r in rep["records"] for e in ("upper", "lower")
        if (r.get(f"{e}_check") or {}).get("margin"))
    for f in rep["figures"]:
        data = (out / f).read_bytes()
        if f.endswith(".png"):
            assert png_width_inches(data) <= MAX_WIDTH_IN
        elif f.endswith(".pdf"):
            box = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", data)
            assert box and float(box.group(1)) / 72 <= MAX_WIDTH_IN
    md = (out / "report.md").read_text()
    assert md.count("*Figure ") == 3 and f"from the {checked} checked brackets" in md


def test_one_word_per_meaning(paper):
    """'resolved' is only a verdict at a budget; the study's criterion is 'within criterion',
    L = U is 'closed'."""
    out, rep = paper
    for t in rep["tables"].values():
        assert "Resolved" not in t["columns"]
        if "Unresolved" in t["columns"]:  # a verdict table
            assert {"Feasible", "Impossible"} <= set(t["columns"])
    md = (out / "report.md").read_text()
    assert "pairs resolved" not in md and "within the study's criterion" in md
    assert "- resolved: at budget k" in md and "- within criterion: " in md
    for name in ("report.tex", "report-tables.tex"):
        text = (out / name).read_text()
        assert "within" in text.lower() and not re.search(r"(?<!un)[Rr]esolved (share|pairs|:)",
                                                  text)


def test_per_head_csv_has_one_row_per_pair(paper):
    out, rep = paper
    rows = list(csv.DictReader((out / "per_head.csv").read_text().splitlines()))
    assert len(rows) == len(rep["pairs"]) == 3 * len(OPS)
    by = {(p["operator"], Fraction(p["eps"])): p for p in rep["pairs"]}
    for r in rows:
        p = by[(r["operator"], Fraction(r["eps"]))]
        assert (int(r["L"]), int(r["U"])) == (p["lower"], p["upper"])
        assert int(r["gap"]) == p["upper"] - p["lower"] >= 0
        assert r["upper_kind"] and r["lower_kind"]


def test_csv_cells_from_the_store_cannot_be_formulas():
    for bad in ("=HYPERLINK(\"x\")", "+1", "-2+3", "@SUM(A1)"):
        assert csv_cell(bad) == "'" + bad
    assert csv_cell("a\nb") == "a\\u000ab" and csv_cell("minilm") == "minilm"
    table = {"columns": ["op", "n"], "csv_columns": ["op", "n"], "text_columns": [0],
             "rows": [["=cmd|' /C calc'!A0", "-1"], ["a,\"b\"", "3"]]}
    rows = list(csv.reader(csv_text(table).splitlines()))
    # store text guarded; a number the report wrote itself is left alone
    assert rows[1] == ["'=cmd|' /C calc'!A0", "-1"] and rows[2] == ["a,\"b\"", "3"]


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex not installed (apt-get install texlive-latex-base "
                           "texlive-latex-recommended); report.tex is not compiled")
def test_report_tex_compiles_with_pdflatex(paper, tmp_path):
    out, rep = paper
    work = tmp_path / "tex"
    shutil.copytree(out, work)
    for _ in range(2):  # longtable settles its column widths on the second run
        proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                               "-no-shell-escape", "report.tex"], cwd=work,
                              capture_output=True, text=True, timeout=300)
        log = (work / "report.log").read_text(errors="replace")
        assert proc.returncode == 0, log[-3000:]
    pdf = (work / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-")
    assert "Overfull \\hbox" not in log and "LaTeX Warning: Reference" not in log
    assert "Float too large" not in log and "Rerun to get" not in log
    # pdflatex read every figure (it logs "<figures/x.pdf, id=...>")
    for f in rep["figures"]:
        if f.endswith(".pdf"):
            assert f"<{f}" in log
    assert json.loads((out / "report.json").read_text())["summary"]["pairs"] == len(rep["pairs"])


TWO_COLUMNS = r"""\documentclass[twocolumn,10pt]{article}
\usepackage{graphicx,booktabs}
\setlength{\textwidth}{7in}\setlength{\oddsidemargin}{-0.25in}\setlength{\columnsep}{0.33in}
\begin{document}
\typeout{SOFTRANK-COLUMN=\the\linewidth}
\input{report-tables.tex}
\input{report-figures.tex}
\end{document}
"""


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex not installed (apt-get install texlive-latex-base "
                           "texlive-latex-recommended); the two-column layout is not compiled")
def test_tables_and_figures_input_into_a_two_column_paper(paper, tmp_path):
    """An author's own two-column preamble: report-tables.tex and report-figures.tex go in
    without an overfull box, the figures at their natural 3.3 in (no scaling: the column is
    wider), so their 8 pt text prints at 8 pt."""
    out, _ = paper
    work = tmp_path / "two"
    shutil.copytree(out, work)
    (work / "paper.tex").write_text(TWO_COLUMNS.replace(
        r"\input{report-figures.tex}",
        r"\let\origresizebox\resizebox"
        r"\renewcommand{\resizebox}[2]{\typeout{SOFTRANK-SCALED}\origresizebox{#1}{#2}}"
        "\n" r"\input{report-figures.tex}"))
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "-no-shell-escape", "paper.tex"], cwd=work, capture_output=True,
                          text=True, timeout=300)
    log = (work / "paper.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    column = float(re.search(r"SOFTRANK-COLUMN=([\d.]+)pt", log).group(1))
    assert column >= 3.3 * 72.27  # the test's column is wide enough for a figure
    assert "Overfull \\hbox" not in log and "SOFTRANK-SCALED" not in log


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex not installed (apt-get install texlive-latex-base "
                           "texlive-latex-recommended); report.tex is not compiled")
def test_report_tex_with_hostile_store_text_compiles_to_the_literal_text(tmp_path):
    """A family holding TeX specials, a newline and an \\input still compiles (no error, no
    file read) and prints literally."""
    from .storefactory import build_store

    build_store(tmp_path / "s", n_ops=1)
    p = tmp_path / "s" / "operators.jsonl"
    family = "}\\input{/etc/hostname}%\n\\end{longtable}<|>[9in]_^~#&$"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    p.write_text("".join(json.dumps({**r, "family": family}) + "\n" for r in recs))
    out = tmp_path / "o"
    run_audit(tmp_path / "s", out, bootstrap_resamples=50)
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "-no-shell-escape", "report.tex"], cwd=out, capture_output=True,
                          text=True, timeout=300)
    log = (out / "report.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    assert "(/etc/hostname" not in log  # TeX logs "(file" for every file it opens
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "report.pdf", "-"], cwd=out, capture_output=True,
                              text=True, timeout=60).stdout
        assert "\\input{/etc/hostname}%\\u000a\\end{longtable}" in text
