"""Generic capture of pre-softmax attention scores: trace the softmax input, replay it in float64.

Mechanism (no per-architecture module paths).  During one eager forward pass a
``torch.overrides.TorchFunctionMode`` watches every torch function call:

* a 4-D ``matmul`` (``torch.matmul``, ``@``, ``bmm``) starts a *score chain*: its two inputs are
  kept as Q (..., m, d) and K^T (..., d, N);
* the elementwise steps applied to a chain are recorded when they can be replayed exactly:
  multiplication or division by a scalar (the model's scale), addition of a tensor or scalar
  (attention masks, relative position biases), ``masked_fill`` and ``where`` with a scalar,
  and float32-to-float32 conversions / copies;
* a ``softmax`` over the last axis of a chain is a *capture*: the chain, the softmax input and
  its output.  Any other operation on a chain taints it, and a capture of a tainted chain
  carries the name of the operation that cannot be replayed.

The captures are then matched to the attention probabilities the model returns with
``output_attentions=True`` (equal float32 tensors, in call order).  A returned attention tensor
with no matching capture means the scores were never formed by a traced softmax (a fused
kernel, an einsum, a custom op): the model is refused, never approximated.

Replay (per head, batch row 0), in float64 from the model's float32 Q and K:
``S = Q K^T`` (one numpy matmul), then each recorded step in order.  A scalar scale s is
applied as a multiplication by a float64 number: by ``1/sqrt(d)`` (d = the head dimension,
computed as ``1 / np.sqrt(d)``) when s agrees with 1/sqrt(d) to float32 precision, else by
``float(s)`` (or ``1 / float(s)`` for a division).  Added entries at or below
``MASK_THRESHOLD`` (half the most negative float32; models write ``finfo.min`` or ``-inf``
there) mark masked keys, which are stored as ``-inf``.  The operator of record is the exact
softmax of the stored logits; the caller compares its float64 softmax with the model's own
probabilities and refuses the capture beyond a stated tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MASK_THRESHOLD = float(np.finfo(np.float32).min) / 2
_MATMUL = {"matmul", "__matmul__", "bmm"}
_SOFTMAX = {"softmax"}
_MUL = {"mul", "mul_", "__mul__", "__rmul__", "__imul__", "multiply"}
_DIV = {"div", "div_", "__truediv__", "__itruediv__", "true_divide"}
_ADD = {"add", "add_", "__add__", "__radd__", "__iadd__"}
_FILL = {"masked_fill", "masked_fill_"}
_WHERE = {"where"}
_SAME = {"to", "float", "type_as", "type", "contiguous", "clone", "detach"}
# functions that only read a tensor (sizes, dtypes, comparisons of shapes): never taint
_READ = {"size", "dim", "__get__", "numel", "is_floating_point", "__len__", "data_ptr",
         "is_contiguous", "stride", "__format__", "__repr__", "element_size"}


@dataclass
class Chain:
    """A score chain: Q (..., m, d), K^T (..., d, N), replayable steps, or a taint."""

    q: Any
    kT: Any
    steps: list[tuple[Any, ...]] = field(default_factory=list)
    taint: str | None = None

    def then(self, step: tuple[Any, ...] | None, taint: str | None = None) -> Chain:
        steps = self.steps if step is None else [*self.steps, step]
        return Chain(self.q, self.kT, steps, self.taint or taint)


@dataclass
class SoftmaxCall:
    """One traced softmax whose input is a score chain."""

    chain: Chain
    scores: Any   # the softmax input (float32 tensor, B x H x m x N)
    probs: Any    # its output
    taint: str | None


def _scalar(x: Any) -> float | None:
    """Returns x as a Python float when it is a real scalar (number or 0-d tensor), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if hasattr(x, "dim") and x.dim() == 0 and x.is_floating_point():
        return float(x.item())
    if hasattr(x, "numel") and x.numel() == 1 and x.is_floating_point():
        return float(x.reshape(()).item())
    return None


def _tensor_args(args: tuple[Any, ...]) -> list[Any]:
    return [a for a in args if hasattr(a, "dim") and hasattr(a, "dtype")]


