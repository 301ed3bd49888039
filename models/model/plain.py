"""The loaded model run without the bridge: its own Hugging Face modules, fused SDPA attention,
and a callback that sees every layer's q, k and v exactly as the softmax does.

TransformerLens's bridge re-implements attention eagerly so that its hooks can show the whole
pattern; on a 2,048-token prompt that is four to five times slower than the model's own fused
attention. This module builds a second view of the same model -- shallow copies of the original
modules, sharing every parameter tensor, so no memory is added -- whose attention goes through a
registered ``AttentionInterface`` entry: it calls transformers' SDPA implementation and hands the
callback the rotated q, k, v, the scale, the mask, and SDPA's own output (for a self-check).

A plain pass does not take the model's lock: it adds no hooks and writes nothing into the
modules (the callback is per thread), so a long capture here never makes a short request on the
bridge wait. Models whose attention does not use the interface (ALiBi bridges such as Bloom's)
simply never call back; the caller then falls back to the bridge.

The pass runs in the dtype the model was loaded in (bfloat16 runs bfloat16 SDPA; on the CPU the
kernel still returns float32 row statistics). :func:`run_plain_float32` runs the same view in
float32 arithmetic on the same weights, one module's weights upcast at a time, to measure what
the low-precision pass changed.
"""

from __future__ import annotations

import collections
import copy
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from models.model.handle import ModelHandle
from models.model.loading import bridge_of

IMPLEMENTATION = "atlas_sdpa"
_local = threading.local()
_register_lock = threading.Lock()


@dataclass(frozen=True)
class LayerAttention:
    """What one attention layer's softmax saw in a plain pass (batch dimension kept).

    Attributes:
        layer: the layer index.
        query: ``batch head_index query_pos d_head`` after any rotation.
        key, value: ``batch kv_head_index key_pos d_head``.
        output: ``batch head_index query_pos d_head``, SDPA's result (before the output projection).
        lse: ``batch head_index query_pos`` log-sum-exp of every row as the fused kernel
            computed it (CPU flash kernel), or None when another kernel ran.
        scale: the logit multiplier.
        causal: whether SDPA applied a causal mask (when ``mask`` is None).
        mask: ``batch 1|head query_pos key_pos`` boolean (True = may attend) or additive float
            mask, or None.
        window: a sliding-window width passed to the attention, or None.
    """

    layer: int
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    output: torch.Tensor
    lse: torch.Tensor | None
    scale: float
    causal: bool
    mask: torch.Tensor | None
    window: int | None


OnLayer = Callable[[LayerAttention], None]


def _attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, telling the pass's callback what it computed.

    On the CPU, with no extra mask, the flash kernel is called directly: it returns each row's
    log-sum-exp beside the output, so the capture gets the LSE for free.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    callback = getattr(_local, "callback", None)
    scale = kwargs.get("scaling")
    scale = float(query.shape[-1] ** -0.5 if scale is None else scale)
    causal = kwargs.get("is_causal")
    causal = bool(getattr(module, "is_causal", False) if causal is None else causal)
    causal = causal and query.shape[2] > 1 and attention_mask is None
    lse = None
    plain = (
        callback is not None
        and query.device.type == "cpu"
        and attention_mask is None
        and not kwargs.get("sliding_window")
        and kwargs.get("softcap") is None
        and not kwargs.get("dropout")
    )
    if plain:  # the kernel reads key head h // group for query head h (GQA, MQA): no copies
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, causal, scale=scale
        )
        out = out.transpose(1, 2).contiguous()
    else:
        out, _ = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if callback is not None:
        counter = _local.counter
        layer = getattr(module, "layer_idx", None)
        layer = counter[0] if layer is None else int(layer)
        counter[0] += 1
        callback(
            LayerAttention(
                layer=layer,
                query=query,
                key=key,
                value=value,
                output=out.transpose(1, 2),
                lse=lse,
                scale=scale,
                causal=causal if attention_mask is None else False,
                mask=attention_mask,
                window=kwargs.get("sliding_window"),
            )
        )
    return out, None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    with _register_lock:
        if IMPLEMENTATION not in AttentionInterface._global_mapping:
            AttentionInterface.register(IMPLEMENTATION, _attention)
            AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


def _unwrapped(module: torch.nn.Module, config: Any) -> torch.nn.Module:
    """A shallow copy of the original module tree under ``module``, bridge wrappers removed."""
    base = getattr(module, "_original_component", None) or module
    plain = copy.copy(base)
    plain._modules = collections.OrderedDict(
        (name, _unwrapped(child, config))
        for name, child in base._modules.items()
        if child is not None and type(child).__name__ != "HookPoint"
    )
    for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
        setattr(plain, hooks, collections.OrderedDict())
    if hasattr(plain, "config"):
        plain.config = config
    return plain


def plain_model(model: ModelHandle) -> torch.nn.Module:
    """The bridge-free view of ``model`` (built once, shares every parameter)."""
    if "plain" not in model.memo:
        _register()
        original = bridge_of(model).original_model
        config = copy.deepcopy(original.config)
        config._attn_implementation = IMPLEMENTATION
        model.memo["plain"] = _unwrapped(original, config).eval()
    plain: torch.nn.Module = model.memo["plain"]
    return plain


