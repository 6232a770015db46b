"""report-tables.tex compiles in a plain one-column ``article`` with every table at its natural
size (no overfull box, no scaling), and in two columns without an overfull box (tables scaled to
the column); report.tex compiles alone with pdflatex, its figures one column wide.  Skipped when
no LaTeX engine is installed; booktabs is used when present, else its rules are stood in by
\\hline (the rules do not change column widths).
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from softrank.audit import run_audit
from softrank.audit.report import build_report, report_latex_tables

from .test_audit import build_known_store

ENGINE = next((e for e in ("pdflatex", "lualatex", "xelatex") if shutil.which(e)), None)
pytestmark = pytest.mark.skipif(ENGINE is None, reason="no LaTeX engine installed")

PREAMBLE = r"""\documentclass[%s]{article}
\usepackage{graphicx}
\IfFileExists{booktabs.sty}{\usepackage{booktabs}}{%%
  \newcommand{\toprule}{\hline}\newcommand{\midrule}{\hline}%%
  \newcommand{\bottomrule}{\hline}\newcommand{\addlinespace}{\noalign{\vskip 2pt}}%%
  \def\cmidrule(##1)##2{\cline{##2}}}
\let\origresizebox\resizebox
\renewcommand{\resizebox}[2]{\typeout{SOFTRANK-SCALED}\origresizebox{#1}{#2}}
\begin{document}
\input{report.tex}
\softrankassumptions
\end{document}
"""


def compile_tex(tex: str, tmp: Path, options: str = "") -> str:
    """Compiles report.tex inside an article; returns the log (asserts success)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "report.tex").write_text(tex)
    (tmp / "doc.tex").write_text(PREAMBLE % options)
    proc = subprocess.run([ENGINE, "-interaction=nonstopmode", "-halt-on-error",
                           "-no-shell-escape", "doc.tex"], cwd=tmp, capture_output=True,
                          text=True, timeout=300)
    log = (tmp / "doc.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    return log


def example_like_records(seed: int = 3) -> tuple[list[dict], dict[str, int]]:
    """Records shaped like the shipped example: 72 heads (6 layers x 12) of 64 x 64, eps
    0.15 / 0.25 / 0.35, one upper and one lower claim per pair, confirmed."""
    rng = random.Random(seed)
    recs, layers = [], {}
    for layer in range(6):
        for head in range(12):
            op = f"minilm.t0.L{layer}.H{head}.T64"
            layers[op] = layer
            for eps in ("3/20", "1/4", "7/20"):
                L = rng.randint(1, 30)
                U = rng.choice([L, rng.randint(L, 64)])
                recs.append({"bracket": f"{op}.e{eps}", "operator": op, "family": "minilm",
                             "eps": eps, "shape": [64, 64], "lower": L, "upper": U,
                             "lower_claim": L, "upper_claim": U, "lower_kind": "decoder",
                             "upper_outcome": "confirmed", "lower_outcome": "confirmed",
                             "producer": {"upper": "alt_l1", "lower": "keyset"}})
    return recs, layers


def _report_tex(records, layers, budgets=(8, 16, 32)):
    rep = build_report(records, store={"path": "examples/minilm", "sha256": "0" * 64},
                       tier="auto", budgets=list(budgets), environment={"numpy": "x"},
                       methods={}, figures=[], run={"command": "softrank-certify audit"},
                       layers=layers)
    return rep, report_latex_tables(rep)


def test_example_like_tables_fit_one_column_at_natural_size(tmp_path):
    recs, layers = example_like_records()
    rep, tex = _report_tex(recs, layers)
    assert {"intervals", "medians", "layers"} <= set(rep["tables"])
    log = compile_tex(tex, tmp_path / "one")
    assert "Overfull \\hbox" not in log
    assert "SOFTRANK-SCALED" not in log  # every table fits without shrinking
    assert log.count("Table") >= 0 and "LaTeX Warning: Float too large" not in log


def test_two_column_layout_has_no_overfull_box(tmp_path):
    recs, layers = example_like_records()
    _, tex = _report_tex(recs, layers)
    log = compile_tex(tex, tmp_path / "two", "twocolumn")
    assert "Overfull \\hbox" not in log


def test_audit_report_tex_compiles_without_overfull_boxes(tmp_path):
    store = tmp_path / "store"
    build_known_store(store)
    out = tmp_path / "out"
    run_audit(store, out, budgets=(4, 8, 12), figures=False, bootstrap_resamples=200)
    log = compile_tex((out / "report-tables.tex").read_text(), tmp_path / "tex")
    assert "Overfull \\hbox" not in log