def make_tracer() -> Any:
    """Returns a new TorchFunctionMode instance that records score chains and softmax calls
    (attribute ``calls``, in call order).  Needs torch."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ScoreTracer(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.chains: dict[int, tuple[Any, Chain]] = {}  # id(tensor) -> (tensor, chain)
            self.calls: list[SoftmaxCall] = []

        def _chain(self, t: Any) -> Chain | None:
            hit = self.chains.get(id(t))
            return hit[1] if hit is not None and hit[0] is t else None

        def _set(self, t: Any, chain: Chain) -> None:
            self.chains[id(t)] = (t, chain)

        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            if name in _READ:
                return out
            self._observe(name, args, kwargs, out)
            return out

        def _observe(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                     out: Any) -> None:
            if not isinstance(out, torch.Tensor):
                return
            if name in _MATMUL and len(args) >= 2 and out.dim() == 4 \
                    and all(isinstance(a, torch.Tensor) and a.dim() == 4 for a in args[:2]):
                self._set(out, Chain(args[0], args[1]))
                return
            tracked = [(i, a, self._chain(a)) for i, a in enumerate(args)
                       if isinstance(a, torch.Tensor)]
            tracked = [(i, a, c) for i, a, c in tracked if c is not None]
            if not tracked:
                return
            pos, x, chain = tracked[0]
            if name in _SOFTMAX:
                dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
                taint = chain.taint
                if pos != 0 or dim not in (-1, x.dim() - 1):
                    taint = taint or f"softmax over axis {dim!r}"
                self.calls.append(SoftmaxCall(chain, x, out, taint))
                return
            step, taint = self._step(name, pos, args, kwargs, x, out, len(tracked))
            self._set(out, chain.then(step, taint))

        def _step(self, name: str, pos: int, args: tuple[Any, ...], kwargs: dict[str, Any],
                  x: Any, out: Any, n_tracked: int) -> tuple[tuple[Any, ...] | None,
                                                             str | None]:
            if out.dtype != torch.float32 or x.dtype != torch.float32:
                return None, f"{name} in {out.dtype} (float32 needed)"
            if tuple(out.shape) != tuple(x.shape):
                return None, f"{name} changed the shape"
            other = args[1 - pos] if len(args) >= 2 and pos in (0, 1) else None
            if name in _SAME:
                return None, None
            if n_tracked > 1:
                return None, f"{name} of two score tensors"
            if name in _MUL and "out" not in kwargs:
                s = _scalar(other)
                return (("scale", s), None) if s is not None else (None, f"{name} by a tensor")
            if name in _DIV and pos == 0 and not kwargs:
                s = _scalar(other)
                return (("divide", s), None) if s is not None else (None, f"{name} by a tensor")
            if name in _ADD and kwargs.get("alpha", 1) == 1 and "out" not in kwargs:
                if isinstance(other, torch.Tensor):
                    return ("add", other.detach()), None
                s = _scalar(other)
                return (("add", s), None) if s is not None else (None, f"{name} of {other!r}")
            if name in _FILL and pos == 0:
                mask = args[1] if len(args) > 1 else kwargs.get("mask")
                value = _scalar(args[2] if len(args) > 2 else kwargs.get("value"))
                if value is None:
                    return None, f"{name} with a non-scalar value"
                return ("fill", mask.detach(), value), None
            if name in _WHERE and len(args) == 3 and pos in (1, 2):
                other = args[3 - pos]
                value = _scalar(other)
                if value is None and not isinstance(other, torch.Tensor):
                    return None, "where with a non-scalar operand"
                keep = args[0].detach() if pos == 1 else ~args[0].detach()
                fill = value if value is not None else other.detach()
                return ("where", keep, fill), None
            return None, name or "an unnamed function"

    return ScoreTracer()


def canonical_scale(s: float, d: int, *, divide: bool = False) -> float:
    """Returns the float64 multiplier that replays a scale step on scores of head dim ``d``.

    ``1 / np.sqrt(d)`` when the model's multiplier (s, or 1/s for a division) equals it to
    float32 precision (the model applies its scale in float32 in any case); else s or 1/s.
    """
    if divide and s == 0:
        raise ValueError("scores divided by zero")
    mult = 1.0 / s if divide else s
    c = 1.0 / np.sqrt(d)
    if abs(mult - c) <= c * 2.0 ** -23:
        return float(c)
    return float(mult)


def _np64(t: Any) -> np.ndarray:
    import torch

    # .to keeps the strides of the float32 tensor, so a per-head slice has the model's layout
    return t.detach().to(torch.float64).numpy()


@dataclass
class HeadScores:
    """The float64 replay of one head's scores (see the module docstring)."""

    logits: np.ndarray        # m x N, -inf at masked keys
    masked: np.ndarray        # m x N bool
    Q: np.ndarray | None      # m x d, scale folded in (None when an additive bias is present)
    K: np.ndarray | None      # N x d
    qk_note: str              # why Q, K are absent, or "logits ~= Q K^T (+ mask)"


