"""A newcomer's reading of the verdict words: what each says is proved, and why an end is not.

The scenario: a 6 x 6 attention matrix at eps = 2/5 with a rank-1 truncated SVD claimed as an
upper witness (its error exceeds eps) and a rank-2 Frobenius-tail certificate (its tail is too
small).  Both inequalities are false, yet neither claim about r_eps is refuted: the checker
must say "does not hold", never "refuted", and say why on each end's own line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify import InputError, check_lower, check_upper, exact_error
from softrank.cli import build_parser, main
from softrank.numfmt import outward4
from softrank.witnesses import Store

from .helpers import random_attention, tsvd_witness

EPS = Fraction(2, 5)
INTERVAL = re.compile(r"in \[([-0-9.e+]+), ([-0-9.e+]+)\]")


def _scenario() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 6 x 6 softmax matrix whose rank-1 truncated SVD misses eps, whose rank-2 tail
    certificate fails and whose nonzero certificate holds (found by seed, then asserted)."""
    rng = np.random.default_rng(0)
    for _ in range(100):
        A = random_attention(rng, 6, 6, scale=2.0)
        U, V = tsvd_witness(A, 1)
        if (check_upper(A, U, V, EPS).status == "fails"
                and check_lower(A, {"kind": "frobenius_tail", "rank": 2}, EPS).status == "fails"
                and check_lower(A, {"kind": "nonzero", "rank": 1}, EPS).status == "holds"):
            return A, U, V
    raise AssertionError("no scenario matrix found")  # pragma: no cover


def _check_v(capsys, store) -> tuple[int, list[str]]:
    code = main(["check", str(store), "-v"])
    return code, capsys.readouterr().out.splitlines()


def _interval(line: str) -> tuple[Fraction, Fraction]:
    lo, hi = INTERVAL.search(line).groups()
    return Fraction(lo), Fraction(hi)


def test_failed_inequalities_are_not_called_refuted_and_say_why(tmp_path, capsys):
    A, U, V = _scenario()
    with Store.create(tmp_path / "s", description="newcomer") as st:
        op = st.add_operator(A, family="demo")
        st.add_bracket(op, EPS, {"kind": "factors", "rank": 1, "U": U, "V": V},
                       {"kind": "frobenius_tail", "rank": 2}, id="b0")
    code, lines = _check_v(capsys, tmp_path / "s")
    assert code == 1
    # the legend defines every word; no other line may say "refuted" (nothing is refuted)
    legend = [ln for ln in lines if ln.startswith("OUTCOME:")]
    assert len(legend) == 1 and "refuted (the claim about r_eps is false" in legend[0]
    assert "does not hold (its own inequality is false" in legend[0]
    assert not [ln for ln in lines if "refuted" in ln and ln not in legend]

    i = next(n for n, ln in enumerate(lines) if ln.startswith("b0 "))
    assert "lower 2->1 does not hold" in lines[i] and "upper 1->6 does not hold" in lines[i]
    lower, upper = lines[i + 1], lines[i + 2]
    # the lower reason: the tail enclosure (outward, so it contains the kernel's) <= m eps^2
    assert lower.startswith("    lower: sum_(i>=2) sigma_i^2 in [") and "<= m (eps+chi)^2" in lower
    assert "[float64]" in lower or "[arb]" in lower
    tail = check_lower(A, {"kind": "frobenius_tail", "rank": 2}, EPS).value
    lo, hi = _interval(lower)
    assert lo <= tail.lo and tail.hi <= hi and hi <= 6 * EPS * EPS
    # the upper reason: the error enclosure contains the exact error, > eps
    assert upper.startswith("    upper: ||A - UV||_row1 in [") and "> eps 2/5" in upper
    err = exact_error(A, U, V)
    lo, hi = _interval(upper)
    assert lo <= err <= hi and lo > EPS
    # the summary's counts use the newer words
    text = "\n".join(lines)
    assert "upper claims (r_eps <= k by factors U V): 1 does not hold" in text
    assert "lower claims (r_eps >= L by a certificate): 1 does not hold" in text
    assert "that alone proves nothing about r_eps" in text
    # without -v: the same words, and no "refuted" anywhere
    assert main(["check", str(tmp_path / "s")]) == 1
    out = capsys.readouterr().out
    assert "1 does not hold" in out and "refuted" not in out
    # JSON: the newer key says what is proved; the older key keeps its older word
    assert main(["check", str(tmp_path / "s"), "--json"]) == 1
    rec = json.loads(capsys.readouterr().out)["records"][0]
    assert rec["upper_result"] == rec["lower_result"] == "does_not_hold"
    assert rec["upper_outcome"] == "refuted"  # deprecated alias: the check's inequality only


