"""Display of proved numbers: outward rounding of printed ends at any size, and the CLI
refusals of grid / gauge / the array-size variable (exit 2 naming the option, no traceback)."""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank import numfmt
from softrank.audit import intrinsic as audit_intrinsic
from softrank.audit import report, tables
from softrank.cli import main
from softrank.commands._intrinsic_check import format_result
from softrank.commands.check import format_line

TINY_LO, TINY_HI = Fraction(1, 10**620), Fraction(1, 10**619)
_NUM = r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?"


def _ends(text: str) -> list[tuple[Fraction, Fraction]]:
    """Every "[a, b]" of plain decimals in ``text`` (escaped Markdown brackets included)."""
    text = text.replace("\\[", "[").replace("\\]", "]")
    return [(Fraction(a), Fraction(b))
            for a, b in re.findall(rf"\[({_NUM}), ({_NUM})\]", text)]


def _random_rationals(n: int, seed: int = 0) -> list[Fraction]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        e = rng.choice([rng.randint(-12, 12), rng.randint(-2000, 2000)])
        q = Fraction(rng.randint(1, 10**rng.randint(1, 25)), rng.randint(1, 10**rng.randint(1, 25)))
        q *= Fraction(10) ** e
        out.append(q if rng.random() < 0.7 else -q)
    return out


@pytest.mark.parametrize("digits", [1, 3, 4, 6])
def test_directed_formatters_bound_the_exact_value(digits):
    for q in _random_rationals(400, seed=digits):
        lo, hi = numfmt.sig(q, digits, "down"), numfmt.sig(q, digits, "up")
        assert Fraction(lo) <= q <= Fraction(hi), (q, lo, hi)
        assert Fraction(numfmt.sci(q, digits, "down")) <= q <= Fraction(numfmt.sci(q, digits, "up"))
        assert Fraction(numfmt.fixed(q, digits, "down")) <= q <= Fraction(numfmt.fixed(q, digits,
                                                                                       "up"))
        assert Fraction(tables.fmt_short(q, digits, "down")) <= q \
            <= Fraction(tables.fmt_short(q, digits, "up"))
        a, b = _ends(numfmt.interval(q, abs(q) * 2))[0]
        assert a <= q and b >= abs(q) * 2
        # one unit of the last digit apart at most, so the rounding is no coarser than asked
        e = numfmt.exponent10(abs(q))
        assert Fraction(hi) - Fraction(lo) <= Fraction(10) ** (e - digits + 2)


def test_nearest_matches_python_g_format_on_floats():
    rng = np.random.default_rng(3)
    for x in rng.standard_normal(3000) * 10.0 ** rng.integers(-30, 30, 3000):
        assert numfmt.sig(Fraction(float(x)), 6) == f"{x:.6g}"
        assert numfmt.sci(Fraction(float(x)), 3) == f"{x:.2e}"


def test_exponent_is_exact_at_powers_of_ten():
    for e in (-700, -5, -1, 0, 1, 17, 400):
        p = Fraction(10) ** e
        assert numfmt.exponent10(p) == e
        assert numfmt.exponent10(p - p / 10**30) == e - 1
    assert numfmt.exponent10(Fraction(2) ** 1_000_000) == 301029  # quick, no str() of it


def test_values_below_and_beyond_the_float_range():
    assert numfmt.interval(TINY_LO, TINY_HI) == "[1e-620, 1e-619]"
    assert numfmt.interval(Fraction(10**1200) / 3, Fraction(10**1200) / 3) == \
        "[3.33333e+1199, 3.33334e+1199]"
    assert numfmt.float_down(TINY_LO) == 0.0 < numfmt.float_up(TINY_LO)
    assert numfmt.float_up(Fraction(10**400)) == np.inf
    assert numfmt.float_down(Fraction(10**400)) == np.finfo(float).max
    assert numfmt.clamped_float(Fraction(-(10**400))) == -np.inf
    x = Fraction(1, 3)
    assert Fraction(numfmt.float_down(x)) < x < Fraction(numfmt.float_up(x))


