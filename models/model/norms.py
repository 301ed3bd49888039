"""The norms on the residual stream's way into an attention score, read off a loaded model.

Each norm is described by what it computes, ``x -> (x - mean x if centring) / scale * weight +
bias`` with ``scale = sqrt(mean((x - mean)^2) + eps)`` (LayerNorm) or ``sqrt(mean(x^2) + eps)``
(RMSNorm). The description is checked against the module itself on a probe input before it is
returned, so a norm that computes something else (an offset weight such as Gemma's ``1 + w``
found from the probe, or a kind not handled here) never passes as one that does not.

Where the norms sit: :func:`block_norm` (a block's ``ln1``/``ln2``, Gemma's ``ln1_post`` /
``ln2_post``), :func:`embedding_norm` (BERT's and Bloom's norm over the embeddings) and
:func:`qk_norm` (QK-norm over each head's query or key, Qwen3 and Gemma 3). Nothing here runs
the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Float

from models.model.forward import NormSite
from models.model.handle import ModelHandle
from models.model.loading import bridge_of

NormKind = Literal["layernorm", "rmsnorm"]
PROBE_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4}  # relative; others: LOW_PRECISION
LOW_PRECISION = 2e-2


class NormUnknown(ValueError):
    """A norm module whose arithmetic is not a LayerNorm or an RMSNorm with a weight."""


@dataclass(frozen=True)
class Norm:
    """One norm's arithmetic (float64, CPU).

    Attributes:
        kind: ``layernorm`` (centres, then divides by the standard deviation) or ``rmsnorm``.
        weight: ``d`` gain as applied (Gemma's ``1 + w`` included).
        bias: ``d`` bias, ``None`` when the norm has none.
        eps: added under the square root.
    """

    kind: NormKind
    weight: Float[torch.Tensor, " d"]
    bias: Float[torch.Tensor, " d"] | None
    eps: float

    @property
    def centres(self) -> bool:
        return self.kind == "layernorm"

    def divisor(self, x: Float[torch.Tensor, "... d"]) -> Float[torch.Tensor, " ..."]:
        """What the norm divides each vector of ``x`` by (float64)."""
        x = x.to(torch.float64)
        if self.centres:
            x = x - x.mean(dim=-1, keepdim=True)
        return torch.sqrt(x.pow(2).mean(dim=-1) + self.eps)

    def apply(self, x: Float[torch.Tensor, "... d"]) -> Float[torch.Tensor, "... d"]:
        """The norm of ``x`` with its scale computed from ``x`` itself (float64)."""
        x = x.to(torch.float64)
        centred = x - x.mean(dim=-1, keepdim=True) if self.centres else x
        out = centred / self.divisor(x)[..., None] * self.weight
        return out if self.bias is None else out + self.bias


def _float64(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().to("cpu", torch.float64)


def read_norm(module: Any) -> Norm:
    """The arithmetic of a LayerNorm or RMSNorm module, checked on a probe input.

    Raises:
        NormUnknown: the module is neither, or its output matches neither reading of its weight.
    """
    weight = getattr(module, "weight", None)
    if weight is None:
        raise NormUnknown(f"{type(module).__name__} has no weight")
    kind: NormKind = "layernorm" if isinstance(module, torch.nn.LayerNorm) else "rmsnorm"
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    gain = weight.detach().to("cpu", torch.float64)
    bias = _float64(getattr(module, "bias", None)) if kind == "layernorm" else None
    generator = torch.Generator().manual_seed(0)
    probe = torch.randn(4, gain.shape[-1], generator=generator, dtype=torch.float64) * 3 + 1
    with torch.no_grad():
        seen = module(probe.to(weight.device, weight.dtype)).to("cpu", torch.float64)
    tolerance = PROBE_TOLERANCE.get(weight.dtype, LOW_PRECISION) * float(seen.abs().max())
    for candidate in (gain, gain + 1.0):
        norm = Norm(kind, candidate, bias, float(eps or 0.0))
        if (norm.apply(probe) - seen).abs().max() <= tolerance:
            return norm
    raise NormUnknown(f"{type(module).__name__} is not a {kind} this split can read")


def _original(component: Any) -> Any:
    return None if component is None else getattr(component, "original_component", component)


def block_norm(model: ModelHandle, layer: int, site: NormSite) -> Norm | None:
    """Block ``layer``'s norm at ``site``, or ``None`` when the block has none there."""
    module = _original(getattr(bridge_of(model).blocks[layer], site, None))
    return None if module is None else read_norm(module)


def embedding_norm(model: ModelHandle) -> Norm | None:
    """The norm over the embeddings before block 0 (BERT, Bloom), or ``None``."""
    module = _original(getattr(bridge_of(model), "embed_ln", None))
    return None if module is None else read_norm(module)


def qk_norm(model: ModelHandle, layer: int, which: Literal["q", "k", "v"]) -> Norm | None:
    """The norm over each head's query, key (QK-norm) or value in block ``layer``, or
    ``None``."""
    module = _original(getattr(bridge_of(model).blocks[layer].attn, f"{which}_norm", None))
    return None if module is None else read_norm(module)


def logit_softcap(model: ModelHandle) -> float | None:
    """The attention logit soft-cap ``c`` (``s -> c tanh(s / c)``, Gemma 2), or ``None``."""
    config = getattr(bridge_of(model).original_model, "config", None)
    cap = getattr(config, "attn_logit_softcapping", None)
    return float(cap) if cap else None