def test_refuted_when_the_other_proved_end_contradicts(tmp_path, capsys):
    """At a small eps the rank-2 tail certificate holds: r_eps >= 2 is proved, so the
    claim r_eps <= 1 is false, and only then is it called refuted (with that reason)."""
    A, U, V = _scenario()
    eps = Fraction(1, 20)
    assert check_lower(A, {"kind": "frobenius_tail", "rank": 2}, eps).status == "holds"
    with Store.create(tmp_path / "s") as st:
        op = st.add_operator(A, family="demo")
        st.add_bracket(op, eps, {"kind": "factors", "rank": 1, "U": U, "V": V},
                       {"kind": "frobenius_tail", "rank": 2}, id="b0")
    code, lines = _check_v(capsys, tmp_path / "s")
    assert code == 1
    i = next(n for n, ln in enumerate(lines) if ln.startswith("b0 "))
    assert "lower 2->2 proved" in lines[i] and "upper 1->6 refuted" in lines[i]
    assert lines[i + 1].startswith("    upper: r_eps >= 2 (proved lower end) > claimed 1; ")
    assert "||A - UV||_row1 in [" in lines[i + 1]
    assert "upper claims (r_eps <= k by factors U V): 1 refuted" in "\n".join(lines)


def test_undecided_names_its_cause(tmp_path, capsys):
    """A forced tier that cannot decide says so on the end's line."""
    from softrank.commands.check import format_line

    rec = {"bracket": "b", "operator": "o", "eps": "1/4", "upper_claim": 2, "upper": 6,
           "lower_claim": None, "lower": 1, "upper_result": "undecided",
           "lower_result": "absent", "resolved": False, "chi": "0",
           "upper_check": {"status": "undecided", "kind": "factors", "rank": 2,
                           "threshold": "1/4", "chi": "0", "sense": "<=", "tier": "float64",
                           "value": {"lo": "1/4", "hi": "1/4"}}}
    text = format_line(rec, "float64")
    assert text.splitlines()[1] == ("    upper: ||A - UV||_row1 in [0.2500, 0.2500] straddles "
                                    "eps 1/4 (needs <=) [float64], undecided: tier forced to "
                                    "float64 (rerun with --tier auto)")
    assert "margin thinner" in format_line(rec, "auto")


