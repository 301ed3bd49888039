"""Pruned weights: which heads go, how (removed or masked), and the parameters that leaves.

Transformers 5 has no ``prune_heads`` any more, and a checkpoint must load with the stock
classes, whose configuration holds one head count for the whole model:

- **GPT-2 and BERT** derive the head size from ``hidden_size / num_heads``, so no head can be
  removed: a pruned head is *masked*, its rows of the output projection (GPT-2 ``c_proj``,
  BERT ``attention.output.dense``) set to zero. The output bias stays, so the model computes
  exactly what zero-ablating the head's ``hook_z`` computes.
- **Llama-style models** (``q_proj``/``k_proj``/``v_proj``/``o_proj``, GQA or not) lose whole
  key/value groups whose every query head is pruned: the group's rows of ``q_proj``, ``k_proj``
  and ``v_proj`` and its columns of ``o_proj`` are cut out, and ``num_attention_heads`` /
  ``num_key_value_heads`` shrink. Because that count is one number for every layer, the same
  number of groups ``r`` is removed in every layer (``r`` = the fewest fully pruned groups in
  any layer, at most all but one); every other pruned head is masked (its ``o_proj`` columns
  zeroed). Removal and masking both equal zero-ablation, the ``o_proj`` bias kept whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from jaxtyping import Float
from torch import nn

from models.errors import UserError
from models.head import Head, HeadGroups

Family = Literal["gpt2", "bert", "llama"]
# Configurations whose attention is Llama's: separate q/k/v/o projections, head_dim in config.
LLAMA_TYPES = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "olmo",
    "granite",
    "smollm3",
    "gemma",
    "gemma2",
    "helium",
}


def plural(n: int, word: str) -> str:
    """``1 head``, ``2 heads``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


class PruneError(UserError):
    """This model cannot be pruned and exported; the message says why."""

    level = "warning"


def family(hf_model: Any) -> Family:
    """Which pruning recipe fits ``hf_model``.

    Raises:
        PruneError: an architecture without one of the three layouts.
    """
    kind = getattr(getattr(hf_model, "config", None), "model_type", "")
    if kind == "gpt2":
        return "gpt2"
    if kind == "bert":
        return "bert"
    if kind in LLAMA_TYPES:
        return "llama"
    inner = getattr(hf_model, "model", None)
    layers = getattr(inner, "layers", None)
    attn = getattr(layers[0], "self_attn", None) if layers is not None and len(layers) else None
    if attn is not None and all(
        isinstance(getattr(attn, name, None), nn.Linear)
        for name in ("q_proj", "k_proj", "v_proj", "o_proj")
    ):
        return "llama"
    raise PruneError(
        f"Pruning and export cover GPT-2, BERT and Llama-style models (separate "
        f"q/k/v/o projections); {type(hf_model).__name__} is none of these."
    )


@dataclass(frozen=True)
class PrunePlan:
    """What happens to each pruned head.

    Attributes:
        family: the recipe.
        heads: every pruned ``(layer, head)``, sorted.
        removed: layer -> key/value groups cut out of the weights (the same count per layer).
        masked: pruned heads that stay in the weights with zeroed output columns.
        groups: the original query and key/value heads; ``d_head`` their width.
    """

    family: Family
    heads: tuple[Head, ...]
    removed: dict[int, tuple[int, ...]]
    masked: tuple[Head, ...]
    groups: HeadGroups
    d_head: int
    notes: tuple[str, ...] = field(default=())

    @property
    def groups_per_layer(self) -> int:
        return len(next(iter(self.removed.values()), ()))

    def describe(self) -> str:
        """One paragraph for the page and the command line."""
        n_heads, n_kv_heads, size = self.groups.n_heads, self.groups.n_kv_heads, self.groups.size
        parts = [f"{plural(len(self.heads), 'head')} pruned."]
        if self.groups_per_layer:
            parts.append(
                f"Removed from the weights: "
                f"{plural(self.groups_per_layer, 'key/value group')} "
                f"({plural(self.groups_per_layer * size, 'query head')}) in every "
                f"layer; the "
                f"config now says {n_heads - self.groups_per_layer * size} heads "
                f"and {n_kv_heads - self.groups_per_layer} key/value heads."
            )
        if self.masked:
            parts.append(
                f"Masked (output columns set to zero, parameters kept): "
                f"{plural(len(self.masked), 'head')}."
            )
        return " ".join(parts + list(self.notes))


