"""The KV cache in bytes: the formula for the loaded model and for the same model with one
key/value head per query head (MHA) or one in all (MQA), and the size of a real cache object.

``bytes = 2 (K and V) * layers * key/value heads * d_head * bytes per element * tokens``, batch 1
(:func:`models.classroom.costs.kv_cache_bytes`, the classroom's calculator), for a model whose
layers all attend to every earlier token. Where layers differ (:func:`layered_kv_bytes`), only
global layers grow with the text: a sliding layer keeps its last ``window - 1`` tokens between
steps (the next token's own key makes the window), a linear-attention layer keeps a fixed-size
state and no keys or values, and a latent-attention layer caches its compressed latent and
shared rotated key (``kv_lora_rank + rope_dim`` numbers a token) instead of per-head keys and
values.

:func:`reserved_cache` is the cache generation writes into: each full-attention layer's keys and
values live in one buffer sized for the whole text, so writing a token costs no new tensor.
transformers' own ``DynamicCache`` concatenates a layer's whole cache with each token, and the
C allocator, handed a block a little larger than the one just freed at every step, fragments
its heap: on SmolLM2 after a 3,900-token prompt the process grew by about 1.7 MiB per written
token that way, with the cache itself growing by 45 KiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
from jaxtyping import Float, Int

from models.classroom.costs import AttentionConfig, kv_cache_bytes
from models.model.facts import ModelFacts
from models.model.variants import LayerVariant, all_plain

Sharing = Literal["model", "MHA", "MQA"]
SHARINGS: tuple[Sharing, ...] = get_args(Sharing)


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
    facts: ModelFacts,
    lengths: Int[np.ndarray, " n"],
    bytes_per_element: int,
    layers: Sequence[LayerVariant] | None = None,
) -> dict[str, np.ndarray]:
    """Cache bytes at each length in ``lengths`` for each sharing in :data:`SHARINGS`; with
    ``layers`` (when they are not all plain), layer by layer (:func:`layered_kv_bytes`)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    sharings: tuple[Sharing, ...] = ("model", "MHA", "MQA")
    if layers is not None and not all_plain(tuple(layers)):
        return {
            sharing: layered_kv_bytes(facts, layers, lengths, bytes_per_element, sharing)
            for sharing in sharings
        }
    return {
        sharing: np.asarray(
            kv_cache_bytes(
                lengths, attention_config(facts, sharing), bytes_per_element=bytes_per_element
            ),
            dtype=np.float64,
        )
        for sharing in sharings
    }


def held_tokens(layer: LayerVariant, n_tokens: Int[np.ndarray, " n"]) -> np.ndarray:
    """Tokens a layer's cache holds after ``n_tokens`` (between steps, as transformers keeps
    it): every one on a global layer, the last ``window - 1`` on a sliding one, none on a
    linear-attention layer."""
    n = np.asarray(n_tokens, dtype=np.float64)
    if not layer.softmax:
        return np.zeros_like(n)
    if layer.kind == "sliding" and layer.window:
        return np.minimum(n, layer.window - 1)
    return n


def layer_bytes_per_token(
    facts: ModelFacts, layer: LayerVariant, bytes_per_element: int, sharing: Sharing = "model"
) -> int:
    """Bytes one held token takes in one layer's cache: ``2 * kv_heads * d_head`` numbers, or
    a latent layer's ``kv_lora_rank + rope_dim`` (this model only: MHA and MQA are the
    per-head alternatives)."""
    if layer.latent is not None and sharing == "model":
        return layer.latent.cached_per_token * bytes_per_element
    return 2 * kv_heads(facts, sharing) * facts.d_head * bytes_per_element


def layered_kv_bytes(
    facts: ModelFacts,
    layers: Sequence[LayerVariant],
    lengths: Int[np.ndarray, " n"],
    bytes_per_element: int,
    sharing: Sharing = "model",
) -> Float[np.ndarray, " n"]:
    """Cache bytes at each length, layer by layer (see the module docstring)."""
    total = np.zeros(np.shape(lengths), dtype=np.float64)
    for layer in layers:
        per_token = layer_bytes_per_token(facts, layer, bytes_per_element, sharing)
        total += per_token * held_tokens(layer, lengths)
    return total


def growing_bytes_per_token(
    facts: ModelFacts,
    layers: Sequence[LayerVariant],
    bytes_per_element: int,
    sharing: Sharing = "model",
) -> int:
    """Bytes each token adds for good: the global layers' share (sliding and linear layers
    stop growing)."""
    return sum(
        layer_bytes_per_token(facts, layer, bytes_per_element, sharing)
        for layer in layers
        if layer.kind == "softmax"
    )


def reserved_cache(config: Any, capacity: int) -> Any:
    """A transformers ``DynamicCache`` for ``config`` whose full-attention layers write into one
    buffer of ``capacity`` positions each (allocated at the first write); sliding-window
    layers, which never hold more than their window, stay as transformers makes them."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """Keys and values as views ``[:length]`` of a buffer of ``capacity`` positions."""

        def __init__(self) -> None:
            DynamicLayer.__init__(self)

        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            super().lazy_initialization(key_states, value_states)
            self._length = 0
            shape = (*key_states.shape[:2], capacity, key_states.shape[-1])
            self._k = key_states.new_empty(shape)
            self._v = value_states.new_empty((*shape[:3], value_states.shape[-1]))

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            start, end = self._length, self._length + key_states.shape[-2]
            if end > self._k.shape[-2]:
                raise ValueError(f"the cache holds {self._k.shape[-2]} positions, not {end}")
            self._k[..., start:end, :] = key_states
            self._v[..., start:end, :] = value_states
            self._length = end
            self.keys, self.values = self._k[..., :end, :], self._v[..., :end, :]
            return self.keys, self.values

    cache = DynamicCache(config=config)
    cache.layers = [
        ReservedLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    return cache


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
