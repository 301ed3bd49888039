"""The model view generation and eviction run through: the model's own Hugging Face modules
(shared weights, no bridge hooks) whose attention calls a handler set for the current thread.

Why not the bridge: TransformerLens re-implements attention eagerly and fires hooks on every
step; writing one token at a time through it is several times slower than the model itself.
Why not ``bridge.original_model``: its modules are the bridge's wrappers. This view (built by
:func:`models.model.plain.attention_view`) is the model as transformers runs it, with the KV
cache passed as ``past_key_values``; the attention of every layer goes through :func:`dispatch`,
which calls the thread's handler (a row recorder, an eviction policy) or plain SDPA when none is
set. No lock is needed: nothing is written into the shared modules, and the handler is per
thread and set only for the duration of one call (see :func:`handling`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from models.model.handle import ModelHandle
from models.model.plain import attention_view

IMPLEMENTATION = "atlas_generate"
Handler = Callable[..., tuple[torch.Tensor, Any]]
_local = threading.local()

# Attention keyword arguments SDPA cannot compute: the model's own eager attention runs then.
EAGER_KWARGS = ("softcap", "s_aux", "sinks")


def sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers' own SDPA attention (what ``generate`` runs by default)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def learned_sinks(kwargs: dict[str, Any], device: torch.device) -> torch.Tensor | None:
    """Each head's learned sink logit, float32 on ``device``, as the model passes it to its
    attention (gpt-oss: ``s_aux``), or None for a model without learned sinks."""
    found = kwargs.get("s_aux", kwargs.get("sinks"))
    return None if found is None else found.detach().to(device, torch.float32)


def model_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """The layer's output as the model computes it: transformers' SDPA, or, for terms SDPA
    lacks (a logit soft-cap, learned sinks), the model's own eager attention from its modelling
    module, given an additive mask (the causal and window mask it would have built)."""
    if not any(kwargs.get(name) is not None for name in EAGER_KWARGS):
        return sdpa(module, query, key, value, attention_mask, **kwargs)
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise RuntimeError(f"{type(module).__name__} has no eager attention to run")
    n_q, n_keys = query.shape[2], key.shape[2]
    if attention_mask is None:  # SDPA's "causal, no mask needed": build it
        key_pos = torch.arange(n_keys, device=query.device)
        query_pos = key_pos[n_keys - n_q :, None]
        allowed = key_pos[None] <= query_pos
        if kwargs.get("sliding_window"):
            allowed &= key_pos[None] > query_pos - int(kwargs["sliding_window"])
        attention_mask = allowed[None, None]
    if attention_mask.dtype == torch.bool:
        blocked = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device)
        attention_mask = blocked.masked_fill(~attention_mask, torch.finfo(query.dtype).min)
    out: tuple[torch.Tensor, Any] = eager(module, query, key, value, attention_mask, **kwargs)
    return out


def dispatch(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """The registered attention: the thread's handler, or SDPA when none is set."""
    handler = getattr(_local, "handler", None)
    if handler is None:
        return model_attention(module, query, key, value, attention_mask, **kwargs)
    out: tuple[torch.Tensor, Any] = handler(module, query, key, value, attention_mask, **kwargs)
    return out


def model_view(model: ModelHandle) -> Any:
    """The causal-LM view of ``model`` (a transformers ``PreTrainedModel``) whose attention
    goes through :func:`dispatch`."""
    return attention_view(model, IMPLEMENTATION, dispatch)


def view_device(view: torch.nn.Module) -> torch.device:
    return next(view.parameters()).device


@contextmanager
def handling(handler: Handler | None) -> Iterator[None]:
    """Route this thread's attention calls to ``handler`` for the ``with`` block only."""
    before = getattr(_local, "handler", None)
    _local.handler = handler
    try:
        yield
    finally:
        _local.handler = before


def layer_index(module: torch.nn.Module) -> int:
    """The attention module's layer index (every decoder transformers ships sets it)."""
    idx = getattr(module, "layer_idx", None)
    if not isinstance(idx, int):
        raise RuntimeError(f"{type(module).__name__} has no layer_idx")
    return idx


def grouped_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``head_index query_pos key_pos`` dot products of ``head_index query_pos d_head`` queries
    with ``kv_head_index key_pos d_head`` keys, each query head against its shared key head."""
    n_heads, n_q, d_head = query.shape
    n_kv = key.shape[0]
    grouped = query.reshape(n_kv, -1, d_head)  # (kv, group * q, d)
    return torch.matmul(grouped, key.transpose(1, 2)).reshape(n_heads, n_q, -1)


def mask_is_causal_window(
    mask: torch.Tensor, n_keys: int, window: int | None, rows: tuple[int, ...] = (-1,)
) -> bool:
    """Whether ``rows`` of the model's ``batch 1|head query_pos key_pos`` attention mask (boolean,
    or additive with a large negative for blocked keys; the queries are the last positions)
    allow exactly the causal keys within the sliding window: the only masks the handlers model.
    """
    n_q = mask.shape[-2]
    key_pos = torch.arange(n_keys, device=mask.device)
    for r in rows:
        row = mask[0, :, r % n_q, :n_keys]
        allowed = row if row.dtype == torch.bool else row > torch.finfo(row.dtype).min / 2
        query_pos = n_keys - n_q + r % n_q
        want = key_pos <= query_pos
        if window:
            want &= key_pos > query_pos - int(window)
        if not bool((allowed == want[None]).all()):
            return False
    return True
