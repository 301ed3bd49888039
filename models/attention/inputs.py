"""The model's own attention inputs for every layer, ready for the app's kernel.

q and k as the softmax sees them, v, the model's own z and pattern, each layer's scale, window and
ALiBi slopes: all read through :mod:`models.model.forward`, which says where each comes from.

Whatever the source, a float64 naive rebuild of every head from these tensors must reproduce
``hook_pattern``; if it does not, :class:`KernelUnavailable` says so instead of blaming the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from models.attention.options import AttentionOptions
from models.attention.reference import naive_attention
from models.errors import UserError
from models.model.forward import (
    QKSource,
    k_hook,
    missing_hooks,
    pattern_hook,
    q_hook,
    qk_names,
    qk_source,
    run_hooks,
    softmax_qk,
    tokenize,
    v_hook,
    z_hook,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales, layer_windows, model_alibi_slopes
from models.model.tokens import readable_tokens

BASE_HOOKS = (q_hook, k_hook, v_hook, z_hook, pattern_hook)
INPUT_TOL = 1e-4


class KernelUnavailable(UserError):
    """The comparison cannot be run on this model; ``str(err)`` is a message for the page."""

    level = "warning"

    def __str__(self) -> str:
        return f"The comparison is not available for this model. {super().__str__()}"


@dataclass(frozen=True)
class KernelInputs:
    """Every layer's q, k, v and the model's own z and pattern, in the kernel's layout.

    Attributes:
        token_ids, tokens: positions fed to the model.
        q: ``layer batch head_index query_pos d_head`` float32 (rotated for RoPE models).
        k, v: ``layer batch kv_head_index key_pos d_head`` float32.
        z: ``layer batch head_index query_pos d_head`` float32, the model's ``hook_z``.
        patterns: ``layer batch head_index query_pos key_pos`` float32, ``hook_pattern``.
        scales: the logit multiplier of each layer.
        windows: sliding-window width of each layer, or None.
        alibi_slopes: ``head_index`` slopes, or None.
        causal: the model masks future keys.
        qk_source, scale_source: where q/k and the scales came from, in words.
        reference_error: ``max |P_naive - hook_pattern|`` of the float64 rebuild, all heads.
        model_dtype: dtype the model ran in.
        n_prompt_tokens: tokens in the prompt before any cut.
    """

    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    z: torch.Tensor
    patterns: torch.Tensor
    scales: tuple[float, ...]
    windows: tuple[int | None, ...]
    alibi_slopes: torch.Tensor | None
    causal: bool
    qk_source: QKSource
    scale_source: str
    reference_error: float
    model_dtype: str
    n_prompt_tokens: int

    @property
    def n_layers(self) -> int:
        return self.q.shape[0]

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    def options(self, layer: int) -> AttentionOptions:
        """The softmax terms of ``layer``: its causal mask, scale, ALiBi slopes and window."""
        return AttentionOptions(
            causal=self.causal,
            scale=self.scales[layer],
            alibi=self.alibi_slopes,
            window=self.windows[layer],
        )


def _fetch(model: ModelHandle, ids: torch.Tensor) -> tuple[dict[str, torch.Tensor], QKSource]:
    """One forward pass with every hook the comparison needs."""
    layers = range(model.facts.n_layers)
    base = [name_of(layer) for layer in layers for name_of in BASE_HOOKS]
    missing = missing_hooks(model, base)
    if missing:
        raise KernelUnavailable(f"This model exposes no `{missing[0]}` hook.")
    source = qk_source(model)
    if source is None:
        raise KernelUnavailable(
            "This model uses rotary position embeddings, and its bridge fires neither rotated q/k "
            "hooks nor the cos/sin tables, so the kernel cannot be fed the rotated q and k."
        )
    extra = [name for layer in layers for name in qk_names(source, layer)]
    return run_hooks(model, ids, base + extra), source


def _heads_first(x: torch.Tensor) -> torch.Tensor:
    """``batch pos head_index d_head`` -> contiguous ``batch head_index pos d_head``."""
    return x.transpose(1, 2).contiguous()


def input_tolerance(model_dtype: torch.dtype) -> float:
    """How far the float64 rebuild may sit from ``hook_pattern``: 1e-4 in fp32, a few ulps in
    half."""
    return max(INPUT_TOL, 8 * torch.finfo(model_dtype).eps)


def check_inputs(inputs: KernelInputs) -> float:
    """``max |P_naive - hook_pattern|`` over every head, the naive pattern built in float64."""
    worst = 0.0
    for layer in range(inputs.n_layers):
        _, _, pattern = naive_attention(
            inputs.q[layer],
            inputs.k[layer],
            inputs.v[layer],
            inputs.options(layer),
        )
        worst = max(worst, float((pattern - inputs.patterns[layer].double()).abs().max()))
    return worst


def capture_inputs(model: ModelHandle, prompt: str, max_tokens: int | None = None) -> KernelInputs:
    """Every layer's kernel inputs on ``prompt``, checked against the model's own patterns.

    Args:
        model: a loaded model.
        prompt: the text (special tokens added as the tokenizer does).
        max_tokens: an optional cap below the model's context.

    Returns:
        :class:`KernelInputs` whose float64 naive rebuild matches ``hook_pattern``.

    Raises:
        PromptError: empty or oversized prompt.
        KernelUnavailable: a hook is missing, or the rebuild does not reproduce the model.
    """
    facts = model.facts
    ids, n_full = tokenize(model, prompt, max_tokens)
    acts, source = _fetch(model, ids)
    layers = range(facts.n_layers)
    qk = [softmax_qk(acts, layer, source) for layer in layers]

    def stack(name_of: Callable[[int], str]) -> torch.Tensor:
        return torch.stack([_heads_first(acts[name_of(layer)]) for layer in layers])

    scales, scale_source = layer_scales(model)
    id_list = [int(i) for i in ids[0]]
    inputs = KernelInputs(
        token_ids=tuple(id_list),
        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        q=torch.stack([_heads_first(q) for q, _ in qk]),
        k=torch.stack([_heads_first(k) for _, k in qk]),
        v=stack(v_hook),
        z=stack(z_hook),
        patterns=torch.stack([acts[pattern_hook(layer)] for layer in layers]),
        scales=scales,
        windows=layer_windows(model),
        alibi_slopes=model_alibi_slopes(model),
        causal=facts.causal,
        qk_source=source,
        scale_source=scale_source,
        reference_error=0.0,
        model_dtype=model.spec.dtype,
        n_prompt_tokens=n_full,
    )
    error = check_inputs(inputs)
    if not error <= input_tolerance(model.spec.torch_dtype):
        raise KernelUnavailable(
            f"Attention rebuilt in float64 from this model's hooks ({source}, scale from "
            f"{scale_source}, positions: {facts.positional}) misses its own patterns by up to "
            f"{error:.2g}, so a kernel error could not be told apart from a wrong input. The model "
            "adds something the kernel does not model (an ALiBi or RoPE variant, logit "
            "soft-capping, a custom mask); the comparison is not supported for it yet."
        )
    return replace(inputs, reference_error=error)
