"""Runner with the float64-first chi: every verdict equals the one the arb chi gives, the arb
chi is computed only where the charged chi changes an outcome, and each operator's arrays and
chi are computed once per run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softrank import certify, runner
from softrank.certify import exact_error
from softrank.witnesses import Store

from .helpers import softmax_rows, tsvd_witness

VERDICT = ("upper", "lower", "upper_result", "lower_result", "chi_changed")


def build(path, seed: int = 0, n_ops: int = 4, size: int = 12, dtype=np.float32) -> None:
    """Softmax operators stored as ``dtype`` with logits; per operator one claim far from the
    boundary, one whose verdict flips within chi, and one without a lower certificate."""
    rng = np.random.default_rng(seed)
    with Store.create(path) as st:
        for o in range(n_ops):
            L = rng.standard_normal((size, size)) * 2
            A = softmax_rows(L).astype(dtype)
            oid = st.add_operator(A, family="f", logits=L, id=f"op{o}")
            chi = certify.operator_slack({"A": A, "logits": L}).chi
            U, V = tsvd_witness(A.astype(np.float64), size - 2)
            err = exact_error(A.astype(np.float64), U, V)
            up = {"kind": "factors", "rank": size - 2, "U": U, "V": V}
            st.add_bracket(oid, err + Fraction(1, 100), up, {"kind": "nonzero", "rank": 1},
                           id=f"{oid}-far")
            st.add_bracket(oid, err + chi / 3, up, {"kind": "nonzero", "rank": 1},
                           id=f"{oid}-near")
            st.add_bracket(oid, err + chi * 3, up, None, id=f"{oid}-nolower")


def _records(path, monkeypatch, arb_only: bool, jobs: int = 1):
    with monkeypatch.context() as m:
        if arb_only:
            m.setattr(certify, "charged_slack", certify.operator_slack)
        return sorted(runner.iter_checks(str(path), jobs=jobs), key=lambda r: r["bracket"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_verdicts_equal_the_arb_chi_ones(tmp_path, monkeypatch, dtype):
    """float32: the float chi is within 2x; float64 (chi_true ~1e-16): the charged float chi
    is only negligible, and the -near claims (eps within chi_true / 3 of the error) are the
    ones where arb must be computed and charged."""
    build(tmp_path / "s", dtype=dtype)
    fast = _records(tmp_path / "s", monkeypatch, arb_only=False)
    ref = _records(tmp_path / "s", monkeypatch, arb_only=True)
    assert [r["bracket"] for r in fast] == [r["bracket"] for r in ref]
    for f, r in zip(fast, ref, strict=True):
        assert {k: f[k] for k in VERDICT} == {k: r[k] for k in VERDICT}, f["bracket"]
    near = [r for r in fast if r["bracket"].endswith("-near")]
    assert near and all(r["chi_changed"] == ["upper"] for r in near)
    # where the charged chi changed an outcome, the arb chi was charged instead
    by_id = {r["bracket"]: r for r in ref}
    assert all(r["chi"] == by_id[r["bracket"]]["chi"] for r in near)
    far = [r for r in fast if r["bracket"].endswith("-far")]
    assert all(Fraction(r["chi"]) >= Fraction(by_id[r["bracket"]]["chi"]) for r in far)


def test_arb_only_where_needed_and_arrays_once(tmp_path, monkeypatch):
    build(tmp_path / "s", n_ops=3)
    calls = {"arb": 0, "fast": 0, "load": 0}
    real_arb, real_fast = certify.operator_slack, certify.charged_slack
    from softrank.witnesses.store import OperatorRecord

    real_load = OperatorRecord.load

    def arb(rec, **kw):
        calls["arb"] += 1
        return real_arb(rec, **kw)

    def fast(rec, **kw):
        calls["fast"] += 1
        return real_fast(rec, **kw)

    def load(self):
        calls["load"] += 1
        return real_load(self)

    monkeypatch.setattr(certify, "operator_slack", arb)
    monkeypatch.setattr(certify, "charged_slack", fast)
    monkeypatch.setattr(OperatorRecord, "load", load)
    recs = list(runner.iter_checks(str(tmp_path / "s")))
    assert len(recs) == 9
    assert calls == {"arb": 3, "fast": 3, "load": 3}  # arb only for the -near operators' sake


@pytest.mark.parametrize("jobs", [2])
def test_parallel_equals_serial(tmp_path, monkeypatch, jobs):
    build(tmp_path / "s", n_ops=3)
    serial = _records(tmp_path / "s", monkeypatch, arb_only=False)
    par = _records(tmp_path / "s", monkeypatch, arb_only=False, jobs=jobs)
    assert par == serial


def test_operator_chunks_are_whole_operators(tmp_path):
    from softrank.witnesses import open_store

    build(tmp_path / "s", n_ops=3)
    reader = open_store(tmp_path / "s")
    chunks = runner.operator_chunks(reversed(reader.brackets))
    assert chunks == [[f"op{o}-far", f"op{o}-near", f"op{o}-nolower"] for o in range(3)]
