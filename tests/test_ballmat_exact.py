"""Ball.exact's zero radius is skipped, not scanned: the same products as an explicit zero."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certify.numerics.ballmat import Ball, ball_abs_row_sums, ball_matmul, identity_minus


def _same(a: Ball, b: Ball) -> bool:
    return np.array_equal(a.mid, b.mid) and np.array_equal(a.rad, b.rad)


@pytest.mark.parametrize("seed", range(5))
def test_exact_balls_give_the_products_of_explicit_zero_radii(seed):
    rng = np.random.default_rng(seed)
    X, Y, Z = (rng.standard_normal(s) for s in ((7, 9), (9, 5), (5, 4)))
    exact = [Ball.exact(M) for M in (X, Y, Z)]
    zeros = [Ball(M, np.zeros_like(M)) for M in (X, Y, Z)]
    assert all(b.zero_rad for b in exact) and not any(b.zero_rad for b in zeros)
    for (a, b), (c, d) in ((exact[:2], zeros[:2]), ((exact[1], exact[2]), (zeros[1], zeros[2]))):
        assert _same(ball_matmul(a, b), ball_matmul(c, d))
    # a product with a real radius on either side, exact on the other
    P = ball_matmul(exact[0], exact[1])
    assert np.any(P.rad)
    assert _same(ball_matmul(P, exact[2]), ball_matmul(P, zeros[2]))
    assert _same(ball_matmul(Ball(Z.T, np.zeros_like(Z.T)), Ball(P.mid.T, P.rad.T)),
                 ball_matmul(Ball.exact(Z.T), Ball(P.mid.T, P.rad.T)))
    S = Ball.exact(rng.standard_normal((4, 4)))
    assert _same(identity_minus(S), identity_minus(Ball(S.mid, np.zeros_like(S.mid))))
    lo, hi = ball_abs_row_sums(S)
    lo0, hi0 = ball_abs_row_sums(Ball(S.mid, np.zeros_like(S.mid)))
    assert np.array_equal(lo, lo0) and np.array_equal(hi, hi0)


def test_an_exact_radius_is_read_only():
    b = Ball.exact(np.ones((3, 3)))
    assert not b.rad.flags.writeable and b.rad.shape == (3, 3) and not np.any(b.rad)
