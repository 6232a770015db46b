"""Inputs that used to be accepted silently: non-ASCII digits in a tolerance, an unbounded
``--jobs``, and produce inputs whose floats would be rounded on the way into the store."""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.certify.rationals import parse_eps, to_rational
from softrank.cli import main
from softrank.workers import MAX_JOBS, jobs_count


@pytest.mark.parametrize("text", ["\u0663/\u0662\u0660", "0.\u0662\u0665", "\uff11/\uff14",
                                  "1/4\u00a0", "\u0661e-2"])
def test_non_ascii_digits_are_not_a_tolerance(text):
    # int() and Decimal() read these as 3/20, 1/4, ...; a tolerance must read the same
    # everywhere, so the kernel refuses them and names the field
    with pytest.raises(InputError) as err:
        parse_eps(text)
    assert err.value.field == "eps" and "ASCII" in str(err.value)


@pytest.mark.parametrize(("text", "value"), [(" 1/4 ", Fraction(1, 4)), ("+3/20", Fraction(3, 20)),
                                             ("0.25", Fraction(1, 4)), ("1e-2", Fraction(1, 100)),
                                             ("-7", Fraction(-7))])
def test_ascii_spellings_still_read_exactly(text, value):
    assert to_rational(text) == value


def test_cli_eps_with_arabic_digits_is_a_usage_error(tmp_path, capsys):
    np.savez(tmp_path / "a.npz", A=np.full((3, 3), 1 / 3))
    code = main(["produce", str(tmp_path / "s"), "--npz", str(tmp_path / "a.npz"),
                 "--eps", "\u0663/\u0662\u0660", "--producers", "tsvd", "--quiet"])
    assert code == 2
    assert "eps" in capsys.readouterr().err
    assert not (tmp_path / "s" / "brackets.jsonl").exists()


@pytest.mark.parametrize("text", ["1", "2", str(MAX_JOBS)])
def test_jobs_in_range(text):
    assert jobs_count(text) == int(text)


@pytest.mark.parametrize("text", ["0", "-1", str(MAX_JOBS + 1), "1000000000", "x", "2.0",
                                  "\u0663", ""])
def test_jobs_out_of_range_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        jobs_count(text)


@pytest.mark.parametrize("command", ["check", "audit", "export", "diff", "produce"])
def test_every_command_refuses_a_huge_jobs(command, capsys, tmp_path):
    argv = {"check": ["check", "examples/minilm"],
            "audit": ["audit", "examples/minilm", "--out", str(tmp_path / "o")],
            "export": ["export", "examples/minilm", "--out", str(tmp_path / "b")],
            "diff": ["diff", "examples/minilm", "examples/minilm"],
            "produce": ["produce", str(tmp_path / "s"), "--npz", "x.npz", "--eps", "1/4"]}
    with pytest.raises(SystemExit) as ex:
        main([*argv[command], "--jobs", "1000000000"])
    assert ex.value.code == 2
    assert "--jobs" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_executor_api_bounds_jobs():
    from softrank.audit.executors import make_executor

    for n in (0, MAX_JOBS + 1):
        with pytest.raises(InputError) as err:
            make_executor(n)
        assert err.value.field == "--jobs"


def test_produce_refuses_long_double_and_names_file_and_field(tmp_path, capsys):
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    A = np.full((3, 3), 1, dtype=np.longdouble) / 3  # not a float64: rounding would change it
    np.savez(tmp_path / "ld.npz", attn=A)
    code = main(["produce", str(tmp_path / "s"), "--npz", str(tmp_path / "ld.npz"),
                 "--eps", "1/4", "--producers", "tsvd", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "ld.npz" in err and "attn" in err and "rounded" in err
    assert not (tmp_path / "s" / "brackets.jsonl").exists()


def test_produce_widens_float16_exactly(tmp_path):
    from softrank.witnesses import open_store

    A = np.array([[0.5, 0.25, 0.25], [0.125, 0.75, 0.125], [0.375, 0.375, 0.25]],
                 dtype=np.float16)
    np.savez(tmp_path / "h.npz", attn=A)
    code = main(["produce", str(tmp_path / "s"), "--npz", str(tmp_path / "h.npz"),
                 "--npz-kind", "probs", "--eps", "1/4", "--producers", "tsvd", "--quiet"])
    assert code in (0, 1)
    reader = open_store(tmp_path / "s")
    (op_id,) = {b.operator for b in reader.brackets}
    stored = reader.operator(op_id).load()["A"]
    assert stored.dtype == np.float64 and np.array_equal(stored, A.astype(np.float64))


@pytest.mark.parametrize("value, shown", [(np.float64("nan"), "got nan"),
                                          (np.float32("-inf"), "got -inf"),
                                          (float("inf"), "got inf")])
def test_a_non_finite_number_is_named_plainly(value, shown):
    with pytest.raises(InputError) as e:
        to_rational(value, field="eps")
    assert shown in str(e.value) and "np." not in str(e.value)


class _Raising:
    """An entry object of the caller's whose attribute and repr raise."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> object:
        if attr == self.name:
            raise ValueError("broken property")
        raise AttributeError(attr)

    def __repr__(self) -> str:
        raise RuntimeError("broken repr")


@pytest.mark.parametrize("name", ["p", "q", "numerator", "denominator", "nothing"])
def test_an_entry_object_that_raises_is_an_input_error_naming_the_field(name):
    # a raising .p ended in the object's own ValueError (an internal error, exit 3)
    from softrank.certify.errors import InputError

    with pytest.raises(InputError) as info:
        to_rational(_Raising(name), field="cell.A[0][1]")
    assert "cell.A[0][1]" in str(info.value)


def test_rational_like_objects_still_read_exactly_and_huge_ones_are_refused_first():
    from fractions import Fraction
    from types import SimpleNamespace

    from softrank.certify.errors import InputError

    assert to_rational(SimpleNamespace(p=-3, q=8)) == Fraction(-3, 8)
    assert to_rational(SimpleNamespace(numerator=5, denominator=10)) == Fraction(1, 2)
    with pytest.raises(InputError, match="longer than"):
        to_rational(SimpleNamespace(p=1 << 3_000_000, q=3))


def test_an_object_whose_class_or_int_raises_is_an_input_error():
    import numbers

    from softrank.certify.errors import InputError

    class BadClass:
        @property
        def __class__(self):  # noqa: PLE0101 - a hostile object on purpose
            raise ValueError("no class")

    class BadInt:
        def __int__(self) -> int:
            raise ValueError("no int")

    numbers.Integral.register(BadInt)
    holder = type("Holder", (), {"p": BadInt(), "q": 3})()
    for x in (BadClass(), holder):
        with pytest.raises(InputError) as info:
            to_rational(x, field="cell.A[1][0]")
        assert "cell.A[1][0]" in str(info.value)
