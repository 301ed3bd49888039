"""Resumed passes run in the model's own dtype: a bfloat16 model's clean pass stores bfloat16
block outputs, and an ablated pass resumed from them equals the whole ablated pass up to
bfloat16 rounding, without a silent upcast anywhere on the way."""

from __future__ import annotations

import torch

from models.model.forward import final_norm_in_hook, run_with_hooks, tokenize, z_hook
from models.model.resume import clean_pass, run_resumed
from models.model.weights import final_norm, unembedding_columns, vocab_size

TEXT = "def mean(values):\n    return sum(values) / len(values)\n" * 3
BF16_UNIT = 2.0**-8  # bfloat16's unit roundoff
ROUNDINGS = 4  # units of it allowed on the scale each logit accumulates


def zero_head(head: int):
    def hook(z: torch.Tensor, hook=None) -> torch.Tensor:
        assert z.dtype == torch.bfloat16  # the hook sees the model's dtype
        out = z.clone()
        out[:, :, head] = 0.0
        return out

    return hook


def accumulated(model, resid: torch.Tensor) -> torch.Tensor:
    """``batch pos vocab`` ``sum_d |x_d W_U[d, v]|``: what each logit adds up, ``x`` the final
    norm's output on ``resid`` (float64)."""
    norm = final_norm(model)
    x = resid.double()
    if norm.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight + norm.bias
    w_u, _ = unembedding_columns(model, range(vocab_size(model)))
    return x.abs() @ w_u.abs()


def test_resumed_ablation_runs_and_stays_in_bfloat16(bundled_bf16):
    """The resumed and the whole ablated pass compute the same function in bfloat16, but layers
    0-1 ran on one sequence in the clean pass and on two in the whole pass: kernels may block
    their sums by shape (oneDNN on AMX does), so an input of layer 2 can round to a neighbouring
    bfloat16 value. A relative change of one unit roundoff ``u = 2^-8`` in the final norm's
    output ``x`` moves logit ``v`` by at most ``u sum_d |x_d W_U[d, v]|``; layer 2 and the norm
    add their own roundings, so :data:`ROUNDINGS` units are allowed. Zeroing the head moves
    logits far beyond that bound (checked below), so a lost or misplaced ablation fails."""
    ids, _ = tokenize(bundled_bf16, TEXT)
    logits, _, outputs = clean_pass(bundled_bf16, ids)
    assert logits.dtype == torch.bfloat16
    assert outputs is not None and all(o.dtype == torch.bfloat16 for o in outputs)
    hooks = [(z_hook(2), zero_head(1))]
    resumed = run_resumed(bundled_bf16, ids, hooks, start=2, outputs=outputs, copies=2)
    kept: list[torch.Tensor] = []
    keep = (final_norm_in_hook(), lambda resid, hook=None: kept.append(resid.detach()))
    whole = run_with_hooks(bundled_bf16, ids.repeat(2, 1), [*hooks, keep])
    assert resumed.dtype == whole.dtype == torch.bfloat16
    bound = ROUNDINGS * BF16_UNIT * accumulated(bundled_bf16, kept[0])
    assert ((resumed.double() - whole.double()).abs() <= bound).all()
    moved = (whole.double() - logits.double().expand_as(whole)).abs()
    assert (moved > bound).any()  # the ablation shows above the rounding allowed


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