@pytest.mark.parametrize("seed", range(5))
def test_outward4_contains_and_has_four_digits(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        a = Fraction(int(rng.integers(-10**9, 10**9)), int(rng.integers(1, 10**9)))
        a *= Fraction(10) ** int(rng.integers(-12, 12))
        b = a + abs(a) * Fraction(int(rng.integers(0, 1000)), 10**6)
        lo, hi = outward4(a, b)[1:-1].split(", ")
        assert Fraction(lo) <= a and Fraction(hi) >= b, (a, b, lo, hi)
        for s in (lo, hi):
            mant = re.sub(r"e.*$", "", s).replace("-", "")
            digits = mant.replace(".", "").lstrip("0")
            if "." not in mant:  # an integer: 907100 has 4 significant digits
                digits = digits.rstrip("0")
            assert s == "0" or len(digits) <= 4, s  # a carry gives 10.00: still 4


def test_rank_above_min_shape_is_an_input_error(tmp_path, capsys):
    A, U, V = _scenario()
    with pytest.raises(InputError) as err:
        check_lower(A, {"kind": "frobenius_tail", "rank": 9}, EPS)
    assert err.value.field == "lower.rank" and "min(m, N)" in str(err.value)
    with pytest.raises(InputError) as err:
        check_upper(A, np.zeros((6, 7)), np.zeros((7, 6)), EPS)
    assert err.value.field == "rank"
    with Store.create(tmp_path / "s") as st:
        op = st.add_operator(A, family="demo")
        with pytest.raises(InputError) as err:
            st.add_bracket(op, EPS, {"kind": "factors", "rank": 1, "U": U, "V": V},
                           {"kind": "frobenius_tail", "rank": 7})
        assert err.value.field == "lower.rank"
        st.add_bracket(op, EPS, {"kind": "factors", "rank": 1, "U": U, "V": V},
                       {"kind": "frobenius_tail", "rank": 2}, id="b0")
    # a store whose record was edited afterwards: refused with the file and the field
    path = tmp_path / "s" / "brackets.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    recs[0]["lower"]["rank"] = 9
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["check", str(tmp_path / "s")]) == 2
    err_text = capsys.readouterr().err
    assert "b0.lower.rank" in err_text and "brackets.jsonl" in err_text
    assert "Traceback" not in err_text


def test_a_producer_rank_above_min_shape_is_reported_not_stored():
    from softrank.witnesses.producers import Certificate, Witness
    from softrank.witnesses.producers.pipeline import malformed_certificate, malformed_witness

    shape = (3, 4)
    too_big = Witness(rank=4, U=np.zeros((3, 4)), V=np.zeros((4, 4)))
    assert "exceeds min(m, N) = 3" in malformed_witness(too_big, shape)
    fits = Witness(rank=3, U=np.zeros((3, 3)), V=np.zeros((3, 4)))
    assert malformed_witness(fits, shape) is None
    assert "exceeds" in malformed_certificate(Certificate(kind="frobenius_tail", rank=4), shape)
    assert malformed_certificate(Certificate(kind="frobenius_tail", rank=3), shape) is None


def test_oracle_mode_is_one_spelling():
    from softrank.exact import oracle

    A = [[1, 0], ["1/2", "1/2"]]  # rank 1 unrestricted, rank 2 row-stochastic at eps 1/3
    assert oracle(A, "1/3").rank == 1 and oracle(A, "1/3", mode="unrestricted").rank == 1
    assert oracle(A, "1/3", mode="stochastic").rank == 2
    with pytest.warns(DeprecationWarning):
        assert oracle(A, "1/3", stochastic=True).mode == "stochastic"
    with pytest.raises(InputError) as err:
        oracle(A, "1/3", mode="row-stochastic")
    assert err.value.field == "mode"
    with warnings.catch_warnings(), pytest.raises(InputError):
        warnings.simplefilter("ignore", DeprecationWarning)
        oracle(A, "1/3", mode="stochastic", stochastic=False)


def test_every_help_has_an_example_and_v_only_where_it_acts(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) >= {"check", "audit", "diff", "export", "oracle", "produce"}
    for name, p in sub.choices.items():
        text = p.format_help()
        assert "examples:" in text and f"softrank-certify {name}" in text, name
        assert ("--verbose" in text) == (name == "check"), name
    assert "example:" in parser.format_help()
    # -v is still accepted where it changes nothing (scripts pass it everywhere)
    assert build_parser().parse_args(["grid", "--r", "1", "--eps", "1/4", "--L", "2",
                                      "-v"]).verbose


def test_version_loads_neither_commands_nor_kernel():
    code = ("import sys\nfrom softrank.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "heavy = [m for m in ('softrank.certify', 'numpy', 'flint', 'softrank.commands')"
            " if m in sys.modules]\nprint('HEAVY', heavy)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "softrank-certify " in done.stdout and "HEAVY []" in done.stdout
