"""Bad input for every lower-certificate kind: InputError naming the field, never a verdict."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certify import InputError, check_lower
from tests.test_svd import softmax

RNG = np.random.default_rng(0)
A = softmax(RNG, 6, 5)
P = 2


def decoder(**over):
    cert = {"kind": "decoder", "rank": P, "D": np.ones((P, 6)), "W": np.ones((5, P)),
            "X": np.eye(P)}
    cert.update(over)
    return cert


def submatrix(**over):
    cert = {"kind": "submatrix", "rank": P, "rows": np.array([0, 1]),
            "cols": np.array([2, 3]), "X": np.eye(P)}
    cert.update(over)
    return cert


def bernstein(**over):
    W = np.full((5, P), 0.5)
    W[[3, 1]] = np.eye(P)
    cert = {"kind": "bernstein", "rank": P, "W": W, "P": np.ones((5, 6)),
            "J": np.array([3, 1])}
    cert.update(over)
    return cert


def without(cert, key):
    return {k: v for k, v in cert.items() if k != key}


def nan_at(X, v=np.nan):
    X = np.array(X, dtype=float)
    X.flat[0] = v
    return X


BAD = [
    # (certificate, field)
    ([("kind", "nonzero")], "lower"),
    ("nonzero", "lower"),
    ({"kind": "svd", "rank": 1}, "lower.kind"),
    ({"rank": 1}, "lower.kind"),
    ({"kind": "nonzero"}, "lower.rank"),
    ({"kind": "nonzero", "rank": 2}, "lower.rank"),
    ({"kind": "nonzero", "rank": 0}, "lower.rank"),
    ({"kind": "nonzero", "rank": True}, "lower.rank"),
    ({"kind": "nonzero", "rank": 1.0}, "lower.rank"),
    ({"kind": "nonzero", "rank": 1, "X": np.eye(1)}, "lower.X"),
    ({"kind": "frobenius_tail", "rank": 0}, "lower.rank"),
    ({"kind": "frobenius_tail", "rank": -3}, "lower.rank"),
    ({"kind": "frobenius_tail", "rank": "3"}, "lower.rank"),
    ({"kind": "frobenius_tail", "rank": 3, "D": np.eye(3)}, "lower.D"),
    (without(decoder(), "D"), "lower.D"),
    (without(decoder(), "W"), "lower.W"),
    (without(decoder(), "X"), "lower.X"),
    (decoder(rows=np.arange(2)), "lower.rows"),
    (decoder(D=np.ones((3, 6))), "lower.D"),
    (decoder(D=np.ones((P, 5))), "lower.D"),
    (decoder(W=np.ones((6, P))), "lower.W"),
    (decoder(W=np.ones((5, 3))), "lower.W"),
    (decoder(X=np.eye(3)), "lower.X"),
    (decoder(X=np.ones((P, 3))), "lower.X"),
    (decoder(rank=3), "lower.D"),
    (decoder(D=nan_at(np.ones((P, 6)))), "lower.D"),
    (decoder(W=nan_at(np.ones((5, P)), np.inf)), "lower.W"),
    (decoder(X=nan_at(np.eye(P), -np.inf)), "lower.X"),
    (decoder(X=np.ones(P)), "lower.X"),
    (decoder(X=np.array([["a", "b"], ["c", "d"]])), "lower.X"),
    (without(submatrix(), "rows"), "lower.rows"),
    (without(submatrix(), "cols"), "lower.cols"),
    (without(submatrix(), "X"), "lower.X"),
    (submatrix(D=np.ones((P, 6))), "lower.D"),
    (submatrix(rows=np.array([0, 6])), "lower.rows"),
    (submatrix(rows=np.array([-1, 0])), "lower.rows"),
    (submatrix(rows=np.array([1, 1])), "lower.rows"),
    (submatrix(rows=np.array([0.0, 1.0])), "lower.rows"),
    (submatrix(rows=np.array([0, 1, 2])), "lower.rows"),
    (submatrix(cols=np.array([0, 5])), "lower.cols"),
    (submatrix(cols=np.array([3, 3])), "lower.cols"),
    (submatrix(cols=np.array([[0, 1]])), "lower.cols"),
    (submatrix(rank=3), "lower.rows"),
    (submatrix(X=np.eye(3)), "lower.X"),
    (submatrix(X=nan_at(np.eye(P))), "lower.X"),
    (without(bernstein(), "W"), "lower.W"),
    (without(bernstein(), "P"), "lower.P"),
    (without(bernstein(), "J"), "lower.J"),
    (bernstein(X=np.eye(P)), "lower.X"),
    (bernstein(rank=3), "lower.rank"),
    (bernstein(rank=6), "lower.rank"),
    (bernstein(W=np.ones((6, P))), "lower.W"),
    (bernstein(W=np.full((5, P), 0.5)), "lower.W"),
    (bernstein(W=nan_at(np.ones((5, P)))), "lower.W"),
    (bernstein(P=np.ones((6, 5))), "lower.P"),
    (bernstein(P=nan_at(np.ones((5, 6)), np.inf)), "lower.P"),
    (bernstein(J=np.array([3, 3])), "lower.J"),
    (bernstein(J=np.array([3, 5])), "lower.J"),
    (bernstein(J=np.array([3.0, 1.0])), "lower.J"),
    (bernstein(J=np.array([1, 3])), "lower.W"),
    (bernstein(J=np.array([3])), "lower.J"),
]


@pytest.mark.parametrize("cert,field", BAD)
def test_bad_certificate(cert, field):
    with pytest.raises(InputError) as info:
        check_lower(A, cert, "0.25", source="run/b7.npz")
    assert info.value.field == field
    assert info.value.source == "run/b7.npz"
    assert str(info.value).startswith("run/b7.npz: " + field)


@pytest.mark.parametrize("cert", [{"kind": "nonzero", "rank": 1},
                                  {"kind": "frobenius_tail", "rank": 2}, decoder(),
                                  submatrix(), bernstein()])
def test_bad_matrix_tolerance_tier_and_slack(cert):
    for bad_A in (nan_at(A), nan_at(A, np.inf), np.zeros((0, 5)), A[0]):
        with pytest.raises(InputError) as info:
            check_lower(bad_A, cert, "0.25")
        assert info.value.field == "A"
    for eps in ("0", "-1", "nan", float("inf"), "x", None):
        with pytest.raises(InputError) as info:
            check_lower(A, cert, eps)
        assert info.value.field == "eps"
    with pytest.raises(InputError, match="tier"):
        check_lower(A, cert, "0.25", tier="quick")
    with pytest.raises(InputError) as info:
        check_lower(A, cert, "0.25", chi="-1/10")
    assert info.value.field == "chi"


def test_valid_inputs_of_other_dtypes_are_accepted():
    cert = submatrix(rows=[0, 1], cols=(2, 3), X=np.eye(P, dtype=np.float32).tolist())
    assert check_lower(A.astype(np.float32), cert, "1e-9").status in ("holds", "fails")
    cert = decoder(rank=np.int64(P), D=np.ones((P, 6), dtype=np.int32))
    assert check_lower(A, cert, "1/4").rank == P
