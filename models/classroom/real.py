"""The classroom's steps for one head of a loaded model, from the model's own q, k and v.

:func:`layer_activations` runs one forward pass and keeps the hooks of one layer; the result holds
only NumPy arrays, so it can be cached. :func:`head_steps` then recomputes ``Q K^T`` times the
layer's own scale (``1 / sqrt(d_head)`` for most models), the softmax and ``A V`` for one head
and measures how far they are from what the model itself produced (``hook_attn_scores``,
``hook_pattern``, ``hook_z``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.classroom.steps import AttentionSteps, attention_steps
from models.cost import Cost
from models.errors import UserError
from models.head import HeadGroups
from models.heads.cost import forward_peak_bytes
from models.model.facts import ModelFacts
from models.model.forward import (
    missing_hooks,
    pattern_hook,
    qk_names,
    qk_source,
    run_hooks,
    scores_hook,
    softmax_qk,
    tokenize,
    v_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales
from models.model.tokens import readable_tokens
from models.model.variants import layer_variants
from models.model.variants.layers import layer_sink_logits

MASKED_BELOW = -1e9


class RealHeadUnavailable(UserError):
    """The model's q and k as its softmax sees them cannot be read from its hooks."""

    level = "warning"


@dataclass(frozen=True)
class LayerActivations:
    """One layer's attention hooks on one prompt (batch dimension dropped, float32).

    Attributes:
        tokens: readable label per position.
        q: ``pos head_index d_head``.
        k, v: ``pos kv_head d_head`` (``kv_head`` = ``n_heads`` for MHA, fewer for GQA/MQA).
        scores: ``head_index query_pos key_pos`` the model's ``hook_attn_scores``.
        pattern: ``head_index query_pos key_pos`` the model's ``hook_pattern``.
        z: ``pos head_index d_head`` the model's ``hook_z``.
        causal: the model hides later keys.
        scale: the layer's logit multiplier, read from the model.
        rotated: q and k are taken after the rotary rotation.
        softcap: the layer's logit cap (Gemma 2), or None.
        window: the layer's sliding window, or None.
        sinks: ``head_index`` the layer's learned sink logits (gpt-oss), or None.
    """

    tokens: tuple[str, ...]
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    pattern: np.ndarray
    z: np.ndarray
    causal: bool
    scale: float
    rotated: bool = False
    softcap: float | None = None
    window: int | None = None
    sinks: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def scores_are_weights(self) -> bool:
        """Some bridges fire ``hook_attn_scores`` with the post-softmax weights (BERT does)."""
        return bool(np.allclose(self.scores, self.pattern, atol=1e-7))


@dataclass(frozen=True)
class HeadCheck:
    """One head recomputed by the classroom and compared with the model.

    Attributes:
        steps: every intermediate over all positions (``query_pos key_pos`` matrices).
        kv_head: the key/value head this query head reads.
        score_error: largest |recomputed - hook_attn_scores| on visible entries, or ``None``
            when the model's hook does not hold pre-softmax scores.
        pattern_error: largest |recomputed - hook_pattern|.
        z_error: largest |recomputed A V - hook_z|.
    """

    steps: AttentionSteps
    kv_head: int
    score_error: float | None
    pattern_error: float
    z_error: float


def layer_cost(facts: ModelFacts, max_tokens: int) -> Cost:
    """The cost of :func:`layer_activations` on at most ``max_tokens`` tokens.

    Memory: one forward pass with its logits (:func:`models.heads.cost.forward_peak_bytes`)
    and what it keeps of the layer in float32: the scores and the pattern (``head_index pos
    pos``), and q, k, v and z (``pos head_index d_head`` each, q and k twice: as hooked and
    as the softmax sees them).
    """
    n = max_tokens
    kept = 4 * facts.n_heads * n * (2 * n + 6 * facts.d_head)
    return Cost(
        flops=facts.forward_flops(n),
        peak_bytes=forward_peak_bytes(facts, facts.d_vocab, n) + kept,
    )