def test_exact_strings_past_pythons_digit_limit_are_displayed():
    # a kernel interval's exact string can pass the limit on int(str) (an intrinsic record
    # mixing 1e-310 and 1e300 entries gave one): `check` and `audit` then exited 3
    from softrank.certify.rationals import qstr

    q = Fraction(7**60000, 3**50000 + 1)
    s = qstr(q)
    assert len(s) > 50_000 and numfmt.exact(s) == q and numfmt.exact("-" + s) == -q
    lo, hi = (Fraction(v) for v in numfmt.outward4(s)[1:-1].split(", "))
    assert lo <= q <= hi and hi / lo < Fraction(1001, 1000)
    a, b = (Fraction(v) for v in numfmt.interval(s, s)[1:-1].split(", "))
    assert a <= q <= b and b - a <= a / 10**5
    assert numfmt.near4(s) == "~6.602e+26849" and numfmt.sci("-" + s) == "-6.60e+26849"
    assert numfmt.near4("1/4") == "1/4" and numfmt.exact(" 3/4 ") == Fraction(3, 4)


def _rank_result(kappa: tuple[Fraction, Fraction]) -> dict:
    iv = {"lo": str(kappa[0]), "hi": str(kappa[1])}
    return {"id": "rec", "operator": "op", "kind": "rank", "rank": 2,
            "tau": {"lo": "1/3", "hi": "2/3"}, "kappa": iv, "profiles": []}


def test_check_line_and_audit_table_print_tiny_kappa_outward():
    res = _rank_result((TINY_LO, TINY_HI))
    line = format_result(res)
    assert "kappa in [1e-620, 1e-619]" in line
    tau, kappa = _ends(line)
    assert tau[0] <= Fraction(1, 3) and tau[1] >= Fraction(2, 3)
    assert kappa[0] <= TINY_LO and kappa[1] >= TINY_HI and kappa[0] > 0
    row = {"operator": "op", "r": 2, "eps": "1/4", "tau": res["tau"], "kappa": res["kappa"],
           "profile_status": "applicable", "profile": {"lo": "1/7", "hi": "10/7"},
           "log_profile": {"lo": "-5/3", "hi": "5/3"}, "rank_bracket": [1, 3]}
    md = audit_intrinsic.render_markdown({"rows": [row], "native": [], "errors": [],
                                          "figure": None})
    got = _ends(md)
    want = [(Fraction(1, 3), Fraction(2, 3)), (TINY_LO, TINY_HI), (Fraction(1, 7), Fraction(10, 7)),
            (Fraction(-5, 3), Fraction(5, 3))]
    assert len(got) >= len(want)
    for (a, b), (lo, hi) in zip(got, want, strict=False):
        assert a <= lo and b >= hi


def test_margin_and_interval_cells_round_outward():
    m = {"lo": str(Fraction(-2, 3) / 10**500), "hi": str(Fraction(2, 3) * 10**500)}
    (a, b), = _ends(report._fmt_margin(m))
    assert a <= Fraction(m["lo"]) and b >= Fraction(m["hi"])
    assert tables._share_ci(["1/6", "5/6"]) == "[16.6, 83.4]"  # nearest would be 16.7, 83.3
    assert tables._median_ci(["1/3", "2/3"], 2) == "[0.33, 0.67]"
    assert tables._median_ci(["7/2", None], 1) == "[3.5, inf]"


def test_check_line_rounds_chi_up():
    r = {"bracket": "b", "operator": "op", "eps": "1/4", "lower_claim": 1, "lower": 1,
         "lower_outcome": "confirmed", "upper_claim": 2, "upper": 2,
         "upper_outcome": "confirmed", "chi": str(Fraction(2, 3) / 10**700), "resolved": True}
    chi = re.search(r"chi<=(\S+)", format_line(r)).group(1)
    assert Fraction(chi) >= Fraction(r["chi"]) > 0 and chi == "6.67e-701"


