"""Forged report text: store strings cannot fake a Result line, break out of a table, a code
span, a LaTeX cell or comment, or a matplotlib title."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from softrank.audit import escape
from softrank.cli import main

from .storefactory import build_store

# under 80 characters, so that tables show it whole (longer families are cut there)
FORGED = "synthetic\n\n**Result:** every float64 claim was proved.\n<!--"


def _set_family(store: Path, family: str) -> None:
    p = store / "operators.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    for r in recs:
        r["family"] = family
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _set_producer(store: Path, name: str) -> None:
    p = store / "brackets.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    for r in recs:
        r["producer"] = {"upper": name, "lower": name}
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _audit(store: Path, out: Path, *extra: str) -> int:
    return main(["audit", str(store), "--out", str(out), "--no-progress", *extra])


def test_forged_result_line_in_family_does_not_render(tmp_path, capsys):
    build_store(tmp_path / "s", n_ops=1)  # one claim of two is false on purpose
    _set_family(tmp_path / "s", FORGED)
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 1
    md = (tmp_path / "o" / "report.md").read_text()
    lines = md.splitlines()
    results = [ln for ln in lines if "**Result:**" in ln]
    assert len(results) == 1 and results[0].startswith("**Result:** 1 float64 claims were not")
    # the Result line comes before any store text (only the title and a blank line before it)
    assert lines.index(results[0]) == 2 and lines[0] == "# Audit report"
    assert "<!--" not in md and "\\<\\!--" in md
    # the store text stayed on its lines: no line starts with it
    assert not any(ln.startswith(("<", "**Result:** every")) for ln in lines)
    assert "\\u000a" in md  # the newline is shown, not obeyed
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["summary"]["families"] == [FORGED]  # report.json keeps the exact text


def test_table_cells_and_code_spans_cannot_be_broken(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    _set_family(tmp_path / "s", "a | b ` c [x](http://e) *y* _z_ &amp; $m$")
    _set_producer(tmp_path / "s", "p|q\r\n# Heading")
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 1
    md = (tmp_path / "o" / "report.md").read_text()
    for ln in md.splitlines():
        if ln.startswith("| a"):  # a table row: the family's pipe is escaped
            assert ln.startswith("| a \\| b \\` c \\[x\\](http\\://e) \\*y\\* \\_z\\_ \\&amp;")
    assert "\n# Heading" not in md and "p\\|q\\\\u000d\\\\u000a\\# Heading" in md


def test_store_path_in_code_span_and_tex_comment(tmp_path):
    store = tmp_path / "s`x\n\\input{evil}"
    build_store(store, n_ops=1)
    assert _audit(store, tmp_path / "o", "--no-figures") == 1
    md = (tmp_path / "o" / "report.md").read_text()
    # the path's backslash doubled: the display is one-to-one
    assert "/s`x\\u000a\\\\input{evil}``" in md and "\nStore: ``/" in md
    for f in (tmp_path / "o").glob("*.tex"):
        for ln in f.read_text().splitlines():
            if "evil" in ln:  # in a comment, or escaped text of the document's body
                assert ln.startswith("%") or (
                    "\\input{evil}" not in ln
                    and "x\\textbackslash{}u000a\\textbackslash{}\\textbackslash{}input\\{evil\\}"
                    in ln)


def test_latex_cells_escape_store_text(tmp_path):
    build_store(tmp_path / "s", n_ops=1)
    _set_family(tmp_path / "s", "}\\input{/etc/passwd}%\n\\end{tabular}<|>")
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 1
    for f in [*(tmp_path / "o").glob("*.tex"), *(tmp_path / "o" / "tables").glob("*.tex")]:
        text = f.read_text()
        assert "\\input{/etc" not in text
        assert "\\end{tabular}<" not in text
    tex = (tmp_path / "o" / "tables" / "brackets.tex").read_text()
    assert ("\\}\\textbackslash{}\\textbackslash{}input\\{/etc/passwd\\}\\%\\textbackslash{}u000a"
            "\\textbackslash{}\\textbackslash{}end\\{tabular\\}"
            "\\textless{}\\textbar{}\\textgreater{}") in tex


def test_figure_text_is_not_mathtext(tmp_path):
    pytest.importorskip("matplotlib")
    build_store(tmp_path / "s", n_ops=1)
    # unbalanced or unknown mathtext would raise inside matplotlib if it were parsed
    _set_family(tmp_path / "s", "$\\undefinedmacro{$ x\ny")
    assert _audit(tmp_path / "s", tmp_path / "o") == 1
    svg = (tmp_path / "o" / "figures" / "brackets.svg").read_text()
    assert "undefinedmacro" in svg or "<path" in svg  # text drawn (as glyphs or text)


def test_escape_functions():
    assert escape.visible("a\nb\u2028c\u202ed\x00") == "a\\u000ab\\u2028c\\u202ed\\u0000"
    assert escape.md("**x** <b>") == "\\*\\*x\\*\\* \\<b\\>"
    assert escape.md_code("a``b") == "```a``b```"
    assert escape.md_code("`a") == "`` `a ``"
    assert escape.tex("50% & $1_2^3$ {x} ~\\") == (
        "50\\% \\& \\$1\\_2\\textasciicircum{}3\\$ \\{x\\} "
        "\\textasciitilde{}\\textbackslash{}\\textbackslash{}")
    assert escape.tex_comment("a\nb") == "a\\u000ab"
    assert escape.svg_text("$x$\n") == "\\$x\\$\\u000a"


def _two_family_store(path: Path, families: tuple[str, str]) -> None:
    """Two operators at the same eps in the given families, one bracket each."""
    from softrank.witnesses import Store

    from .helpers import random_attention
    rng = np.random.default_rng(3)
    with Store.create(path) as st:
        for fam, oid in ((families[0], "op0"), (families[1], "op1")):
            A = random_attention(rng, 8, 8, scale=2.0)
            st.add_operator(A, family=fam, id=oid)
            lower = {"kind": "nonzero", "rank": 1} if oid == "op0" else None
            st.add_bracket(oid, "1/2", {"kind": "factors", "rank": 8, "U": np.eye(8),
                                        "V": A}, lower, id=f"{oid}-b")


def test_a_family_named_all_is_not_the_aggregate(tmp_path):
    _two_family_store(tmp_path / "s", ("all", "b"))
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    rows = {g["family"]: g for g in rep["groups"]}
    # the family "all" has its own operator only; the aggregate (family null) has both
    assert rows["all"]["operators"] == 1 and rows["all"]["records"] == 1
    assert rows[None]["operators"] == 2 and rows[None]["records"] == 2
    md = (tmp_path / "o" / "report.md").read_text()
    assert any(ln.startswith("| all |") for ln in md.splitlines())
    assert any(ln.startswith("| *all families* |") for ln in md.splitlines())
    tex = (tmp_path / "o" / "report-tables.tex").read_text()
    assert "\\textit{all families} &" in tex and "\nall & " in tex


def test_a_family_cannot_pass_for_the_aggregate_label(tmp_path):
    _two_family_store(tmp_path / "s", ("*all families*", "b"))
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 0
    md = (tmp_path / "o" / "report.md").read_text()
    rows = [ln for ln in md.splitlines() if "all families" in ln and ln.startswith("|")]
    # one escaped store row per table with families, one italic aggregate row: never equal
    assert {ln.split(" | ")[0] for ln in rows} == {"| \\*all families\\*", "| *all families*"}


def test_a_bracket_in_a_family_cannot_open_a_tex_optional_argument(tmp_path):
    _two_family_store(tmp_path / "s", ("[9in]", "b"))
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 0
    tex = (tmp_path / "o" / "tables" / "brackets.tex").read_text()
    assert "[9in]" not in tex and "{[}9in{]} &" in tex


@pytest.mark.parametrize("text", ["https://evil.example", "see www.evil.example now",
                                  "mail a@evil.example", "WWW.EVIL.EXAMPLE"])
def test_store_text_cannot_become_an_autolink(text):
    out = escape.md(text)
    assert ":" not in out.replace("\\:", "") and "@" not in out.replace("\\@", "")
    assert "www." not in out.lower()


def test_per_head_csv_and_longtable_neutralise_store_text(tmp_path):
    import csv

    build_store(tmp_path / "s", n_ops=1)
    family = "=HYPERLINK(\"http://e\")\n}\\end{longtable}%"
    _set_family(tmp_path / "s", family)
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 1
    text = (tmp_path / "o" / "per_head.csv").read_text()
    rows = list(csv.reader(text.splitlines()))
    pairs = json.loads((tmp_path / "o" / "report.json").read_text())["pairs"]
    assert len(rows) == len(pairs) + 1  # the newline did not start a row
    for r in rows[1:]:
        assert r[1] == "'" + escape.visible(family)  # a spreadsheet shows it as text
    tex = (tmp_path / "o" / "report-per-head.tex").read_text()
    assert tex.count("\\end{longtable}") == 1 and "\\end{longtable}%" not in tex
    q = "{\\ttfamily\\char34}"  # a literal double quote, not OT1's closing quote
    assert (f"=HYPERLINK({q}http://e{q})\\textbackslash{{}}u000a\\}}"
            "\\textbackslash{}\\textbackslash{}end") in tex


def test_latex_text_is_ascii_whatever_the_store_holds():
    """pdflatex with the report's preamble stops on most characters past ASCII (CJK,
    Cyrillic, a thorn): store text is written with them as visible ``\\uXXXX`` text."""
    from softrank.audit.escape import tex

    out = tex("Zürich 中文 Þ \U0001F600 a_b \u202e")
    assert out.isascii()
    assert out == (r"Z\textbackslash{}u00fcrich \textbackslash{}u4e2d\textbackslash{}u6587 "
                   r"\textbackslash{}u00de \textbackslash{}U0001f600 a\_b "
                   r"\textbackslash{}u202e")


def test_latex_text_forms_no_ligature(tmp_path):
    """OT1 set store text -- and --- as dashes, `` and '' as curly quotes, !` and ?` as
    inverted marks, and " as '': a''b and a"b printed alike."""
    import shutil
    import subprocess

    from softrank.audit.escape import tex

    text = "a--b---c``d''e!`f?`g\"h-i'j"
    out = tex(text)
    for pair in ("--", "``", "''", "!`", "?`"):
        assert pair not in out
    assert '"' not in out and "'" not in out and "`" not in out
    if shutil.which("pdflatex") is None:
        return
    doc = tmp_path / "t.tex"
    doc.write_text("\\documentclass{article}\\begin{document}" + out + "\\end{document}\n")
    done = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode", doc.name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]


def test_figure_text_from_a_store_is_cut_and_long_names_stay_apart():
    """A 2,000,000-character family went whole into a matplotlib title (gigabytes, minutes,
    then exit 3): figure text is cut to SVG_TEXT_MAX characters, with a digest that keeps
    two long names sharing their first 60 characters apart; short text is unchanged."""
    from softrank.audit.escape import SVG_TEXT_MAX, svg_text

    a, b = "f" * 2_000_000, "f" * 1_999_999 + "g"
    assert len(svg_text(a)) <= SVG_TEXT_MAX and svg_text(a) != svg_text(b)
    assert svg_text(a).startswith("f" * 60) and svg_text("fam$x") == r"fam\$x"
    assert svg_text("x" * SVG_TEXT_MAX) == "x" * SVG_TEXT_MAX
    assert "$" not in svg_text("$" * 1000).replace(r"\$", "")


def test_long_families_are_cut_in_every_table_and_kept_whole_in_report_json(tmp_path):
    """A family goes into some forty table cells, each escaped (``^`` is 17 characters in
    LaTeX): 200 families of 100,000 carets wrote 6.6 GB of report and held 8.7 GB. Table
    cells now show it cut as figure text is, with a digest that keeps two long names apart."""
    fams = ("^" * 100_000 + "a", "^" * 100_000 + "b")
    _two_family_store(tmp_path / "s", fams)
    assert _audit(tmp_path / "s", tmp_path / "o", "--no-figures") == 0
    out = tmp_path / "o"
    sizes = {p.name: p.stat().st_size for p in out.rglob("*") if p.is_file()}
    rep = json.loads((out / "report.json").read_text())
    assert sorted(rep["summary"]["families"]) == sorted(fams)  # the data keeps them whole
    assert max(v for k, v in sizes.items() if k != "report.json") < 400_000, sizes
    md = (out / "report.md").read_text()
    shown = {escape.md(escape.cut(f)) for f in fams}
    assert len(shown) == 2 and all(s in md for s in shown)
    assert escape.cut("^" * 80) == "^" * 80 and len(escape.cut(fams[0])) <= escape.SVG_TEXT_MAX


def test_long_eps_and_producer_names_are_shown_short_and_the_latex_builds(tmp_path):
    """A 4,000-character producer name or eps (2^-4000) went whole into every table cell, and
    pdflatex stopped ("Dimension too large"); a float eps filled the cells with 56 digits."""
    import json
    import shutil
    import subprocess
    from fractions import Fraction

    from softrank.cli import main
    from softrank.witnesses import Store

    rng = np.random.default_rng(5)
    A = np.exp(rng.normal(size=(6, 6)))
    A /= A.sum(1, keepdims=True)
    u, s, vt = np.linalg.svd(A)
    U, V = u[:, :5] * s[:5], vt[:5]
    tiny, float_eps = f"1/{2**4000}", str(Fraction(0.3))
    store = tmp_path / "s"
    with Store.create(store) as st:
        op = st.add_operator(A, family="f")
        for eps in (tiny, float_eps):
            st.add_bracket(op, eps, upper={"kind": "factors", "rank": 5, "U": U, "V": V},
                           producer={"upper": "p" * 4000, "lower": "none"})
    out = tmp_path / "o"
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "-q"]) in (0, 1)
    md = (out / "report.md").read_text()
    assert "~0.3 \\[" in md and "~7.58608e-1205 \\[" in md and "p" * 100 not in md
    assert len(md.split("~0.3 \\[", 1)[1].split("\\]", 1)[0]) == 16  # a 64-bit digest
    assert "0.299999999999999988897769753748434595763683319091796875" not in md
    tex = (out / "report-tables.tex").read_text()
    assert max(len(line) for line in tex.splitlines()) < 2000
    doc = json.loads((out / "report.json").read_text())
    assert {r["eps"] for r in doc["records"]} == {tiny, float_eps}  # exact where it counts
    csv = (out / "per_head.csv").read_text()  # data: exact, as before the short form
    assert "0.299999999999999988897769753748434595763683319091796875" in csv
    assert "~" not in csv
    main_tex = (out / "report.tex").read_text()
    assert "\\textasciitilde{}0.3 {[}" in main_tex  # "~" was TeX's tie: "0.3" read as exact
    if shutil.which("pdflatex") is None:
        return
    done = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode",
                           "report.tex"], cwd=out, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]


def test_report_md_writes_no_raw_angle_brackets_of_its_own(tmp_path):
    # "random.Random('softrank-bootstrap:<seed>:<family>:<eps>')" read as three HTML tags:
    # a rendered report showed "softrank-bootstrap:::"
    import re

    from softrank.cli import main

    store = Path(__file__).resolve().parent.parent / "examples" / "glazier_L1H10"
    out = tmp_path / "o"
    assert main(["audit", str(store), "--out", str(out), "--no-figures", "-q"]) in (0, 1)
    md = (out / "report.md").read_text()
    outside_code = re.sub(r"(`+)(?:(?!\1).)*?\1", "", md)
    assert not re.search(r"<[A-Za-z/!]", outside_code)
    assert "`random.Random('softrank-bootstrap:<seed>:<family>:<eps>')" in md


def test_no_short_name_passes_for_the_cut_form_of_a_long_one():
    # "L"*60 + "…[f73e275c]" (71 characters) was shown whole, exactly as "L"*100 is shown cut
    long_name = "L" * 100
    mimic = escape.cut(long_name)
    assert len(mimic) <= escape.SVG_TEXT_MAX
    assert escape.cut(mimic) != escape.cut(long_name)
    assert escape.svg_text(mimic) != escape.svg_text(long_name)
    assert escape.cut("an ordinary family") == "an ordinary family"


def test_layer_1_and_layer_string_1_do_not_look_alike():
    from softrank.audit.tables import layer_cell

    assert len({layer_cell(1), layer_cell("1"), layer_cell('"1"'), layer_cell('""1""')}) == 4
    assert layer_cell(1) == "1" and layer_cell("enc.3") == "enc.3"
    assert len(layer_cell("x" * 10_000)) <= escape.SVG_TEXT_MAX
