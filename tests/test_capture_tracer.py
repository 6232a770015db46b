"""The score tracer on hand-written attention code: every replayable step, masks, taints."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.models
torch = pytest.importorskip("torch")

from softrank.witnesses.capture import (  # noqa: E402
    MASK_THRESHOLD,
    Replay,
    canonical_scale,
    make_tracer,
)

MIN32 = torch.finfo(torch.float32).min


def _qk(seed=0, H=2, m=5, N=6, d=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, H, m, d, generator=g), torch.randn(1, H, N, d, generator=g)


def _trace(fn, q, k):
    tr = make_tracer()
    with torch.no_grad(), tr:
        probs = fn(q, k)
    return tr.calls, probs


def test_divide_mask_fill_where_replay_in_float64():
    q, k = _qk()
    fill = torch.zeros(1, 1, 5, 6, dtype=torch.bool)
    fill[..., 0, 3:] = True
    keep = torch.ones(1, 2, 5, 6, dtype=torch.bool)
    keep[0, 1, 4, 0] = False
    bias = torch.linspace(-1, 1, 6).reshape(1, 1, 1, 6)

    def attn(q, k):
        s = torch.matmul(q, k.transpose(-1, -2)) / 3.0
        s = s + bias
        s = s.masked_fill(fill, MIN32)
        s = torch.where(keep, s, torch.tensor(float("-inf")))
        return torch.softmax(s.float(), dim=-1)

    (call,), probs = _trace(attn, q, k)
    rep = Replay(call)
    q64, k64 = q.double().numpy()[0], k.double().numpy()[0]
    for h in range(2):
        hs = rep.head(h)
        want = (q64[h] @ k64[h].T) * (1 / 3.0) + bias.double().numpy()[0, 0]
        masked = np.zeros((5, 6), dtype=bool)
        masked[0, 3:] = True
        if h == 1:
            masked[4, 0] = True
        assert np.array_equal(hs.masked, masked)
        assert np.array_equal(np.isneginf(hs.logits), masked)
        assert np.array_equal(hs.logits[~masked], want[~masked])
        # an additive bias besides the mask: the scores are not Q K^T, so no Q / K
        assert hs.Q is None and "bias" in hs.qk_note
        S = hs.logits
        A = np.exp(S - S.max(1, keepdims=True))
        A /= A.sum(1, keepdims=True)
        assert np.abs(A - probs[0, h].double().numpy()).max() < 1e-6


def test_scale_is_canonical_and_folded_into_q():
    q, k = _qk(1, d=8)
    (call,), _ = _trace(lambda q, k: torch.nn.functional.softmax(
        torch.matmul(q, k.transpose(2, 3)) * 8 ** -0.5, dim=-1), q, k)
    hs = Replay(call).head(0)
    c = 1.0 / np.sqrt(8)
    assert canonical_scale(8 ** -0.5, 8) == c and canonical_scale(np.sqrt(8), 8, divide=True) == c
    assert canonical_scale(0.3, 8) == 0.3 and canonical_scale(4.0, 8, divide=True) == 0.25
    q64, k64 = q.double().numpy()[0, 0], k.double().numpy()[0, 0]
    assert np.array_equal(hs.logits, (q64 @ k64.T) * c)
    assert np.array_equal(hs.Q, q64 * c) and np.array_equal(hs.K, k64)
    assert not hs.masked.any()


def test_mask_threshold_and_small_masks():
    # -1e4 "masks" of older models are ordinary finite logits, not -inf
    q, k = _qk(2)
    add = torch.zeros(1, 1, 1, 6)
    add[..., 0] = -1e4
    add[..., 1] = MIN32
    (call,), _ = _trace(lambda q, k: torch.softmax(torch.matmul(q, k.transpose(-1, -2)) + add,
                                                   -1), q, k)
    hs = Replay(call).head(0)
    assert MIN32 <= MASK_THRESHOLD
    assert np.isfinite(hs.logits[:, 0]).all() and np.isneginf(hs.logits[:, 1]).all()
    assert hs.Q is None  # -1e4 is an additive bias, not a mask


@pytest.mark.parametrize(("step", "why"), [
    (lambda s: s.exp(), "exp"),
    (lambda s: s * torch.full((1, 1, 1, 6), 2.0), "by a tensor"),
    (lambda s: s * torch.ones_like(s), "two score tensors"),  # derived from the scores
    (lambda s: s.double(), "float32 needed"),
    (lambda s: s + s, "two score tensors"),
])
def test_unreplayable_steps_taint_the_capture(step, why):
    q, k = _qk(3)
    (call,), _ = _trace(lambda q, k: torch.softmax(step(torch.matmul(q, k.transpose(-1, -2))),
                                                   dim=-1), q, k)
    assert call.taint and why in call.taint
    with pytest.raises(ValueError, match=why.split()[0]):
        Replay(call)


def test_softmax_over_another_axis_is_tainted():
    q, k = _qk(4)
    (call,), _ = _trace(lambda q, k: torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=2),
                        q, k)
    assert "axis" in call.taint
