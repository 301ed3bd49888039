"""The loaded model's own attention logits, and the model re-run with every head's logits scaled.

Where the logits come from (checked, not assumed):

1. ``blocks.{l}.attn.hook_attn_scores``: for bridges that rebuild attention themselves (GPT-2's
   joint-QKV bridge, most decoders) this is ``q . k`` times the model's own scale with the real
   mask applied, before the softmax. It is used when ``softmax(scores)`` reproduces
   ``hook_pattern``.
2. Otherwise q and k as the softmax sees them (rotated on RoPE models, see
   :func:`models.model.forward.qk_source`) times the layer's own scale, with a causal mask when
   the model is causal (key/value heads repeated for GQA). Some bridges (BERT's, where the Hugging
   Face module runs unchanged) only fire ``hook_attn_scores`` after the fact with the softmax
   output in it; there the rebuild from q and k is what reproduces the pattern. ALiBi or a
   sliding window add terms this rebuild lacks: the same check then fails and
   :class:`ScalingUnavailable` says so.

The re-run multiplies the scores at every layer's ``hook_attn_scores`` by ``c`` and leaves masked
entries untouched (a finite ``finfo.min`` mask times ``c < 1`` would let masked keys back in).
Each re-run checks that the hook really feeds the softmax: layer 0's pattern must equal
``softmax(c * scores)`` of that same pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from models.errors import UserError
from models.model.forward import (
    Hook,
    QKSource,
    every_layer,
    missing_hooks,
    pattern_hook,
    q_hook,
    qk_names,
    qk_source,
    run_hooks,
    run_with_hooks,
    scores_hook,
    softmax_qk,
    tokenize,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales
from models.model.tokens import readable_tokens
from models.model.variants import layer_variants
from models.progress import Progress, quiet
from models.scaling.maths import scale_scores, scaled_patterns, with_inf_mask

if TYPE_CHECKING:
    from transformer_lens.hook_points import HookPoint

ScoreSource = Literal["hook_attn_scores"] | QKSource
REPRODUCE_TOL = 1e-4
LOSS_ROWS = 32  # positions whose float64 log-softmax over the vocabulary is formed at once


class ScalingUnavailable(UserError):
    """The sweep cannot be run on this model; ``str(err)`` is a message for the page."""

    level = "info"


@dataclass(frozen=True)
class ScoreCapture:
    """Every head's logits on one prompt, at the model's own scale.

    Attributes:
        token_ids, tokens: the positions fed to the model.
        scores: ``layer head_index query_pos key_pos`` float32, masked entries ``-inf``
            (the raw logits of a soft-capped layer, before its cap).
        source: which hooks the scores were built from.
        max_error: ``max |softmax(scores) - hook_pattern|`` over every head and row.
        n_prompt_tokens: tokens in the full prompt before any cut.
        softcaps: each layer's logit cap (Gemma 2); ``scores`` are then the raw logits before
            it (read from q and k); ``()`` for a model without caps.
    """

    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    scores: np.ndarray
    source: ScoreSource
    max_error: float
    n_prompt_tokens: int
    softcaps: tuple[float | None, ...] = ()

    def softcap(self, layer: int) -> float | None:
        return self.softcaps[layer] if self.softcaps else None

    def capped_scores(self, layer: int) -> np.ndarray:
        """Layer ``layer``'s logits as its softmax reads them (capped where it caps)."""
        scores = torch.from_numpy(np.array(self.scores[layer]))
        found: np.ndarray = scale_scores(scores, 1.0, self.softcap(layer)).numpy()
        return found

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class FactorLoss:
    """Next-token loss with every head's logits times ``factor``.

    Attributes:
        factor: ``c``.
        loss: mean cross-entropy (nats) over ``n_predictions`` next-token predictions.
        check_error: ``max |hook_pattern - softmax(c * scores)|`` at layer 0 of that same pass.
    """

    factor: float
    loss: float
    n_predictions: int
    check_error: float


