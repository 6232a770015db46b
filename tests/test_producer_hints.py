"""Searches hand their state to the neighbour eps: r_eps is non-increasing in eps, so a fit
within a smaller eps starts the alt_l1 chain at a larger one, and a Bernstein subspace found
(or missed) at a larger eps is a candidate at a smaller one.  The hints are untrusted search
state: whatever they hold, a bracket is only stored as the kernel would check it, and a hint
that does not hold at this eps is not used."""

from __future__ import annotations

from fractions import Fraction
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from softrank.certify import check_lower, check_upper
from softrank.witnesses.models import softmax64
from softrank.witnesses.producers import (
    ENTRY_POINT_GROUP,
    BaseProducer,
    Certificate,
    Witness,
    altl1,
    bernstein,
)
from softrank.witnesses.producers import _entry_points as real_entry_points
from softrank.witnesses.producers._common import budget_settings, row_l1, target
from softrank.witnesses.producers.pipeline import produce_operator


def attention(m: int, N: int, d: int, beta: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax64(beta * rng.standard_normal((m, d)) @ rng.standard_normal((d, N))
                     / np.sqrt(d))


A = attention(12, 12, 5, 3.0, 7)


def test_a_seed_subspace_found_at_a_larger_eps_certifies_at_a_smaller_one():
    big, small = 0.4, 0.25
    found = bernstein.search(A, big, 0.5)
    assert found is not None
    p, W, _P, _J, v, _ = found
    near: dict = {}
    got = bernstein._seeded(A, [(v / big, W)], small, 0.5, 12, None, near)
    assert got is not None and got[0] == p and got[5] == "seed"
    cert = {"kind": "bernstein", "rank": p, "W": got[1], "P": got[2], "J": got[3]}
    assert check_lower(A, cert, Fraction(1, 4), tier="exact").status == "holds"
    # a seed at or below the rank already found, or above the ceiling, is not tried
    assert bernstein._seeded(A, [(v / big, W)], small, 0.5, 12, got, {}) is got
    assert bernstein._seeded(A, [(v / big, W)], small, 0.5, p - 1, None, {}) is None


def test_a_seed_that_fails_here_is_kept_with_its_recomputed_value():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((12, 11))  # a rank-11 subspace: far beyond this head at eps 1/2
    near: dict = {}
    # the hint's own F (here a false 0) is not believed: the value is recomputed
    assert bernstein._seeded(A, [(0.0, W)], 0.5, 0.5, 12, None, near) is None
    assert 11 in near and near[11][0] * 0.5 > bernstein.CLAIM_BUDGET


def test_bernstein_leaves_its_subspaces_as_hints_and_reads_them():
    hints: dict = {}
    with budget_settings("work", 0.05):
        first = bernstein.Bernstein().produce(A, Fraction(2, 5), hints=hints)
        seeds = list(hints[bernstein.SEEDS])
        second = bernstein.Bernstein().produce(A, Fraction(1, 4), hints=hints)
    assert first is not None and second is not None
    assert seeds and all(W.shape[0] == 12 for _, W in seeds)
    assert seeds[0][1].shape[1] == first.rank  # the certified subspace first
    assert second.rank >= first.rank  # the seed alone certifies first.rank at 1/4
    cert = {"kind": second.kind, "rank": second.rank, **second.arrays}
    assert check_lower(A, cert, Fraction(1, 4), tier="exact").status == "holds"


def test_the_chain_starts_from_a_fit_within_this_eps_only():
    t = target(Fraction(1, 4))
    Us, s, Vt = np.linalg.svd(A)
    r = next(k for k in range(1, 13)
             if float(row_l1(A, Us[:, :k] * s[:k], Vt[:k]).max()) <= t)
    fit = (r, Us[:, :r] * s[:r], Vt[:r])  # within 1/4, as a search at a smaller eps left it
    k_svd, svd_fit = r + 2, (Us[:, :r + 2] * s[:r + 2], Vt[:r + 2])
    k, (U, V) = altl1._start(A, t, k_svd, svd_fit, fit)
    assert k == r and U is fit[1] and V is fit[2]
    # not within t here, not below the SVD's rank, or not of its stated shape: not used
    for args in ((t / 10, k_svd, fit), (t, r, fit), (t, k_svd, (r - 1, fit[1], fit[2])),
                 (t, k_svd, None)):
        k, got = altl1._start(A, args[0], args[1], svd_fit, args[2])
        assert k == args[1] and got is svd_fit


def test_alt_l1_from_a_hint_gives_a_witness_the_kernel_accepts():
    hints: dict = {}
    with budget_settings("work", 0.05):
        w1 = altl1.AlternatingL1().produce(A, Fraction(1, 5), hints=hints)
        w2 = altl1.AlternatingL1().produce(A, Fraction(2, 5), hints=hints)
    assert w1 is not None and w2 is not None
    assert w2.claims["chain_start"] == min(w1.rank, w2.claims["tsvd_rank"])
    assert w2.rank <= w1.rank
    assert check_upper(A, w2.U, w2.V, Fraction(2, 5)).status == "holds"


class Recorder(BaseProducer):
    """A plug-in (either role) that logs each call's eps and the hints it was given, and leaves
    its eps as its hint."""

    calls: list = []

    def produce(self, A, eps, *, logits=None, hints=None, stop_at=None):
        Recorder.calls.append((self.role, eps, dict(hints)))
        hints["eps"] = eps
        if self.role == "upper":
            return Witness(rank=A.shape[0], U=np.eye(A.shape[0]), V=A.copy())
        return Certificate(kind="nonzero", rank=1, claims={})


class UpRecorder(Recorder):
    name, role = "up_rec", "upper"


class LowRecorder(Recorder):
    name, role = "low_rec", "lower"


class OnceLower(BaseProducer):
    """A lower plug-in that writes its hints on its first call only."""

    name, role = "once_rec", "lower"

    def produce(self, A, eps, *, logits=None, hints=None):
        hints.setdefault("first", eps)  # in place, not through assignment: not seen
        if "seen" not in hints:
            hints["seen"] = eps
        return Certificate(kind="nonzero", rank=1, claims={})


class FailingLower(BaseProducer):
    """A lower plug-in that raises at every eps."""

    name, role = "fail_rec", "lower"

    def produce(self, A, eps, *, logits=None):
        raise RuntimeError(f"no luck at {eps}")


class FailingUpper(BaseProducer):
    """An upper plug-in that raises at every eps."""

    name, role = "fail_up", "upper"

    def produce(self, A, eps, *, logits=None):
        raise RuntimeError(f"no fit at {eps}")


@pytest.fixture
def recorders(monkeypatch):
    extra = [EntryPoint(name=n, value=f"{__name__}:{c}", group=ENTRY_POINT_GROUP)
             for n, c in (("up_rec", "UpRecorder"), ("low_rec", "LowRecorder"),
                          ("once_rec", "OnceLower"), ("fail_rec", "FailingLower"),
                          ("fail_up", "FailingUpper"))]
    monkeypatch.setattr("softrank.witnesses.producers._entry_points",
                        lambda: [*real_entry_points(), *extra])
    Recorder.calls = []


def test_uppers_go_up_in_eps_and_lowers_down_each_with_its_hints(recorders):
    a, b, c = Fraction(1, 10), Fraction(1, 4), Fraction(1, 2)
    res = produce_operator("op", A, [b, c, a], ["up_rec"], ["low_rec"])
    assert not res.failures
    assert [(r, e) for r, e, _ in Recorder.calls] == [
        ("upper", a), ("upper", b), ("upper", c), ("lower", c), ("lower", b), ("lower", a)]
    assert [h for _, _, h in Recorder.calls] == [{}, {"eps": a}, {"eps": b}, {}, {"eps": c},
                                                 {"eps": b}]
    assert [x.eps for x in res.brackets] == [b, c, a]  # the order asked for
    claims = {x.eps: x.claims for x in res.brackets}
    assert "upper_hints_from" not in claims[a] and claims[c]["upper_hints_from"] == "1/4"
    assert "lower_hints_from" not in claims[c] and claims[a]["lower_hints_from"] == "1/4"


def test_stored_brackets_are_searched_again_but_not_returned(recorders):
    a, b = Fraction(1, 10), Fraction(1, 4)
    with budget_settings("work"):  # work claims: the same numbers on every run
        done = produce_operator("op", A, [a, b], ["up_rec"], ["low_rec"])
        Recorder.calls = []
        res = produce_operator("op", A, [a, b], ["up_rec"], ["low_rec"],
                               skip={done.brackets[1].id})
    assert len(Recorder.calls) == 4  # the stored eps 1/4 is searched again: eps 1/10's hints
    assert [x.id for x in res.brackets] == [done.brackets[0].id]
    assert res.brackets[0].claims == done.brackets[0].claims
    assert res.brackets[0].claims["lower_hints_from"] == "1/4"


def test_a_failure_in_a_repeated_search_says_its_bracket_was_stored(recorders):
    # a resumed run searches a stored eps again for its hints: its producers' failures are
    # reported, marked as from a repeated search; the others are not marked
    from softrank.witnesses.producers.pipeline import AGAIN

    a, b = Fraction(1, 10), Fraction(1, 4)
    done = produce_operator("op", A, [a, b], ["up_rec", "fail_up"], ["fail_rec"])
    assert len(done.failures) == 4 and not any(AGAIN in f for f in done.failures)
    stored = next(x.id for x in done.brackets if x.eps == b)
    res = produce_operator("op", A, [a, b], ["up_rec", "fail_up"], ["fail_rec"], skip={stored})
    marked = sorted(f for f in res.failures if f.endswith(AGAIN))
    plain = sorted(f for f in res.failures if AGAIN not in f)
    # at 1/4 the lower search's bracket (the anchor) is stored: its failure is marked; fail_up
    # wrote no bracket at 1/4, so its failure there stands as this run's
    assert marked == [f"op eps=1/4: fail_rec: RuntimeError: no luck at 1/4{AGAIN}"]
    assert plain == sorted(f for f in done.failures if "fail_rec" not in f or "1/10" in f)


@pytest.fixture
def at_the_ceiling(monkeypatch):
    """A head whose Bernstein rank r is known, the lift reach made unlimited (any subspace that
    missed rank r + 1 is lifted), and the hops and lifts replaced by recorders."""
    from softrank.witnesses.producers import polytope

    # budgets in work units (fixture and test): 0.1 CPU s was within 10 times of the need,
    # short on a slow machine
    monkeypatch.setenv("SOFTRANK_BUDGET_MODE", "work")
    head = attention(10, 10, 4, 3.0, 2)
    free = bernstein.Bernstein(budget=0.1).produce(head, Fraction(1, 4))
    assert free is not None
    calls: dict = {"hops": [], "lifts": [], "lifts_ok": True}

    def fake_hop(A, F0, W0, goal, deadline, **kw):
        calls["hops"].append(W0.shape[1])
        return F0, W0  # no better subspace: the one lifted before the hops stays the best

    def fake_lift(A, W, eps, deadline, retry, *, report=None):
        calls["lifts"].append(W.shape[1])
        return ({"fake": np.zeros(1)}, 0.5) if calls["lifts_ok"] else None

    monkeypatch.setattr(bernstein, "hop", fake_hop)
    monkeypatch.setattr(polytope, "lift_near", fake_lift)
    monkeypatch.setattr(polytope, "LIFT_NEAR", 1e9)
    return head, free.rank, calls


def test_a_lift_that_reaches_the_ceiling_ends_the_search_before_the_hops(at_the_ceiling):
    head, r, calls = at_the_ceiling
    got = bernstein.Bernstein(budget=0.1).produce(head, Fraction(1, 4), stop_at=r + 1)
    assert got is not None and got.kind == "polytope" and got.rank == r + 1
    assert calls["lifts"] == [r + 1] and calls["hops"] == []


def test_below_the_ceiling_or_when_the_lift_fails_the_hops_still_run(at_the_ceiling):
    head, r, calls = at_the_ceiling
    # the ceiling two ranks up: a lift of rank r + 1 would not close the bracket
    got = bernstein.Bernstein(budget=0.1).produce(head, Fraction(1, 4), stop_at=r + 2)
    assert got.rank == r + 1 and calls["hops"] == [r + 1] and calls["lifts"] == [r + 1]
    calls.update(hops=[], lifts=[], lifts_ok=False)
    got = bernstein.Bernstein(budget=0.1).produce(head, Fraction(1, 4), stop_at=r + 1)
    assert got.kind == "bernstein" and got.rank == r
    # lifted once before the hops; the hops ended on that same subspace: not lifted again
    assert calls["hops"] == [r + 1] and calls["lifts"] == [r + 1]


def test_the_claim_names_the_last_eps_whose_search_wrote_the_hints(recorders):
    a, b, c = Fraction(1, 10), Fraction(1, 4), Fraction(1, 2)
    res = produce_operator("op", A, [a, b, c], ["up_rec"], ["once_rec"])
    claims = {x.eps: x.claims for x in res.brackets}
    assert "lower_hints_from" not in claims[c]
    # written at 1/2 only: the searches at 1/4 and 1/10 both started from 1/2's state
    assert claims[b]["lower_hints_from"] == claims[a]["lower_hints_from"] == "1/2"
