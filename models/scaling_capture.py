"""The loaded model's own attention logits, and the model re-run with every head's logits scaled.

Where the logits come from (checked, not assumed):

1. ``blocks.{l}.attn.hook_attn_scores``: for bridges that rebuild attention themselves (GPT-2's
   joint-QKV bridge, most decoders) this is ``q . k`` times the model's own scale with the real
   mask applied, before the softmax. It is used when ``softmax(scores)`` reproduces
   ``hook_pattern``.
2. Otherwise ``hook_q`` / ``hook_k``: ``q . k / sqrt(d_head)`` with a causal mask when the model is
   causal (key/value heads repeated for GQA). Some bridges (BERT's, where the Hugging Face module
   runs unchanged) only fire ``hook_attn_scores`` after the fact with the softmax output in it;
   there the rebuild from ``q`` and ``k`` is what reproduces the pattern. For RoPE models the
   bridge may expose ``q`` / ``k`` before the rotation, and ALiBi or a custom scale add terms
   this rebuild lacks: the same check then fails and :class:`ScalingUnavailable` says so.

The re-run multiplies the scores at every layer's ``hook_attn_scores`` by ``c`` and leaves masked
entries untouched (a finite ``finfo.min`` mask times ``c < 1`` would let masked keys back in).
Each re-run checks that the hook really feeds the softmax: layer 0's pattern must equal
``softmax(c * scores)`` of that same pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from models.capture import tokenize
from models.loading import LoadedModel
from models.scaling import scale_scores, scaled_patterns, with_inf_mask
from models.tokens import readable_tokens

ScoreSource = Literal["hook_attn_scores", "hook_q/hook_k"]
REPRODUCE_TOL = 1e-4


class ScalingUnavailable(Exception):
    """The sweep cannot be run on this model; ``str(err)`` is a message for the page."""


@dataclass(frozen=True)
class ScoreCapture:
    """Every head's logits on one prompt, at the model's own scale.

    Attributes:
        token_ids, tokens: the positions fed to the model.
        scores: ``layer head_index query_pos key_pos`` float32, masked entries ``-inf``.
        source: which hooks the scores were built from.
        max_error: ``max |softmax(scores) - hook_pattern|`` over every head and row.
        n_prompt_tokens: tokens in the full prompt before any cut.
    """

    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    scores: np.ndarray
    source: ScoreSource
    max_error: float
    n_prompt_tokens: int

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


def _hook(layer: int, name: str) -> str:
    return f"blocks.{layer}.attn.{name}"


def _cache(model: LoadedModel, ids: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """Named activations of one pass, batch 0, on CPU in their own dtype (masks intact)."""
    missing = [name for name in names if name not in model.bridge.hook_dict]
    if missing:
        raise ScalingUnavailable(f"This model exposes no `{missing[0]}` hook.")
    wanted = set(names)
    device = model.bridge.cfg.device or "cpu"
    with model.lock, torch.no_grad():
        _, cache = model.bridge.run_with_cache(ids.to(device), names_filter=lambda n: n in wanted)
        return {name: cache[name][0].detach().cpu() for name in names}


def scores_from_qk(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """``q . k / sqrt(d_head)`` with the causal mask as ``-inf``.

    Args:
        q: ``pos head_index d_head``; k: ``pos kv_head d_head`` (repeated when fewer heads).
        causal: mask keys after the query.

    Returns:
        ``head_index query_pos key_pos`` float32.
    """
    q, k = q.float(), k.float()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        n_q, n_k = scores.shape[-2:]
        future = torch.ones(n_q, n_k, dtype=torch.bool).triu(1 + n_k - n_q)
        scores = scores.masked_fill(future, -torch.inf)
    return scores


def tolerance(dtype: torch.dtype) -> float:
    """How far a recomputed pattern may sit from the model's own: 1e-4 in fp32, a few ulps in half."""
    return max(REPRODUCE_TOL, 4 * torch.finfo(dtype).eps)


def _error(scores: torch.Tensor, patterns: torch.Tensor) -> float:
    return float((scaled_patterns(scores, 1.0) - patterns.float()).abs().max())


