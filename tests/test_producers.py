"""Producers: plug-in registry, built-ins rechecked by certify, the produce/producers commands."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from fractions import Fraction
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from softrank import certify
from softrank.certify import check_upper
from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.witnesses import Store, open_store
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import (
    BUILTINS,
    ENTRY_POINT_GROUP,
    BaseProducer,
    Witness,
    altl1,
    available_producers,
    get_producer,
    rowset,
)
from softrank.witnesses.producers import _entry_points as real_entry_points
from softrank.witnesses.producers._common import SCALE_ENV, budget_scale, budget_settings
from softrank.witnesses.producers.altl1 import AlternatingL1
from softrank.witnesses.producers.pipeline import eps_tag
from softrank.witnesses.producers.rowset import RowSet

UPPERS = ["tsvd", "rw_svd", "alt_l1", "cpqr", "rpqr", "rep_rows"]
LOWERS = ["nonzero", "frobenius_tail", "pinv_decoder", "submatrix", "keyset", "decoder_lp",
          "bernstein", "rowset", "nerve"]


def attention(m: int, N: int, d: int, beta: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    S = beta * rng.standard_normal((m, d)) @ rng.standard_normal((d, N)) / np.sqrt(d)
    return softmax64(S), S


class DummyMeanRow(BaseProducer):
    """A plug-in: U = [1 | I without its first column], V = [first row; A[1:] - first row]
    (rank m <= min(m, N) on the square test heads; B = A up to rounding)."""

    name = "dummy_mean"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        m = A.shape[0]
        first = A[:1]
        U = np.hstack([np.ones((m, 1)), np.eye(m)[:, 1:]])
        V = np.vstack([first, A[1:] - first])
        return Witness(rank=m, U=U, V=V, claims={"upper_error": 0.0})


class ScaleProbe(BaseProducer):
    """A plug-in that reports, in its claims, the budgets a producer would get here."""

    name = "scale_probe"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        w = DummyMeanRow().produce(A, eps)
        return Witness(rank=w.rank, U=w.U, V=w.V, claims={
            "probe_scale": budget_scale(), "rowset_budget": RowSet().budget,
            "descent_budget": AlternatingL1().descent_budget})


class LiarProducer(BaseProducer):
    """A wrong plug-in: claims the rank-1 truncated SVD is within eps (it is not)."""

    name = "liar"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        Us, s, Vt = np.linalg.svd(A)
        return Witness(rank=1, U=Us[:, :1] * s[:1], V=Vt[:1], claims={"upper_error": 0.0})


class BadShapeProducer(BaseProducer):
    """A broken plug-in: its factors do not fit A."""

    name = "bad_shape"
    role = "upper"

    def produce(self, A, eps, *, logits=None):
        return Witness(rank=2, U=np.ones((A.shape[0] + 1, 2)), V=np.ones((2, A.shape[1])))


class CrashingProducer(BaseProducer):
    name = "crash"
    role = "lower"

    def produce(self, A, eps, *, logits=None):
        raise RuntimeError("boom")


@pytest.fixture
def plugins(monkeypatch):
    """Adds two plug-ins to the entry-point table the registry reads."""
    extra = [EntryPoint(name="dummy_mean", value=f"{__name__}:DummyMeanRow",
                        group=ENTRY_POINT_GROUP),
             EntryPoint(name="liar", value=f"{__name__}:LiarProducer", group=ENTRY_POINT_GROUP),
             EntryPoint(name="scale_probe", value=f"{__name__}:ScaleProbe",
                        group=ENTRY_POINT_GROUP),
             EntryPoint(name="bad_shape", value=f"{__name__}:BadShapeProducer",
                        group=ENTRY_POINT_GROUP),
             EntryPoint(name="crash", value=f"{__name__}:CrashingProducer",
                        group=ENTRY_POINT_GROUP),
             EntryPoint(name="broken_import", value="no_such_module_xyz:Thing",
                        group=ENTRY_POINT_GROUP)]
    monkeypatch.setattr("softrank.witnesses.producers._entry_points",
                        lambda: [*real_entry_points(), *extra])


def _npz(tmp_path, name: str = "heads.npz", **arrays) -> str:
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def test_a_plugin_under_a_builtin_name_is_refused_not_run(monkeypatch, tmp_path, capsys):
    """A plug-in registered as ``tsvd`` would be run, priced and reported as the built-in:
    asking for that name is an input error (exit 2), and the other producers still load."""
    shadow = EntryPoint(name="tsvd", value=f"{__name__}:DummyMeanRow", group=ENTRY_POINT_GROUP)
    monkeypatch.setattr("softrank.witnesses.producers._entry_points",
                        lambda: [*real_entry_points(), shadow])
    with pytest.raises(InputError, match="built-in name") as err:
        get_producer("tsvd")
    assert err.value.field == "producers"
    assert get_producer("rw_svd").role == "upper"
    assert available_producers()["tsvd"] == "broken"
    A = softmax64(np.random.default_rng(0).standard_normal((6, 6)))
    code = main(["produce", str(tmp_path / "s"), "--npz", _npz(tmp_path, A=A), "--eps", "0.25",
                 "--producers", "tsvd", "nonzero", "-q"])
    assert code == 2 and "built-in name" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


class RaisesInputErrorOnInit(BaseProducer):
    name, role = "needs_env", "upper"

    def __init__(self):
        raise InputError("must be set", field="MY_ENV")


def test_a_plugin_failing_with_an_input_error_is_named(monkeypatch):
    """Only the name conflict passes through unwrapped: a plug-in's own InputError is still
    reported with the producer's name (the conflict's re-raise had let every one through)."""
    ep = EntryPoint(name="needs_env", value=f"{__name__}:RaisesInputErrorOnInit",
                    group=ENTRY_POINT_GROUP)
    monkeypatch.setattr("softrank.witnesses.producers._entry_points",
                        lambda: [*real_entry_points(), ep])
    with pytest.raises(InputError, match="producer 'needs_env' failed to load") as err:
        get_producer("needs_env")
    assert "MY_ENV" in str(err.value) and err.value.field == "producers"


def test_builtins_registered():
    avail = available_producers()
    for n in UPPERS:
        assert avail[n] == "upper"
    for n in LOWERS:
        assert avail[n] == "lower"
    assert set(BUILTINS) == set(UPPERS) | set(LOWERS)
    with pytest.raises(certify.InputError, match="unknown producer"):
        get_producer("no_such_producer")


@pytest.mark.parametrize("seed", [0, 1])
def test_every_builtin_upper_witness_is_confirmed(seed):
    A, _ = attention(20, 24, 4, 2.5, seed)
    eps = Fraction(1, 4)
    ranks = {}
    for name in UPPERS:
        w = get_producer(name).produce(A, eps)
        assert w is not None, name
        chk = check_upper(A, w.U, w.V, eps, rank=w.rank)
        assert chk.status == "holds", (name, chk)
        assert 1 <= w.rank <= 20
        ranks[name] = w.rank
    # the least-rank search of alt_l1 starts from the tsvd rank, so it never does worse
    assert ranks["alt_l1"] <= ranks["tsvd"]


def _exact_decoder_holds(A, D, W, X, eps: Fraction) -> bool:
    """delta + ||X D||_inf ||W||_inf eps < 1 in exact rational arithmetic (reference)."""
    q = np.vectorize(Fraction, otypes=[object])
    Aq, Dq, Wq, Xq = q(A), q(D), q(W), q(X)
    M = Dq.dot(Aq).dot(Wq)
    p = M.shape[0]
    R = np.eye(p, dtype=object) * Fraction(1) - Xq.dot(M)

    def inf(Y):
        return max(sum(abs(v) for v in row) for row in Y)

    return inf(R) + inf(Xq.dot(Dq)) * inf(Wq) * eps < 1


@pytest.mark.parametrize("name", ["pinv_decoder", "submatrix", "keyset"])
def test_decoder_certificates_hold_exactly(name):
    A, _ = attention(12, 12, 6, 6.0, 3)
    eps = Fraction(1, 4)
    c = get_producer(name).produce(A, eps)
    assert c is not None and c.rank >= 1
    if c.kind == "submatrix":
        m, N = A.shape
        rows, cols = c.arrays["rows"], c.arrays["cols"]
        D = np.eye(m)[rows]
        W = np.eye(N)[:, cols]
    else:
        D, W = c.arrays["D"], c.arrays["W"]
    assert _exact_decoder_holds(A, D, W, c.arrays["X"], eps)
    # and it can never exceed what an upper witness reaches
    w = get_producer("alt_l1").produce(A, eps)
    assert c.rank <= w.rank


def test_keyset_finds_full_rank_on_peaked_attention():
    N = 10
    A = 0.8 * np.eye(N) + 0.2 / N * np.ones((N, N))
    c = get_producer("keyset").produce(A, Fraction(1, 4))
    assert c.rank == N
    assert _exact_decoder_holds(A, c.arrays["D"], c.arrays["W"], c.arrays["X"], Fraction(1, 4))


def test_frobenius_tail_against_high_precision_singular_values():
    import mpmath

    A, _ = attention(10, 10, 5, 5.0, 4)
    eps = Fraction(1, 5)
    c = get_producer("frobenius_tail").produce(A, eps)
    assert c is not None
    with mpmath.workdps(40):
        s = mpmath.svd_r(mpmath.matrix([[mpmath.mpf(float(x)) for x in r] for r in A]),
                         compute_uv=False)
        sq = sorted((s[i] ** 2 for i in range(len(s))), reverse=True)
        thr = 10 * mpmath.mpf(eps.numerator) ** 2 / eps.denominator ** 2
        assert sum(sq[c.rank - 1:]) > thr  # the claimed L holds
        assert not sum(sq[c.rank:]) > thr * (1 + mpmath.mpf(10) ** -6)  # and is the largest


def test_nonzero_claims_only_above_eps():
    A = np.full((3, 4), 0.25)
    assert get_producer("nonzero").produce(A, Fraction(1, 2)).rank == 1
    assert get_producer("nonzero").produce(A, Fraction(1)) is None  # row l1 = 1, not > 1


def test_eps_tag():
    assert eps_tag(Fraction(1, 4)) == "0.25"
    assert eps_tag(Fraction(3, 20)) == "0.15"
    assert eps_tag(Fraction(1, 3)) == "1-3"


def test_plugin_end_to_end(tmp_path, plugins, capsys):
    assert available_producers()["dummy_mean"] == "upper"
    A, S = attention(8, 8, 3, 2.0, 5)
    src = _npz(tmp_path, logits_head=S, probs_head=A)
    store = tmp_path / "st"
    rc = main(["produce", str(store), "--npz", src, "--eps", "1/4", "0.35", "--producers",
               "dummy_mean", "keyset", "nonzero", "--quiet"])
    assert rc == 0
    reader = open_store(store)
    assert len(reader.operators) == 2 and len(reader.brackets) == 4
    kinds = {op.id: op.record_kind for op in reader.operators}
    assert kinds == {"heads.logits_head": "logits", "heads.probs_head": "A"}
    for br in reader.brackets:
        assert br.producer["upper"] == "dummy_mean"  # the anchor when alt_l1 is absent
        assert br.producer["lower"] in ("keyset", "nonzero")
        upper, lower = br.load()
        A_op = reader.operator(br.operator).load()["A"]
        assert check_upper(A_op, upper["U"], upper["V"], br.eps).holds
        assert lower is not None and lower["rank"] >= 1
    # resumed: nothing new to do
    capsys.readouterr()
    assert main(["produce", str(store), "--npz", src, "--eps", "0.25", "0.35", "--producers",
                 "dummy_mean", "keyset", "nonzero", "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["brackets_written"] == 0 and summary["operators_already_complete"] == 2
    budgets = len(reader.header["provenance"]["produce_budgets"])
    # another lower producer and scale on a complete store: said so, and no budget recorded
    assert main(["produce", str(store), "--npz", src, "--eps", "0.25", "0.35", "--producers",
                 "dummy_mean", "rowset", "--budget-scale", "0.5"]) == 0
    assert "2 operators already had every bracket" in capsys.readouterr().err
    assert len(open_store(store).header["provenance"]["produce_budgets"]) == budgets
    _check_command_if_available(store, capsys, expect_refuted=False)


def test_wrong_producer_does_not_hold(tmp_path, plugins, capsys):
    A, S = attention(10, 10, 6, 4.0, 6)
    src = _npz(tmp_path, logits_x=S)
    store = tmp_path / "st"
    assert main(["produce", str(store), "--npz", src, "--eps", "0.15", "--producers", "liar",
                 "tsvd", "nonzero", "--quiet"]) == 0
    reader = open_store(store)
    liar = [b for b in reader.brackets if b.producer["upper"] == "liar"]
    assert len(liar) == 1 and liar[0].upper.rank == 1
    upper, _ = liar[0].load()
    chk = check_upper(A, upper["U"], upper["V"], liar[0].eps)
    assert chk.status == "fails" and chk.error.lo > Fraction(3, 20)
    capsys.readouterr()
    assert main(["producers", str(store), "--json", "--reference", "tsvd"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["witnesses_not_proved"] == 1
    assert out["table"]["liar"]["proved"] == out["table"]["liar"]["confirmed"] == 0
    # a witness that does not hold counts as full rank
    assert out["table"]["liar"]["median_rank"] == 10
    _check_command_if_available(store, capsys, expect_refuted=True)


def test_malformed_and_crashing_plugins_are_reported_not_stored(tmp_path, plugins, capsys):
    A, S = attention(6, 6, 3, 2.0, 7)
    src = _npz(tmp_path, logits_y=S)
    store = tmp_path / "st"
    rc = main(["produce", str(store), "--npz", src, "--eps", "0.25", "--producers", "bad_shape",
               "tsvd", "crash", "nonzero", "--quiet"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "bad_shape" in err and "do not fit" in err and "boom" in err
    reader = open_store(store)
    assert [b.producer["upper"] for b in reader.brackets] == ["tsvd"]
    assert reader.brackets[0].lower.kind == "nonzero"
    assert available_producers()["broken_import"] == "broken"
    assert main(["produce", str(tmp_path / "st2"), "--npz", src, "--producers",
                 "broken_import", "tsvd"]) == 2
    assert "failed to load" in capsys.readouterr().err


def _check_command_if_available(store, capsys, *, expect_refuted: bool) -> None:
    if not hasattr(certify, "check_bracket"):
        return  # the bracket kernel lands separately; check_upper above covers the claim
    capsys.readouterr()
    rc = main(["check", str(store), "--json"])
    recs = json.loads(capsys.readouterr().out)["records"]
    results = {r["upper_result"] for r in recs}
    if expect_refuted:  # the liar's rank-1 witness misses eps: refuted only if L >= 2 proved
        assert rc == 1 and results & {"does_not_hold", "refuted"}
    else:
        assert rc == 0 and results == {"proved"}


@pytest.mark.parametrize("argv, field", [
    (["--eps", "1.5"], "eps"),
    (["--eps", "nan"], "eps"),
    (["--producers", "nope"], "producers"),
    (["--producers", "keyset"], "producers"),
    (["--texts", "x.txt"], "model"),
    (["--tokens", "8"], "model"),  # ignored without --model: refused instead
    (["--capture-tolerance", "1e-3"], "model"),
    (["--budget-scale", "0"], "--budget-scale"),
    (["--budget-scale", "nan"], "--budget-scale"),
    (["--budget-scale", "inf"], "--budget-scale"),
    (["--budget-scale", "1e300"], "--budget-scale"),  # finite, but no bounded run
    (["--capture-tolerance", "inf"], "--capture-tolerance"),  # was exit 3 after the run
    (["--intrinsic-budget", "nan"], "--intrinsic-budget"),
    (["--intrinsic-budget", "inf"], "--intrinsic-budget"),
    (["--intrinsic-budget", "0"], "--intrinsic-budget"),
])
def test_produce_bad_arguments(tmp_path, capsys, argv, field):
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, *argv]) == 2
    assert field in capsys.readouterr().err
    assert not (tmp_path / "st").exists()  # refused before anything is written


@pytest.mark.parametrize("array", [
    np.full((3, 3), np.nan), np.ones(4) / 4, np.ones((2, 3), dtype=np.int64),
    np.array([[0.5, 0.5], [-0.5, 1.5]]) * np.inf])
def test_produce_bad_arrays(tmp_path, capsys, array):
    src = _npz(tmp_path, probs=array)
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--quiet",
                 "--npz-kind", "probs"]) == 2
    assert "probs" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()  # nothing written for bad input


def test_a_bad_later_input_leaves_no_store_behind(tmp_path, capsys):
    good, bad = np.full((3, 3), 1 / 3), np.full((3, 3), 1 / 3)
    bad[0, 0] = np.nan
    src = _npz(tmp_path, a=good, b=bad)  # the store is created when "a" is read
    for out in (tmp_path / "st", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        assert main(["produce", str(out), "--npz", src, "--quiet", "--npz-kind", "probs",
                     "--producers", "tsvd"]) == 2
        assert "NaN" in capsys.readouterr().err
        # no half-made store (check would call it "every claim proved"); a folder the user
        # made stays, empty
        assert not out.exists() if out.name == "st" else list(out.iterdir()) == []


def test_a_bad_input_on_resume_keeps_the_store(tmp_path, capsys):
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    out = tmp_path / "st"
    assert main(["produce", str(out), "--npz", src, "--quiet", "--npz-kind", "probs",
                 "--producers", "tsvd"]) == 0
    before = (out / "brackets.jsonl").read_text()
    bad = np.full((3, 3), 1 / 3)
    bad[1, 1] = np.inf
    src2 = _npz(tmp_path, "more.npz", b=bad)
    assert main(["produce", str(out), "--npz", src, src2, "--quiet", "--npz-kind", "probs",
                 "--producers", "tsvd"]) == 2
    capsys.readouterr()
    assert (out / "brackets.jsonl").read_text() == before


def test_a_bad_later_input_on_an_existing_store_adds_no_operator(tmp_path, capsys):
    """An existing store keeps exactly its records and array files when a later input file
    is bad: the operators read before it are withdrawn, not left stored without brackets."""
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    out = tmp_path / "st"
    assert main(["produce", str(out), "--npz", src, "--quiet", "--npz-kind", "probs",
                 "--producers", "tsvd"]) == 0
    files = {f.name: f.read_bytes() for f in (out / "arrays").iterdir()}
    records = {n: (out / n).read_text() for n in ("operators.jsonl", "brackets.jsonl")}
    bad = np.full((3, 3), 1 / 3)
    bad[1, 1] = np.nan
    new = _npz(tmp_path, "new.npz", c=np.full((3, 3), 1 / 3), d=np.full((4, 4), 1 / 4))
    worse = _npz(tmp_path, "worse.npz", b=bad)
    assert main(["produce", str(out), "--npz", new, worse, "--quiet", "--npz-kind", "probs",
                 "--producers", "tsvd"]) == 2
    assert "NaN" in capsys.readouterr().err
    assert {n: (out / n).read_text() for n in records} == records
    assert {f.name: f.read_bytes() for f in (out / "arrays").iterdir()} == files
    assert len(open_store(out).operators) == 1
    assert main(["check", str(out), "--quiet"]) == 0


def test_an_empty_stack_is_an_input_error_not_skipped(tmp_path, capsys):
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3), heads=np.zeros((0, 3, 3)))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--quiet", "--npz-kind",
                 "probs", "--producers", "tsvd"]) == 2
    err = capsys.readouterr().err
    assert "heads" in err and "no matrices" in err and "heads.npz" in err
    assert not (tmp_path / "st").exists()


def test_extreme_logits_and_factors_raise_no_numpy_warning():
    """Logits whose differences overflow and factors past float32's range are valid input:
    the softmax is exact there (exp of an overflowed difference is 0 either way) and such a
    witness stays float64, so neither prints a RuntimeWarning."""
    import warnings

    from softrank.witnesses.producers.pipeline import compact_witness

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A = softmax64(np.array([[1e308, -1e308, 0.0], [1.0, 2.0, 3.0]]))
        w = Witness(rank=2, U=np.array([[1e300, 0.0], [0.0, 1.0]]),
                    V=np.array([[1e-300, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        kept = compact_witness(np.eye(2, 3), w, Fraction(1, 4))
    assert A[0].tolist() == [1.0, 0.0, 0.0] and kept.U.dtype == np.float64


def test_a_resume_says_it_kept_brackets_unchecked_and_check_refuses_an_edited_one(
        tmp_path, capsys):
    """A resumed run compares ids, operators, eps, producers and digests of the brackets it
    keeps, not their ends: it says so, and ``check`` refuses the hand-edited rank."""
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    out = tmp_path / "st"
    args = ["produce", str(out), "--npz", src, "--npz-kind", "probs", "--producers", "tsvd",
            "--eps", "0.25"]
    assert main([*args, "--quiet"]) == 0
    lines = (out / "brackets.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["upper"]["rank"] += 1
    (out / "brackets.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "1 stored brackets kept as recorded" in err and "not rechecked" in err
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["brackets_kept"] == 1
    assert main(["check", str(out), "--quiet"]) == 2
    assert "upper.U: shape (3, 1) differs from the record" in capsys.readouterr().err


def test_producers_checks_the_operator_of_record_as_check_does(tmp_path, capsys):
    """``producers`` validates each witness as ``check`` does: for a logits operator whose
    beta makes the operator of record far from the stored A it reports the witnesses not
    proved (it reported every one proved, exit 0), and a record with an input error is
    named and exit 2 (it was exit 0)."""
    rng = np.random.default_rng(0)
    src = _npz(tmp_path, logits=rng.normal(size=(5, 7)))
    out = tmp_path / "st"
    assert main(["produce", str(out), "--npz", src, "--npz-kind", "logits", "--eps", "0.25",
                 "0.5", "--producers", "tsvd", "nonzero", "-q"]) == 0
    assert main(["producers", str(out), "-q"]) == 0
    for change, code in (("beta", 1), ("logits", 2)):
        bad = tmp_path / change
        shutil.copytree(out, bad)
        ops = [json.loads(x) for x in (bad / "operators.jsonl").read_text().splitlines()]
        if change == "beta":
            ops[0]["beta"] = "100000000000000000000"
        else:
            path = bad / ops[0]["file"]
            arrays = dict(np.load(path))
            arrays["logits"][0, 0] = np.inf
            np.savez_compressed(path, **arrays)
            ops[0]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        (bad / "operators.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
        capsys.readouterr()
        assert main(["check", str(bad), "-q"]) == code
        capsys.readouterr()
        assert main(["producers", str(bad), "--json"]) == code
        doc = json.loads(capsys.readouterr().out)
        if code == 1:
            assert doc["witnesses_not_proved"] == 2 and not doc["input_errors"]
        else:
            assert len(doc["input_errors"]) == 2 and "logits" in doc["input_errors"][0]


def test_producers_rows_follow_the_store_order(tmp_path):
    """The checks run grouped by operator; the rows (and the open-bracket table cut at 40)
    come back in the store's bracket order, as before they went through iter_checks."""
    from softrank.commands.producers import checked_records

    rng = np.random.default_rng(5)
    with Store.create(tmp_path / "s") as st:
        for oid in ("zeta", "alpha", "mid"):
            A = softmax64(rng.standard_normal((4, 4)))
            st.add_operator(A, family="f", id=oid)
            U, s_, Vt = np.linalg.svd(A)
            st.add_bracket(oid, "1/4", {"kind": "factors", "rank": 4, "U": U * s_, "V": Vt},
                           id=f"b_{oid}")
    order = [b.id for b in open_store(tmp_path / "s").brackets]
    assert order == ["b_zeta", "b_alpha", "b_mid"]
    assert [r["bracket"] for r in checked_records(str(tmp_path / "s"))] == order


