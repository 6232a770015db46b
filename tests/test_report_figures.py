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
    assert r"Validated brackets $L \leq r_\varepsilon \leq U$" in texts
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
    # $ escaped (no mathtext from store text); a lone backslash is literal text
    assert any(t.startswith(r"a\$b\c, $\varepsilon") for t in titles)
