"""Output gates (gated attention: Qiu et al. 2025; Qwen3-Next, Qwen3.5).

The query projection emits twice its usual width: per head, the query and a gate ``g`` of the
same size. The head's output is ``sigmoid(g) * (A V)``, one gate value per query and dimension,
before the output projection. A gate near 0 silences the head at that query whatever its
pattern says; the paper's claim is that gates let heads stop dumping weight on a sink token.
The app shows each head's gate at each query as the mean of ``sigmoid(g)`` over its dimensions.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float


def is_gated(module: Any, config: Any) -> bool:
    """Whether an attention module's query projection also emits an output gate per head."""
    q_proj = getattr(module, "q_proj", None)
    head_dim = getattr(module, "head_dim", None)
    n_heads = getattr(config, "num_attention_heads", None)
    width = getattr(q_proj, "out_features", None)
    if not (isinstance(head_dim, int) and isinstance(n_heads, int) and isinstance(width, int)):
        return False
    return width == 2 * n_heads * head_dim


def gate_values(
    gate_logits: Float[torch.Tensor, "pos gate_width"], n_heads: int
) -> Float[torch.Tensor, "head_index pos d_head"]:
    """``sigmoid(g)`` of each head, query and dimension from the gate's logits as the model
    lays them out (heads side by side)."""
    pos, width = gate_logits.shape
    return torch.sigmoid(gate_logits.reshape(pos, n_heads, width // n_heads)).transpose(0, 1)


def mean_gate(
    gate_logits: Float[torch.Tensor, "pos gate_width"], n_heads: int
) -> Float[torch.Tensor, "head_index pos"]:
    """Each head's gate at each query: the mean of ``sigmoid(g)`` over its dimensions (0 to 1)."""
    return gate_values(gate_logits, n_heads).mean(dim=-1)
