"""The capture of a model whose layers are not all plain softmax: one pass through the bridge.

Each layer is read as :func:`models.model.variants.layer_variants` describes it:

- a softmax layer's pattern whole (``hook_pattern``: for learned sinks, the rows without the
  sink, as the model multiplies them with its values);
- a layer with learned sinks: each row's log-sum-exp of its logits, reduced in the hook, and
  from it and the sink logit each row's weight on the sink;
- a gated layer: the gate logits, kept as ``sigmoid(g)`` per head, query and dimension;
- a linear-attention layer: q, k, decay and beta, from which its exact mixing matrix is built,
  and its values and output, kept only for the fidelity check;
- a latent-attention layer: its queries and keys, for the split of each score.

The fused and factored paths never see these models: they would not compute the same thing.

When the bridge disagrees with transformers on the model's logits (see
:mod:`models.model.parity`), :func:`capture_reference` takes every softmax pattern from
transformers' own eager pass instead (a learned sink's weight is then one minus the row's sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np
import torch

from models.capture.extras import RunExtras
from models.capture.store import DensePatterns, read_only
from models.model.eager import run_eager
from models.model.forward import (
    LinearHook,
    k_hook,
    linear_hook,
    pattern_hook,
    q_gate_hook,
    q_hook,
    run_with_hooks,
    scores_hook,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales
from models.model.variants import LayerVariant, layer_variants
from models.model.variants.gates import gate_values
from models.model.variants.layers import layer_sink_logits
from models.model.variants.linear import mixing_matrix
from models.model.variants.sinks import sink_weights
from models.shapes import TokenIds

LINEAR_INPUTS: tuple[LinearHook, ...] = get_args(LinearHook)


@dataclass
class Kept:
    """What the hooks of one pass keep, by layer (first sequence, CPU, float32)."""

    patterns: dict[int, torch.Tensor] = field(default_factory=dict)
    lse: dict[int, torch.Tensor] = field(default_factory=dict)
    gates: dict[int, torch.Tensor] = field(default_factory=dict)
    linear: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)
    latent: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)


def _first(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach()[0].to("cpu", torch.float32)


def _hooks(layer: int, variant: LayerVariant, kept: Kept) -> list[tuple[str, Any]]:
    """The hooks that read one layer as its variant says."""

    def store(into: dict[Any, Any], key: Any, name: str | None = None) -> Any:
        def hook(tensor: torch.Tensor, hook: Any) -> None:
            if name is None:
                into[key] = _first(tensor)
            else:
                into.setdefault(key, {})[name] = _first(tensor)

        return hook

    def row_lse(tensor: torch.Tensor, hook: Any) -> None:
        kept.lse[layer] = torch.logsumexp(_first(tensor), dim=-1)

    if variant.kind == "linear":
        return [(linear_hook(layer, n), store(kept.linear, layer, n)) for n in LINEAR_INPUTS]
    hooks = [(pattern_hook(layer), store(kept.patterns, layer))]
    if variant.sinks:
        hooks.append((scores_hook(layer), row_lse))
    if variant.gated:
        hooks.append((q_gate_hook(layer), store(kept.gates, layer)))
    if variant.latent is not None:
        hooks += [(q_hook(layer), store(kept.latent, layer, "q"))]
        hooks += [(k_hook(layer), store(kept.latent, layer, "k"))]
    return hooks


@dataclass(frozen=True)
class VariantCapture:
    """A variant model's patterns and extras, and what the fidelity check of its linear layers
    needs (values and outputs; not kept in the run)."""

    store: DensePatterns
    extras: RunExtras
    linear_io: dict[int, tuple[torch.Tensor, torch.Tensor]]


def capture_variants(model: ModelHandle, ids: TokenIds) -> VariantCapture:
    """Every layer of ``ids`` read as its variant says, in one bridge pass.

    Args:
        model: a loaded model whose layers are not all plain softmax.
        ids: ``1 pos`` token ids.
    """
    layers = layer_variants(model)
    kept = Kept()
    hooks = [hook for i, v in enumerate(layers) for hook in _hooks(i, v, kept)]
    run_with_hooks(model, ids, hooks, return_type=None)
    n, n_heads = int(ids.shape[1]), model.facts.n_heads
    stack = np.zeros((len(layers), n_heads, n, n), dtype=np.float32)
    for layer, pattern in kept.patterns.items():
        stack[layer] = pattern.numpy()
    extras = RunExtras(layers=layers, scales=dict(enumerate(layer_scales(model)[0])))
    for layer, lse in kept.lse.items():
        logits = layer_sink_logits(model, layer)
        extras.sink_logits[layer] = read_only(logits.numpy())
        extras.sinks[layer] = read_only(sink_weights(lse, logits).numpy())
    for layer, logits in kept.gates.items():
        extras.gates[layer] = read_only(gate_values(logits, n_heads).numpy())
    linear_io = {}
    for layer, acts in kept.linear.items():
        m = mixing_matrix(acts["hook_q"], acts["hook_k"], acts["hook_log_decay"], acts["hook_beta"])
        extras.mixing[layer] = read_only(m.numpy())
        linear_io[layer] = (acts["hook_v"], acts["hook_recurrence_out"])
    for layer, acts in kept.latent.items():
        extras.latent_qk[layer] = (read_only(acts["q"].numpy()), read_only(acts["k"].numpy()))
    return VariantCapture(DensePatterns(read_only(stack)), extras, linear_io)


def capture_reference(model: ModelHandle, ids: TokenIds) -> VariantCapture:
    """Like :func:`capture_variants`, every softmax pattern from transformers' eager pass.

    Gates, mixing matrices and latent queries still come from the bridge's inner hooks (the
    fidelity check then tells whether they reproduce the model's output).
    """
    found = capture_variants(model, ids)
    _, reference = run_eager(model, ids, keep_weights=True)
    stack = np.array(found.store.stack)
    for layer, entry in reference.items():
        if entry.weights is not None and found.extras.layers[layer].softmax:
            stack[layer] = entry.weights[0].to("cpu", torch.float32).numpy()
    extras = found.extras
    for layer in extras.sinks:
        extras.sinks[layer] = read_only(1.0 - stack[layer].sum(axis=-1, dtype=np.float64))
    return VariantCapture(DensePatterns(read_only(stack)), extras, found.linear_io)
