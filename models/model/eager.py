"""The model run by transformers' own code with its own eager attention: the reference pass.

The bridge re-implements every attention layer so that its hooks can show the pattern; this
module runs the model as transformers itself does, through each architecture's own
``eager_attention_forward`` (which adds gpt-oss's sinks, Gemma 2's soft-cap, sliding windows),
and records what a check needs: each layer's values, its eager weights when asked, the input
of its output projection (the head outputs after any gate) and that projection's output.
Linear-attention layers run untouched. The view shares every parameter with the loaded model
(:func:`models.model.plain.attention_view`) and takes no lock (it adds no hooks to the bridge).

Two uses: the fidelity of a capture (do the patterns shown, times these values, through the
output projection, give this output?) and the once-per-model comparison of the bridge's logits
with transformers'.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from models.model.handle import ModelHandle
from models.model.plain import attention_view

IMPLEMENTATION = "atlas_eager"
PROJECTIONS = ("o_proj", "c_proj", "out_proj", "dense")
_local = threading.local()


@dataclass
class EagerLayer:
    """What one softmax layer computed in the reference pass (batch dimension kept).

    Attributes:
        value: ``batch kv_head_index key_pos d_v`` values as the attention received them.
        weights: ``batch head_index query_pos key_pos`` eager weights (only when asked).
        z: ``batch pos head_index*d_v`` the output projection's input (after any gate).
        out: ``batch pos d_model`` the output projection's output.
        projection: the output projection module itself (to send other head outputs through).
    """

    value: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    z: torch.Tensor | None = None
    out: torch.Tensor | None = None
    projection: Any = field(default=None, repr=False)


def _own_eager(module: Any) -> Any:
    """The ``eager_attention_forward`` of the module's own modelling file (Llama's otherwise)."""
    found = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if found is None:
        from transformers.models.llama.modeling_llama import eager_attention_forward as found
    return found


def _attention(module: Any, query: Any, key: Any, value: Any, mask: Any, **kwargs: Any) -> Any:
    out, weights = _own_eager(module)(module, query, key, value, mask, **kwargs)
    layers = getattr(_local, "layers", None)
    idx = getattr(module, "layer_idx", None)
    if layers is not None and isinstance(idx, int):
        entry = layers.setdefault(idx, EagerLayer())
        entry.value = value.detach()
        if _local.keep_weights:
            entry.weights = weights.detach()
    return out, weights


def _projection(view: torch.nn.Module, attention: torch.nn.Module) -> Any:
    """The output projection that reads ``attention``'s merged heads: its own ``o_proj`` (or
    ``c_proj``, ``out_proj``, ``dense``), else its parent's ``output.dense`` (BERT)."""
    for name in PROJECTIONS:
        found = getattr(attention, name, None)
        if isinstance(found, torch.nn.Module):
            return found
    for parent in view.modules():
        if any(child is attention for child in parent.children()):
            dense = getattr(getattr(parent, "output", None), "dense", None)
            if isinstance(dense, torch.nn.Module):
                return dense
    return None


def _attention_modules(view: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """The view's modules that call the attention interface, by layer index."""
    found: dict[int, torch.nn.Module] = {}
    for module in view.modules():
        idx = getattr(module, "layer_idx", None)
        calls = hasattr(module, "num_key_value_groups") or hasattr(module, "scaling")
        if isinstance(idx, int) and hasattr(module, "config") and idx not in found and calls:
            found[idx] = module
    return found


def _keeper(idx: int) -> Any:
    """A forward hook of layer ``idx``'s output projection: its input and output, into the
    calling thread's record (nothing when no reference pass runs in this thread)."""

    def keep(_module: Any, args: Any, out: Any) -> None:
        layers = getattr(_local, "layers", None)
        if layers is not None:
            entry = layers.setdefault(idx, EagerLayer())
            entry.z, entry.out = args[0].detach(), out.detach()

    return keep


def eager_view(model: ModelHandle) -> tuple[torch.nn.Module, dict[int, Any]]:
    """The bridge-free view of ``model`` whose attention is its own eager code, and each softmax
    layer's output projection in it (built once; the hooks stay on the view's own copies)."""
    key = "eager_projections"
    view = attention_view(model, IMPLEMENTATION, _attention, mask="eager")
    if key not in model.memo:
        projections = {}
        for idx, module in _attention_modules(view).items():
            projection = _projection(view, module)
            if projection is not None:
                projection.register_forward_hook(_keeper(idx))
                projections[idx] = projection
        model.memo[key] = projections
    return view, model.memo[key]


def run_eager(
    model: ModelHandle, ids: torch.Tensor, keep_weights: bool = False
) -> tuple[torch.Tensor, dict[int, EagerLayer]]:
    """One forward pass of the reference view (no lock: the record is per thread).

    Args:
        model: the loaded model.
        ids: ``batch pos`` token ids.
        keep_weights: also keep every layer's eager weights (``n_heads * pos^2`` each).

    Returns:
        The logits (an encoder: its first output) and, per softmax layer that called the
        attention interface and has an output projection, what it computed.
    """
    view, projections = eager_view(model)
    layers: dict[int, EagerLayer] = {}
    _local.layers, _local.keep_weights = layers, keep_weights
    device = next(view.parameters()).device
    try:
        with torch.no_grad():
            extra: dict[str, Any] = {"use_cache": False} if model.facts.causal else {}
            out = view(input_ids=ids.to(device), **extra)
    finally:
        _local.layers = None
    logits = out[0] if isinstance(out, tuple) else getattr(out, "logits", None)
    if logits is None:
        logits = out[0]
    for idx, entry in layers.items():
        entry.projection = projections.get(idx)
    return logits, {
        idx: entry
        for idx, entry in layers.items()
        if entry.value is not None and entry.z is not None and entry.projection is not None
    }
