"""Direct logit attribution at the last position of the clean prompt.

The residual stream entering the final norm is a sum of parts: the token (and, with learned
positions, position) embeddings, every head's ``z^h W_O^h``, every attention output bias and
every MLP output. With the norm's scale ``s`` frozen at its clean-run value the norm is affine,
so the logit difference splits exactly::

    LD = sum_parts  centre(part) / s . (w * (W_U[:, answer] - W_U[:, wrong]))
         + b . (W_U[:, answer] - W_U[:, wrong]) + b_U[answer] - b_U[wrong]

(``centre`` only for LayerNorm, ``w``/``b`` the norm's weight and bias). The parts add up to the
model's own clean logit difference up to float rounding; :attr:`Attribution.residual_gap` says
how well the parts rebuild the residual itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.task import CircuitsUnavailable, Setup
from models.model.forward import (
    embed_hook,
    every_layer,
    final_norm_in_hook,
    mlp_out_hook,
    pos_embed_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.model.weights import final_norm, output_projection, unembedding_columns


@dataclass(frozen=True)
class Attribution:
    """Each part's share of the clean logit difference (float64).

    Attributes:
        heads: ``layer head_index`` direct effect of each head.
        attn_bias: ``layer`` effect of each attention output bias (0 when bias-free).
        mlps: ``layer`` effect of each MLP output.
        embed: token embeddings.
        pos_embed: learned position embeddings, ``None`` when the model has none.
        norm_bias: the final norm's bias.
        unembed_bias: ``b_U[answer] - b_U[wrong]``.
        logit_diff: the clean logit difference from the model's own logits.
        residual_gap: largest ``|residual - sum of its parts|`` at the last position.
        residual_norm: largest ``|residual|`` there, to judge the gap against.
        norm_kind: ``layernorm`` or ``rmsnorm``.
        scale: the final norm's divisor at the last position of the clean run.
    """

    heads: np.ndarray
    attn_bias: np.ndarray
    mlps: np.ndarray
    embed: float
    pos_embed: float | None
    norm_bias: float
    unembed_bias: float
    logit_diff: float
    residual_gap: float
    residual_norm: float
    norm_kind: str
    scale: float

    @property
    def total(self) -> float:
        """The sum of every part; equals :attr:`logit_diff` up to rounding."""
        return float(
            self.heads.sum()
            + self.attn_bias.sum()
            + self.mlps.sum()
            + self.embed
            + (self.pos_embed or 0.0)
            + self.norm_bias
            + self.unembed_bias
        )

    def parts(self) -> list[tuple[str, str, float]]:
        """``(group, part, value)`` rows: embeddings, heads summed per layer, biases, MLPs. A
        bias the model does not have (exactly 0: SmolLM2 has none) is left out, as a bar of
        nothing would only crowd the chart; the rows still add up to :attr:`total`."""
        rows = [("embeddings", "token embeddings", self.embed)]
        if self.pos_embed is not None:
            rows.append(("embeddings", "position embeddings", self.pos_embed))
        for layer in range(self.heads.shape[0]):
            rows.append(("heads", f"heads of layer {layer}", float(self.heads[layer].sum())))
            if self.attn_bias[layer] != 0.0:
                rows.append(("biases", f"attention bias {layer}", float(self.attn_bias[layer])))
            rows.append(("MLPs", f"MLP {layer}", float(self.mlps[layer])))
        if self.norm_bias != 0.0:
            rows.append(("biases", "final norm bias", self.norm_bias))
        if self.unembed_bias != 0.0:
            rows.append(("biases", "unembedding bias", self.unembed_bias))
        return rows


def learned_positions(model: ModelHandle) -> bool:
    """Whether position embeddings are added to the residual stream."""
    return model.facts.positional == "standard"


def attribution_hooks(model: ModelHandle) -> list[str]:
    """The activations :func:`attribute` reads from the clean run."""
    n_layers = model.facts.n_layers
    names = [embed_hook(), final_norm_in_hook()]
    if learned_positions(model):
        names.append(pos_embed_hook())
    return names + every_layer(z_hook, n_layers) + every_layer(mlp_out_hook, n_layers)


def readout(
    model: ModelHandle, setup: Setup, resid: torch.Tensor
) -> tuple[torch.Tensor, float, float, float, str]:
    """The direction that turns a residual part into its logit-difference share.

    Args:
        resid: ``d_model`` residual entering the final norm at the last position.

    Returns:
        ``(d_model direction, norm bias share, unembedding bias share, scale, norm kind)``; a
        part ``p`` contributes ``p . direction``.
    """
    try:
        norm = final_norm(model)
    except ValueError as err:
        raise CircuitsUnavailable(f"Direct logit attribution is not available: {err}.") from err
    w_u, b_u = unembedding_columns(model, [setup.answer_id, setup.wrong_id])
    diff = w_u[:, 0] - w_u[:, 1]
    direction = norm.weight * diff
    if norm.kind == "layernorm":
        resid = resid - resid.mean()
        direction = direction - direction.mean()  # p . centre(d) == centre(p) . d
    scale = float(torch.sqrt(resid.pow(2).mean() + norm.eps))
    return (direction / scale, float(norm.bias @ diff), float(b_u[0] - b_u[1]), scale, norm.kind)


def attribute(
    model: ModelHandle, setup: Setup, acts: dict[str, torch.Tensor], logit_diff: float
) -> Attribution:
    """Split the clean logit difference into the parts of the final residual.

    Args:
        model: the loaded model.
        setup: the task (answer and wrong token).
        acts: the clean run's activations named by :func:`attribution_hooks`, ``1 pos ...``.
        logit_diff: the clean logit difference from the model's logits.
    """
    last = {name: act[0, -1].to(torch.float64) for name, act in acts.items()}
    resid = last[final_norm_in_hook()]
    direction, norm_bias, unembed_bias, scale, kind = readout(model, setup, resid)
    n_layers, n_heads = model.facts.n_layers, model.facts.n_heads
    heads, attn_bias, mlps = np.zeros((n_layers, n_heads)), np.zeros(n_layers), np.zeros(n_layers)
    rebuilt = last[embed_hook()].clone()
    pos_share = None
    if learned_positions(model):
        rebuilt += last[pos_embed_hook()]
        pos_share = float(last[pos_embed_hook()] @ direction)
    for layer in range(n_layers):
        w_o, b_o = output_projection(model, layer)
        per_head = torch.einsum("hd,hdm->hm", last[z_hook(layer)], w_o)
        heads[layer] = (per_head @ direction).numpy()
        attn_bias[layer] = float(b_o @ direction)
        mlp = last[mlp_out_hook(layer)]
        mlps[layer] = float(mlp @ direction)
        rebuilt += per_head.sum(dim=0) + b_o + mlp
    return Attribution(
        heads=heads,
        attn_bias=attn_bias,
        mlps=mlps,
        embed=float(last[embed_hook()] @ direction),
        pos_embed=pos_share,
        norm_bias=norm_bias,
        unembed_bias=unembed_bias,
        logit_diff=float(logit_diff),
        residual_gap=float((resid - rebuilt).abs().max()),
        residual_norm=float(resid.abs().max()),
        norm_kind=kind,
        scale=scale,
    )
