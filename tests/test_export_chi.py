"""The bundle's slack chi for an operator whose records charged different chi: the cheap
float chi on one bracket, the arb chi on another whose verdict it changes."""

from __future__ import annotations

import json
import zipfile
from fractions import Fraction

import numpy as np

from replay import replay as rp
from softrank import certify
from softrank.certify import exact_error
from softrank.export import write_bundle
from softrank.runner import iter_checks
from softrank.witnesses import Store

from .helpers import softmax_rows, tsvd_witness


def test_an_end_proved_at_the_arb_chi_replays(tmp_path):
    rng = np.random.default_rng(0)
    store = tmp_path / "s"
    with Store.create(store) as st:
        L = rng.standard_normal((12, 12)) * 2
        A = softmax_rows(L).astype(np.float32)  # chi about 3e-8: float32 renormalisation
        oid = st.add_operator(A, family="f", logits=L, id="op0")
        chi = certify.operator_slack({"A": A, "logits": L}).chi
        U, V = tsvd_witness(A.astype(np.float64), 10)
        err = exact_error(A.astype(np.float64), U, V)
        up = {"kind": "factors", "rank": 10, "U": U, "V": V}
        # sorted first, decided at the cheap chi; then one that holds only at the arb chi
        st.add_bracket(oid, err + Fraction(1, 100), up, None, id="a-far")
        st.add_bracket(oid, err + chi * Fraction(1000001, 1000000), up, None, id="b-near")
    records = list(iter_checks(str(store)))
    chis = {r["bracket"]: Fraction(r["chi"]) for r in records}
    assert chis["b-near"] < chis["a-far"]  # the case: the records charged different chi
    assert all(r["upper_check"]["status"] == "holds" for r in records)
    out = tmp_path / "b.zip"
    write_bundle(store, records, out)
    with zipfile.ZipFile(out) as zf:
        doc = json.loads(zf.read("bundle.json"))
    assert Fraction(doc["operators"][0]["chi"]) == chis["b-near"]
    s = rp.replay(str(out))
    assert s["disagreements"] == 0
    assert s["replayed_proved"] == s["kernel_proved"] == 4
