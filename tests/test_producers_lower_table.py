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
    assert main(["producers", str(tmp_path / "st"), "--json", "--reference", "svd"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["certificates_not_proved"] == 1
    assert out["lower_table"]["liar"] == {"certificates": 1, "proved": 0, "median_rank": 0,
                                          "closed": 0, "kinds": ["decoder"],
                                          "seconds": None}


def test_every_lower_producer_time_is_recorded_and_shown(tmp_path, capsys):
    src = tmp_path / "ops.npz"
    np.savez(src, A=_attention(8, 3))
    store = tmp_path / "st"
    assert main(["produce", str(store), "--npz", str(src), "--npz-kind", "probs", "--eps",
                 "0.25", "--producers", "tsvd", "keyset", "nonzero", "--quiet"]) == 0
    capsys.readouterr()
    rec = json.loads((store / "brackets.jsonl").read_text().splitlines()[0])
    # work units in the default work mode (byte-identical brackets), seconds in cpu mode
    times = rec["claims"]["lower_producer_work"]
    # both lower producers ran, whichever won
    assert set(times) == {"keyset", "nonzero"} and all(t >= 0 for t in times.values())
    assert main(["producers", str(store), "--json", "--reference", "tsvd"]) == 0
    lt = json.loads(capsys.readouterr().out)["lower_table"]
    assert set(lt) == {"keyset", "nonzero"}
    loser = next(n for n in lt if lt[n]["certificates"] == 0)
    assert lt[loser]["median_rank"] is None and lt[loser]["seconds"] is not None


def _hostile_store(tmp_path, name: str, claims: dict) -> str:
    A = _attention(6, 4)
    st = Store.create(tmp_path / "st")
    op = st.add_operator(A, family="t")
    U, s, Vt = np.linalg.svd(A)
    upper = {"kind": "factors", "rank": 6, "U": U * s, "V": Vt}
    st.add_bracket(op, "1/4", upper, {"kind": "nonzero", "rank": 1},
                   producer={"upper": name, "lower": name}, claims=claims)
    st.close()
    return str(tmp_path / "st")


def test_store_strings_cannot_drive_the_terminal(tmp_path, capsys):
    evil = "x\x1b[2J\nforged: 0 not proved\u202e"
    store = _hostile_store(tmp_path, evil, {"upper_seconds": "soon",
                                            "lower_producer_seconds": {evil: -1}})
    assert main(["producers", store, "--reference", evil]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "\nforged" not in out and "x\\u001b[2J\\u000aforged" in out
    # unreadable claimed times are not summed: shown as "-"
    assert main(["producers", store, "--json", "--reference", evil]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["table"][evil]["seconds"] is None
    assert doc["lower_table"][evil]["seconds"] is None


def test_a_claimed_time_beyond_the_float_range_still_prints(tmp_path, capsys):
    store = _hostile_store(tmp_path, "big", {"upper_seconds": 10**400,
                                             "lower_producer_seconds": {"big": 10**400}})
    assert main(["producers", store, "--reference", "big"]) == 0
    out = capsys.readouterr().out
    assert "e+400" in out or "e400" in out


def test_the_cost_column_names_the_unit_the_store_records(tmp_path, capsys):
    """Work-mode stores record work units, cpu-mode stores seconds: the tables say which."""
    src = tmp_path / "ops.npz"
    np.savez(src, A=_attention(8, 5))
    for mode, unit in (("work", "work"), ("cpu", "s")):
        store = tmp_path / mode
        assert main(["produce", str(store), "--npz", str(src), "--npz-kind", "probs", "--eps",
                     "0.25", "--producers", "tsvd", "keyset", "nonzero", "--budget-mode", mode,
                     "--quiet"]) == 0
        capsys.readouterr()
        assert main(["producers", str(store), "--reference", "tsvd", "--quiet"]) == 0
        text = capsys.readouterr().out
        header = text.splitlines()[0]
        assert header.rstrip().endswith(f"claimed {unit}")
        assert f"claimed {'s' if unit == 'work' else 'work'} " not in text
        assert main(["producers", str(store), "--json", "--reference", "tsvd"]) == 0
        assert json.loads(capsys.readouterr().out)["cost_unit"] == unit
    # a hand-built store without cost claims
    bare = _hostile_store(tmp_path / "bare", "x", {})
    assert main(["producers", bare, "--json", "--reference", "x"]) == 0
    assert json.loads(capsys.readouterr().out)["cost_unit"] == "-"
