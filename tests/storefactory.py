"""Builds small stores with known outcomes for tests."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from softrank.certify import exact_error
from softrank.witnesses import Store

from .helpers import random_attention, tsvd_witness


def build_store(path: Path, *, seed: int = 0, n_ops: int = 3, size: int = 8,
                family: str = "synthetic") -> dict[str, dict]:
    """Creates a store; returns {bracket_id: expected} with the exact truth of each upper claim.

    Per operator: a rank-k truncated-SVD witness at eps = (exact error + 1) / 2 (true), and the same
    witness at eps = exact error * (1 - 2^-40) (false), with nonzero lower claims.
    """
    rng = np.random.default_rng(seed)
    expected: dict[str, dict] = {}
    with Store.create(path, description="test store") as st:
        for o in range(n_ops):
            A = random_attention(rng, size, size, scale=2.0)
            oid = st.add_operator(A, family=family, id=f"op{o}")
            k = size - 3  # small error, so eps < 1 and the nonzero claims hold
            U, V = tsvd_witness(A, k)
            err = exact_error(A, U, V)
            assert err < 1
            for tag, eps, holds in (("t", (err + 1) / 2, True),
                                    ("f", err * (1 - Fraction(1, 2**40)), False)):
                bid = st.add_bracket(oid, eps, {"kind": "factors", "rank": k, "U": U, "V": V},
                                     {"kind": "nonzero", "rank": 1}, id=f"{oid}-{tag}",
                                     producer={"upper": "tsvd", "lower": "nonzero"},
                                     claims={"upper_error": float(err)})
                expected[bid] = {"upper_holds": holds, "eps": eps, "error": err, "rank": k,
                                 "full_rank": size}
    return expected


def set_first_lower_rank(store: Path, rank: int) -> None:
    """Rewrites the first bracket record's lower rank in place (its arrays untouched): a
    tampered record whose declared rank no longer matches what its file holds."""
    import json

    path = Path(store) / "brackets.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    recs[0]["lower"]["rank"] = rank
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def forbid_array_loads(monkeypatch) -> None:
    """Makes any load of a store's arrays fail the test (refusals must come before them)."""
    def no_load(*args, **kwargs):
        raise AssertionError("an array was loaded")

    monkeypatch.setattr("softrank.witnesses.store.load_npz", no_load)
    monkeypatch.setattr(np, "load", no_load)
