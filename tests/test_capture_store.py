"""Without torch: Q / K operator arrays in stores, block records end to end, the block-width
budget table of the audit."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

import numpy as np
import pytest

from softrank.audit import tables as T
from softrank.certify.errors import InputError
from softrank.cli import main
from softrank.witnesses import Store, open_store
from softrank.witnesses.models import Head, causal_block, softmax64


def _scores(m: int, N: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((m, d)), rng.standard_normal((N, d))
    return Q, K, Q @ K.T


def test_store_keeps_q_and_k_with_the_operator(tmp_path):
    Q, K, S = _scores(6, 9, 4)
    with Store.create(tmp_path / "st") as st:
        st.add_operator(softmax64(S), family="f", id="op", logits=S, Q=Q, K=K)
    op = open_store(tmp_path / "st").operator("op")
    assert op.arrays == ("A", "logits", "Q", "K") and op.record_kind == "logits"
    arrs = op.load()
    assert np.array_equal(arrs["Q"], Q) and np.array_equal(arrs["K"], K)


@pytest.mark.parametrize(("Q", "K", "match"), [
    (np.zeros((6, 4)), None, "together"),
    (np.zeros((5, 4)), np.zeros((9, 4)), "6 x d"),
    (np.zeros((6, 4)), np.zeros((9, 3)), "column count"),
    (np.zeros((6, 4)), np.full((9, 4), np.inf), "NaN or Inf"),
])
def test_store_refuses_bad_q_k(tmp_path, Q, K, match):
    _, _, S = _scores(6, 9, 4)
    st = Store.create(tmp_path / "st")
    with pytest.raises(InputError, match=match):
        st.add_operator(softmax64(S), family="f", id="op", logits=S, Q=Q, K=K)


def _rewrite_record(root, **changes):
    path = root / "operators.jsonl"
    rec = json.loads(path.read_text())
    rec.update(changes)
    path.write_text(json.dumps(rec) + "\n")


def test_reader_refuses_q_without_k_and_mismatched_shapes(tmp_path):
    Q, K, S = _scores(6, 9, 4)
    with Store.create(tmp_path / "st") as st:
        st.add_operator(softmax64(S), family="f", id="op", logits=S, Q=Q, K=K)
    _rewrite_record(tmp_path / "st", arrays=["A", "logits", "Q"])
    with pytest.raises(InputError, match="Q and K come together"):
        open_store(tmp_path / "st")
    with Store.create(tmp_path / "st2") as st:  # K with too few rows, written by hand
        st.add_operator(softmax64(S), family="f", id="op")
    arr = tmp_path / "st2" / "arrays" / "op.npz"
    np.savez(arr, A=softmax64(S), Q=Q, K=K[:8])
    _rewrite_record(tmp_path / "st2", arrays=["A", "Q", "K"],
                    sha256=hashlib.sha256(arr.read_bytes()).hexdigest())
    with pytest.raises(InputError, match=r"K: shape \(8, 4\) differs|operator\.K"):
        open_store(tmp_path / "st2").operator("op").load()


def _causal_head(T_: int = 12, seed: int = 1) -> Head:
    Q, K, S = _scores(T_, T_, 3, seed)
    S = S.copy()
    S[np.triu(np.ones((T_, T_), dtype=bool), 1)] = -np.inf
    return Head(text_index=0, layer=0, head=0, logits=S, A=softmax64(S), model_probs=None,
                Q=Q, K=K, causal=True)


def test_block_records_check_and_audit(tmp_path, capsys):
    """Blocks and Q / K written like produce does; check and audit accept them (exit 0) and
    the audit's block-width table counts them per width."""
    from softrank.witnesses.producers.pipeline import produce_operator

    h = _causal_head()
    st = Store.create(tmp_path / "st")
    ops = [("full", h.A, {"logits": h.logits, "Q": h.Q, "K": h.K}, h.logits)]
    for N in (3, 6):
        block, A = causal_block(h, N)
        ops.append((f"b{N}", A, {"block": block, "Q": h.Q[N - 1:], "K": h.K[:N]}, None))
    for oid, A, extra, logits in ops:
        st.add_operator(A, family="toy", id=oid, **extra)
        res = produce_operator(oid, A, [Fraction(1, 4)],
                               ["alt_l1"], ["keyset"], logits=logits)
        for b in res.brackets:
            st.add_bracket(oid, b.eps, b.upper, b.lower, producer=b.producer, id=b.id)
    st.close()
    assert main(["check", str(tmp_path / "st")]) == 0
    out = tmp_path / "audit"
    assert main(["audit", str(tmp_path / "st"), "--out", str(out), "--jobs", "1",
                 "--budgets", "2,4"]) == 0
    rep = json.loads((out / "report.json").read_text())
    rows = rep["tables"]["block_widths"]["rows"]
    assert [r[:5] for r in rows] == [["toy", "0.25", "3", "10 x 3", "2"],
                                     ["toy", "0.25", "3", "10 x 3", "4"],
                                     ["toy", "0.25", "6", "7 x 6", "2"],
                                     ["toy", "0.25", "6", "7 x 6", "4"]]
    assert {r["record_kind"] for r in rep["records"]} == {"logits", "block"}


