"""Kernel checks on the shipped MiniLM heads and the whole-record check."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.certify.intrinsic.check import check_intrinsic
from softrank.certify.intrinsic.interaction import interaction_from_logits
from softrank.certify.intrinsic.kappa import kappa_bracket, kappa_lower_variance, kappa_upper
from softrank.certify.intrinsic.tau import tau_bracket
from softrank.exact.grid import grid_family
from tests.intrinsic_kappa_witness import kappa_witness_fw
from tests.intrinsic_witness import tau_witness

STORE = Path(__file__).resolve().parent.parent / "examples" / "minilm"


def _heads() -> list[Path]:
    ops = [json.loads(line) for line in (STORE / "operators.jsonl").read_text().splitlines()]
    return [STORE / op["file"] for op in ops]


def _factors(C, r: int):
    U, s, Vt = np.linalg.svd(C.mid)
    return U[:, :r] * np.sqrt(s[:r]), Vt[:r].T * np.sqrt(s[:r])


def _rank_one_worst(paths: list[Path]) -> Fraction:
    worst = Fraction(1)
    for path in paths:
        C = interaction_from_logits(np.load(path)["logits"])
        x, y = _factors(C, 1)
        rect = [int(np.argmax(x)), int(np.argmin(x)), int(np.argmax(y)), int(np.argmin(y))]
        kb = kappa_bracket(x, y, a=[(x.max() + x.min()) / 2], c=[(y.max() + y.min()) / 2],
                           rects=[rect])
        osc = (Fraction(float(x.max())) - Fraction(float(x.min()))) * (
            Fraction(float(y.max())) - Fraction(float(y.min())))
        assert kb.contains(osc / 4)
        worst = max(worst, kb.ratio)
    return worst


def test_rank_one_closes_on_some_heads() -> None:
    assert _rank_one_worst(_heads()[::9]) <= 1 + Fraction(1, 10**9)


@pytest.mark.slow
def test_rank_one_closes_on_every_head() -> None:
    assert _rank_one_worst(_heads()) <= 1 + Fraction(1, 10**9)


@pytest.mark.parametrize("head", [0, 17, 40, 71])
def test_tau_closes_on_real_heads(head: int) -> None:
    C = interaction_from_logits(np.load(_heads()[head])["logits"])
    for r in (1, 2, 4, 8):
        X, Y = _factors(C, r)
        b, cyc, rows = tau_witness(C.mid - X @ Y.T)
        res = tau_bracket(C, X, Y, b=b, cycle=cyc, cycle_rows=rows)
        assert res.tau.hi > Fraction(1, 10**12)
        assert res.q.ratio <= 1 + Fraction(1, 10**9)
        assert res.tau.ratio <= 1 + Fraction(1, 10**6)


@pytest.mark.parametrize("head,r", [(3, 2), (50, 3)])
def test_variance_dual_on_real_heads(head: int, r: int) -> None:
    C = interaction_from_logits(np.load(_heads()[head])["logits"])
    X, Y = _factors(C, r)
    w = kappa_witness_fw(X, Y, steps=60)
    kb = kappa_bracket(X, Y, G=w["G"], a=w["a"], c=w["c"], lam=w["lam"], mu=w["mu"])
    assert kb.ratio <= Fraction(11, 10)
    # the bound does not depend on the factorisation: a regauged T gives the same lower end
    G = np.array([[2.0, 0.5], [0.0, 1.0]]) if r == 2 else np.diag([1.0, 3.0, 0.5])
    lo2 = kappa_lower_variance(X @ G, Y @ np.linalg.inv(G).T, w["lam"], w["mu"])
    assert abs(lo2.lo - kb.lo) <= kb.lo * Fraction(1, 10**9)
    assert lo2.lo <= kappa_upper(X @ G, Y @ np.linalg.inv(G).T).hi


@pytest.mark.parametrize("seed", range(6))
def test_tampered_weights_never_false(seed: int) -> None:
    # grid family r = 2, L = 3 (exact kappa known): any weights give a valid lower bound
    g = grid_family(2, 3, "1/4")
    pts = np.array(g.points, dtype=float)
    Xn = 9 * pts - pts.sum(axis=0)
    exact = Fraction(4) * 81  # kappa(C) / s = r (L - 1)^2 / 2 = 4, times n^2
    rng = np.random.default_rng(seed)
    lam = rng.random(9) * (rng.random(9) < 0.6)
    lam[seed % 9] += 0.1
    mu = rng.random(9)
    lb = kappa_lower_variance(Xn, 2 * Xn, lam, mu)
    assert lb.lo <= exact
    # the exact dual weights (the four corners) prove it
    corners = np.zeros(9)
    corners[[0, 2, 6, 8]] = 1.0
    best = kappa_lower_variance(Xn, 2 * Xn, corners, corners)
    assert best.lo <= exact and best.lo >= exact * (1 - Fraction(1, 10**9))


def test_tau_zero_at_rank_of_C_grid() -> None:
    # grid family r = 2, L = 8: logits beta H with H_ab = 2 a.b - |b|^2 and n = 64 = 2^6, so
    # C = beta P H P = (P X0)(2 beta P X0)^T is a product of floats: tau(C) = 0 exactly
    g = grid_family(2, 8, "1/4")
    assert g.rank_C == 2
    pts = np.array(g.points, dtype=float)
    H = 2 * pts @ pts.T - (pts * pts).sum(axis=1)[None, :]
    beta = 0.75
    C = interaction_from_logits(H, beta)
    X = pts - pts.mean(axis=0)
    res = tau_bracket(C, X, 2 * beta * X, b=np.zeros(64), cycle=[0], tier="arb")
    assert res.q.lo == 0 and res.q.hi == 0 and res.tau.hi == 0


def test_check_intrinsic_record() -> None:
    C = interaction_from_logits(np.load(_heads()[5])["logits"])
    X, Y = _factors(C, 2)
    b, cyc, rows = tau_witness(C.mid - X @ Y.T)
    w = kappa_witness_fw(X, Y, steps=40)
    wit = {"X": X, "Y": Y, "b": b, "cycle": cyc, "cycle_rows": rows, "G": w["G"],
           "a": w["a"], "c": w["c"], "lam": w["lam"], "mu": w["mu"]}
    res = check_intrinsic(C, wit, "1/4", 2)
    js = res.to_json()
    assert js["r"] == 2 and js["profile"]["status"] in ("applicable", "not applicable")
    if res.tau.tau.hi < Fraction(1, 4):
        assert res.profile.profile.lo >= 1
    with pytest.raises(InputError) as e:
        check_intrinsic(C, {**wit, "Z": X}, "1/4", 2)
    assert e.value.field == "Z"
    with pytest.raises(InputError) as e:
        check_intrinsic(C, {"X": X}, "1/4", 2)
    assert e.value.field == "Y"
    with pytest.raises(InputError) as e:
        check_intrinsic(C, wit, "1/4", 3)
    assert e.value.field == "r"
    with pytest.raises(InputError) as e:
        check_intrinsic(C, {**wit, "lam": np.full(64, np.nan)}, "1/4", 2)
    assert e.value.field == "lam"


def test_tiny_tau_needs_the_arb_tier() -> None:
    # grid r = 2, L = 8 (exact factorisation, tau = 0) with one logit moved by d = 2^-36:
    # E = beta d P e_i e_j^T P, whose q is beta d / 2 exactly (offsets
    # b = beta d (1/2 - 1/m)(e_j - 1/n), cycle j -> l -> j); the float enclosure of C is far
    # too coarse (its radius is ~1e-13 against q ~ 5e-12): the arb tier must close it
    pts = np.array(grid_family(2, 8, "1/4").points, dtype=float)
    H = 2 * pts @ pts.T - (pts * pts).sum(axis=1)[None, :]
    i, j, l = 5, 9, 30
    d = 2.0**-36
    H[i, j] += d
    beta = 0.75
    C = interaction_from_logits(H, beta)
    X = pts - pts.mean(axis=0)
    b = beta * d * (0.5 - 1 / 64) * (np.eye(64)[j] - 1 / 64)
    q = Fraction(beta) * Fraction(d) / 2
    f = tau_bracket(C, X, 2 * beta * X, b=b, cycle=[j, l], cycle_rows=[i, 0],
                    tier="float64")
    assert f.q.contains(q) and f.q.ratio > 1 + Fraction(1, 10**6)  # float64 is not enough
    res = tau_bracket(C, X, 2 * beta * X, b=b, cycle=[j, l], cycle_rows=[i, 0])
    assert res.q.tier == "arb" and res.q.contains(q)
    assert res.q.ratio <= 1 + Fraction(1, 10**9)
    assert res.tau.lo > Fraction(1, 10**12) and res.tau.ratio <= 1 + Fraction(1, 10**6)
