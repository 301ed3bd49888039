"""The weights attribution reads from a loaded model: each head's output projection, the
unembedding's columns and the final norm, as the bridge holds them (float64, on CPU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Float

from models.model.loading import LoadedModel


@dataclass(frozen=True)
class FinalNorm:
    """The final norm before the unembedding: ``x -> (x - mean if centring) / scale * w + b``.

    ``kind`` is ``"layernorm"`` (centre, then divide by the standard deviation) or ``"rmsnorm"``
    (divide by the root mean square); ``weight``/``bias`` are ``d_model`` float64 (``bias``
    zeros when the norm has none); ``weight`` already includes Gemma's ``1 +``.
    """

    kind: Literal["layernorm", "rmsnorm"]
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float


def output_projection(
    model: LoadedModel, layer: int
) -> tuple[Float[torch.Tensor, "head_index d_head d_model"], Float[torch.Tensor, " d_model"]]:
    """Layer ``layer``'s output projection per head, as the bridge holds it.

    Returns:
        ``head_index d_head d_model`` W_O and ``d_model`` b_O (zeros when bias-free), float64
        on CPU.
    """
    attn = model.bridge.blocks[layer].attn
    w_o = attn.W_O.detach().to("cpu", torch.float64)
    try:
        b_o = attn.b_O.detach().to("cpu", torch.float64)
    except AttributeError:  # the bridge raises for a bias-free projection
        b_o = torch.zeros(w_o.shape[-1], dtype=torch.float64)
    return w_o, b_o


def unembedding_columns(
    model: LoadedModel, token_ids: Sequence[int]
) -> tuple[Float[torch.Tensor, "d_model n_ids"], Float[torch.Tensor, " n_ids"]]:
    """The unembedding's columns and biases for ``token_ids``.

    Returns:
        ``d_model n_ids`` W_U columns and ``n_ids`` b_U (zeros when bias-free), float64 on CPU.
    """
    unembed = model.bridge.unembed
    idx = torch.tensor(list(token_ids), dtype=torch.long)
    w_u = unembed.W_U.detach()[:, idx.to(unembed.W_U.device)].to("cpu", torch.float64)
    b_u = getattr(unembed, "b_U", None)
    b_u = (
        b_u.detach()[idx.to(b_u.device)].to("cpu", torch.float64)
        if b_u is not None
        else torch.zeros(len(idx), dtype=torch.float64)
    )
    return w_u, b_u


def vocab_size(model: LoadedModel) -> int:
    """How many logits the model outputs per position."""
    return int(model.bridge.cfg.d_vocab)


def final_norm(model: LoadedModel) -> FinalNorm:
    """The final norm's kind, weight, bias and epsilon, read off the Hugging Face module.

    Raises:
        ValueError: the model has no final norm of a kind handled here.
    """
    module = getattr(model.bridge.ln_final, "original_component", None)
    name = type(module).__name__
    weight = getattr(module, "weight", None)
    if module is None or weight is None:
        raise ValueError(f"no final norm with a weight on {model.facts.name} ({name})")
    d_model = weight.shape[-1]
    weight = weight.detach().to("cpu", torch.float64)
    if "Gemma" in name:
        weight = weight + 1.0
    bias = getattr(module, "bias", None)
    bias = (
        bias.detach().to("cpu", torch.float64)
        if bias is not None
        else torch.zeros(d_model, dtype=torch.float64)
    )
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    kind: Literal["layernorm", "rmsnorm"]
    if isinstance(module, torch.nn.LayerNorm):
        kind = "layernorm"
    elif "RMS" in name.upper():
        kind = "rmsnorm"
    else:
        raise ValueError(
            f"the final norm of {model.facts.name} is a {name}, neither LayerNorm nor RMSNorm"
        )
    return FinalNorm(kind=kind, weight=weight, bias=bias, eps=float(eps or 0.0))
