"""Sliding windows and logit soft-caps, layer by layer.

A sliding layer with window ``w`` lets query ``i`` read keys ``j`` with ``i - w < j <= i``: the
last ``w`` tokens, itself included (Hugging Face's ``sliding_window`` convention). Its oldest
visible key, ``i - w + 1``, is the window's edge; weight piled there is attention the window cut
short. Only global layers' key/value caches grow with the prompt: a sliding layer keeps its last
``w - 1`` tokens between steps (:func:`models.generate.kv.held_tokens`).

Gemma 2 caps every logit before the softmax: ``s -> c * tanh(s / c)`` (``c = 50`` in its
attention), so no logit leaves ``(-c, c)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jaxtyping import Float


def module_softcap(module: Any, config: Any) -> float | None:
    """The logit soft-cap of an attention module (or of its configuration), or None."""
    for source in (module, config):
        cap = getattr(source, "attn_logit_softcapping", None)
        if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0:
            return float(cap)
    return None


def capped(scores: Float[torch.Tensor, "*any"], cap: float | None) -> Float[torch.Tensor, "*any"]:
    """``cap * tanh(scores / cap)``, or the scores unchanged when there is no cap."""
    return scores if cap is None else cap * torch.tanh(scores / cap)


def visible(query: int, key: int, window: int | None, causal: bool = True) -> bool:
    """Whether ``query`` reads ``key`` under this layer's mask."""
    if causal and key > query:
        return False
    return window is None or query - key < window


def window_edge(query: int, window: int | None) -> int | None:
    """The oldest key ``query`` still sees (``query - w + 1``), or None while the window has not
    cut anything yet (the query sees every earlier key)."""
    if window is None or query - window + 1 <= 0:
        return None
    return query - window + 1


def edge_weight(
    pattern: Float[np.ndarray, "*head query_pos key_pos"], window: int | None
) -> Float[np.ndarray, "*head"]:
    """Mean weight on the window's edge, ``A[i, i - w + 1]``, over the queries the window cuts
    (NaN when no query is cut: a short prompt, or no window)."""
    n = pattern.shape[-2]
    if window is None or n <= window:
        return np.full(pattern.shape[:-2], np.nan)
    queries = np.arange(window, n)
    edge: np.ndarray = np.asarray(pattern, dtype=np.float64)[..., queries, queries - window + 1]
    mean: np.ndarray = edge.mean(axis=-1)
    return mean