def layer_activations(
    model: ModelHandle, prompt: str, layer: int, max_tokens: int | None = None
) -> LayerActivations:
    """Run ``prompt`` (its first ``max_tokens`` tokens) once and keep layer ``layer``'s q, k,
    v, scores, pattern and z.

    q and k are the ones the softmax sees (after the rotation on RoPE models), as
    :func:`models.model.forward.qk_source` finds them.

    Raises:
        PromptError: for an empty or oversized prompt.
        RealHeadUnavailable: a rotary model whose rotated q and k cannot be read.
    """
    ids, _ = tokenize(model, prompt, max_tokens)
    source = qk_source(model)
    if source is None:
        raise RealHeadUnavailable(
            "This model's bridge fires neither its rotated q and k nor the rotation's cos/sin "
            "tables, so the steps cannot start from what its softmax sees."
        )
    names = {
        "v": v_hook(layer),
        "scores": scores_hook(layer),
        "pattern": pattern_hook(layer),
        "z": z_hook(layer),
    }
    wanted = list(names.values()) + qk_names(source, layer)
    missing = missing_hooks(model, wanted)
    if missing:
        raise RealHeadUnavailable(
            f"This model exposes no `{missing[0]}` hook, which this section needs."
        )
    try:
        acts = run_hooks(model, ids, wanted)
    except KeyError as err:
        raise RealHeadUnavailable(
            f"The hook {err} never fired in this model's forward "
            "pass, so this section cannot show its steps."
        ) from err
    q, k = softmax_qk(acts, layer, source)
    arr = {key: acts[name][0].numpy() for key, name in names.items()}
    if not q.shape[1] == k.shape[1] == arr["v"].shape[0] == ids.shape[1]:
        raise RealHeadUnavailable(
            "This model's hooks do not hold one query, key and value per token (latent "
            "attention keeps a compressed key/value), so the steps cannot be laid out here."
        )
    id_list = [int(i) for i in ids[0]]
    variant = layer_variants(model)[layer]
    sinks = layer_sink_logits(model, layer) if variant.sinks else None
    return LayerActivations(
        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        q=q[0].numpy(),
        k=k[0].numpy(),
        v=arr["v"],
        scores=arr["scores"],
        pattern=arr["pattern"],
        z=arr["z"],
        causal=model.facts.causal,
        scale=layer_scales(model)[0][layer],
        rotated=source != "hook_q/hook_k",
        softcap=variant.softcap,
        window=variant.window,
        sinks=None if sinks is None else sinks.numpy(),
    )


def token_count(model: ModelHandle, prompt: str, max_tokens: int | None = None) -> int:
    """How many positions the model reads for ``prompt`` (raises PromptError when empty)."""
    return int(tokenize(model, prompt, max_tokens)[0].shape[1])


def head_steps(acts: LayerActivations, head: int) -> HeadCheck:
    """Recompute head ``head`` from its q, k, v with the layer's own scale.

    Args:
        acts: the layer's hooks.
        head: query head index.

    Returns:
        A :class:`HeadCheck` with the steps over every position and the largest differences.
    """
    n_heads, n_kv = acts.q.shape[1], acts.k.shape[1]
    kv = HeadGroups.checked(n_heads, n_kv).kv_head(head)
    q = acts.q[:, head].astype(np.float64)
    k = acts.k[:, kv].astype(np.float64)
    v = acts.v[:, kv].astype(np.float64)
    visible = None
    if acts.window is not None:  # query i sees keys i - window < j only
        i, j = np.indices((acts.n_tokens, acts.n_tokens))
        visible = i - j < acts.window
    steps = attention_steps(
        q,
        k,
        v,
        causal=acts.causal,
        scale=acts.scale,
        visible=visible,
        softcap=acts.softcap,
        sink=None if acts.sinks is None else float(acts.sinks[head]),
    )
    model_scores = acts.scores[head].astype(np.float64)
    score_error = None
    if not acts.scores_are_weights:  # a soft-capped model's hook holds the capped scores
        seen = steps.visible & (model_scores > MASKED_BELOW)
        ours = steps.scaled if steps.capped is None else steps.capped
        score_error = float(np.abs(ours - model_scores)[seen].max())
    pattern_error = float(np.abs(steps.weights - acts.pattern[head]).max())
    z_error = float(np.abs(steps.output - acts.z[:, head]).max())
    return HeadCheck(
        steps=steps,
        kv_head=kv,
        score_error=score_error,
        pattern_error=pattern_error,
        z_error=z_error,
    )


def window(matrix: np.ndarray, start: int, stop: int, cols: bool = True) -> np.ndarray:
    """Rows ``start:stop`` of ``matrix`` (and the same columns when ``cols``)."""
    rows = matrix[start:stop]
    return rows[:, start:stop] if cols else rows


def mass_outside(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``query_pos`` share of each query row (in the window) that lands on keys outside it."""
    rows = weights[start:stop]
    outside: np.ndarray = 1.0 - rows[:, start:stop].sum(axis=1)
    return outside
