"""The KV cache in bytes: the formula for the loaded model and for the same model with one
key/value head per query head (MHA) or one in all (MQA), and the size of a real cache object.

``bytes = 2 (K and V) * layers * key/value heads * d_head * bytes per element * tokens``, batch 1
(:func:`models.classroom.costs.kv_cache_bytes`, the classroom's calculator). A cache whose layers
keep a sliding window holds fewer tokens than the text on those layers; the formula is the
full-attention size.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
from jaxtyping import Int

from models.classroom.costs import AttentionConfig, kv_cache_bytes
from models.model.facts import ModelFacts

Sharing = Literal["model", "MHA", "MQA"]
SHARINGS: tuple[str, ...] = get_args(Sharing)


def kv_heads(facts: ModelFacts, sharing: Sharing) -> int:
    """Key/value heads under ``sharing``: the model's own, one per query head, or one."""
    return {"model": facts.n_kv_heads, "MHA": facts.n_heads, "MQA": 1}[sharing]


def attention_config(facts: ModelFacts, sharing: Sharing = "model") -> AttentionConfig:
    return AttentionConfig(
        n_layers=facts.n_layers,
        d_model=facts.d_model,
        n_heads=facts.n_heads,
        n_kv_heads=kv_heads(facts, sharing),
        d_head=facts.d_head,
    )


def kv_bytes_per_token(
    facts: ModelFacts, bytes_per_element: int, sharing: Sharing = "model"
) -> int:
    """Cache bytes each token adds: ``2 * layers * kv_heads * d_head * bytes_per_element``."""
    return int(
        kv_cache_bytes(1, attention_config(facts, sharing), bytes_per_element=bytes_per_element)
    )


def kv_growth(
    facts: ModelFacts, lengths: Int[np.ndarray, " n"], bytes_per_element: int
) -> dict[str, np.ndarray]:
    """Cache bytes at each length in ``lengths`` for each sharing in :data:`SHARINGS`."""
    lengths = np.asarray(lengths, dtype=np.int64)
    sharings: tuple[Sharing, ...] = ("model", "MHA", "MQA")
    return {
        sharing: np.asarray(
            kv_cache_bytes(
                lengths, attention_config(facts, sharing), bytes_per_element=bytes_per_element
            ),
            dtype=np.float64,
        )
        for sharing in sharings
    }


def cache_nbytes(cache: Any) -> int:
    """Bytes held by the key and value tensors of a transformers ``Cache`` (``cache.layers``,
    each with ``keys`` / ``values``; uninitialised layers count 0)."""
    total = 0
    for layer in getattr(cache, "layers", ()):
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if tensor is not None:
                total += tensor.numel() * tensor.element_size()
    return int(total)


def cache_length(cache: Any) -> int:
    """Tokens the cache holds (layer 0)."""
    return int(cache.get_seq_length())
