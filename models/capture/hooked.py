"""Capture a long prompt without holding its patterns: q, k and each row's log-sum-exp.

The fallback when the fused pass (:mod:`models.capture.streaming`) cannot read a model: one
forward pass through the bridge with hooks on the q and k the softmax sees and on
``hook_pattern``; the pattern hook keeps only a few sample rows. The log-sum-exp of
``q k^T * scale`` is then computed one layer at a time, and the sample rows are rebuilt from it
and compared with the model's own pattern: the result fills the same
:class:`~models.capture.store.FactoredPatterns` store. If q and k do not reproduce it (RoPE
applied after the hook, an unusual scale), the caller falls back to a dense capture. (Some
adapters, BERT's among them, fire ``hook_attn_scores`` after the softmax, so the pattern, not
the scores hook, is the ground truth here.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float, Int

from models.capture.store import FactoredPatterns, read_only
from models.model.forward import pattern_hook, qk_names, qk_source, run_with_hooks, softmax_qk
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales
from models.shapes import TokenIds

CHECK_TOLERANCE = 1e-5


def sample_rows(n: int) -> Int[torch.Tensor, " row"]:
    """The first, last and two evenly spaced query positions of ``n`` (fewer when ``n < 4``)."""
    rows: torch.Tensor = torch.unique(torch.tensor([0, n // 3, (2 * n) // 3, n - 1]))
    return rows


def layer_scores(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    scale: float,
    causal: bool,
    rows: Int[torch.Tensor, " row"] | None = None,
) -> Float[torch.Tensor, "head_index row key_pos"]:
    """``q k^T * scale`` with masked keys at -inf.

    Args:
        q: one layer's queries.
        k: one layer's keys (query head ``h`` reads kv head ``h // group``).
        scale: the softmax scale.
        causal: whether later keys are masked.
        rows: query positions to compute (all when ``None``).

    Returns:
        The scores of ``rows``, float32.
    """
    rows = torch.arange(q.shape[1]) if rows is None else rows
    group = q.shape[0] // k.shape[0]
    q_rows = torch.unflatten(q[:, rows], 0, (k.shape[0], group))  # kv_head group rows d_head
    scores = torch.einsum("hgqd,hkd->hgqk", q_rows, k).flatten(0, 1) * scale
    if causal:
        n_k = k.shape[1]
        masked = torch.arange(n_k)[None, :] > rows[:, None] + (n_k - q.shape[1])
        scores = scores.masked_fill(masked, float("-inf"))
    return scores


def layer_lse(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    scale: float,
    causal: bool,
    block: int = 512,
) -> Float[torch.Tensor, "head_index query_pos"]:
    """Log-sum-exp of each row of :func:`layer_scores`, ``block`` queries at a time."""
    n = q.shape[1]
    parts = [
        torch.logsumexp(
            layer_scores(q, k, scale, causal, torch.arange(i, min(i + block, n))), dim=-1
        )
        for i in range(0, n, block)
    ]
    return torch.cat(parts, dim=-1)


def capture_hooked(model: ModelHandle, ids: TokenIds) -> FactoredPatterns | None:
    """q, k and LSE of every layer from one hooked forward pass.

    Args:
        model: the loaded model.
        ids: ``1 pos`` token ids.

    Returns:
        The factored store, or ``None`` when a hook did not fire or q and k do not rebuild the
        model's own pattern (the caller then captures densely).
    """
    facts = model.facts
    n_layers, n = facts.n_layers, ids.shape[1]
    source = qk_source(model)
    if source is None:
        return None
    rows = sample_rows(n)
    acts: dict[str, torch.Tensor] = {}
    samples: list[torch.Tensor | None] = [None] * n_layers

    # the bridge may report an alias as hook.name: key by our name
    def keeper(name: str) -> Callable[..., None]:
        def hook(tensor: torch.Tensor, hook: object) -> None:
            acts[name] = tensor.detach()[0:1].to("cpu", torch.float32)

        return hook

    def pattern_keeper(layer: int) -> Callable[..., None]:
        # batch head query_pos key_pos: keep a few rows only
        def hook(tensor: torch.Tensor, hook: object) -> None:
            samples[layer] = tensor.detach()[0][:, rows.to(tensor.device)].to("cpu", torch.float32)

        return hook

    hooks = []
    for layer in range(n_layers):
        hooks += [(name, keeper(name)) for name in qk_names(source, layer)]
        hooks.append((pattern_hook(layer), pattern_keeper(layer)))
    run_with_hooks(model, ids, hooks, return_type=None)
    kept = [item for item in samples if item is not None]
    if len(kept) < n_layers:
        return None
    try:
        pairs = [softmax_qk(acts, layer, source) for layer in range(n_layers)]
    except KeyError:  # a q/k hook did not fire
        return None
    acts.clear()
    # batch pos head d_head -> head pos d_head
    qs = [q[0].transpose(0, 1).contiguous() for q, _ in pairs]
    ks = [k[0].transpose(0, 1).contiguous() for _, k in pairs]
    del pairs
    scales, _source = layer_scales(model)
    lses = []
    for layer in range(n_layers):
        lse = layer_lse(qs[layer], ks[layer], scales[layer], facts.causal)
        rebuilt = torch.exp(
            layer_scores(qs[layer], ks[layer], scales[layer], facts.causal, rows)
            - lse[:, rows, None]
        )
        if not (rebuilt - kept[layer]).abs().max() <= CHECK_TOLERANCE:
            return None
        lses.append(lse)
    return FactoredPatterns(
        q=read_only(torch.stack(qs).numpy()),
        k=read_only(torch.stack(ks).numpy()),
        lse=read_only(torch.stack(lses).numpy()),
        scales=scales,
        causal=facts.causal,
    )