def plan_pruning(
    fam: Family,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int,
    d_head: int,
    heads: Iterable[tuple[int, int]],
) -> PrunePlan:
    """Decide, per pruned head, removal or masking (see the module docstring).

    Args:
        fam: the recipe (:func:`family`).
        n_layers, n_heads, n_kv_heads, d_head: the model's attention shape.
        heads: the heads to prune (``Head`` or ``(layer, index)``; repeats are ignored).

    Raises:
        PruneError: a head the model does not have.
    """
    chosen = tuple(sorted({Head(int(layer), int(index)) for layer, index in heads}))
    for head in chosen:
        if not head.fits(n_layers, n_heads):
            raise PruneError(
                f"There is no head {head} in a model of {n_layers} layers x {n_heads} heads."
            )
    notes: list[str] = []
    removed: dict[int, tuple[int, ...]] = {}
    groups = HeadGroups.checked(n_heads, n_kv_heads)
    if fam == "llama":
        full = {
            layer: [
                g
                for g in range(n_kv_heads)
                if all(Head(layer, h) in chosen for h in groups.query_heads(g))
            ]
            for layer in range(n_layers)
        }
        r = min(min(len(g) for g in full.values()), n_kv_heads - 1)
        if r:
            removed = {layer: tuple(groups[:r]) for layer, groups in full.items()}
        elif any(full.values()):
            notes.append(
                "Whole key/value groups are pruned in some layers but not in every "
                "layer; a stock checkpoint has one head count for all layers, so "
                "they are masked."
            )
    else:
        notes.append(
            f"{'GPT-2' if fam == 'gpt2' else 'BERT'} derives the head size from the "
            "model width, so a stock checkpoint cannot hold fewer heads: pruned heads "
            "are masked."
        )
    gone = {
        Head(layer, h) for layer, cut in removed.items() for g in cut for h in groups.query_heads(g)
    }
    return PrunePlan(
        fam,
        chosen,
        removed,
        tuple(h for h in chosen if h not in gone),
        groups,
        d_head,
        tuple(notes),
    )


def uniform_group_heads(
    importance: Float[np.ndarray, "layer head_index"], n_kv_heads: int, groups: int
) -> list[Head]:
    """The query heads of the ``groups`` least important key/value groups of every layer.

    Args:
        importance: ``layer head_index``; a group's importance is the sum over its heads.
        n_kv_heads: key/value heads per layer.
        groups: how many groups to drop per layer.
    """
    values = np.nan_to_num(np.asarray(importance, dtype=float), nan=np.inf)
    n_layers, n_heads = values.shape
    sharing = HeadGroups.checked(n_heads, n_kv_heads)
    per_group = values.reshape(n_layers, n_kv_heads, sharing.size).sum(axis=-1)
    out = []
    for layer in range(n_layers):
        for g in sorted(np.argsort(per_group[layer], kind="stable")[:groups]):
            out += [Head(layer, h) for h in sharing.query_heads(int(g))]
    return out


# --- applying a plan to a Hugging Face model ---------------------------------------------------


def attention_modules(hf_model: Any, fam: Family) -> list[Any]:
    """Each layer's attention module, in layer order."""
    if fam == "gpt2":
        return [block.attn for block in hf_model.transformer.h]
    if fam == "bert":
        bert = getattr(hf_model, "bert", hf_model)
        return [layer.attention for layer in bert.encoder.layer]
    return [layer.self_attn for layer in hf_model.model.layers]


def _columns(heads: Iterable[int], d_head: int) -> torch.Tensor:
    return torch.cat([torch.arange(h * d_head, (h + 1) * d_head) for h in heads])