def test_produce_duplicate_operator_ids(tmp_path, capsys):
    (tmp_path / "b").mkdir()
    a = _npz(tmp_path, "h.npz", x=np.full((2, 2), 0.5))
    b = _npz(tmp_path / "b", "h.npz", x=np.full((2, 2), 0.5))
    assert main(["produce", str(tmp_path / "st"), "--npz", a, b, "--quiet"]) == 2
    assert "h.x" in capsys.readouterr().err


def test_produce_missing_file(tmp_path, capsys):
    assert main(["produce", str(tmp_path / "st"), "--npz", str(tmp_path / "none.npz")]) == 2
    assert "none.npz" in capsys.readouterr().err


def test_produce_parallel_matches_serial(tmp_path, capsys):
    rng = np.random.default_rng(8)
    src = _npz(tmp_path, logits=3 * rng.standard_normal((3, 9, 9)))
    ranks = []
    for jobs in ("1", "2"):
        store = tmp_path / f"st{jobs}"
        assert main(["produce", str(store), "--npz", src, "--eps", "0.25", "--producers",
                     "tsvd", "cpqr", "keyset", "--jobs", jobs, "--quiet"]) == 0
        reader = open_store(store)
        ranks.append(sorted((b.id, b.upper.rank, b.lower.rank if b.lower else None)
                            for b in reader.brackets))
    assert ranks[0] == ranks[1] and len(ranks[0]) == 6
    capsys.readouterr()
    assert main(["producers", str(tmp_path / "st1"), "--reference", "tsvd", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "tsvd" in out and "1.00x" in out and "cpqr" in out


def test_default_producers_leave_out_the_opt_in_ones(tmp_path, capsys, monkeypatch):
    from softrank.witnesses.producers import OPT_IN, default_producers
    from softrank.witnesses.producers.decoder_lp import DecoderLP

    assert "decoder_lp" in OPT_IN and "bernstein" in default_producers()
    assert "nerve" in OPT_IN and "nerve" not in default_producers()
    assert default_producers() == [n for n in BUILTINS if n not in OPT_IN]
    calls = []
    monkeypatch.setattr(DecoderLP, "produce", lambda self, A, eps, *, logits=None:
                        calls.append(A.shape))
    src = _npz(tmp_path, logits=np.random.default_rng(3).standard_normal((1, 5, 5)))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--eps", "0.25", "--quiet"]) == 0
    assert calls == []
    assert main(["produce", str(tmp_path / "st2"), "--npz", src, "--eps", "0.25", "--quiet",
                 "--producers", "tsvd", "decoder_lp"]) == 0
    assert calls == [(5, 5)]


def test_budget_scale_reaches_the_producers_and_is_restored(tmp_path, plugins, monkeypatch):
    for var in (SCALE_ENV, rowset.BUDGET_ENV, altl1.DESCENT_ENV):
        monkeypatch.delenv(var, raising=False)
    A, _ = attention(6, 6, 2, 2.0, 1)
    store = tmp_path / "st"
    assert main(["produce", str(store), "--npz", _npz(tmp_path, probs=A), "--eps", "1/4",
                 "--producers", "scale_probe", "--budget-scale", "0.25", "--quiet"]) == 0
    lines = (store / "brackets.jsonl").read_text().splitlines()
    claims = json.loads(lines[0])["claims"]
    assert claims["probe_scale"] == 0.25
    assert claims["budget_scale"] == 0.25  # the store says which budgets made the bracket
    assert claims["rowset_budget"] == rowset.DEFAULT_BUDGET / 4
    assert claims["descent_budget"] == altl1.DEFAULT_DESCENT / 4
    assert SCALE_ENV not in os.environ  # an in-process caller sees no change
    # without the option the producers get their budgets and the claims say nothing
    assert main(["produce", str(tmp_path / "st2"), "--npz", _npz(tmp_path, probs=A), "--eps",
                 "1/4", "--producers", "scale_probe", "--quiet"]) == 0
    claims = json.loads((tmp_path / "st2" / "brackets.jsonl").read_text().splitlines()[0])[
        "claims"]
    assert claims["probe_scale"] == 1.0 and "budget_scale" not in claims


def test_budget_scale_multiplies_defaults_and_variables(monkeypatch):
    monkeypatch.delenv(rowset.BUDGET_ENV, raising=False)
    monkeypatch.delenv(altl1.DESCENT_ENV, raising=False)
    monkeypatch.setenv(SCALE_ENV, "0.5")
    assert RowSet().budget == rowset.DEFAULT_BUDGET / 2
    assert AlternatingL1().descent_budget == altl1.DEFAULT_DESCENT / 2
    monkeypatch.setenv(rowset.BUDGET_ENV, "4")
    monkeypatch.setenv(altl1.DESCENT_ENV, "0")  # 0 still turns the descent off
    assert RowSet().budget == 2.0 and AlternatingL1().descent_budget == 0.0
    assert RowSet(budget=3.0).budget == 3.0  # an explicit budget is not scaled
    for bad in ("nan", "-1", "0", "x", ""):
        monkeypatch.setenv(SCALE_ENV, bad)
        assert budget_scale() == 1.0 and RowSet().budget == 4.0


@pytest.mark.parametrize("var, value", [
    (SCALE_ENV, "fast"), (rowset.BUDGET_ENV, "0"), (rowset.BUDGET_ENV, "-5"),
    ("SOFTRANK_BERNSTEIN_BUDGET", "inf"), (altl1.DESCENT_ENV, "nan"), (altl1.DESCENT_ENV, "-1"),
    ("SOFTRANK_KEYSET_BUDGET", "0"), ("SOFTRANK_CHEAP_BUDGET", "lots"),
])
def test_produce_refuses_unreadable_budget_variables(tmp_path, capsys, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--quiet"]) == 2
    assert var in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def test_produce_accepts_a_zero_descent(tmp_path, monkeypatch):
    monkeypatch.setenv(altl1.DESCENT_ENV, "0")
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--quiet", "--producers",
                 "tsvd"]) == 0


def test_truncations_remove_one_component_of_the_fit():
    rng = np.random.default_rng(7)
    A, _ = attention(20, 16, 6, 4.0, 5)
    k = 5
    U, V = rng.standard_normal((20, k + 1)), rng.standard_normal((k + 1, 16))
    starts = altl1._truncations(A, U, V, k)
    assert 1 <= len(starts) <= 2
    Ub, sb, Vtb = np.linalg.svd(U @ V, full_matrices=False)
    comps = [(Ub[:, j] * sb[j], Vtb[j]) for j in range(k + 1)]
    for U0, V0 in starts:
        assert U0.shape == (20, k) and V0.shape == (k, 16)
        # each start is the fit without exactly one of its SVD components
        gone = U @ V - U0 @ V0
        assert np.linalg.matrix_rank(gone, tol=1e-9 * np.abs(U @ V).max()) == 1
        assert any(np.allclose(gone, np.outer(u, v), atol=1e-9) for u, v in comps)

    def err(X):
        return np.abs(A - X).sum(axis=1).max()

    least = min(err(U @ V - np.outer(u, v)) for u, v in comps)
    assert np.isclose(err(starts[0][0] @ starts[0][1]), least, rtol=1e-12)
    # the truncated SVD is the second start, unless it is the first
    tsvd = (Ub[:, :k] * sb[:k]) @ Vtb[:k]
    assert np.allclose(starts[-1][0] @ starts[-1][1], tsvd, atol=1e-9)


def test_components_price_every_drop_and_the_chain_step_screens_them():
    from softrank.witnesses.producers._common import budget_settings, work_done

    rng = np.random.default_rng(3)
    A, _ = attention(24, 20, 8, 4.0, 2)
    k = 6
    U, V = rng.standard_normal((24, k + 1)) * 0.1, rng.standard_normal((k + 1, 20)) * 0.1
    Ub, Vb, z = altl1._components(A, U, V)
    assert np.allclose(Ub @ Vb, U @ V, atol=1e-12)
    for j in range(k + 1):  # z[j]: the error without component j, exactly as row_l1 has it
        U0, V0 = altl1._without(Ub, Vb, j)
        assert z[j] == pytest.approx(np.abs(A - U0 @ V0).sum(axis=1).max(), rel=1e-12)
    first = altl1._first_drops(z)
    assert first[0] == int(np.argmin(z)) and first[-1] in (first[0], k)
    with budget_settings("work", 1.0):
        # a target no rank-k fit can meet: every screened start, then the patient run, fail;
        # every run's error is kept, only the patient run's counted for the agreement claims
        ends: dict[int, list[tuple[float, bool]]] = {}
        assert altl1._chain_step(A, 1e-9, U, V, k, float("inf"), ends, 50) is None
        n_first = len(altl1._first_drops(z))
        screened = n_first + min(altl1.SCREEN_DROPS, k + 1 - n_first)
        more = len(altl1.SCREEN_MORE) * min(altl1.SCREEN_TOP, screened)
        assert [c for _, c in ends[k]] == [False] * (screened + more) + [True]
        assert all(e > 1e-9 for e, _ in ends[k])
        spent = work_done()
        # a target the first truncation meets at once: returned after its few screen steps
        t = float(z.min()) * 1.5
        ends = {}
        U2, V2, e = altl1._chain_step(A, t, U, V, k, float("inf"), ends, 50)
        assert e <= t and U2.shape == (24, k) and V2.shape == (k, 20)
        assert ends == {k: [(e, False)]}
        assert e == np.abs(A - U2 @ V2).sum(axis=1).max()
        assert work_done() - spent < spent


def test_chain_step_says_when_a_rank_needed_more_than_its_truncations():
    rng = np.random.default_rng(5)
    A, _ = attention(24, 20, 8, 4.0, 2)
    k = 6
    U, V = rng.standard_normal((24, k + 1)) * 0.1, rng.standard_normal((k + 1, 20)) * 0.1
    z = altl1._components(A, U, V)[2]
    hard: list[bool] = []
    assert altl1._chain_step(A, float(z.min()) * 1.5, U, V, k, float("inf"), {}, 50, hard)
    assert hard == []  # the first truncation passed
    assert altl1._chain_step(A, 1e-9, U, V, k, float("inf"), {}, 50, hard) is None
    assert hard == [True]


def test_probe_truncates_the_fit_far_down_and_counts_its_run_as_screening():
    A, _ = attention(30, 24, 10, 4.0, 4)
    Us, s, Vt = np.linalg.svd(A, full_matrices=False)
    U, V = Us[:, :12] * s[:12], Vt[:12]
    e6 = np.abs(A - (Us[:, :6] * s[:6]) @ Vt[:6]).sum(axis=1).max()
    ends: dict[int, list[tuple[float, bool]]] = {}
    got = altl1._probe(A, 1.01 * e6, U, V, 6, float("inf"), ends)  # the SVD's 6 components
    assert got is not None and got[0].shape == (30, 6) and got[1].shape == (6, 24)
    assert got[2] <= 1.01 * e6 and got[2] == np.abs(A - got[0] @ got[1]).sum(axis=1).max()
    assert ends[6] == [(got[2], False)]
    assert altl1._probe(A, 1e-9, U, V, 6, float("inf"), ends) is None
    assert [c for _, c in ends[6]] == [False, False]


def test_alt_l1_probes_halfway_below_a_hard_rank(monkeypatch):
    calls: list[tuple[int, int, bool]] = []
    real = altl1._probe

    def spy(A, t, U, V, k, deadline, ends, polish=True):
        got = real(A, t, U, V, k, deadline, ends, polish=polish)
        calls.append((U.shape[1], k, got is not None))
        return got
    monkeypatch.setattr(altl1, "_probe", spy)
    A, _ = attention(40, 40, 10, 6.0, 11)
    eps = Fraction(1, 5)
    w = AlternatingL1(budget=60.0, descent_budget=0).produce(A, eps)
    assert w is not None and check_upper(A, w.U, w.V, eps, rank=w.rank).holds
    assert calls  # this head has ranks its truncations do not pass
    missed = 0
    assert sum(not passed for _, _, passed in calls) <= altl1.PROBE_MISSES
    for k, kp, passed in calls:
        # halfway between the rank just reached and the highest probe that missed
        assert kp == (k + missed) // 2 and missed < kp < k - 1
        if passed:
            assert w.rank <= kp
        else:
            missed = kp


def test_alt_l1_chain_claims_its_rank_and_never_ends_above_the_tsvd():
    A, _ = attention(40, 40, 10, 6.0, 11)
    eps = Fraction(1, 5)
    # work units, not CPU seconds: on a loaded machine a CPU-second budget ended the chain
    # before any run below its rank, and the claim below was missing
    with budget_settings(mode="work"):
        w = AlternatingL1(descent_budget=0).produce(A, eps)
    assert w is not None and check_upper(A, w.U, w.V, eps, rank=w.rank).holds
    assert w.rank == w.claims["chain_rank"] <= w.claims["tsvd_rank"]
    if w.rank > 1:  # the chain's failing run below its rank is claimed
        assert w.claims["upper_next_rank"] == w.rank - 1
        assert w.claims["upper_next_ratio"] > 1


def _resume_fixture(tmp_path):
    rng = np.random.default_rng(21)
    L = 2 * rng.standard_normal((2, 6, 6))
    P = np.exp(L - L.max(2, keepdims=True))
    P /= P.sum(2, keepdims=True)
    src = _npz(tmp_path, a=P[0], b=P[1])
    out = tmp_path / "st"
    args = ["produce", str(out), "--npz", src, "--quiet", "--npz-kind", "probs",
            "--producers", "tsvd", "nonzero"]
    assert main([*args, "--eps", "0.25"]) == 0
    return out, args


def _edit_jsonl(path, fn):
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps(fn(r)) + "\n" for r in recs))