def _cache(model: ModelHandle, ids: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """Named activations of one pass, batch 0, on CPU in their own dtype (masks intact)."""
    missing = missing_hooks(model, names)
    if missing:
        raise ScalingUnavailable(f"This model exposes no `{missing[0]}` hook.")
    return {name: value[0] for name, value in run_hooks(model, ids, names, dtype=None).items()}


def scores_from_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    causal: bool,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """``q . k * scale`` with the causal mask (and a sliding window's) as ``-inf``.

    Args:
        q: ``pos head_index d_head``; k: ``pos kv_head d_head`` (repeated when fewer heads).
        causal: mask keys after the query.
        scale: the layer's logit multiplier; ``1 / sqrt(d_head)`` when not given.
        window: a sliding layer's width: mask keys ``window`` or more positions back.

    Returns:
        ``head_index query_pos key_pos`` float32.
    """
    q, k = q.float(), k.float()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    n_q, n_k = scores.shape[-2:]
    query_pos = torch.arange(n_k - n_q, n_k)[:, None]
    key_pos = torch.arange(n_k)[None]
    hidden = torch.zeros(n_q, n_k, dtype=torch.bool)
    if causal:
        hidden |= key_pos > query_pos
    if window:
        hidden |= query_pos - key_pos >= window
    return scores.masked_fill(hidden, -torch.inf)


def tolerance(dtype: torch.dtype) -> float:
    """How far a recomputed pattern may sit from the model's own: 1e-4 in fp32, a few ulps in
    half."""
    return max(REPRODUCE_TOL, 4 * torch.finfo(dtype).eps)


def _error(scores: torch.Tensor, patterns: torch.Tensor, softcap: float | None = None) -> float:
    return float((scaled_patterns(scores, 1.0, softcap) - patterns.float()).abs().max())


def _layer_error(
    scores: torch.Tensor, patterns: torch.Tensor, softcaps: tuple[float | None, ...] = ()
) -> float:
    """:func:`_error` of every layer's heads, one layer at a time (its softmax and difference
    are a layer's size, not the model's)."""
    if scores.shape != patterns.shape:
        return float("inf")
    caps = softcaps or (None,) * len(scores)
    return max(_error(s, p, c) for s, p, c in zip(scores, patterns, caps, strict=True))


def _stacked(layers: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(layers)``, each layer let go once copied: the stacked array and the
    layers are never both held whole."""
    out = torch.empty((len(layers), *layers[0].shape), dtype=layers[0].dtype)
    for i in range(len(layers)):
        out[i] = layers[i]
        layers[i] = out[i]
    return out


def capture_scores(model: ModelHandle, prompt: str, max_tokens: int | None = None) -> ScoreCapture:
    """Every head's logits on ``prompt``, checked against the model's own patterns.

    Args:
        model: a loaded model.
        prompt: the text.
        max_tokens: optional cap below the model's context.

    Returns:
        A :class:`ScoreCapture`.

    Raises:
        PromptError: empty or oversized prompt.
        ScalingUnavailable: neither source reproduces ``hook_pattern`` (within 1e-4 in fp32).
    """
    ids, n_full = tokenize(model, prompt, max_tokens)
    n_layers = model.facts.n_layers
    acts = _cache(
        model, ids, every_layer(scores_hook, n_layers) + every_layer(pattern_hook, n_layers)
    )
    tol = tolerance(acts[pattern_hook(0)].dtype)
    patterns = _stacked([acts.pop(pattern_hook(l)).float() for l in range(n_layers)])
    scores = _stacked(
        [with_inf_mask(acts.pop(scores_hook(l)), torch.float32) for l in range(n_layers)]
    )
    source: ScoreSource = "hook_attn_scores"
    caps = softcaps_of(model)
    # a capped model's raw logits come from q and k (inverting the cap loses them where it
    # saturates)
    error = float("inf") if caps else _layer_error(scores, patterns)
    qk = qk_source(model)
    if not error <= tol and qk is not None:
        scales, _ = layer_scales(model)
        windows = [layer.window for layer in layer_variants(model)]
        acts = _cache(model, ids, [name for l in range(n_layers) for name in qk_names(qk, l)])
        try:
            scores = _stacked(
                [
                    scores_from_qk(
                        *softmax_qk(acts, l, qk), model.facts.causal, scales[l], windows[l]
                    )
                    for l in range(n_layers)
                ]
            )
            source, error = qk, _layer_error(scores, patterns, caps)
        except (RuntimeError, ValueError):  # q/k hooks laid out other than pos head d_head
            error = float("inf")
    if not error <= tol:
        raise ScalingUnavailable(
            "Neither the bridge's attention-score hook nor q . k rebuilt from its q and k hooks "
            f"reproduces this model's attention patterns (largest gap {error:.2g}). Its "
            "attention adds something those hooks do not show (ALiBi, a sliding window, logit "
            "soft-capping), so the sweep is not shown."
        )
    id_list = [int(i) for i in ids[0]]
    return ScoreCapture(
        token_ids=tuple(id_list),
        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        scores=scores.numpy(),
        source=source,
        max_error=error,
        n_prompt_tokens=n_full,
        softcaps=caps,
    )


def softcaps_of(model: ModelHandle) -> tuple[float | None, ...]:
    """Each layer's logit cap, or ``()`` when no layer caps its logits."""
    caps = tuple(layer.softcap for layer in layer_variants(model))
    return caps if any(caps) else ()


def loss_unavailable(model: ModelHandle, n_tokens: int) -> str | None:
    """Why the next-token loss sweep cannot run on this model and prompt, or None if it can."""
    if not model.facts.causal:
        return (
            "This is a bidirectional encoder: it does not predict the next token, so there is "
            "no next-token loss to sweep. (The masked-token head of all-MiniLM-L6-v2 is not in "
            "its checkpoint either, so a masked-token loss would be meaningless.)"
        )
    if n_tokens < 2:
        return "The prompt needs at least two tokens for a next-token loss."
    return None


def next_token_loss(model: ModelHandle, ids: torch.Tensor, factor: float) -> FactorLoss:
    """Mean next-token cross-entropy of ``ids`` with every layer's logits times ``factor``.

    Args:
        model: a causal language model.
        ids: ``(1, pos)`` token ids.
        factor: ``c > 0``; at 1.0 the hooks still run and change nothing.

    Returns:
        A :class:`FactorLoss`.

    Raises:
        ScalingUnavailable: the scores hook does not feed this model's softmax.
    """
    names = every_layer(scores_hook, model.facts.n_layers)
    if missing_hooks(model, names):
        raise ScalingUnavailable("This model exposes no attention-score hook to scale.")
    seen: dict[str, torch.Tensor] = {}
    capped = bool(softcaps_of(model))  # scale q (the cap then runs on the scaled logits)

    def scale(scores: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        if hook.name == names[0]:
            seen["scores"] = scores.detach()[0].cpu()
        return scores if capped else scale_scores(scores, factor)

    def scale_q(q: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        return q * factor

    def keep(pattern: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        seen["pattern"] = pattern.detach()[0].cpu()
        return pattern

    hooks: list[Hook] = [(name, scale) for name in names] + [(pattern_hook(0), keep)]
    if capped:
        hooks += [(q_hook(layer), scale_q) for layer in range(model.facts.n_layers)]
    logits = run_with_hooks(model, ids, hooks)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ScalingUnavailable("This model's forward pass does not return next-token logits.")
    if "scores" not in seen or "pattern" not in seen:
        raise ScalingUnavailable("The attention-score hook never fired during the forward pass.")
    # the scores seen are scaled already where q was (and capped by the model)
    expected = scaled_patterns(
        with_inf_mask(seen["scores"], torch.float32), 1.0 if capped else factor
    )
    check = float((expected - seen["pattern"].float()).abs().max())
    if not check <= tolerance(seen["pattern"].dtype):
        raise ScalingUnavailable(
            "This model's bridge reports its attention scores only after the softmax has run, "
            "so scaling them does not change the forward pass: the model cannot be re-run at "
            "another scale this way."
        )
    rows, targets = logits[0, :-1], ids[0, 1:].to(logits.device)
    blocks = [slice(i, i + LOSS_ROWS) for i in range(0, rows.shape[0], LOSS_ROWS)]
    nll = torch.cat(
        [
            -torch.log_softmax(rows[b].double(), dim=-1).gather(-1, targets[b, None])[:, 0]
            for b in blocks
        ]
    )
    return FactorLoss(
        factor=float(factor),
        loss=float(nll.mean()),
        n_predictions=int(nll.numel()),
        check_error=check,
    )


def loss_at(
    model: ModelHandle, prompt: str, factor: float, max_tokens: int | None = None
) -> FactorLoss:
    """:func:`next_token_loss` for a prompt (tokenised as :func:`models.model.forward.tokenize`
    does)."""
    ids, _ = tokenize(model, prompt, max_tokens)
    reason = loss_unavailable(model, ids.shape[1])
    if reason:
        raise ScalingUnavailable(reason)
    return next_token_loss(model, ids, factor)


def loss_curve(
    model: ModelHandle,
    prompt: str,
    factors: tuple[float, ...],
    max_tokens: int | None = None,
    progress: Progress = quiet,
) -> list[FactorLoss]:
    """:func:`loss_at` at every factor in turn (one forward pass each), reporting each."""
    out = []
    for i, c in enumerate(factors):
        progress(i / len(factors), f"re-running the model at c = {c:.3g}")
        out.append(loss_at(model, prompt, c, max_tokens))
    return out