def _sliced(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping ``index`` along ``dim`` of its weight (0: outputs, 1: inputs);
    the bias follows the outputs and is kept whole when inputs are cut."""
    weight = linear.weight.detach().index_select(dim, index.to(linear.weight.device)).clone()
    bias: torch.Tensor | None = linear.bias
    if bias is not None and dim == 0:
        bias = bias.detach().index_select(0, index.to(bias.device)).clone()
    out = nn.Linear(
        weight.shape[1],
        weight.shape[0],
        bias=bias is not None,
        device=weight.device,
        dtype=weight.dtype,
    )
    out.weight = nn.Parameter(weight)
    if bias is not None:
        out.bias = nn.Parameter(bias.detach().clone())
    return out


@torch.no_grad()
def mask_heads(hf_model: Any, plan: PrunePlan) -> None:
    """Zero the output-projection inputs of ``plan.masked`` (in place; biases kept)."""
    modules = attention_modules(hf_model, plan.family)
    for layer, head in plan.masked:
        cols = slice(head * plan.d_head, (head + 1) * plan.d_head)
        if plan.family == "gpt2":  # Conv1D: weight is (in, out)
            modules[layer].c_proj.weight[cols, :] = 0.0
        elif plan.family == "bert":
            modules[layer].output.dense.weight[:, cols] = 0.0
        else:
            modules[layer].o_proj.weight[:, cols] = 0.0


@torch.no_grad()
def remove_groups(hf_model: Any, plan: PrunePlan, update_config: bool = True) -> None:
    """Cut ``plan.removed`` key/value groups out of a Llama-style model (in place).

    With ``update_config`` the configuration's head counts shrink too (``plan.removed`` then
    has the same number of groups in every layer); without it only the modules change, which
    runs in memory for any per-layer choice but cannot be saved as a stock checkpoint.
    """
    if plan.family != "llama" or not plan.removed:
        return
    groups, d = plan.groups, plan.d_head
    for layer, attn in enumerate(attention_modules(hf_model, "llama")):
        keep = [g for g in range(groups.n_kv_heads) if g not in plan.removed.get(layer, ())]
        q_index = _columns([h for g in keep for h in groups.query_heads(g)], d)
        kv_index = _columns(keep, d)
        attn.q_proj = _sliced(attn.q_proj, q_index, 0)
        attn.k_proj = _sliced(attn.k_proj, kv_index, 0)
        attn.v_proj = _sliced(attn.v_proj, kv_index, 0)
        attn.o_proj = _sliced(attn.o_proj, q_index, 1)
    if update_config:
        config = hf_model.config
        config.head_dim = d
        config.num_attention_heads = groups.n_heads - plan.groups_per_layer * groups.size
        config.num_key_value_heads = groups.n_kv_heads - plan.groups_per_layer


def apply_plan(hf_model: Any, plan: PrunePlan) -> Any:
    """Mask, then remove (masked heads are never in removed groups); returns ``hf_model``."""
    mask_heads(hf_model, plan)
    remove_groups(hf_model, plan)
    return hf_model


def n_parameters(hf_model: Any) -> int:
    """Numbers stored in ``hf_model``'s parameters."""
    return sum(p.numel() for p in hf_model.parameters())


def dead_parameters(hf_model: Any, plan: PrunePlan) -> int:
    """Parameters a masked head alone uses (they stay stored, but do nothing).

    GPT-2/BERT: the head's q, k, v columns with their biases and its output rows. Llama: its
    q rows (with bias) and o columns, plus the k, v rows of a group whose every head is masked.
    """
    modules = attention_modules(hf_model, plan.family)
    d, width = plan.d_head, int(hf_model.config.hidden_size)
    total = 0
    for layer, _head in plan.masked:
        if plan.family == "gpt2":
            has_bias = modules[layer].c_attn.bias is not None
        elif plan.family == "bert":
            has_bias = modules[layer].self.query.bias is not None
        else:
            has_bias = modules[layer].q_proj.bias is not None
        if plan.family in ("gpt2", "bert"):
            total += 4 * d * width + 3 * d * has_bias
        else:
            total += 2 * d * width + d * has_bias
    if plan.family == "llama":
        masked = set(plan.masked)
        for layer in {head.layer for head in plan.masked}:
            attn = modules[layer]
            for g in range(plan.groups.n_kv_heads):
                if all(Head(layer, h) in masked for h in plan.groups.query_heads(g)):
                    total += 2 * (d * width + d * (attn.k_proj.bias is not None))
    return total
