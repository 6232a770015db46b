"""`producers` shows the lower producers side by side, each certificate rechecked."""

from __future__ import annotations

import json

import numpy as np

from softrank.cli import main
from softrank.witnesses import Store
from softrank.witnesses.models import softmax64


def _attention(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax64(3.0 * rng.standard_normal((n, 3)) @ rng.standard_normal((3, n)))


def test_lower_table_counts_wins_proofs_and_closed(tmp_path, capsys):
    src = tmp_path / "ops.npz"
    np.savez(src, A=_attention(8, 0), B=_attention(8, 1))
    store = tmp_path / "st"
    assert main(["produce", str(store), "--npz", str(src), "--npz-kind", "probs", "--eps",
                 "0.25", "--producers", "tsvd", "keyset", "nonzero", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["producers", str(store), "--json", "--reference", "tsvd"]) == 0
    out = json.loads(capsys.readouterr().out)
    lt = out["lower_table"]
    assert sum(t["certificates"] for t in lt.values()) == 2
    assert out["certificates_not_proved"] == 0
    assert all(t["proved"] == t["certificates"] for t in lt.values())
    assert main(["producers", str(store), "--reference", "tsvd", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "won" in text and "closed" in text


def test_a_false_certificate_counts_as_rank_zero(tmp_path, capsys):
    A = _attention(6, 2)
    st = Store.create(tmp_path / "st")
    op = st.add_operator(A, family="t")
    U, s, Vt = np.linalg.svd(A)
    p = 6
    # D = W = I, X = 4 I: delta = ||I - 4 A||_inf alone exceeds 1, so the claim is false
    lower = {"kind": "decoder", "rank": p, "D": np.eye(p), "W": np.eye(p), "X": 4 * np.eye(p)}
    upper = {"kind": "factors", "rank": 6, "U": U * s, "V": Vt}
    st.add_bracket(op, "1/4", upper, lower, producer={"upper": "svd", "lower": "liar"})
    st.close()
    assert main(["producers", str(tmp_path / "st"), "--json", "--reference", "svd"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certificates_not_proved"] == 1
    assert out["lower_table"]["liar"] == {"certificates": 1, "proved": 0, "median_rank": 0,
                                          "closed": 0, "kinds": ["decoder"]}