# ------------------------------------------------------- intrinsic factors beyond the range

def _big_store(tmp_path: Path, scale: float) -> Path:
    from softrank.witnesses import Store, open_store
    from softrank.witnesses.intrinsic_store import IntrinsicWriter
    from softrank.witnesses.models import softmax64
    from softrank.witnesses.producers import intrinsic as P

    H = np.random.default_rng(0).standard_normal((12, 10)) * 2
    root = tmp_path / "s"
    with Store.create(root) as st:
        oid = st.add_operator(softmax64(H), family="toy", logits=H)
    C = P.interaction_float(None, H)
    rw = P.rank_witness(C, 2, budget=0.3)
    arrs = dict(rw.arrays)
    arrs["X"], arrs["Y"] = arrs["X"] * scale, arrs["Y"] * scale
    with IntrinsicWriter(open_store(root)) as w:
        w.add(oid, "rank", arrs, rank=2, eps=("1/4",), claims=rw.claims)
    return root


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_factors_of_1e300_check_and_audit_without_overflow(tmp_path, capsys):
    root = _big_store(tmp_path, 1e300)
    assert main(["check", str(root), "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    (res,) = doc["intrinsic"]
    # T = X Y^T is about 1e600 here, so q(C - T) is huge and tau = 2 tanh(q/4) is 2 to many
    # digits: a proved upper end below that is wrong (an earlier kernel proved [0, 0])
    assert res["tau"]["hi"] is None or Fraction(res["tau"]["hi"]) >= Fraction(199, 100)
    k = res["kappa"]
    assert Fraction(k["lo"]) > 10**500
    assert main(["check", str(root), "-v"]) in (0, 1)  # -v: one line per intrinsic record
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "kappa in" in ln)
    kap = _ends(line[line.index("kappa in"):])[0]
    assert kap[0] <= Fraction(k["lo"]) and kap[1] >= Fraction(k["hi"])
    rep = tmp_path / "rep"
    assert main(["audit", str(root), "--out", str(rep), "--no-progress"]) == 0
    md = (rep / "intrinsic.md").read_text()
    assert "e+600" in md and "internal error" not in capsys.readouterr().err
    data = json.loads((rep / "intrinsic.json").read_text())
    assert data["rows"][0]["kappa"]["lo"] == k["lo"]  # exact in JSON


# --------------------------------------------------------------------------- CLI refusals

def test_grid_refuses_a_huge_point_count_with_a_short_message(capsys):
    assert main(["grid", "--r", "1000000", "--L", "2", "--eps", "1/4"]) == 2
    err = capsys.readouterr().err
    assert "L:" in err and "2^1000000" in err and len(err) < 300


def test_grid_plot_names_the_file_it_writes(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    assert main(["grid", "--r", "1", "--L", "3", "--eps", "1/4", "--plot", "dir"]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "is a folder" in err and not (tmp_path / "dir.png").exists()
    assert main(["grid", "--r", "1", "--L", "3", "--eps", "1/4", "--plot", "x.nope"]) == 2
    assert "--plot" in capsys.readouterr().err
    assert main(["grid", "--r", "1", "--L", "3", "--eps", "1/4", "--plot", "fig"]) == 0
    assert "plot saved to fig.png" in capsys.readouterr().out
    assert (tmp_path / "fig.png").is_file() and not (tmp_path / "fig").exists()
    assert main(["grid", "--r", "1", "--L", "3", "--eps", "1/4", "--plot", "g.svg"]) == 0
    assert "plot saved to g.svg" in capsys.readouterr().out and (tmp_path / "g.svg").is_file()


@pytest.mark.parametrize("value", ["nan", "oo", "zoo", "I", "E", "pi", "NaN", "inf", "0", "-2",
                                   "None", "True", "EmptySet", "true"])
def test_gauge_refuses_non_finite_beta_and_t(value, capsys):
    # None, True, EmptySet as symbols printed "kappa(C) None"; sympy's "true" is an object too
    assert main(["gauge", "--beta", value, "--t", "0"]) == 2
    assert "--beta" in capsys.readouterr().err
    if value not in ("0", "-2", "E", "pi", "None", "True", "EmptySet", "true"):
        assert main(["gauge", "--t", "0", value]) == 2
        assert "--t" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["\uff4f\uff4f", "\uff4e\uff41\uff4e", "b\u0435ta"])
def test_gauge_refuses_symbol_names_that_are_not_ascii(value, capsys):
    """Full-width 'oo' printed as the symbol would read as infinity (and Cyrillic e as beta)."""
    assert main(["gauge", "--beta", value, "--t", "0"]) == 2
    err = capsys.readouterr().err
    assert "--beta" in err and "not ASCII" in err and "\\" not in err
    assert " ".join(f"U+{ord(c):04X}" for c in value) in err  # the look-alikes named


def test_gauge_keeps_symbol_and_rational_beta(capsys):
    assert main(["gauge", "--beta", "beta", "--t", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["beta"] == "beta"
    assert main(["gauge", "--beta", "3/2", "--t", "0"]) == 0


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1.5", "1e9", "²"])
def test_bad_array_cap_variable_is_refused_by_name(value, monkeypatch, capsys):
    monkeypatch.setenv("SOFTRANK_MAX_ARRAY_BYTES", value)
    assert main(["gauge", "--t", "0"]) == 2
    assert "SOFTRANK_MAX_ARRAY_BYTES" in capsys.readouterr().err
    monkeypatch.setenv("SOFTRANK_MAX_ARRAY_BYTES", "1000")
    assert main(["gauge", "--t", "0"]) == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_tau_kernel_keeps_rows_whose_float_ends_overflow(tmp_path):
    """Float overflow makes every row's float ends NaN; the arb tier must still bound every
    row (it once kept none, and proved q <= 0, tau in [0, 0], for a residual near 1e600)."""
    from softrank.commands._intrinsic_check import iter_intrinsic_checks
    from softrank.witnesses import open_store

    (res,) = iter_intrinsic_checks(open_store(_big_store(tmp_path, 1e300)))
    hi = res["tau"]["hi"]
    assert hi is None or Fraction(hi) >= Fraction(199, 100)
    (ref,) = iter_intrinsic_checks(open_store(_big_store(tmp_path / "unit", 1.0)))
    assert Fraction(ref["tau"]["lo"]) > 0  # the same witness, unscaled: a real bracket


def test_bracket_json_ratio_beyond_the_float_range():
    from softrank.certify.intrinsic.result import Bracket
    from softrank.witnesses import jsonexact

    b = Bracket("kappa", Fraction(1, 10**620), Fraction(1, 10**300), "arb").to_json()
    assert b["ratio"] == np.finfo(float).max and b["lo"] == str(Fraction(1, 10**620))
    jsonexact.dumps(b)  # JSON-compliant
    line = format_result({"id": "r", "kind": "rank", "rank": 1, "tau": b, "kappa": b,
                          "profiles": []})
    assert "kappa in [1e-620, 1e-300]" in line


def test_a_store_of_intrinsic_records_only_does_not_say_every_claim_proved(tmp_path, capsys):
    """With no bracket, "every claim proved" was vacuous and read as if the intrinsic
    records' float claims (never verdicts) had been proved; the result line says what was
    done instead, with the same exit 0."""
    root = _big_store(tmp_path, 1.0)
    assert main(["check", str(root)]) == 0
    out = capsys.readouterr().out
    assert "every claim proved" not in out
    assert "no bracket claims; every intrinsic record enclosed" in out
