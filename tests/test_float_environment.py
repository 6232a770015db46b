"""The float64 tier's bounds assume IEEE defaults (round to nearest, gradual underflow).
Under flush-to-zero / denormals-are-zero a subnormal entry read as zero is an error of up to
2^-1022, far above the 2^-1075 the bounds charge, and a false `holds` followed; a directed
rounding mode doubles every rounding error. The kernel refuses to check in such an
environment (never a verdict), and the CLI ends with exit 3."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import subprocess
import sys
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import pytest

from softrank.certify.lower import check_lower
from softrank.certify.numerics.fpenv import FloatEnvironmentError, float_environment_reason
from softrank.certify.upper import check_upper

X86_GLIBC = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not X86_GLIBC, reason="sets MXCSR through glibc's fenv_t")

FE_TOWARDZERO, FE_UPWARD = 0xC00, 0x800


def _libm():
    return ctypes.CDLL(ctypes.util.find_library("m"))


@contextmanager
def flush_to_zero():
    libm = _libm()
    env = (ctypes.c_uint8 * 64)()
    assert libm.fegetenv(ctypes.byref(env)) == 0
    saved = (ctypes.c_uint8 * 64).from_buffer_copy(env)
    # glibc x86_64 fenv_t: the 28-byte x87 environment, then MXCSR; FTZ is bit 15, DAZ bit 6
    # (what crtfastmath.o and torch.set_flush_denormal(True) set)
    ctypes.c_uint32.from_buffer(env, 28).value |= 0x8040
    assert libm.fesetenv(ctypes.byref(env)) == 0
    try:
        yield
    finally:
        assert libm.fesetenv(ctypes.byref(saved)) == 0
    assert (np.array([2.0**-1074]) + 0.0)[0] > 0


@contextmanager
def rounding(mode: int):
    libm = _libm()
    assert libm.fesetround(mode) == 0
    try:
        yield
    finally:
        assert libm.fesetround(0) == 0


def _tiny_rowset():
    # A = [[u, u], [-u, d]] with d the most negative subnormal: y = (1, 1) gives a rank-1 B
    # exactly t = (u - |d|) / 2 from A, so r_t(A) >= 2 is false; read as d = 0 under DAZ the
    # certificate's value is u / 2 > t
    u, d = 2.0**-974, -(2.0**-1022 - 2.0**-1074)
    A = np.array([[u, u], [-u, d]])
    cert = {"kind": "rowset", "rank": 2, "I": np.array([0, 1]),
            "Z": np.array([[-0.5, 1.0], [1.0, 1.0]])}
    return A, cert, (Fraction(u) - abs(Fraction(d))) / 2


def test_flush_to_zero_is_refused_where_it_gave_a_false_holds():
    A, cert, t = _tiny_rowset()
    assert check_lower(A, cert, t).status == "fails"
    with flush_to_zero():
        assert "zero" in float_environment_reason()
        with pytest.raises(FloatEnvironmentError, match="fresh process"):
            check_lower(A, cert, t)
        for kind in ("nerve", "polytope"):
            c = {"kind": kind, "rank": 2, "Z": cert["Z"], "G": np.array([0, 1]),
                 "T" if kind == "nerve" else "F": np.array([[0, 1], [0, 3]])}
            if kind == "polytope":
                c |= {"Y": np.eye(2), "I": np.array([0, 1])}
            with pytest.raises(FloatEnvironmentError):
                check_lower(A, c, t)
    assert float_environment_reason() is None
    assert check_lower(A, cert, t).status == "fails"


@pytest.mark.parametrize("mode", [FE_TOWARDZERO, FE_UPWARD])
def test_a_directed_rounding_mode_is_refused(mode):
    A = np.full((2, 2), 0.5)
    U, V = np.ones((2, 1)), np.full((1, 2), 0.5)
    with rounding(mode):
        assert "rounding" in float_environment_reason()
        with pytest.raises(FloatEnvironmentError):
            check_upper(A, U, V, "1/4")
    assert check_upper(A, U, V, "1/4").status == "holds"


def test_blas_workers_started_under_flush_to_zero_are_found(tmp_path):
    # the workers keep the environment they were started with: the calling thread's test
    # passes, the product test does not
    script = tmp_path / "probe.py"
    script.write_text(
        "import ctypes, ctypes.util\n"
        "libm = ctypes.CDLL(ctypes.util.find_library('m'))\n"
        "env = (ctypes.c_uint8 * 64)(); libm.fegetenv(ctypes.byref(env))\n"
        "saved = (ctypes.c_uint8 * 64).from_buffer_copy(env)\n"
        "ctypes.c_uint32.from_buffer(env, 28).value |= 0x8040\n"
        "libm.fesetenv(ctypes.byref(env))\n"
        "import numpy as np\n"
        "np.ones((300, 300)) @ np.ones((300, 300))\n"
        "libm.fesetenv(ctypes.byref(saved))\n"
        "from softrank.certify.numerics.fpenv import float_environment_reason\n"
        "assert (np.array([2.0**-1074]) + 0.0)[0] > 0\n"
        "n = 256\n"
        "flushed = not np.all(np.full((n, n), 2.0**-520) @ np.full((n, n), 2.0**-530) > 0)\n"
        "print(flushed, float_environment_reason())\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("False"):
        pytest.skip("this BLAS ran the product in the calling thread: no worker to test")
    assert "BLAS" in out.stdout


def test_the_cli_ends_with_an_internal_error_and_no_verdict(capsys):
    from softrank.cli import main

    store = os.path.join(os.path.dirname(__file__), "..", "examples", "glazier_L1H10")
    with flush_to_zero():
        code = main(["check", store])
    out, err = capsys.readouterr()
    assert code == 3 and "floating-point environment" in err
    assert "holds" not in out and "proved" not in out
    # the message says what to do, and it was cut mid-word at 300 characters
    assert "Run the check in a fresh process" in err and "--debug" not in err


def test_the_replayer_refuses_to_read_subnormals_as_zero(tmp_path, capsys):
    # the replayer reads every number with as_integer_ratio, exact in any rounding mode, but
    # under denormals-are-zero Python itself converts and compares a subnormal as 0
    from replay import replay as rp

    assert rp.float_environment_reason() is None
    with flush_to_zero():
        assert "zero" in rp.float_environment_reason()
        code = rp.main([str(tmp_path / "bundle.zip")])
    assert code == 3 and "floating-point environment" in capsys.readouterr().err
    with rounding(FE_TOWARDZERO):
        assert "rounding" in rp.float_environment_reason()
    assert rp.main([str(tmp_path / "bundle.zip")]) == 2  # no such bundle: refused, as before


def test_exact_values_of_subnormals_are_refused_where_they_read_as_zero():
    # the exact oracle and every API that takes floats read them through to_rational
    from softrank.certify.rationals import to_rational
    from softrank.exact.inputs import rational_matrix

    tiny = 2.0**-1074
    assert to_rational(tiny) == Fraction(1, 2**1074) and to_rational(-0.0) == 0
    with flush_to_zero():
        assert to_rational(0.0) == 0 and to_rational(np.float64(-0.0)) == 0
        with pytest.raises(FloatEnvironmentError):
            to_rational(tiny)
        with pytest.raises(FloatEnvironmentError):
            rational_matrix(np.array([[0.5, tiny], [0.5, 0.5]]))