def test_resume_refuses_a_stored_operator_that_is_not_its_input(tmp_path, capsys):
    """Operator a's record pointed at b's array file (digest updated: a consistent store):
    resuming added brackets of b's matrix under a's name, exit 0."""
    out, args = _resume_fixture(tmp_path)
    ops = [json.loads(x) for x in (out / "operators.jsonl").read_text().splitlines()]
    b = next(o for o in ops if o["id"].endswith(".b"))
    _edit_jsonl(out / "operators.jsonl", lambda r: {**r, "file": b["file"],
                                                    "sha256": b["sha256"]}
                if r["id"].endswith(".a") else r)
    before = (out / "brackets.jsonl").read_text()
    capsys.readouterr()
    assert main([*args, "--eps", "0.25", "0.35"]) == 2
    err = capsys.readouterr().err
    assert "operators.jsonl" in err and "differs from this run's input" in err
    assert (out / "brackets.jsonl").read_text() == before


def test_resume_refuses_a_skipped_bracket_that_is_not_what_its_id_says(tmp_path, capsys):
    out, args = _resume_fixture(tmp_path)
    first = json.loads((out / "brackets.jsonl").read_text().splitlines()[0])
    _edit_jsonl(out / "brackets.jsonl",
                lambda r: {**r, "eps": "7/20"} if r["id"] == first["id"] else r)
    capsys.readouterr()
    assert main([*args, "--eps", "0.25"]) == 2
    err = capsys.readouterr().err
    assert first["id"] in err and "does not match its id" in err


