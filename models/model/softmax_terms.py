"""The terms of each layer's softmax besides q and k, as the model's configuration sets them.

- the logit scale of each layer, as the model's own attention modules hold it;
- sliding-window widths per layer;
- ALiBi slopes;
- the RoPE rotation (``rotate_half`` convention), for bridges that expose q, k, cos and sin but
  not the rotated q and k.

These read the loaded model's modules and config; they never run it (that is
:mod:`models.model.forward`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from jaxtyping import Float

from models.model.handle import ModelHandle
from models.model.loading import bridge_of
from models.shapes import HeadActivations, Slopes


def rotate(
    x: HeadActivations,
    cos: Float[torch.Tensor, "batch pos rotary_dim"],
    sin: Float[torch.Tensor, "batch pos rotary_dim"],
) -> HeadActivations:
    """RoPE in the ``rotate_half`` convention on the first ``cos.shape[-1]`` dimensions.

    Args:
        x: ``batch pos head_index d_head``.
        cos, sin: ``batch pos rotary_dim`` (``rotary_dim <= d_head``).

    Returns:
        ``batch pos head_index d_head``, the rotated copy.
    """
    dim = cos.shape[-1]
    part, rest = x[..., :dim], x[..., dim:]
    first, second = part[..., : dim // 2], part[..., dim // 2 :]
    half_turn = torch.cat([-second, first], dim=-1)
    return torch.cat([part * cos[:, :, None] + half_turn * sin[:, :, None], rest], dim=-1)


def layer_scales(model: ModelHandle) -> tuple[tuple[float, ...], str]:
    """The logit multiplier of each layer, and where it was read from.

    The ``scaling`` (or Bloom's ``inv_norm_factor``) attribute of each Hugging Face attention
    module already folds in GPT-2's ``scale_attn_weights`` and
    ``scale_attn_by_inverse_layer_idx``; the config flags are the fallback when no module
    carries it.
    """
    n_layers = model.facts.n_layers
    found: dict[int, float] = {}
    for module in bridge_of(model).original_model.modules():
        idx = getattr(module, "layer_idx", None)
        value = getattr(module, "scaling", getattr(module, "inv_norm_factor", None))
        if isinstance(idx, int) and isinstance(value, (int, float)) and not isinstance(value, bool):
            found.setdefault(idx, float(value))
    if all(layer in found for layer in range(n_layers)):
        return tuple(
            found[layer] for layer in range(n_layers)
        ), "the attention modules' own scaling"
    config = getattr(bridge_of(model).original_model, "config", None)
    base = model.facts.d_head**-0.5
    source = "1 / sqrt(d_head)"
    pre_attn = getattr(config, "query_pre_attn_scalar", None)
    if pre_attn:
        base, source = (
            float(pre_attn) ** -0.5,
            "1 / sqrt(query_pre_attn_scalar)",
        )
    if getattr(config, "scale_attn_weights", True) is False:
        base, source = 1.0, "1 (scale_attn_weights is off)"
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        return tuple(base / (layer + 1) for layer in range(n_layers)), source + " / (layer + 1)"
    return (base,) * n_layers, source


def layer_windows(model: ModelHandle) -> tuple[int | None, ...]:
    """Sliding-window width per layer from the Hugging Face config (None = full attention)."""
    return windows_from_config(
        getattr(bridge_of(model).original_model, "config", None), model.facts.n_layers
    )


def windows_from_config(config: Any, n_layers: int) -> tuple[int | None, ...]:
    """Sliding-window width per layer from a Hugging Face config (None = full attention)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window:
        return (None,) * n_layers
    if types is not None and len(types) == n_layers:
        return tuple(int(window) if kind == "sliding_attention" else None for kind in types)
    if getattr(config, "use_sliding_window", True) is False:
        return (None,) * n_layers
    return (int(window),) * n_layers


def alibi_slopes(n_heads: int) -> Slopes:
    """ALiBi slopes ``2^(-8 (h+1) / n)``, interleaving the next power of two when ``n`` is not one.

    Returns:
        ``head_index`` float32 slopes (Bloom's / MPT's ordering).
    """
    closest = 2 ** math.floor(math.log2(n_heads))
    base = 2.0 ** (-8.0 / closest)
    slopes = [base ** (i + 1) for i in range(closest)]
    if closest != n_heads:
        extra = 2.0 ** (-4.0 / closest)
        slopes += [extra ** (2 * i + 1) for i in range(n_heads - closest)]
    return torch.tensor(slopes, dtype=torch.float32)


def model_alibi_slopes(model: ModelHandle) -> Slopes | None:
    """The model's ALiBi slopes, or None when it does not use ALiBi."""
    return alibi_slopes(model.facts.n_heads) if model.facts.positional == "alibi" else None