def _rec(op, kind, shape, lower, upper, eps="1/4", family="f"):
    return {"bracket": f"{op}.b", "operator": op, "family": family, "eps": eps,
            "shape": list(shape), "record_kind": kind, "lower": lower, "upper": upper}


def test_block_width_summary_counts_exactly():
    records = [_rec("a", "block", (9, 8), 3, 5), _rec("b", "block", (9, 8), 9, 9),
               _rec("c", "block", (5, 12), 1, 1), _rec("d", "logits", (16, 16), 2, 20),
               _rec("e", "block", (9, 8), 7, 7, family="g")]
    rows = T.summarize_block_widths(records, [4, 8])
    assert [(r["family"], r["width"], r["operators"]) for r in rows] == [
        ("f", 8, 2), ("f", 12, 1), ("g", 8, 1)]
    assert rows[0]["budgets"]["4"] == {"feasible": 0, "impossible": 1, "unresolved": 1}
    assert rows[0]["budgets"]["8"] == {"feasible": 1, "impossible": 1, "unresolved": 0}
    # exact shares in the rows (report.json keeps them); the table only formats them
    assert rows[0]["shares"]["4"] == {"feasible": "0", "impossible": "1/2",
                                      "unresolved": "1/2"}
    table = T.block_tables(rows, [4, 8])["block_widths"]
    assert table["rows"][0] == ["f", "0.25", "8", "9 x 8", "4", "2", "0.0%", "50.0%", "50.0%"]
    assert T.block_tables(T.summarize_block_widths(
        [r for r in records if r["record_kind"] != "block"], [4]), [4]) == {}