def capture_scores(model: LoadedModel, prompt: str, max_tokens: int | None = None
                   ) -> ScoreCapture:
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
    layers = range(model.facts.n_layers)
    acts = _cache(model, ids, [_hook(l, n) for l in layers
                               for n in ("hook_attn_scores", "hook_pattern")])
    tol = tolerance(acts[_hook(0, "hook_pattern")].dtype)
    patterns = torch.stack([acts[_hook(l, "hook_pattern")].float() for l in layers])
    scores = torch.stack([with_inf_mask(acts[_hook(l, "hook_attn_scores")], torch.float32)
                          for l in layers])
    source: ScoreSource = "hook_attn_scores"
    error = _error(scores, patterns) if scores.shape == patterns.shape else float("inf")
    if not error <= tol:
        acts = _cache(model, ids, [_hook(l, n) for l in layers for n in ("hook_q", "hook_k")])
        try:
            scores = torch.stack([scores_from_qk(acts[_hook(l, "hook_q")],
                                                 acts[_hook(l, "hook_k")], model.facts.causal)
                                  for l in layers])
            source, error = "hook_q/hook_k", _error(scores, patterns)
        except (RuntimeError, ValueError):  # q/k hooks laid out other than pos head d_head
            error = float("inf")
    if not error <= tol:
        raise ScalingUnavailable(
            "Neither the bridge's attention-score hook nor q . k / sqrt(d_head) rebuilt from its "
            f"q and k hooks reproduces this model's attention patterns (largest gap {error:.2g}). "
            "Its attention adds something those hooks do not show (un-rotated RoPE q/k, ALiBi, "
            "a sliding window or a custom scale), so the sweep is not shown.")
    id_list = [int(i) for i in ids[0]]
    return ScoreCapture(token_ids=tuple(id_list),
                        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
                        scores=scores.numpy(), source=source,
                        max_error=error, n_prompt_tokens=n_full)


def loss_unavailable(model: LoadedModel, n_tokens: int) -> str | None:
    """Why the next-token loss sweep cannot run on this model and prompt, or None if it can."""
    if not model.facts.causal:
        return ("This is a bidirectional encoder: it does not predict the next token, so there is "
                "no next-token loss to sweep. (The masked-token head of all-MiniLM-L6-v2 is not in "
                "its checkpoint either, so a masked-token loss would be meaningless.)")
    if n_tokens < 2:
        return "The prompt needs at least two tokens for a next-token loss."
    return None


def next_token_loss(model: LoadedModel, ids: torch.Tensor, factor: float) -> FactorLoss:
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
    names = [_hook(l, "hook_attn_scores") for l in range(model.facts.n_layers)]
    if any(name not in model.bridge.hook_dict for name in names):
        raise ScalingUnavailable("This model exposes no attention-score hook to scale.")
    seen: dict[str, torch.Tensor] = {}

    def scale(scores: torch.Tensor, hook) -> torch.Tensor:
        if hook.name == names[0]:
            seen["scores"] = scores.detach()[0].cpu()
        return scale_scores(scores, factor)

    def keep(pattern: torch.Tensor, hook) -> torch.Tensor:
        seen["pattern"] = pattern.detach()[0].cpu()
        return pattern

    hooks = [(name, scale) for name in names] + [(_hook(0, "hook_pattern"), keep)]
    device = model.bridge.cfg.device or "cpu"
    with model.lock, torch.no_grad():
        logits = model.bridge.run_with_hooks(ids.to(device), fwd_hooks=hooks)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ScalingUnavailable("This model's forward pass does not return next-token logits.")
    if "scores" not in seen or "pattern" not in seen:
        raise ScalingUnavailable("The attention-score hook never fired during the forward pass.")
    expected = scaled_patterns(with_inf_mask(seen["scores"], torch.float32), factor)
    check = float((expected - seen["pattern"].float()).abs().max())
    if not check <= tolerance(seen["pattern"].dtype):
        raise ScalingUnavailable(
            "This model's bridge reports its attention scores only after the softmax has run, "
            "so scaling them does not change the forward pass: the model cannot be re-run at "
            "another scale this way.")
    log_probs = torch.log_softmax(logits[0, :-1].double(), dim=-1)
    targets = ids[0, 1:].to(log_probs.device)
    nll = -log_probs.gather(-1, targets[:, None])[:, 0]
    return FactorLoss(factor=float(factor), loss=float(nll.mean()), n_predictions=int(nll.numel()),
                      check_error=check)


def loss_at(model: LoadedModel, prompt: str, factor: float, max_tokens: int | None = None
            ) -> FactorLoss:
    """:func:`next_token_loss` for a prompt (tokenised as :func:`models.capture.tokenize` does)."""
    ids, _ = tokenize(model, prompt, max_tokens)
    reason = loss_unavailable(model, ids.shape[1])
    if reason:
        raise ScalingUnavailable(reason)
    return next_token_loss(model, ids, factor)