class Replay:
    """Float64 replay of a traced chain for the heads of batch row 0."""

    def __init__(self, call: SoftmaxCall):
        if call.taint:
            raise ValueError(call.taint)
        chain = call.chain
        self.q = _np64(chain.q)[0]
        self.kT = _np64(chain.kT)[0]
        self.shape = tuple(call.scores.shape)
        self.d = int(self.q.shape[-1])
        self.steps = [self._prepare(s) for s in chain.steps]

    def _prepare(self, step: tuple[Any, ...]) -> tuple[Any, ...]:
        kind = step[0]
        if kind in ("scale", "divide"):
            return ("scale", canonical_scale(step[1], self.d, divide=kind == "divide"))
        if kind == "add":
            val = step[1]
            if isinstance(val, float):
                return ("add", val, val <= MASK_THRESHOLD)
            arr = np.broadcast_to(_np64(val), self.shape)[0]
            return ("add", arr, None)
        mask = np.broadcast_to(step[1].numpy().astype(bool), self.shape)[0]
        fill = step[2]
        if not isinstance(fill, float):
            fill = np.broadcast_to(_np64(fill), self.shape)[0]
        return (step[0], mask, fill)

    @property
    def heads(self) -> int:
        return int(self.shape[1])

    def head(self, h: int) -> HeadScores:
        """Returns the float64 scores of head h (batch row 0)."""
        q = self.q[h] if self.q.shape[0] > 1 else self.q[0]
        kT = self.kT[h] if self.kT.shape[0] > 1 else self.kT[0]
        S = q @ kT
        masked = np.zeros(S.shape, dtype=bool)
        mult, bias = 1.0, False
        for step in self.steps:
            if step[0] == "scale":
                S = S * step[1]
                mult *= step[1]
                continue
            if step[0] == "add":
                val = step[1]
                if isinstance(val, float):
                    S = S + val
                    masked |= bool(step[2])
                    bias = bias or (val != 0 and not step[2])
                    continue
                B = val[h] if val.shape[0] > 1 else val[0]
                S = S + B
                hit = B <= MASK_THRESHOLD
                masked |= hit
                bias = bias or bool(np.any(B[~hit] != 0))
                continue
            mask, fill = step[1], step[2]
            M = mask[h] if mask.shape[0] > 1 else mask[0]
            if step[0] == "where":
                M = ~M  # "where" stores the entries kept; the others are filled
            F = fill if isinstance(fill, float) else (fill[h] if fill.shape[0] > 1 else fill[0])
            S = np.where(M, F, S)
            low = (F <= MASK_THRESHOLD) if not isinstance(F, float) else \
                np.full(S.shape, F <= MASK_THRESHOLD)
            masked = np.where(M, low, masked)
            bias = bias or bool(np.any(M & ~low))
        S = np.array(S, dtype=np.float64)
        S[masked] = -np.inf
        if bias:
            return HeadScores(S, masked, None, None,
                              "omitted: the scores carry an additive bias besides the mask, "
                              "so they are not Q K^T")
        Q = np.ascontiguousarray(q * mult)
        K = np.ascontiguousarray(kT.T)
        return HeadScores(S, masked, Q, K, "logits ~= Q K^T (scale folded into Q) plus mask")