def run_plain(
    model: ModelHandle, ids: torch.Tensor, on_layer: OnLayer, keep_logits: int = 1
) -> torch.Tensor:
    """One forward pass of the plain view; ``on_layer`` sees each layer (no lock: see above).

    Args:
        model: the loaded model.
        ids: ``batch pos`` token ids.
        on_layer: called with each attention layer's :class:`LayerAttention`.
        keep_logits: how many last positions get logits (0: all); a capture needs none.

    Returns:
        The model's output logits (or, for an encoder, its first output).
    """
    plain = plain_model(model)
    device = next(plain.parameters()).device
    _local.callback, _local.counter = on_layer, [0]
    try:
        with torch.no_grad():
            extra: dict[str, Any] = {"use_cache": False} if model.facts.causal else {}
            if "logits_to_keep" in inspect.signature(plain.forward).parameters:
                extra["logits_to_keep"] = keep_logits  # 8,192 x 49,152 logits are 1.6 GB
            out = plain(input_ids=ids.to(device), **extra)
    finally:
        _local.callback = None
    logits: torch.Tensor = out[0] if isinstance(out, tuple) else getattr(out, "logits", out[0])
    return logits


def _upcast(module: torch.nn.Module, _args: Any) -> None:
    """Forward pre-hook: this module's own parameters and buffers as float32 copies."""
    state = module.__dict__
    state["_kept"] = (module._parameters, module._buffers)
    state["_parameters"] = collections.OrderedDict(
        (name, None if p is None else p.detach().to(torch.float32) if p.is_floating_point() else p)
        for name, p in module._parameters.items()
    )
    state["_buffers"] = collections.OrderedDict(
        (name, b.to(torch.float32) if b is not None and b.is_floating_point() else b)
        for name, b in module._buffers.items()
    )


def _restore(module: torch.nn.Module, _args: Any, _out: Any) -> None:
    state = module.__dict__
    state["_parameters"], state["_buffers"] = state.pop("_kept")


def _rows_as_float32(_module: torch.nn.Module, _args: Any, out: torch.Tensor) -> torch.Tensor:
    """Forward hook of an embedding: the rows it looked up, as float32 (upcasting is exact, so
    this equals a lookup in the upcast table without copying the whole table)."""
    return out.to(torch.float32) if out.is_floating_point() else out


def _float32_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A shallow copy of ``module``'s tree whose modules each run on float32 copies of their own
    weights, made as they start and dropped as they end (one module's weights at a time; an
    embedding upcasts only the rows it looks up)."""
    twin = copy.copy(module)
    twin._modules = collections.OrderedDict(
        (name, _float32_copy(child)) for name, child in module._modules.items() if child is not None
    )
    for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
        setattr(twin, hooks, collections.OrderedDict())  # never the shared module's dicts
    if (
        isinstance(module, torch.nn.Embedding)
        and type(module).forward is torch.nn.Embedding.forward
    ):
        twin.register_forward_hook(_rows_as_float32)
    elif module._parameters or module._buffers:
        twin.register_forward_pre_hook(_upcast)
        twin.register_forward_hook(_restore)
    return twin


def run_plain_float32(model: ModelHandle, ids: torch.Tensor, on_layer: OnLayer) -> None:
    """:func:`run_plain` in float32 arithmetic on the same (possibly bfloat16) weights.

    Each module upcasts its own weights while it runs, so the extra memory is one module's
    weights in float32, never a second model; the embedding upcasts only the rows it looks up,
    and the output head is not run (the callback sees every attention layer, which is all this
    pass is for). Used to measure how far a low-precision pass lies from float32 on a short
    prefix.

    Args:
        model: the loaded model.
        ids: ``batch pos`` token ids.
        on_layer: called with each attention layer's :class:`LayerAttention` (float32 q, k).
    """
    plain = plain_model(model)
    # the layers only: no output head (for most models as large as the embedding) to upcast
    twin = _float32_copy(getattr(plain, "base_model", plain))
    device = next(plain.parameters()).device
    _local.callback, _local.counter = on_layer, [0]
    try:
        with torch.no_grad():
            extra: dict[str, Any] = {"use_cache": False} if model.facts.causal else {}
            twin(input_ids=ids.to(device), **extra)
    finally:
        _local.callback = None


def attention_view(
    model: ModelHandle,
    implementation: str,
    attention: Callable[..., Any],
    mask: Literal["sdpa", "eager"] = "sdpa",
) -> torch.nn.Module:
    """A bridge-free view like :func:`plain_model` whose attention layers call ``attention``.

    ``attention`` is registered once under ``implementation`` as a transformers
    ``AttentionInterface`` entry (same signature as SDPA's: module, query, key, value, mask,
    keyword arguments; returns output and weights). ``mask`` says which masks it takes: SDPA's
    (boolean, True = may attend) or eager attention's (additive floats). The view is built once
    per name and shares every parameter with the loaded model.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    key = f"view:{implementation}"
    if key not in model.memo:
        with _register_lock:
            if implementation not in AttentionInterface._global_mapping:
                AttentionInterface.register(implementation, attention)
                AttentionMaskInterface.register(
                    implementation, eager_mask if mask == "eager" else sdpa_mask
                )
        original = bridge_of(model).original_model
        config = copy.deepcopy(original.config)
        config._attn_implementation = implementation
        model.memo[key] = _unwrapped(original, config).eval()
    found: torch.nn.Module = model.memo[key]
    return found
