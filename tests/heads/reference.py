"""Independent references for the head finder's tests: ablation written out with plain
TransformerLens hooks and the bridge's own loss, sharing no code with ``models.heads``."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def z_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def bridge_loss(model, ids: torch.Tensor, hooks=()) -> float:
    """The bridge's own next-token loss (TransformerLens's formula), with manual hooks."""
    with model.lock, torch.no_grad():
        return float(model.bridge.run_with_hooks(ids, fwd_hooks=list(hooks), return_type="loss"))


def replace_heads(heads: list[int], values: torch.Tensor | None = None):
    """A ``hook_z`` hook that sets ``heads`` to zero, or to ``values[head]`` (``head d_head``)."""

    def hook(z, hook):
        z = z.clone()
        for head in heads:
            z[:, :, head] = 0.0 if values is None else values[head]
        return z

    return hook


def ablation_hooks(heads, means: torch.Tensor | None = None) -> list:
    """Hooks that zero (or mean-replace, with ``layer head d_head`` means) every listed head."""
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        by_layer[int(layer)].append(int(head))
    return [
        (z_name(layer), replace_heads(idx, None if means is None else means[layer]))
        for layer, idx in by_layer.items()
    ]


def head_means(model, ids: torch.Tensor) -> torch.Tensor:
    """``layer head_index d_head``: each head's ``hook_z`` over the text's positions."""
    with model.lock, torch.no_grad():
        _, cache = model.bridge.run_with_cache(ids)
    return torch.stack([cache[z_name(layer)][0].mean(0) for layer in range(model.facts.n_layers)])


def single_head_effects(model, ids: torch.Tensor, means: torch.Tensor | None = None) -> np.ndarray:
    """``layer head_index``: loss with one head ablated minus the clean loss, head by head."""
    clean = bridge_loss(model, ids)
    out = np.zeros((model.facts.n_layers, model.facts.n_heads))
    for layer, head in np.ndindex(*out.shape):
        out[layer, head] = bridge_loss(model, ids, ablation_hooks([(layer, head)], means)) - clean
    return out
