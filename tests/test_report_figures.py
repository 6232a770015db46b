"""Figures: PDF as well as SVG and PNG, labels in mathtext, store strings shown literally."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from softrank.audit import figures as F  # noqa: E402


def pairs(family: str) -> list[dict]:
    out = []
    for i in range(5):
        for eps in ("1/4", "3/8"):
            out.append({"operator": f"o{i}", "family": family, "eps": eps, "lower": i,
                        "upper": i + 2, "resolved": True})
    return out


def _texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return texts


def test_bracket_labels_are_mathtext():
    fig = F.brackets_figure(pairs("fam"))
    texts = _texts(fig)
    # the caption (report.md, report-figures.tex) says what is plotted; the axis says it too
    assert any(t.startswith(r"rank: $L \leq r_\varepsilon \leq U$") for t in texts)
    assert any(r"$\varepsilon = 0.25$" in t for t in texts)


def test_dollar_in_a_family_name_is_literal_and_all_formats_are_written(tmp_path, monkeypatch):
    # one figure keeps the test fast; the audit tests write all of them
    monkeypatch.setattr(F, "FIGURES", {"brackets": F.FIGURES["brackets"]})
    recs = [{"family": "a$b\\c", "operator": f"o{i}", "chi": "1/1000000", "eps": "1/4",
             "upper_check": {"kind": "factors", "status": "holds",
                             "margin": {"lo": "1/100", "hi": "1/50"}}} for i in range(3)]
    written = F.write_figures(tmp_path, pairs("a$b\\c"), recs)
    assert sorted(written) == sorted(f"figures/{n}.{x}" for n in F.FIGURES for x in F.FORMATS)
    pdf = (tmp_path / "figures" / "brackets.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and b"CreationDate" not in pdf
    titles = _texts(F.brackets_figure(pairs("a$b\\c")))
    # $ escaped (no mathtext from store text); a backslash is doubled (one-to-one display)
    assert any(t.startswith(r"a\$b\\c, $\varepsilon") for t in titles)


def _margin_records(kinds: int) -> list[dict]:
    recs = []
    for i in range(kinds):
        for j in range(4):
            recs.append({"bracket": f"b{i}.{j}", "family": "f", "operator": f"o{j}",
                         "eps": "1/4", "upper_check": None,
                         "lower_check": {"kind": f"kind{i}", "status": "holds",
                                         "margin": {"lo": f"1/{10 ** (j + 1)}",
                                                    "hi": f"2/{10 ** (j + 1)}"}}})
    return recs


@pytest.mark.parametrize("n", [1, 3, 4, 6, 9])
def test_figures_are_one_column_wide_small_multiples_in_a_grid(n):
    """Every figure is WIDTH_IN (one column) wide whatever the panel count; panels go in a
    grid of at most 3 columns, never a row of n; all text is at least 8 pt."""
    many = [{"operator": f"o{i}", "family": f"fam{k}", "eps": "1/4", "lower": 2, "upper": 5,
             "resolved": True} for k in range(n) for i in range(3)]
    for fig in (F.brackets_figure(many), F.margins_figure(_margin_records(n)),
                F.chi_figure(_margin_records(1))):
        w, h = fig.get_size_inches()
        assert w == F.WIDTH_IN <= 3.4 and h <= 9
        axes = [ax for ax in fig.axes if ax.axison]
        cols = {round(ax.get_position().x0, 3) for ax in axes}
        assert len(cols) <= 3
        sizes = [t.get_fontsize() for t in fig.findobj(lambda o: hasattr(o, "get_fontsize"))
                 if getattr(t, "get_text", lambda: "")()]
        assert sizes and min(sizes) >= F.FONT
    rows, cols = F.grid_shape(n)
    assert rows * cols >= n and cols <= 3 and (n < 4 or cols >= 2)


def test_chi_legend_quotes_family_names():
    # matplotlib drops a legend label starting with "_", and a family could be named like
    # the merged group: families are quoted, the merged group is not
    recs = [{"family": f, "operator": f"o{i}", "chi": "1/1000", "eps": "1/2"}
            for i, f in enumerate(["_secret", "good", "9 other families"])]
    legend = [t.get_text() for t in F.chi_figure(recs).axes[0].get_legend().get_texts()]
    assert legend == ["\u20189 other families\u2019 (1)", "\u2018_secret\u2019 (1)",
                      "\u2018good\u2019 (1)"]
    many = [{"family": f"f{i:02d}", "operator": "o", "chi": "1/1000", "eps": "1/2"}
            for i in range(F.MAX_LEGEND + 3)]
    legend = [t.get_text() for t in F.chi_figure(many).axes[0].get_legend().get_texts()]
    assert legend[-1] == "4 other families (4)" and legend[0] == "\u2018f00\u2019 (1)"