def test_hub_id_is_refused_with_advice(tmp_path, capsys):
    texts = tmp_path / "t.txt"
    texts.write_text("some text\n")
    rc = main(["produce", str(tmp_path / "st"), "--model", "someorg/some-model", "--texts",
               str(texts), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "local folders only" in err and "save_pretrained" in err
    assert not (tmp_path / "st").exists()


@pytest.mark.parametrize("name", ["sentence-transformers/all-MiniLM-L6-v2", "someorg/some-model",
                                  "gpt2", "t5-small"])
def test_the_saving_command_for_a_hub_id_is_printed_whole(tmp_path, capsys, name):
    # the length limit of an error's reason cut the middle out of the command it promised
    texts = tmp_path / "t.txt"
    texts.write_text("some text\n")
    assert main(["produce", str(tmp_path / "st"), "--model", name, "--texts", str(texts),
                 "-q"]) == 2
    err = capsys.readouterr().err
    assert "characters cut" not in err
    assert f"n = '{name}'; t.AutoModel.from_pretrained(n).save_pretrained('DIR'); " in err
    assert "t.AutoTokenizer.from_pretrained(n).save_pretrained('DIR')" in err


@pytest.mark.parametrize("name", ["./minilm-dir", "org/$(touch x)", "a/b/c", "x'y"])
def test_a_missing_local_folder_is_named_as_one_without_hub_advice(tmp_path, capsys, name):
    # no shell line is suggested around a name that is not spelled as a hub id
    texts = tmp_path / "t.txt"
    texts.write_text("some text\n")
    assert main(["produce", str(tmp_path / "st"), "--model", name, "--texts",
                 str(texts), "-q"]) == 2
    err = capsys.readouterr().err
    assert ": no such folder" in err and "from_pretrained" not in err


@pytest.mark.parametrize("tokens", ["99999999999999999999", "4097", "1", "-3"])
def test_tokens_out_of_range_is_an_input_error_naming_the_option(tmp_path, capsys, tokens):
    # a 20-digit --tokens reached the tokenizer as a C integer: OverflowError, exit 3
    texts = tmp_path / "t.txt"
    texts.write_text("some text\n")
    assert main(["produce", str(tmp_path / "st"), "--model", str(tmp_path), "--texts",
                 str(texts), "--tokens", tokens, "-q"]) == 2
    assert "--tokens: must be from 2 to 4096" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def _texts_case(tmp_path, kind):
    import os

    p = tmp_path / "t.txt"
    if kind == "latin-1":
        p.write_bytes(b"\xff\xfebad bytes\n")
    elif kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "huge":
        with open(p, "wb") as fh:
            fh.truncate((4 << 20) + 1)  # sparse: its size alone is refused
    return p


@pytest.mark.parametrize(("kind", "said"), [
    ("latin-1", "is not UTF-8 text (byte 0 of the file)"),
    ("folder", "is not a regular file"),
    ("fifo", "is not a regular file"),
    ("huge", "4194305 bytes, above the limit of 4194304 for a texts file"),
])
def test_a_texts_file_that_cannot_be_text_is_an_input_error(tmp_path, capsys, kind, said):
    # not UTF-8 was an internal error (exit 3); a folder or FIFO was "missing"; an 18 MB
    # paragraph was read and tokenized whole (3 GB for an 8-token capture)
    from softrank.witnesses.models import read_texts

    p = _texts_case(tmp_path, kind)
    with pytest.raises(InputError) as info:
        read_texts(p)
    assert said in str(info.value) and "--texts" in str(info.value) and str(p) in str(info.value)


@pytest.mark.parametrize(("decoder", "refused"), [("0", True), ("5000", True), ("1", False)])
def test_decoder_tokens_are_bounded_and_one_is_allowed(tmp_path, capsys, decoder, refused):
    texts = tmp_path / "t.txt"
    texts.write_text("some text\n")
    main(["produce", str(tmp_path / "st"), "--model", str(tmp_path / "none"), "--texts",
          str(texts), "--decoder-tokens", decoder, "-q"])
    err = capsys.readouterr().err
    assert ("--decoder-tokens: must be from 1 to 4096" in err) == refused


@pytest.mark.parametrize("kind", ["folder", "fifo"])
@pytest.mark.parametrize("option", ["--npz", "--images"])
def test_an_input_that_is_not_a_regular_file_is_named_so(tmp_path, capsys, kind, option):
    # --npz and --images said "file is missing" for a folder or FIFO
    p = _texts_case(tmp_path, kind)
    argv = (["--npz", str(p)] if option == "--npz" else
            ["--model", str(tmp_path), "--images", str(p)])
    assert main(["produce", str(tmp_path / "st"), *argv, "-q"]) == 2
    err = capsys.readouterr().err
    assert "is not a regular file" in err and "missing" not in err
