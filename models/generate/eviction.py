"""Perplexity of a text read with a bounded KV cache, per eviction policy and cache budget.

The text is read once with the full cache (:func:`full_pass`): its per-token losses, its keys and
values, and for H2O the attention each key gathered before the cache first fills. A policy with
budget ``B`` changes nothing before position ``B`` (nothing is evicted yet), so its pass
(:func:`policy_pass`) starts at ``B`` from the full pass's first ``B`` keys and values: the
sweep costs ``n + sum over runs of (n - B)`` token-forwards, not ``n`` per run. How each policy
treats positions is in :mod:`models.generate.policies`.

Perplexity is ``exp(mean loss)`` over the ``n - 1`` next-token predictions of the text, as a
plain forward with ``labels`` computes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from models.attention.options import AttentionOptions
from models.generate.policies import POLICY_NAMES, Policy, RopeShift, banded, heavy_hitters
from models.generate.settings import GenerationError
from models.generate.view import (
    handling,
    layer_index,
    learned_sinks,
    mask_is_causal_window,
    model_view,
    view_device,
)
from models.model.handle import ModelHandle
from models.progress import quiet

LOGIT_CHUNK = 256


class PolicyAttention:
    """Attention handler: every layer's attention under one policy (one forward call).

    Args:
        policy, budget, sinks: the policy (see :mod:`models.generate.policies`).
        shift: re-indexes sink positions (RoPE models), or None.
        checkpoints: ``full`` only: budgets at which to keep, per layer, the attention summed
            over the queries before them (for H2O passes that start after a shared prefix).
        accumulated: ``h2o`` after a shared prefix: those sums, per layer.
        on_layer: called after each layer (progress; may raise Cancelled).
    """

    def __init__(
        self,
        policy: Policy,
        budget: int,
        sinks: int = 0,
        shift: RopeShift | None = None,
        checkpoints: tuple[int, ...] = (),
        accumulated: dict[int, torch.Tensor] | None = None,
        on_layer: Callable[[int], None] | None = None,
    ) -> None:
        self.policy, self.budget, self.sinks, self.shift = policy, budget, sinks, shift
        self.checkpoints = checkpoints
        self.sums: dict[int, dict[int, torch.Tensor]] = {b: {} for b in checkpoints}
        self.accumulated = accumulated or {}
        self.on_layer = on_layer
        self.calls = 0

    def __call__(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        learned_sink = learned_sinks(kwargs, query.device)  # never evicted
        window = kwargs.get("sliding_window")
        if attention_mask is not None and not mask_is_causal_window(
            attention_mask, key.shape[2], window, rows=(0, query.shape[2] // 2, -1)
        ):
            raise GenerationError(
                "This model's attention mask is not a plain causal or "
                "sliding-window mask; the eviction experiment cannot run on it."
            )
        layer = layer_index(module)
        terms = AttentionOptions(
            causal=True,
            scale=float(kwargs.get("scaling") or query.shape[-1] ** -0.5),
            softcap=kwargs.get("softcap") or None,
            window=window,
        )
        q, k, v = (x[0].to(torch.float32) for x in (query, key, value))
        first = k.shape[1] - q.shape[1]
        if self.policy == "h2o":
            out = heavy_hitters(
                q, k, v, first, terms, self.budget, self.accumulated.get(layer), learned_sink
            )
        else:
            sums = {b: torch.zeros(k.shape[0], b, device=q.device) for b in self.checkpoints}
            out = banded(
                q,
                k,
                v,
                first,
                terms,
                self.policy,
                self.budget,
                self.sinks,
                self.shift,
                checkpoints=sums,
                learned_sink=learned_sink,
            )
            for b, acc in sums.items():
                self.sums[b][layer] = acc
        self.calls += 1
        if self.on_layer is not None:
            self.on_layer(layer)
        return out.transpose(0, 1)[None].to(query.dtype), None


def rope_shift(model: ModelHandle) -> RopeShift | None:
    """The model's rotary frequencies, when it has exactly one rotary embedding."""
    if model.facts.positional != "rotary":
        return None
    found = {
        id(m): m.inv_freq
        for m in model_view(model).modules()
        if isinstance(getattr(m, "inv_freq", None), torch.Tensor)
    }
    if len(found) != 1:
        return None
    return RopeShift(next(iter(found.values())).detach().to(torch.float32))