def test_resume_refuses_a_skipped_bracket_whose_arrays_changed(tmp_path, capsys):
    out, args = _resume_fixture(tmp_path)
    first = json.loads((out / "brackets.jsonl").read_text().splitlines()[0])
    (out / first["file"]).write_bytes(b"garbage")
    capsys.readouterr()
    assert main([*args, "--eps", "0.25"]) == 2
    err = capsys.readouterr().err
    assert f"{first['id']}.file" in err and "sha256" in err
    # an intact store resumes as before: nothing new, exit 0
    (tmp_path / "again").mkdir()
    out2, args2 = _resume_fixture(tmp_path / "again")
    assert main([*args2, "--eps", "0.25"]) == 0


def test_bracket_ids_stay_distinct_and_valid_past_128_characters():
    import re
    from fractions import Fraction

    from softrank.witnesses.producers.pipeline import bracket_id

    ok = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")  # the store's id rule
    assert bracket_id("op", Fraction(1, 4), "alt_l1") == "op.e0.25.alt_l1"  # short: unchanged
    tiny = Fraction(1, 10**400)  # its tag alone is 402 characters
    long_op = "o" * 120
    ids = {bracket_id(op, e, up) for op in ("op", long_op) for e in (tiny, Fraction(1, 4),
                                                                      tiny * 3)
           for up in ("alt_l1", "tsvd", "rw_svd")}
    assert len(ids) == 18 and all(ok.match(i) for i in ids)
    assert bracket_id(long_op, tiny, "tsvd") == bracket_id(long_op, tiny, "tsvd")  # resumable


