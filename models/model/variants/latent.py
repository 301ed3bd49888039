"""Multi-head latent attention (DeepSeek-V2/V3): content and RoPE parts of each score.

Each head's query and key are two pieces side by side: a "no position" part decompressed from
a shared latent, and a small rotated part that carries position. The score is exactly their sum::

    s_ij = (q_nope_i . k_nope_j + q_rope_i . k_rope_j) * scale

The key/value cache holds the compressed latent (``kv_lora_rank`` numbers) and the one rotated
key shared by every head (``rope_dim``) per token and layer, not heads x d_head keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float


@dataclass(frozen=True)
class LatentShape:
    """The sizes of one latent-attention layer.

    Attributes:
        kv_lora_rank: width of the compressed key/value latent.
        rope_dim: the rotated part of each query and key (shared by every head on the key side).
        nope_dim: the unrotated, content part of each query and key.
        v_head_dim: each head's value width.
    """

    kv_lora_rank: int
    rope_dim: int
    nope_dim: int
    v_head_dim: int

    @property
    def cached_per_token(self) -> int:
        """Numbers one layer caches per token: the latent and the shared rotated key."""
        return self.kv_lora_rank + self.rope_dim


def latent_shape(module: Any) -> LatentShape | None:
    """The latent sizes of an attention module that compresses its keys and values, or None."""
    if not hasattr(module, "kv_a_proj_with_mqa"):
        return None
    return LatentShape(
        kv_lora_rank=int(module.kv_lora_rank),
        rope_dim=int(module.qk_rope_head_dim),
        nope_dim=int(module.qk_nope_head_dim),
        v_head_dim=int(module.v_head_dim),
    )


def split_scores(
    q: Float[torch.Tensor, "head_index query_pos d_qk"],
    k: Float[torch.Tensor, "head_index key_pos d_qk"],
    nope_dim: int,
    scale: float,
) -> tuple[
    Float[torch.Tensor, "head_index query_pos key_pos"],
    Float[torch.Tensor, "head_index query_pos key_pos"],
]:
    """The content (unrotated) and RoPE parts of every score; their sum is the score.

    Args:
        q, k: queries and keys as the softmax sees them (content part first, rotated part last).
        nope_dim: width of the content part.
        scale: the layer's logit scale.
    """
    content = torch.einsum("hqd,hkd->hqk", q[..., :nope_dim], k[..., :nope_dim]) * scale
    rope = torch.einsum("hqd,hkd->hqk", q[..., nope_dim:], k[..., nope_dim:]) * scale
    return content, rope
