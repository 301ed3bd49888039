"""The model's own attention inputs for every layer, ready for the app's kernel.

What the bridge's hooks hold (checked on MiniLM, on a GPT-2 trained by ``models/bundled/train.py``
and on tiny random Llama / GPT-NeoX / Bloom / GPT-2 checkpoints, and re-checked on every capture by
:func:`check_inputs`):

- ``hook_q`` / ``hook_k`` / ``hook_v`` / ``hook_z`` are ``batch pos head_index d_head`` and are
  the outputs of the projections, biases included (MiniLM's query bias is not zero, and the
  pattern only matches with it). For GQA/MQA models ``hook_k`` / ``hook_v`` carry
  ``n_kv_heads`` heads (seen on a tiny Llama with 4 query and 2 key/value heads).
- For RoPE models ``hook_q`` / ``hook_k`` are *before* the rotation. Llama-style bridges also fire
  ``hook_rot_q`` / ``hook_rot_k`` (after it), which are used. GPT-NeoX-style bridges fire only
  ``hook_cos`` / ``hook_sin``; the rotation is then applied here (``rotate_half`` convention, on the
  first ``cos.shape[-1]`` dimensions, as Hugging Face does for partial rotary).
- The scale is the model's own: the ``scaling`` (or Bloom's ``inv_norm_factor``) attribute of each
  Hugging Face attention module, which already folds in GPT-2's ``scale_attn_weights`` and
  ``scale_attn_by_inverse_layer_idx`` (1 / sqrt(d_head) / (layer + 1)); the config flags are the
  fallback when no module carries it.
- ALiBi models get the slopes of Press et al. (Bloom's formula, non-power-of-two head counts
  included). Sliding windows come from the config's ``layer_types`` / ``sliding_window``.

Whatever the source, a float64 naive rebuild of every head from these tensors must reproduce
``hook_pattern``; if it does not, :class:`KernelUnavailable` says so instead of blaming the kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from models.attention import naive_attention
from models.capture import run_hooks, tokenize
from models.loading import LoadedModel
from models.tokens import readable_tokens

QKSource = Literal["hook_q/hook_k", "hook_rot_q/hook_rot_k", "hook_q/hook_k + hook_cos/hook_sin"]
BASE_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_z", "hook_pattern")
INPUT_TOL = 1e-4


class KernelUnavailable(Exception):
    """The comparison cannot be run on this model; ``str(err)`` is a message for the page."""


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

    def options(self, layer: int) -> dict[str, Any]:
        """Keyword options of :func:`models.attention.attention` for ``layer`` (no scale)."""
        return dict(causal=self.causal, alibi_slopes=self.alibi_slopes, window=self.windows[layer])


def _hook(layer: int, name: str) -> str:
    return f"blocks.{layer}.attn.{name}"


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi slopes ``2^(-8 (h+1) / n)``, interleaving the next power of two when ``n`` is not one.

    Args:
        n_heads: number of query heads.

    Returns:
        ``head_index`` float32 slopes (Bloom's / MPT's ordering).
    """
    closest = 2 ** math.floor(math.log2(n_heads))
    base = 2.0 ** (-8.0 / closest)
    slopes = [base ** (i + 1) for i in range(closest)]
    if closest != n_heads:
        extra = 2.0 ** (-4.0 / closest)
        slopes += [extra ** (2 * i + 1) for i in range(n_heads - closest)]
    return torch.tensor(slopes, dtype=torch.float32)


def layer_scales(model: LoadedModel) -> tuple[tuple[float, ...], str]:
    """The logit multiplier of each layer, and where it was read from.

    Args:
        model: a loaded model.

    Returns:
        One scale per layer, and a short description of the source.
    """
    n_layers, found = model.facts.n_layers, {}
    for module in model.bridge.original_model.modules():
        idx = getattr(module, "layer_idx", None)
        value = getattr(module, "scaling", getattr(module, "inv_norm_factor", None))
        if isinstance(idx, int) and isinstance(value, (int, float)) and not isinstance(value, bool):
            found.setdefault(idx, float(value))
    if all(layer in found for layer in range(n_layers)):
        return tuple(found[layer] for layer in range(n_layers)), "the attention modules' own scaling"
    config = getattr(model.bridge.original_model, "config", None)
    base = model.facts.d_head ** -0.5
    source = "1 / sqrt(d_head)"
    if getattr(config, "query_pre_attn_scalar", None):
        base, source = float(config.query_pre_attn_scalar) ** -0.5, "1 / sqrt(query_pre_attn_scalar)"
    if getattr(config, "scale_attn_weights", True) is False:
        base, source = 1.0, "1 (scale_attn_weights is off)"
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        return tuple(base / (layer + 1) for layer in range(n_layers)), source + " / (layer + 1)"
    return (base,) * n_layers, source