def test_a_tiny_eps_writes_every_bracket(tmp_path, capsys):
    src = _npz(tmp_path, a=np.full((3, 3), 1 / 3))
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--eps", "1e-400", "1/4",
                 "--producers", "tsvd", "rw_svd", "--quiet"]) == 0
    assert "4 brackets written" in capsys.readouterr().out


@pytest.mark.parametrize("shape", [(256, 16), (64, 4)])
def test_rep_rows_on_a_tall_operator_gives_a_witness_within_min_m_n(shape):
    """kmax was m: on a tall operator at a small eps the witness had rank m > N, a producer
    failure and exit 1 on valid input."""
    from softrank.certify import check_upper
    from softrank.witnesses.producers import get_producer

    from .helpers import softmax_rows

    A = softmax_rows(np.random.default_rng(3).standard_normal(shape) * 3)
    w = get_producer("rep_rows").produce(A, Fraction(1, 20))
    assert w is not None and w.rank <= min(shape)
    assert check_upper(A, w.U, w.V, Fraction(1, 20)).status == "holds"


@pytest.mark.parametrize("edit, why", [(lambda A: A.__setitem__((0, 0), -0.01),
                                        "negative entries"),
                                       (lambda A: A.__imul__(1.5), "does not sum to 1")])
def test_auto_kind_says_when_it_reads_an_array_as_logits(tmp_path, capsys, edit, why):
    """A probability matrix with one bad entry was silently stored as softmax(input): the
    run and the store now say what the array was read as."""
    from softrank.witnesses import open_store

    A = np.full((4, 4), 0.25)
    edit(A)
    src = _npz(tmp_path, probs=A)
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--producers", "tsvd",
                 "--eps", "0.25"]) == 0
    err = capsys.readouterr().err
    assert "probs: logits" in err and why in err
    (op,) = open_store(tmp_path / "st").operators
    assert why in op.meta["read_as"]
    # named logits, or asked for: no note
    src2 = _npz(tmp_path, logits=A)
    assert main(["produce", str(tmp_path / "st2"), "--npz", src2, "--producers", "tsvd",
                 "--eps", "0.25"]) == 0
    assert "logits, A =" not in capsys.readouterr().err


