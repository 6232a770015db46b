"""``softrank-certify produce OUT_STORE``: build or extend a store with producer brackets.

Sources: ``--npz FILE...`` (attention probabilities or logits, 2-D or stacked 3-D arrays) or
``--model minilm|FOLDER --texts FILE`` / ``--model FOLDER --images FILE.npz`` (needs the [models]
extra; any local Hugging Face model whose eager attention can be traced, see
witnesses/capture.py).  ``--block-widths`` adds the common-prefix blocks of causal heads.
Producers are untrusted: this command only writes what they claim; ``softrank-certify
check`` decides.  Resumable: an existing store is opened and every (operator, eps, upper
producer) bracket already in it is skipped.

Where: ``--jobs N`` local processes, or ``--scheduler ADDRESS`` a Dask cluster (each operator
with all its eps is one job; ``--batch`` jobs per task, chosen from the sizes by default;
workers return brackets, this process alone writes the store).
Budgets: ``--budget-mode work`` (default) counts work units, so the same command writes
byte-identical brackets on any number of workers; ``--budget-mode cpu`` gives CPU seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from softrank.certify.errors import InputError
from softrank.certify.rationals import parse_eps
from softrank.software import process_environment
from softrank.terminal import shown
from softrank.witnesses import Store, open_store
from softrank.witnesses.models import must_be_a_file, softmax64
from softrank.witnesses.npzsafe import read_npz
from softrank.witnesses.producers import default_producers, get_producer
from softrank.witnesses.producers._common import (
    MODES,
    SCALE_ENV,
    WORK_UNITS,
    budget_settings,
    one_blas_thread,
    parse_budget,
)
from softrank.witnesses.producers.pipeline import OperatorResult, bracket_id, produce_operator
from softrank.witnesses.store import stale_brackets
from softrank.workers import jobs_count

from . import _batch
from . import _intrinsic_produce as intrinsic_produce

NAME = "produce"
HELP = "run (untrusted) producers on attention operators and write their brackets to a store"
DEFAULT_EPS = ("0.15", "0.25", "0.35")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


DEFAULT_TOKENS = 64  # sequence length of a captured text when --tokens is not given
# the longest capture: one 4096 x 4096 head is 128 MiB in float64, the largest operator the
# producers' prices are stated for
MAX_TOKENS = 4096
EXAMPLES = (  # shown under --help
    'softrank-certify produce OUT --npz heads.npz --eps 0.15 0.25 0.35',
    'softrank-certify produce OUT --model ./minilm-dir --texts examples/minilm_texts.txt \\',
    '    --tokens 64 --eps 0.25',
    'softrank-certify produce OUT --npz heads.npz --scheduler tcp://10.0.0.5:8786',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="output store directory (created, or opened to resume)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--npz", nargs="+", metavar="FILE",
                     help=".npz files of attention matrices or logits (2-D, or 3-D stacks)")
    src.add_argument("--model", metavar="NAME",
                     help="'minilm' (packaged all-MiniLM-L6-v2) or a local Hugging Face model "
                          "folder (read offline; hub ids are not downloaded)")
    p.add_argument("--npz-kind", choices=["auto", "probs", "logits"], default="auto",
                   help="what the npz arrays hold (auto: names starting with 'logits', or "
                        "arrays with negative entries or rows not summing to 1, are logits)")
    p.add_argument("--texts", metavar="FILE",
                   help="texts, one paragraph per blank-line block (UTF-8, at most 4 MiB)")
    p.add_argument("--text-index", type=int, nargs="+", metavar="I",
                   help="use only these texts of --texts (0-based; default all)")
    p.add_argument("--layers", type=int, nargs="+", metavar="L", help="layers (default all)")
    p.add_argument("--heads", type=int, nargs="+", metavar="H", help="heads (default all)")
    p.add_argument("--tokens", type=int, default=None,
                   help=f"sequence length, 2 .. {MAX_TOKENS} (default {DEFAULT_TOKENS}; "
                        "with --model only)")
    p.add_argument("--images", metavar="FILE",
                   help=".npz of images (one 3-D array each) for a vision model")
    p.add_argument("--decoder-tokens", type=int, metavar="M",
                   help=f"encoder-decoder models: decoder length, 1 .. {MAX_TOKENS} (the "
                        "first M tokens of the text; default --tokens); cross attention is "
                        "M x --tokens")
    p.add_argument("--block-widths", type=int, nargs="+", metavar="N",
                   help="causal heads: also store the common-prefix block of each width N "
                        "(queries N-1..T-1 on keys 0..N-1, a `block` record)")
    p.add_argument("--capture-tolerance", type=float, default=None, metavar="TOL",
                   help="refuse a captured head whose float64 softmax differs from the "
                        "model's probabilities by more than TOL in some entry (default 1e-5)")
    p.add_argument("--allow-bin-weights", action="store_true",
                   help="load a model folder that has only pickle-format weights (.bin); "
                        "refused by default (a crafted pickle can execute code): convert it "
                        "to safetensors instead where you can")
    p.add_argument("--eps", nargs="+", default=list(DEFAULT_EPS), metavar="EPS",
                   help="tolerances, exact rationals such as 0.25 or 1/4 (default 0.15 0.25 0.35)")
    p.add_argument("--producers", nargs="+", metavar="NAME",
                   help="producer names: built-in or registered under the entry-point group "
                        "'softrank.producers' (default: every built-in except "
                        "decoder_lp, which never beat bernstein on the heads measured)")
    p.add_argument("--budget-scale", type=float, default=None, metavar="F",
                   help="multiply the producers' search budgets (alt_l1's chain, descent "
                        "and near-miss steps, bernstein, rowset, decoder_lp, the key-set search "
                        "of keyset and submatrix, and the price limit of the producers "
                        "without a search budget: their defaults or SOFTRANK_*_BUDGET / "
                        "SOFTRANK_ALT_L1_DESCENT / SOFTRANK_ALT_L1_VSTEP) by F in (0, 1000]; "
                        "below 1, fewer seconds and looser brackets (default 1)")
    p.add_argument("--budget-mode", choices=list(MODES), default="work",
                   help="work (default): every search budget counts work units (IRLS steps, "
                        "LP sizes and simplex iterations), so the same command writes "
                        "byte-identical brackets on any machine with the same libraries and "
                        "any number of workers; cpu: CPU seconds of the producing process "
                        "(today's behaviour, brackets vary with machine load)")
    where = p.add_mutually_exclusive_group()  # local processes or a cluster, not both
    where.add_argument("--jobs", type=jobs_count, default=1, metavar="N",
                       help="worker processes (default 1)")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="produce on a Dask cluster (extra [dask]): each operator with all "
                            "its eps is one job, several jobs per task (--batch); the workers "
                            "need this package, not the store")
    _batch.add_argument(p)
    p.add_argument("--family", help="family label for the operators (default: model or file)")
    p.add_argument("--description", default="", help="store description (new stores)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    intrinsic_produce.add_arguments(p)


@dataclass
class OperatorInput:
    id: str
    family: str
    A: np.ndarray
    logits: np.ndarray | None
    meta: dict[str, Any] = field(default_factory=dict)
    block: np.ndarray | None = None
    Q: np.ndarray | None = None
    K: np.ndarray | None = None


def _logits_reason(name: str, X: np.ndarray, kind: str) -> str | None:
    """Returns why array ``name`` is read as logits ("" when ``--npz-kind logits`` says so),
    or None when it is read as probabilities."""
    if kind != "auto":
        return "" if kind == "logits" else None
    if name.lower().startswith("logit"):
        return ""
    finite = X[np.isfinite(X)]
    if finite.size and finite.min() < 0:
        return "it has negative entries"
    if np.any(np.abs(X.sum(axis=-1) - 1.0) > 1e-3):
        return "a row does not sum to 1"
    return None


def iter_npz(paths: list[str], kind: str, family: str | None,
             note: Callable[[str], None] | None = None) -> Iterator[OperatorInput]:
    """Yields one operator per 2-D array (or per slice of a 3-D array) of the files;
    ``note`` is told of each array that ``--npz-kind auto`` reads as logits from its values
    (its operator's meta says so too)."""
    for path in paths:
        p = Path(path)
        must_be_a_file(p, "npz")
        # headers and declared sizes are checked (and capped) before any array is allocated
        arrays = read_npz(p, None, expect=_npz_expect, field_name="npz")
        for key, X in arrays.items():
            if X.dtype.kind != "f":
                raise InputError(f"must be a float array, got {X.dtype}", field=key,
                                 source=path)
            if X.ndim == 2:
                stack, names = X[None], [key]
            elif X.ndim == 3:
                if X.shape[0] == 0:  # was skipped without a word beside other inputs
                    raise InputError(f"a stack of no matrices (shape {X.shape})", field=key,
                                     source=path)
                stack, names = X, [f"{key}.{i}" for i in range(X.shape[0])]
            else:
                raise InputError(f"must be 2-D or 3-D, got shape {X.shape}", field=key,
                                 source=path)
            for name, M in zip(names, stack, strict=True):
                op = _npz_operator(p, name, np.asarray(M, dtype=np.float64), kind,
                                   family or p.stem)
                if note is not None and "read_as" in op.meta:
                    note(f"{path}: {name}: {op.meta['read_as']} (--npz-kind probs or "
                         "logits says which it is)")
                yield op


def _npz_expect(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    if dtype.kind != "f":
        return f"must be a float array, got {dtype}"
    if dtype.itemsize > 8:
        # float16/32 widen to float64 exactly; a longer float would be rounded, and the
        # store would then hold (and every verdict would be about) another matrix than given
        return (f"{dtype} entries would be rounded to float64: give float64, float32 or "
                "float16 (round them yourself if that is what you want)")
    if len(shape) not in (2, 3):
        return f"must be 2-D or 3-D, got shape {shape}"
    return None


def _npz_operator(p: Path, name: str, M: np.ndarray, kind: str, family: str) -> OperatorInput:
    src = str(p)
    if min(M.shape) == 0:
        raise InputError(f"empty matrix {M.shape}", field=name, source=src)
    if np.isnan(M).any() or np.isposinf(M).any():
        raise InputError("NaN or +Inf entries", field=name, source=src)
    oid = _SAFE.sub("_", f"{p.stem}.{name}").strip("._-")[:100] or "op"
    meta = {"source": p.name, "array": name}
    why = _logits_reason(name, M, kind)
    if why is not None:
        if np.isneginf(M).all(axis=1).any():
            raise InputError("a row of logits is entirely -inf", field=name, source=src)
        if why:  # read from the values, not asked for: the store and the run say so
            meta["read_as"] = f"logits, A = softmax of its rows ({why})"
        return OperatorInput(oid, family, softmax64(M), M, meta)
    if np.isinf(M).any() or M.min() < 0:
        raise InputError("probabilities must be finite and nonnegative", field=name, source=src)
    return OperatorInput(oid, family, M, None, meta)


def iter_model(args: argparse.Namespace, provenance: dict[str, Any] | None = None
               ) -> Iterator[OperatorInput]:
    """Yields the captured heads; fills ``provenance`` (when given) with the model's files and
    their sha256 and, per text read, the token ids of its pass (see ``Store.add_provenance``)."""
    from softrank.witnesses.models import CAPTURE_TOLERANCE, Capture, read_images, read_texts

    if bool(args.texts) == bool(args.images):
        raise InputError("--model needs --texts FILE (language models) or --images FILE "
                         "(vision models)", field="texts")
    if args.tokens is None:
        args.tokens = DEFAULT_TOKENS
    # the capture allocates n x n per head, and the tokenizer takes n as a C integer; a
    # decoder of one token is allowed (its cross attention is 1 x --tokens)
    for option, n, least in (("--tokens", args.tokens, 2),
                             ("--decoder-tokens", args.decoder_tokens, 1)):
        if n is not None and not least <= n <= MAX_TOKENS:
            raise InputError(f"must be from {least} to {MAX_TOKENS}, got {_short_int(n)}",
                             field=option)
    widths = sorted(set(args.block_widths or []))
    if any(w < 1 for w in widths):
        raise InputError("block widths must be >= 1", field="--block-widths")
    if widths and args.texts and widths[-1] > (args.decoder_tokens or args.tokens):
        raise InputError(f"block width {widths[-1]} exceeds the causal pass of "
                         f"{args.decoder_tokens or args.tokens} tokens", field="--block-widths")
    # a repeated layer, head or text asks for the same operator once (as a repeated eps does)
    for name in ("layers", "heads", "text_index"):
        if getattr(args, name) is not None:
            setattr(args, name, list(dict.fromkeys(getattr(args, name))))
    inputs: list[Any] = read_texts(args.texts) if args.texts else read_images(args.images)
    src = args.texts or args.images
    chosen = range(len(inputs)) if args.text_index is None else args.text_index
    bad = [i for i in chosen if not 0 <= i < len(inputs)]
    if bad:
        raise InputError(f"text indices {bad} out of range 0..{len(inputs) - 1}",
                         field="--text-index", source=src)
    tol = CAPTURE_TOLERANCE if args.capture_tolerance is None else args.capture_tolerance
    if not tol > 0:
        raise InputError("must be > 0", field="--capture-tolerance")
    if args.quiet or args.json or not sys.stderr.isatty():
        # read by transformers and huggingface_hub at import: silences their loading bars
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    cap = Capture(args.model, tolerance=tol, allow_bin_weights=args.allow_bin_weights)
    prov = provenance if provenance is not None else {}
    prov["models"] = [cap.provenance()]
    prov.setdefault("inputs", [])
    if args.images and not cap.vision:
        raise InputError("--images needs a vision model (pixel_values input)", field="images")
    if args.texts and cap.vision:
        raise InputError("a vision model reads --images, not --texts", field="texts")
    family = args.family or (args.model if args.model == "minilm" else
                             Path(args.model).resolve().name)
    def heads_of(ti: int, layers: Any, heads: Any) -> Iterator[Any]:
        if args.images:
            return cap.capture_image(inputs[ti], layers=layers, heads=heads, index=ti)
        return cap.capture(inputs[ti], tokens=args.tokens, layers=layers, heads=heads,
                           text_index=ti, decoder_tokens=args.decoder_tokens)

    # refuse blocks of a model without causal self-attention before anything is written
    if widths and chosen and not any(h.causal for h in heads_of(chosen[0], [0], [0])):
        raise InputError("--block-widths: the model has no causal self-attention (common-"
                         "prefix blocks are defined for causal heads only)", field="--block-widths")
    for ti in chosen:
        for h in heads_of(ti, args.layers, args.heads):
            if not any(e["index"] == ti for e in prov["inputs"]):
                prov["inputs"].append(_input_record(Path(src).name, ti, inputs[ti],
                                                    cap.token_ids.get(ti)))
            oid = f"{family}.{h.id}.{h.tag}"
            # encoder-decoder stacks (enc / dec / cross) are reported as separate families
            fam = f"{family}-{h.kind}" if h.kind else family
            yield OperatorInput(oid, fam, h.A, h.logits, dict(h.meta), Q=h.Q, K=h.K)
            if widths and h.causal:
                yield from _blocks(h, oid, fam, widths)


def _input_record(source: str, index: int, item: Any, ids: list[int] | None
                  ) -> dict[str, Any]:
    """Returns the provenance record of one input: a text's token ids, an image's sha256."""
    rec: dict[str, Any] = {"source": source, "index": index}
    if ids is not None:
        rec["token_ids"] = list(ids)
    if isinstance(item, np.ndarray):
        X = np.ascontiguousarray(item)
        rec["shape"], rec["dtype"] = list(X.shape), X.dtype.str
        rec["sha256"] = hashlib.sha256(X.tobytes()).hexdigest()
    return rec


def _blocks(h: Any, oid: str, family: str, widths: list[int]) -> Iterator[OperatorInput]:
    from softrank.witnesses.models import causal_block

    for w in widths:
        block, A = causal_block(h, w)
        meta = {**h.meta, "block_of": oid, "block_width": w, "masked_keys": 0,
                "block_rows": f"{w - 1}..{h.A.shape[0] - 1}"}
        Q = None if h.Q is None else np.ascontiguousarray(h.Q[w - 1:])
        K = None if h.K is None else np.ascontiguousarray(h.K[:w])
        yield OperatorInput(f"{oid}.N{w}", family, A, None, meta, block=block, Q=Q, K=K)


@dataclass(frozen=True)
class Budgets:
    """The budget settings a producing task runs under: carried by every job, so a Dask
    worker (which sees neither this process's environment nor its flags) uses them too."""

    mode: str
    scale: float | None
    env: dict[str, str]

    def provenance(self) -> dict[str, Any]:
        """The record of these settings in store.json's provenance (``produce_budgets``)."""
        # floats as their repr strings: the store's exact JSON reader turns a JSON number
        # into an exact rational, which would compare equal but be written back as a
        # different string, so a resumed run would rewrite store.json
        def text(v: Any) -> Any:
            return repr(float(v)) if isinstance(v, float) else v

        units = ({k: text(v) for k, v in WORK_UNITS.items()} if self.mode == "work"
                 else None)
        # the software the brackets depend on (in work mode they are a function of it and
        # of the inputs); a resumed run under other libraries adds an entry of its own
        return {"budget_mode": self.mode, "budget_scale": text(float(self.scale or 1.0)),
                "budget_variables": dict(sorted(self.env.items())), "work_units": units,
                "software": process_environment()}


def _work(job: tuple[str, np.ndarray, np.ndarray | None, list[Fraction], list[str], list[str],
                     set[str], Budgets]) -> tuple[str, OperatorResult]:
    """Worker entry point: returns (operator id, its brackets) for one job."""
    op_id, A, logits, eps_list, uppers, lowers, skip, budgets = job
    from ..workers import tune_allocator

    tune_allocator()  # speed only (a Dask worker is not started by this package)
    with one_blas_thread(), budget_settings(budgets.mode, budgets.scale, budgets.env):
        res = produce_operator(op_id, A, eps_list, uppers, lowers, logits=logits, skip=skip)
    res.software = process_environment()
    return op_id, res


def _work_batch(jobs: list[tuple[Any, ...]]) -> list[tuple[str, OperatorResult]]:
    """Worker entry point of a Dask task: returns ``_work(job)`` for each of ``jobs``, in
    order (each job runs exactly as a task of its own would run it)."""
    return [_work(j) for j in jobs]  # type: ignore[arg-type]


def _job_work(job: tuple[Any, ...]) -> int:
    """Returns the estimated work of ``job`` (``batching.produce_work``): its shape, its eps
    (all searched again when one bracket is missing: ``produce_operator``), its producers and
    budget scale."""
    from softrank.audit.batching import produce_work

    _op_id, A, _logits, eps_list, uppers, lowers, _skip, budgets = job
    return produce_work(A.shape, len(set(eps_list)), [*uppers, *lowers], budgets.scale)


def _split_producers(names: list[str]) -> tuple[list[str], list[str]]:
    uppers, lowers = [], []
    for n in names:
        (uppers if get_producer(n).role == "upper" else lowers).append(n)
    if not uppers:
        raise InputError("at least one upper producer is needed (every bracket has an upper "
                         "witness)", field="producers")
    return uppers, lowers


def _budget_variables() -> list[tuple[str, bool]]:
    """The environment variables the built-in producers read their budgets from, each with
    whether 0 is allowed (it turns alt_l1's descent or its near-miss steps off)."""
    from softrank.witnesses.producers import (
        altl1,
        bernstein,
        decoder_lp,
        lower,
        nerve,
        prices,
        rowset,
    )

    return [(SCALE_ENV, False), (bernstein.BUDGET_ENV, False), (rowset.BUDGET_ENV, False),
            (decoder_lp.BUDGET_ENV, False), (nerve.BUDGET_ENV, False), (altl1.DESCENT_ENV, True),
            (altl1.VSTEP_ENV, True), (lower.KEYSET_BUDGET_ENV, False),
            (prices.CHEAP_BUDGET_ENV, False)]


def _check_budget_variables() -> None:
    # the producers fall back to their defaults on a value they cannot read; a typo in a
    # budget should not silently cost hours, so produce refuses it up front
    for name, zero_ok in _budget_variables():
        raw = os.environ.get(name, "")
        if raw and parse_budget(raw, zero_ok=zero_ok) is None:
            need = "a finite number >= 0" if zero_ok else "a positive finite number"
            raise InputError(f"environment variable {name}={raw!r} is not {need}", field=name)


#: Largest --budget-scale: every search budget times this stays a bounded run (4 is the most
#: any measurement in the producers' README used).
MAX_BUDGET_SCALE = 1000.0


def run(args: argparse.Namespace) -> int:
    _check_budget_variables()
    scale = args.budget_scale
    if scale is not None and not (np.isfinite(scale) and 0 < scale <= MAX_BUDGET_SCALE):
        raise InputError(f"must be a number in (0, {MAX_BUDGET_SCALE}], got {scale}",
                         field="--budget-scale")
    # checked before anything is read or created: a value that cannot be written to the
    # store's provenance would otherwise fail after the brackets were written
    for name, value in (("--capture-tolerance", args.capture_tolerance),
                        ("--intrinsic-budget", args.intrinsic_budget)):
        if value is not None and not (np.isfinite(value) and value > 0):
            raise InputError(f"must be a positive finite number, got {value}", field=name)
    env = {name: os.environ[name] for name, _ in _budget_variables()
           if os.environ.get(name) and name != SCALE_ENV}
    if scale is None:
        scale = parse_budget(os.environ.get(SCALE_ENV))
    args.budgets = Budgets(getattr(args, "budget_mode", "work"), scale, env)
    # the producers read their budgets from the environment (worker processes inherit it);
    # restored afterwards so that an in-process caller sees no change
    before = os.environ.get(SCALE_ENV)
    if scale is not None:
        os.environ[SCALE_ENV] = repr(float(scale))
    try:
        return _run(args)
    finally:
        client = getattr(args, "owned_client", None)
        if client is not None:
            client.close()
        if before is None:
            os.environ.pop(SCALE_ENV, None)
        else:
            os.environ[SCALE_ENV] = before


def _run(args: argparse.Namespace) -> int:
    eps_list = sorted({parse_eps(e, field="eps") for e in args.eps})
    for e in eps_list:
        if e >= 1:
            raise InputError(f"must be < 1 for attention operators, got {e}", field="eps")
    names = args.producers or default_producers()
    if len(set(names)) != len(names):
        raise InputError("duplicate producer names", field="producers")
    uppers, lowers = _split_producers(names)
    args.batch_k = _batch.value(args)
    if getattr(args, "scheduler", None) is not None:
        # connect before the store is touched: a bad address leaves nothing behind (exit 2);
        # a client this run opened is closed by ``run``
        from softrank.audit.executors import DaskExecutor

        ex = DaskExecutor(args.scheduler)
        args.scheduler = ex.client
        if ex._owned:
            args.owned_client = ex.client
    if args.model is None and (args.texts or args.layers or args.heads or args.text_index
                               or args.images or args.block_widths or args.decoder_tokens
                               or args.tokens is not None
                               or args.capture_tolerance is not None
                               or args.allow_bin_weights):
        raise InputError("--texts/--images/--text-index/--layers/--heads/--block-widths/"
                         "--decoder-tokens/--tokens/--capture-tolerance/--allow-bin-weights "
                         "need --model", field="model")
    root = Path(args.store)
    provenance: dict[str, Any] = {}

    def note(text: str) -> None:
        if not args.quiet:
            print(shown(f"softrank-certify produce: {text}"), file=sys.stderr)

    source = (iter_npz(args.npz, args.npz_kind, args.family, note) if args.npz
              else iter_model(args, provenance))
    # read the first operator before touching the output: bad input leaves no empty store
    first = next(source, None)
    if first is None:
        raise InputError("no operators in the input", field="npz" if args.npz else "texts")
    source = itertools.chain([first], source)
    ranks = None
    if args.intrinsic_ranks:
        # every operator is validated for the intrinsic witnesses before anything is written
        ranks = intrinsic_produce.validate_ranks(args.intrinsic_ranks)
        source = list(source)
        for op in source:
            intrinsic_produce.precheck(op.id, op.A, op.logits, ranks)
        source = iter(source)
    fresh = not (root / "store.json").is_file()
    root_existed = root.exists()
    store = Store.open(root) if not fresh else Store.create(
        root, description=args.description or "brackets from softrank-certify produce")
    try:
        jobs, new_ops, seen, kept = _add_operators(store, root, source, eps_list, uppers,
                                                   lowers, args.budgets)
        # the budgets brackets were searched under (a resumed run with other budgets adds its
        # own entry, when it searches anything; each work-mode bracket also says budget_mode
        # in its claims)
        if jobs:
            provenance["produce_budgets"] = [args.budgets.provenance()]
        if provenance:
            # the model files' sha256 and the token ids of every text read, in store.json
            store.add_provenance(provenance)
    except InputError:
        # a later input is bad: nothing was produced yet, so a store this run created goes
        # (Store.create refused a non-empty folder, so only this run's files are removed),
        # and an existing one loses the operators this run added before the bad one
        try:
            if not fresh:
                store.withdraw_added()
        finally:
            store.close()  # the lock goes whatever the withdrawal met
        if fresh:
            shutil.rmtree(root, ignore_errors=True)
            if root_existed:
                root.mkdir(exist_ok=True)
        raise
    return _produce(args, store, root, jobs, new_ops, seen, ranks, kept)


def _add_operators(store: Store, root: Path, source: Iterator[Any], eps_list: list[Fraction],
                   uppers: list[str], lowers: list[str], budgets: Budgets
                   ) -> tuple[list[tuple[Any, ...]], int, set[str], int]:
    """Adds the new operators to ``store``; returns the producing jobs, the number of
    operators added, the ids seen and the number of stored brackets kept (raises InputError
    on a bad input)."""
    existing = set(store.operator_ids)
    have = store.bracket_ids
    reader = open_store(root) if existing else None
    by_id = {b.id: b for b in reader.brackets} if reader is not None else {}
    jobs: list[tuple[Any, ...]] = []
    new_ops = kept = 0
    seen: set[str] = set()
    for op in source:
        if op.id in seen:
            where = ", ".join(f"{k} {v}" for k, v in op.meta.items()
                              if k in ("source", "array", "text", "layer", "head"))
            from_npz = "source" in op.meta or "array" in op.meta
            raise InputError(f"two inputs map to operator id {op.id!r}"
                             + (" (same file stem and array name?); rename one" if from_npz
                                else "") + f" (the second: {where})",
                             field="npz" if from_npz else "--model")
        seen.add(op.id)
        if op.id in existing:
            # resume: the stored arrays are the operator of record, never a recomputation
            arrs = reader.operator(op.id).load()  # type: ignore[union-attr]
            A, logits = np.asarray(arrs["A"], dtype=np.float64), arrs.get("logits")
            _same_operator(root, op.id, A, op.A)
        else:
            store.add_operator(op.A, family=op.family, id=op.id, logits=op.logits,
                               block=op.block, Q=op.Q, K=op.K, meta=op.meta)
            existing.add(op.id)
            new_ops += 1
            A, logits = op.A, op.logits
        wanted = {bracket_id(op.id, e, u): (e, u) for e in eps_list for u in uppers}
        skip = set(wanted) & have
        if skip:
            _skipped_intact(reader, root, [(by_id[i], *wanted[i]) for i in sorted(skip)],
                            op.id)
            kept += len(skip)
        if len(skip) < len(eps_list) * len(uppers):
            jobs.append((op.id, A, logits, eps_list, uppers, lowers, skip, budgets))
    store.flush()
    return jobs, new_ops, seen, kept


#: Largest entrywise difference between a stored operator and the input a resumed run reads
#: for it: a recapture under other libraries may differ in the last bits (the stored arrays
#: stay the operator of record), another head or text differs far more.
RESUME_TOLERANCE = 1e-5


def _same_operator(root: Path, op_id: str, stored: np.ndarray, given: np.ndarray) -> None:
    """Raises InputError (naming operators.jsonl and the operator) when the stored operator
    is not the input's: of another shape, or differing by more than RESUME_TOLERANCE."""
    given = np.asarray(given, dtype=np.float64)
    if stored.shape != given.shape or not np.all(np.abs(stored - given) <= RESUME_TOLERANCE):
        raise InputError("the stored operator differs from this run's input for it (the "
                         "store was changed, or it was produced from other input): a resumed "
                         "run would add brackets of one matrix to another; use a new store",
                         field=op_id, source=str(root / "operators.jsonl"))


def _skipped_intact(reader: Any, root: Path, skip: list[tuple[Any, Fraction, str]],
                    op_id: str) -> None:
    """Raises InputError unless every bracket a resumed run skips (record, the eps and upper
    producer its id names) is what its id says (this operator, eps and upper producer) and
    its arrays still have their recorded digests: a skipped bracket is never looked at again
    by this run."""
    src = str(root / "brackets.jsonl")
    for b, eps, upper in skip:
        bid = b.id
        if b.operator != op_id or b.eps != eps or b.producer.get("upper") != upper:
            raise InputError(f"the record does not match its id (operator {b.operator!r}, eps "
                             f"{b.eps}, upper producer {b.producer.get('upper')!r}); a resumed "
                             "run would skip it in place of the bracket its id names",
                             field=bid, source=src)
    stale = stale_brackets(reader, [b for b, _, _ in skip])
    if stale:
        raise InputError("its array file (or its operator's) no longer has the sha256 its "
                         "record states (changed or corrupt); a resumed run does not build on "
                         "it: remove the record, or use a new store", field=f"{stale[0]}.file",
                         source=src)


def _produce(args: argparse.Namespace, store: Store, root: Path, jobs: list[tuple[Any, ...]],
             new_ops: int, seen: set[str], ranks: Any, kept: int = 0) -> int:
    written, failures, over = 0, [], []
    t0 = time.monotonic()
    bar = tqdm(total=len(jobs), unit="operator",
               disable=args.quiet or args.json or not sys.stderr.isatty(),
               file=sys.stderr, desc="produce")
    known = _Environments(store, process_environment())
    try:
        for op_id, res in _map(jobs, args.jobs, getattr(args, "scheduler", None),
                               getattr(args, "batch_k", None)):
            known.note(res.software)
            with store.batch():
                for b in res.brackets:
                    store.add_bracket(op_id, b.eps, b.upper, b.lower, producer=b.producer,
                                      claims=b.claims, id=b.id)
                    written += 1
            failures.extend(res.failures)
            over.extend(getattr(res, "skipped", []))
            bar.update(1)
    finally:
        bar.close()
        store.close()
    complete = len(seen) - len(jobs)
    summary = {"store": str(root), "operators_added": new_ops, "operators_processed":
               len(jobs), "operators_already_complete": complete,
               "brackets_written": written, "brackets_kept": kept,
               "producer_failures": failures,
               "producers_over_budget": over,
               # the run's wall time: kept out of the records in work mode (byte identity)
               "budget_mode": args.budgets.mode, "seconds": round(time.monotonic() - t0, 3)}
    if ranks:
        summary.update(intrinsic_produce.produce_intrinsic(
            root, sorted(seen), ranks, budget=args.intrinsic_budget, jobs=args.jobs))
    if args.json:
        from softrank.witnesses import jsonexact

        print(jsonexact.dumps(summary, indent=1))
    else:
        print(shown(f"{root}: {new_ops} operators added, {len(jobs)} processed, {written} "
                    f"brackets written ({len(failures)} producer failures)"))
        if ranks:
            print(shown(f"{root}: {summary['intrinsic_records_written']} intrinsic records "
                        "written"))
        for f in failures[:20]:
            print(f"  producer failure: {shown(f)}", file=sys.stderr)
        if complete:
            print(shown(f"{root}: {complete} operators already had every bracket asked for "
                        "and were not searched again: other lower producers, --budget-scale "
                        "or --budget-mode do not apply to their stored brackets (produce "
                        "into a new store for that)"), file=sys.stderr)
        if kept:
            print(shown(f"{root}: {kept} stored brackets kept as recorded: their ids, "
                        "operators, eps, producers and array sha256 were compared, their ends "
                        "were not rechecked here (softrank-certify check proves or refuses "
                        "every record)"), file=sys.stderr)
        if over:
            print(shown(f"{root}: {len(over)} producer calls not started, priced above their "
                        f"budget; first: {over[0]}"), file=sys.stderr)
    if jobs and not written:
        # a run that searched and stored nothing is no success, whatever the reason (every
        # producer priced over its budget, every search empty)
        print(shown(f"{root}: no bracket written for the {len(jobs)} operators processed"),
              file=sys.stderr)
        return 1
    return 1 if failures else 0


class _Environments:
    """The numerics software of the processes that produced this run's brackets, recorded in
    store.json's provenance ("producing_software": one entry per distinct environment,
    written before the first bracket it produced).  A Dask worker on another host may load
    other libraries or BLAS kernels than this process, and in work mode the brackets are a
    function of them: a store whose producing_software has several entries, or one other
    than ``produce_budgets[].software``, may not be rewritten bit for bit by one rerun."""

    def __init__(self, store: Store, here: dict[str, Any]):
        self.store, self.here = store, here
        self.seen: list[dict[str, Any]] = []
        self.warned = False

    def note(self, software: dict[str, Any] | None) -> None:
        """Records ``software`` (a worker's ``numerics_environment()``) unless it was seen
        already; warns once on stderr when it differs from this process's own."""
        if software is None or software in self.seen:
            return
        self.seen.append(software)
        self.store.add_provenance({"producing_software": [software]})
        if software != self.here and not self.warned:
            self.warned = True
            diff = sorted(k for k in set(software) | set(self.here)
                          if software.get(k) != self.here.get(k))
            print("produce: warning: a worker produced brackets with other numerics software "
                  f"than this process ({shown(', '.join(diff))} differ); store.json's "
                  "producing_software lists every environment used: a rerun reproduces "
                  "the brackets bit for bit only under the same one", file=sys.stderr)


def _map(jobs: list[tuple[Any, ...]], n: int, scheduler: Any = None, batch: int | None = None
         ) -> Iterator[tuple[str, OperatorResult]]:
    """Yields ``_work(job)`` for every job, in the order of ``jobs`` (so that the store's
    records come in the same order however the work was spread); on a Dask ``scheduler``,
    ``batch`` jobs per task (None: from their estimated work)."""
    if scheduler is not None:
        yield from _map_dask(jobs, scheduler, batch)
        return
    if n == 1 or len(jobs) <= 1:
        for j in jobs:
            yield _work(j)  # type: ignore[arg-type]
        return
    import multiprocessing as mp

    # one BLAS thread per worker: the workers already use every core
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    from ..workers import init_worker, stopping_pool  # workers ignore Ctrl-C

    pool = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                               initializer=init_worker, initargs=(os.getpid(),))
    with stopping_pool(pool) as ex:
        yield from ex.map(_work, jobs)


def _map_dask(jobs: list[tuple[Any, ...]], scheduler: Any, batch: int | None = None
              ) -> Iterator[tuple[str, OperatorResult]]:
    """``_map`` on a Dask cluster: consecutive jobs (operators, all their eps) grouped into
    tasks (``batch`` jobs each, or ``batching.batches`` of their estimated work), results
    yielded in job order (a finished task waits for the ones before it).  At most
    WINDOW_PER_WORKER tasks per worker thread are queued at a time, so the client does not
    ship a whole corpus's arrays to the scheduler at once.  A task of a worker that dies is
    rescheduled by Dask as a whole; its results arrive here once.  Jobs are pure functions
    of their inputs, so a rerun, and any grouping, returns the same brackets in work mode."""
    from distributed import as_completed

    from softrank.audit.batching import batches
    from softrank.audit.executors import WINDOW_PER_WORKER, DaskExecutor, LostRecordsError

    ex = DaskExecutor(scheduler)  # a Client (``_run`` connected): not closed here
    todo = iter(batches([_job_work(j) for j in jobs], ex.workers, batch))
    first: dict[str, int] = {}  # task key -> index of its first job
    live: dict[str, Any] = {}
    queue = as_completed()

    def submit(n: int) -> None:
        for g in itertools.islice(todo, n):
            fut = ex.client.submit(_work_batch, [jobs[i] for i in g], pure=False)
            first[fut.key], live[fut.key] = g.start, fut
            queue.add(fut)

    done: dict[int, tuple[str, OperatorResult]] = {}
    nxt = 0
    try:
        submit(WINDOW_PER_WORKER * ex.workers)
        for fut in queue:
            for k, item in enumerate(fut.result()):
                done[first[fut.key] + k] = item
            del live[fut.key]
            fut.release()  # the client holds the results now; the cluster may drop them
            submit(1)
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1
        if nxt != len(jobs):  # never a shorter store that reads as the whole corpus
            raise LostRecordsError(f"the cluster returned results for {nxt} of {len(jobs)} "
                                   f"operators")
    finally:
        ex.client.cancel(list(live.values()))


def _short_int(n: int) -> str:
    """Returns ``n`` as digits, or its digit count past 40 digits (an option's echo)."""
    return str(n) if abs(n) < 10**40 else f"an integer of {len(str(abs(n)))} digits"
