"""What each layer of a loaded model computes, read once from its own modules.

Every capability asks :func:`layer_variants` (never the architecture's name): whether a layer is
a softmax over every earlier key, a sliding window, or a linear-attention layer with no softmax
at all; and which extras join its softmax (learned sinks, a soft-cap, an output gate, a latent
key/value compression). Each extra is described in its own module beside this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from jaxtyping import Float

from models.model.handle import ModelHandle
from models.model.loading import bridge_of
from models.model.softmax_terms import windows_from_config
from models.model.variants.gates import is_gated
from models.model.variants.latent import LatentShape, latent_shape
from models.model.variants.linear import is_delta_rule, value_heads
from models.model.variants.sinks import sink_logits
from models.model.variants.windows import module_softcap

AttentionKind = Literal["softmax", "sliding", "linear"]


@dataclass(frozen=True)
class LayerVariant:
    """One layer's attention, as the model computes it.

    Attributes:
        kind: ``softmax`` (every visible key), ``sliding`` (a softmax over the last ``window``
            keys) or ``linear`` (a Gated DeltaNet layer: a signed mixing matrix, no softmax).
        n_heads: heads with a pattern (a linear layer: its value heads, each with a matrix).
        window: the sliding window's width (``sliding`` only).
        softcap: the logit soft-cap ``c`` in ``c * tanh(s / c)``, or None.
        sinks: whether each head has a learned sink logit in its softmax.
        gated: whether each head's output passes through a sigmoid gate.
        latent: the latent sizes of multi-head latent attention, or None.
    """

    kind: AttentionKind
    n_heads: int
    window: int | None = None
    softcap: float | None = None
    sinks: bool = False
    gated: bool = False
    latent: LatentShape | None = None

    @property
    def softmax(self) -> bool:
        """Whether the layer has a softmax pattern (``softmax`` or ``sliding``)."""
        return self.kind != "linear"

    @property
    def plain(self) -> bool:
        """A softmax over every visible key with nothing added (what the app always drew)."""
        return self.kind == "softmax" and not (
            self.softcap or self.sinks or self.gated or self.latent
        )

    def mark(self) -> str:
        """A few letters for the layer's row of the head grid: ``G`` (global), ``W4096``
        (a sliding window of 4,096 keys) or ``lin`` (linear attention)."""
        if self.kind == "linear":
            return "lin"
        return f"W{self.window}" if self.kind == "sliding" and self.window else "G"

    def describe(self) -> str:
        """A few words for the page: ``global``, ``sliding window 4,096``, ``linear attention``,
        with the extras after them."""
        base = {
            "softmax": "global",
            "sliding": f"sliding window {self.window:,}" if self.window else "sliding window",
            "linear": "linear attention (Gated DeltaNet)",
        }[self.kind]
        extras = [
            f"logits capped at ±{self.softcap:g}" if self.softcap else "",
            "learned sinks" if self.sinks else "",
            "output gate" if self.gated else "",
            "latent key/value" if self.latent else "",
        ]
        return ", ".join([base, *[extra for extra in extras if extra]])


def hf_modules_by_layer(model: ModelHandle) -> dict[int, list[Any]]:
    """The model's own (Hugging Face) modules that carry a ``layer_idx``, grouped by it; the
    bridge's wrappers around them are skipped."""
    found: dict[int, list[Any]] = {}
    for module in bridge_of(model).original_model.modules():
        idx = getattr(module, "layer_idx", None)
        if isinstance(idx, int) and getattr(module, "_original_component", None) is None:
            found.setdefault(idx, []).append(module)
    return found


def _variant(modules: list[Any], config: Any, window: int | None, n_heads: int) -> LayerVariant:
    linear = next((m for m in modules if is_delta_rule(m)), None)
    if linear is not None:
        return LayerVariant(kind="linear", n_heads=value_heads(linear))
    return LayerVariant(
        kind="sliding" if window else "softmax",
        n_heads=n_heads,
        window=window,
        softcap=next((c for m in modules if (c := module_softcap(m, config))), None),
        sinks=any(sink_logits(m) is not None for m in modules),
        gated=any(is_gated(m, config) for m in modules),
        latent=next((s for m in modules if (s := latent_shape(m))), None),
    )


def layer_variants(model: ModelHandle) -> tuple[LayerVariant, ...]:
    """Each layer's :class:`LayerVariant` (read once per model, then kept in its memo)."""
    if "layer_variants" not in model.memo:
        config = getattr(bridge_of(model).original_model, "config", None)
        n_layers = model.facts.n_layers
        windows = windows_from_config(config, n_layers)
        modules = hf_modules_by_layer(model)
        model.memo["layer_variants"] = tuple(
            _variant(modules.get(layer, []), config, windows[layer], model.facts.n_heads)
            for layer in range(n_layers)
        )
    found: tuple[LayerVariant, ...] = model.memo["layer_variants"]
    return found


def all_plain(variants: tuple[LayerVariant, ...]) -> bool:
    """Whether every layer is a plain softmax (the app's original, unchanged path)."""
    return all(layer.plain for layer in variants)


def layer_sink_logits(model: ModelHandle, layer: int) -> Any:
    """``head_index`` sink logits of one layer (None when it has no learned sinks)."""
    for module in hf_modules_by_layer(model).get(layer, []):
        found = sink_logits(module)
        if found is not None:
            return found
    return None


def sink_logit_grid(model: ModelHandle) -> Float[np.ndarray, "layer head_index"] | None:
    """Every head's learned sink logit (NaN in a layer without sinks), or None when no layer
    has learned sinks."""
    variants = layer_variants(model)
    if not any(layer.sinks for layer in variants):
        return None
    grid = np.full((len(variants), model.facts.n_heads), np.nan)
    for layer, variant in enumerate(variants):
        found = layer_sink_logits(model, layer) if variant.sinks else None
        if found is not None:
            grid[layer, : found.shape[0]] = found.numpy()
    return grid