def test_two_inputs_with_one_operator_id_are_named_plainly(tmp_path, capsys):
    A = np.full((3, 3), 1 / 3)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = _npz(tmp_path / "a", A=A), _npz(tmp_path / "b", A=A)
    assert main(["produce", str(tmp_path / "st"), "--npz", one, two, "--producers",
                 "tsvd"]) == 2
    err = capsys.readouterr().err
    assert "map to operator id" in err and "source heads.npz, array A" in err
    assert "{'source'" not in err


def test_a_run_that_writes_no_bracket_is_not_a_success(tmp_path, capsys):
    # every producer priced over a tiny budget: "0 brackets written" and exit 0
    rng = np.random.default_rng(3)
    A = np.exp(rng.normal(size=(6, 6)))
    A /= A.sum(1, keepdims=True)
    src = _npz(tmp_path, probs=A)
    assert main(["produce", str(tmp_path / "st"), "--npz", src, "--npz-kind", "probs",
                 "--budget-scale", "1e-300", "--eps", "0.25"]) == 1
    assert "no bracket written for the 1 operators processed" in capsys.readouterr().err
    assert main(["produce", str(tmp_path / "ok"), "--npz", src, "--npz-kind", "probs",
                 "--eps", "0.25", "-q"]) == 0


def test_a_dangling_link_as_the_store_folder_is_named_as_one(tmp_path, capsys):
    # the message was the operating system's bare "File exists"
    rng = np.random.default_rng(4)
    A = np.exp(rng.normal(size=(5, 5)))
    A /= A.sum(1, keepdims=True)
    src = _npz(tmp_path, probs=A)
    link = tmp_path / "dangl"
    link.symlink_to(tmp_path / "missing" / "dir")
    assert main(["produce", str(link), "--npz", src, "--npz-kind", "probs", "--eps", "0.25",
                 "-q"]) == 2
    err = capsys.readouterr().err
    assert "is a symbolic link to" in err and "does not exist" in err
    assert not (tmp_path / "missing").exists()  # nothing created through the link