def token_losses(view: Any, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``pos`` float32 next-token losses from ``batch pos d_model`` final hidden states."""
    head = view.get_output_embeddings()
    cap = getattr(view.config, "final_logit_softcapping", None)
    parts = []
    for i in range(0, targets.shape[0], LOGIT_CHUNK):
        logits = head(hidden[0, i : i + LOGIT_CHUNK]).to(torch.float32)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        parts.append(
            torch.nn.functional.cross_entropy(
                logits, targets[i : i + LOGIT_CHUNK].to(logits.device), reduction="none"
            )
        )
    return torch.cat(parts).cpu()


@dataclass
class FullPass:
    """What the full-cache reading leaves for the policy passes.

    Attributes:
        losses: ``pos`` float32 loss of predicting token ``i + 1`` at position ``i``.
        cache: per layer ``(key, value)`` ``batch kv_head_index key_pos d_head`` in the model's
            dtype.
        sums: ``{budget: {layer: kv_head x budget}}`` attention summed before each budget.
    """

    losses: torch.Tensor
    cache: list[tuple[torch.Tensor, torch.Tensor]]
    sums: dict[int, dict[int, torch.Tensor]] = field(default_factory=dict)


def _run(
    model: ModelHandle,
    ids: torch.Tensor,
    start: int,
    handler: PolicyAttention,
    prefix: list[tuple[torch.Tensor, torch.Tensor]] | None,
) -> tuple[torch.Tensor, Any]:
    """Positions ``start ..`` of ``ids`` under ``handler``; losses and the cache after them."""
    from transformers import DynamicCache

    view = model_view(model)
    cache = DynamicCache(ddp_cache_data=prefix) if prefix else DynamicCache()
    with torch.no_grad(), handling(handler):
        hidden = view.base_model(
            input_ids=ids[:, start:].to(view_device(view)), past_key_values=cache, use_cache=True
        ).last_hidden_state
    if handler.calls < model.facts.n_layers:
        raise GenerationError(
            f"The attention of {model.facts.name} does not run through the "
            "interface the eviction experiment replaces; it cannot run here."
        )
    with torch.no_grad():
        losses = token_losses(view, hidden[:, :-1], ids[0, start + 1 :])
    return losses, cache


def full_pass(
    model: ModelHandle,
    ids: torch.Tensor,
    checkpoints: tuple[int, ...] = (),
    on_layer: Callable[[int], None] | None = None,
) -> FullPass:
    """Read ``ids`` (``batch pos``, batch 1) with the full cache."""
    handler = PolicyAttention("full", 0, checkpoints=checkpoints, on_layer=on_layer)
    losses, cache = _run(model, ids, 0, handler, None)
    kv = [(layer.keys, layer.values) for layer in cache.layers]
    return FullPass(losses=losses, cache=kv, sums=handler.sums)


def policy_pass(
    model: ModelHandle,
    ids: torch.Tensor,
    policy: Policy,
    budget: int,
    sinks: int = 0,
    full: FullPass | None = None,
    on_layer: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """``pos`` losses of reading ``ids`` under ``policy`` with ``budget`` keys per query.

    With ``full``, positions before ``budget`` are taken from it and only the rest is run;
    without it, the whole text runs under the policy (what the tests compare).
    """
    shift = rope_shift(model) if policy == "sinks" else None
    n = int(ids.shape[1])
    if full is None or budget >= n:
        if full is not None:
            return full.losses.clone()
        handler = PolicyAttention(policy, budget, sinks, shift, on_layer=on_layer)
        return _run(model, ids, 0, handler, None)[0]
    prefix = [(k[..., :budget, :], v[..., :budget, :]) for k, v in full.cache]
    accumulated = full.sums.get(budget) if policy == "h2o" else None
    handler = PolicyAttention(
        policy, budget, sinks, shift, accumulated=accumulated, on_layer=on_layer
    )
    tail = _run(model, ids, budget, handler, prefix)[0]
    return torch.cat([full.losses[:budget], tail])


def perplexity(losses: torch.Tensor) -> float:
    return float(np.exp(float(losses.to(torch.float64).mean())))


def describe(policy: Policy) -> str:
    return POLICY_NAMES[policy]


__all__ = [
    "FullPass",
    "PolicyAttention",
    "full_pass",
    "perplexity",
    "policy_pass",
    "quiet",
    "rope_shift",
]
