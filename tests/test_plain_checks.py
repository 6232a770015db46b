"""benchmarks/plain_checks.py (the untrusted float64 baseline of the corpus benchmark) computes
the kernel's statements: on real MiniLM brackets of the example store, and on a polytope
certificate lifted from one of its Bernstein subspaces, the plain value lies within float
rounding of the kernel's exact enclosure, and the plain verdict is the kernel's wherever the
kernel's margin is large.  Each certificate is evaluated at its stored eps and at eps scaled
up and down, so that both verdicts occur for every kind (a baseline that always says "holds",
or compares the wrong quantity, fails here).
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank.certify import check_lower, check_upper
from softrank.witnesses import open_store
from softrank.witnesses.producers.polytope import subspace_certificate

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "examples" / "minilm"
SCALES = (Fraction(1, 8), Fraction(1, 2), Fraction(1), Fraction(2), Fraction(8))
LARGE = 1e-3  # a margin (relative to the threshold) above which the verdicts must agree


def _plain():
    spec = importlib.util.spec_from_file_location("plain_checks",
                                                  ROOT / "benchmarks" / "plain_checks.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plain_checks", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


plain = _plain()


def _examples(kinds: tuple[str, ...]) -> list[tuple[np.ndarray, dict, dict, Fraction]]:
    """The first stored bracket (A, upper, lower, eps) of each lower kind in ``kinds``."""
    reader = open_store(STORE)
    out, seen = [], set()
    for br in reader.brackets:
        if br.lower is None or br.lower.kind in seen or br.lower.kind not in kinds:
            continue
        seen.add(br.lower.kind)
        up, lo = br.load()
        out.append((reader.operator(br.operator).load()["A"], up, lo, br.eps))
    assert seen == set(kinds), f"the example store lacks {set(kinds) - seen}"
    return out


def _agree(kernel, p) -> tuple[str, str]:
    """Asserts that the plain value lies within rounding of the kernel's enclosure and that
    the verdicts agree when the kernel's margin is large; returns both statuses."""
    assert p.kind == kernel.kind and p.sense == kernel.detail.get("sense", "<=")
    assert p.threshold == pytest.approx(float(kernel.threshold), rel=1e-15)
    if kernel.value is None:  # the polytope's sphere failed: no value
        assert kernel.status == "fails" and not p.holds and np.isnan(p.value)
        return kernel.status, "fails"
    lo, hi = kernel.value.as_floats()
    tol = 1e-9 * max(1.0, abs(lo), abs(hi))
    assert lo - tol <= p.value <= hi + tol, (kernel.kind, p.value, lo, hi)
    m_lo, m_hi = kernel.margin.as_floats()
    if min(abs(m_lo), abs(m_hi)) > LARGE * max(float(kernel.threshold), 1e-300):
        assert p.holds == (kernel.status == "holds"), (kernel.kind, p, kernel)
    return kernel.status, "holds" if p.holds else "fails"


@pytest.fixture(scope="module")
def stored():
    return _examples(("decoder", "submatrix", "bernstein", "rowset", "rowmix"))


def test_upper_and_stored_lower_kinds(stored):
    statuses: dict[str, set[str]] = {}
    for A, up, lo, eps in stored:
        for s in SCALES:
            e = eps * s
            got = _agree(check_upper(A, up["U"], up["V"], e),
                         plain.upper(A, up["U"], up["V"], e))
            statuses.setdefault("factors", set()).update(got)
            got = _agree(check_lower(A, lo, e), plain.lower(A, lo, e))
            statuses.setdefault(lo["kind"], set()).update(got)
    for kind, seen in statuses.items():  # both verdicts met, by both evaluations
        assert seen == {"holds", "fails"}, (kind, seen)


def test_nonzero_and_frobenius_tail(stored):
    A = stored[0][0]
    seen = set()
    for cert in ({"kind": "nonzero", "rank": 1}, {"kind": "frobenius_tail", "rank": 2},
                 {"kind": "frobenius_tail", "rank": 5}):
        for e in (Fraction(1, 100), Fraction(1, 20), Fraction(1, 4), Fraction(2)):
            seen.update(_agree(check_lower(A, cert, e), plain.lower(A, cert, e)))
    assert seen == {"holds", "fails"}


@pytest.fixture(scope="module")
def lifted(stored):
    """A polytope certificate on a real head: the lift of a stored Bernstein subspace of rank
    at most 5 (producers/polytope.py; untrusted), one witness per facet."""
    reader = open_store(STORE)
    for br in reader.brackets:
        if br.lower is not None and br.lower.kind == "bernstein" and 3 <= br.lower.rank <= 5:
            A = reader.operator(br.operator).load()["A"]
            _, lo = br.load()
            got = subspace_certificate(np.asarray(A, dtype=np.float64), lo["W"])
            if got is not None:
                Y, I, F, Z = got
                return A, {"kind": "polytope", "rank": lo["rank"], "Y": Y, "I": I, "F": F,
                           "Z": Z, "G": np.arange(len(F))}, br.eps
    pytest.fail("no Bernstein certificate of rank 3 .. 5 in the example store")


def test_polytope(lifted):
    A, cert, eps = lifted
    seen = set()
    for s in (Fraction(1, 100), *SCALES):
        seen.update(_agree(check_lower(A, cert, eps * s), plain.lower(A, cert, eps * s)))
    assert seen == {"holds", "fails"}


def test_polytope_broken_sphere(lifted):
    """A missing facet: the kernel fails the sphere, and so does the plain evaluation (at an
    eps where the value alone would hold)."""
    A, cert, eps = lifted
    small = eps / 100
    assert plain.lower(A, cert, small).holds
    broken = {**cert, "F": cert["F"][1:], "Z": cert["Z"][1:], "G": cert["G"][:-1]}
    p = plain.lower(A, broken, small)
    assert not p.holds and "ridge" in p.reason
    _agree(check_lower(A, broken, small), p)


def test_polytope_point_outside(lifted):
    """A point pushed out of the hull (the facet lists unchanged, so every ridge still lies in
    two facets): both evaluations find a point outside a facet's hyperplane."""
    A, cert, eps = lifted
    Y = cert["Y"].copy()
    Y[0] *= 2.0
    moved = {**cert, "Y": Y}
    p = plain.lower(A, moved, eps / 100)
    assert not p.holds and "outside" in p.reason
    kernel = check_lower(A, moved, eps / 100)
    assert "not strictly inside" in kernel.detail["reason"]
    _agree(kernel, p)