def layer_windows(config: Any, n_layers: int) -> tuple[int | None, ...]:
    """Sliding-window width per layer from a Hugging Face config (None = full attention)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window:
        return (None,) * n_layers
    if types is not None and len(types) == n_layers:
        return tuple(int(window) if kind == "sliding_attention" else None for kind in types)
    if getattr(config, "use_sliding_window", True) is False:
        return (None,) * n_layers
    return (int(window),) * n_layers


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in the ``rotate_half`` convention on the first ``cos.shape[-1]`` dimensions.

    Args:
        x: ``batch pos head_index d_head``.
        cos, sin: ``batch pos rotary_dim`` (``rotary_dim <= d_head``).

    Returns:
        ``batch pos head_index d_head``, the rotated copy.
    """
    dim = cos.shape[-1]
    part, rest = x[..., :dim], x[..., dim:]
    first, second = part[..., : dim // 2], part[..., dim // 2:]
    half_turn = torch.cat([-second, first], dim=-1)
    return torch.cat([part * cos[:, :, None] + half_turn * sin[:, :, None], rest], dim=-1)


def _fetch(model: LoadedModel, ids: torch.Tensor) -> tuple[dict[str, torch.Tensor], QKSource]:
    """One forward pass with the hooks this model needs (a second one for RoPE fallbacks)."""
    layers = range(model.facts.n_layers)
    base = [_hook(l, n) for l in layers for n in BASE_HOOKS]
    missing = [name for name in base if name not in model.bridge.hook_dict]
    if missing:
        raise KernelUnavailable(f"This model exposes no `{missing[0]}` hook.")
    if model.facts.positional != "rotary":
        return run_hooks(model, ids, base), "hook_q/hook_k"
    tries: list[tuple[QKSource, tuple[str, str]]] = [
        ("hook_rot_q/hook_rot_k", ("hook_rot_q", "hook_rot_k")),
        ("hook_q/hook_k + hook_cos/hook_sin", ("hook_cos", "hook_sin"))]
    for source, extra in tries:
        try:
            return run_hooks(model, ids, base + [_hook(l, n) for l in layers for n in extra]), source
        except KeyError:
            continue
    raise KernelUnavailable(
        "This model uses rotary position embeddings, and its bridge fires neither rotated q/k "
        "hooks nor the cos/sin tables, so the kernel cannot be fed the rotated q and k.")


def _qk(acts: dict[str, torch.Tensor], layer: int, source: QKSource
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch pos head_index d_head`` q and k as the model's softmax sees them."""
    if source == "hook_rot_q/hook_rot_k":
        return acts[_hook(layer, "hook_rot_q")], acts[_hook(layer, "hook_rot_k")]
    q, k = acts[_hook(layer, "hook_q")], acts[_hook(layer, "hook_k")]
    if source == "hook_q/hook_k + hook_cos/hook_sin":
        cos, sin = acts[_hook(layer, "hook_cos")], acts[_hook(layer, "hook_sin")]
        return rotate(q, cos, sin), rotate(k, cos, sin)
    return q, k


def _heads_first(x: torch.Tensor) -> torch.Tensor:
    """``batch pos head_index d_head`` -> contiguous ``batch head_index pos d_head``."""
    return x.transpose(1, 2).contiguous()


def input_tolerance(model_dtype: torch.dtype) -> float:
    """How far the float64 rebuild may sit from ``hook_pattern``: 1e-4 in fp32, a few ulps in half."""
    return max(INPUT_TOL, 8 * torch.finfo(model_dtype).eps)


def check_inputs(inputs: KernelInputs) -> float:
    """``max |P_naive - hook_pattern|`` over every head, the naive pattern built in float64."""
    worst = 0.0
    for layer in range(inputs.n_layers):
        _, _, pattern = naive_attention(inputs.q[layer], inputs.k[layer], inputs.v[layer],
                                        scale=inputs.scales[layer], **inputs.options(layer))
        worst = max(worst, float((pattern - inputs.patterns[layer].double()).abs().max()))
    return worst


def capture_inputs(model: LoadedModel, prompt: str, max_tokens: int | None = None
                   ) -> KernelInputs:
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
    qk = [_qk(acts, layer, source) for layer in layers]

    def stack(name: str) -> torch.Tensor:
        return torch.stack([_heads_first(acts[_hook(layer, name)]) for layer in layers])

    scales, scale_source = layer_scales(model)
    config = getattr(model.bridge.original_model, "config", None)
    id_list = [int(i) for i in ids[0]]
    inputs = KernelInputs(
        token_ids=tuple(id_list), tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        q=torch.stack([_heads_first(q) for q, _ in qk]),
        k=torch.stack([_heads_first(k) for _, k in qk]), v=stack("hook_v"), z=stack("hook_z"),
        patterns=torch.stack([acts[_hook(layer, "hook_pattern")] for layer in layers]),
        scales=scales, windows=layer_windows(config, facts.n_layers),
        alibi_slopes=alibi_slopes(facts.n_heads) if facts.positional == "alibi" else None,
        causal=facts.causal, qk_source=source, scale_source=scale_source, reference_error=0.0,
        model_dtype=model.spec.dtype, n_prompt_tokens=n_full)
    error = check_inputs(inputs)
    if not error <= input_tolerance(model.spec.torch_dtype):
        raise KernelUnavailable(
            f"Attention rebuilt in float64 from this model's hooks ({source}, scale from "
            f"{scale_source}, positions: {facts.positional}) misses its own patterns by up to "
            f"{error:.2g}, so a kernel error could not be told apart from a wrong input. The model "
            "adds something the kernel does not model (an ALiBi or RoPE variant, logit "
            "soft-capping, a custom mask); the comparison is not supported for it yet.")
    return replace(inputs, reference_error=error)
