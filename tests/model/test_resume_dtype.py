"""Resumed passes run in the model's own dtype: a bfloat16 model's clean pass stores bfloat16
block outputs, and an ablated pass resumed from them equals the whole ablated pass in bfloat16,
without a silent upcast anywhere on the way."""

from __future__ import annotations

import torch

from models.model.forward import run_with_hooks, tokenize, z_hook
from models.model.resume import clean_pass, run_resumed

TEXT = "def mean(values):\n    return sum(values) / len(values)\n" * 3


def zero_head(head: int):
    def hook(z: torch.Tensor, hook=None) -> torch.Tensor:
        assert z.dtype == torch.bfloat16  # the hook sees the model's dtype
        out = z.clone()
        out[:, :, head] = 0.0
        return out

    return hook


def test_resumed_ablation_runs_and_stays_in_bfloat16(bundled_bf16):
    ids, _ = tokenize(bundled_bf16, TEXT)
    logits, _, outputs = clean_pass(bundled_bf16, ids)
    assert logits.dtype == torch.bfloat16
    assert outputs is not None and all(o.dtype == torch.bfloat16 for o in outputs)
    hooks = [(z_hook(2), zero_head(1))]
    resumed = run_resumed(bundled_bf16, ids, hooks, start=2, outputs=outputs, copies=2)
    whole = run_with_hooks(bundled_bf16, ids.repeat(2, 1), hooks)
    assert resumed.dtype == whole.dtype == torch.bfloat16
    torch.testing.assert_close(resumed, whole, rtol=0, atol=0)
    assert not torch.equal(resumed, logits.expand_as(resumed))  # the ablation changed something


def test_bfloat16_resumed_losses_track_float32(bundled, bundled_bf16):
    """Zero-ablating each head of the last layer moves the loss the same way in both dtypes."""
    import torch.nn.functional as F

    changes = {}
    for name, model in (("float32", bundled), ("bfloat16", bundled_bf16)):
        ids, _ = tokenize(model, TEXT)
        logits, _, outputs = clean_pass(model, ids)

        def loss(out: torch.Tensor, ids=ids) -> torch.Tensor:
            flat = out[:, :-1].float().reshape(-1, out.shape[-1])
            return F.cross_entropy(flat, ids[0, 1:].repeat(out.shape[0]), reduction="none")

        hooks = [
            (z_hook(2), lambda z, hook=None, h=h: _zero_row(z, h))
            for h in range(model.facts.n_heads)
        ]
        copies = model.facts.n_heads
        resumed = run_resumed(model, ids, hooks, start=2, outputs=outputs, copies=copies)
        per_copy = loss(resumed).view(copies, -1).mean(dim=1)
        changes[name] = per_copy - loss(logits).mean()
    assert torch.argmax(changes["float32"]) == torch.argmax(changes["bfloat16"])
    torch.testing.assert_close(changes["bfloat16"], changes["float32"], atol=0.02, rtol=0.1)


def _zero_row(z: torch.Tensor, head: int) -> torch.Tensor:
    """Batch row ``head`` gets head ``head`` zeroed (one head per copy)."""
    out = z.clone()
    out[head, :, head] = 0.0
    return out
