"""The one module that speaks to a loaded model: hook names, tokens in, activations out.

Every analysis runs the model through here, so that one place decides

- what each hook is called (one function per hook kind; no other module spells ``blocks.``);
- how a prompt becomes token ids, and where it is cut to the context;
- how a forward pass runs: under the model's lock, without gradients unless asked, with the
  pattern copies TransformerLens keeps on every attention module released as the pass goes;
- which q and k the softmax really sees (after the rotation on RoPE models); the other terms of
  each layer's softmax (scale, window, ALiBi bias) are read from its configuration in
  :mod:`models.model.softmax_terms`.

What the bridge's hooks hold (checked on the bundled GPT-2, MiniLM, SmolLM2 and tiny random
Llama / GPT-NeoX / Bloom / GPT-2 checkpoints): ``hook_q/k/v/z`` are ``batch pos head_index
d_head`` projections with their biases; GQA models carry ``n_kv_heads`` heads in ``hook_k`` and
``hook_v``. On RoPE models ``hook_q``/``hook_k`` come before the rotation; Llama-style bridges
also fire ``hook_rot_q``/``hook_rot_k`` after it, GPT-NeoX-style bridges only ``hook_cos`` /
``hook_sin`` (the rotation is then applied here, ``rotate_half`` convention on the first
``cos.shape[-1]`` dimensions, as Hugging Face does for partial rotary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import torch

from models.errors import PromptError
from models.model.handle import ModelHandle
from models.model.loading import bridge_of
from models.model.softmax_terms import rotate
from models.shapes import HeadActivations, TokenIds

MAX_PROMPT_CHARS = 200_000
QKSource = Literal["hook_q/hook_k", "hook_rot_q/hook_rot_k", "hook_q/hook_k + hook_cos/hook_sin"]
Hook = tuple[str, Callable[..., Any]]

__all__ = ["MAX_PROMPT_CHARS", "PromptError"]


# --- hook names -----------------------------------------------------------------------------


def _attn(layer: int, name: str) -> str:
    return f"blocks.{layer}.attn.{name}"


def pattern_hook(layer: int) -> str:
    """``batch head_index query_pos key_pos`` softmax weights."""
    return _attn(layer, "hook_pattern")


def scores_hook(layer: int) -> str:
    """``batch head_index query_pos key_pos`` logits before the softmax (most bridges)."""
    return _attn(layer, "hook_attn_scores")


def q_hook(layer: int) -> str:
    return _attn(layer, "hook_q")


def k_hook(layer: int) -> str:
    return _attn(layer, "hook_k")


def v_hook(layer: int) -> str:
    return _attn(layer, "hook_v")


def z_hook(layer: int) -> str:
    """``batch pos head_index d_head``: each head's output before the output projection."""
    return _attn(layer, "hook_z")


def rot_q_hook(layer: int) -> str:
    return _attn(layer, "hook_rot_q")


def rot_k_hook(layer: int) -> str:
    return _attn(layer, "hook_rot_k")


def cos_hook(layer: int) -> str:
    return _attn(layer, "hook_cos")


def sin_hook(layer: int) -> str:
    return _attn(layer, "hook_sin")


def q_gate_hook(layer: int) -> str:
    """``batch pos gate_width``: a gated layer's output-gate logits (before the sigmoid)."""
    return _attn(layer, "hook_q_gate")


LinearHook = Literal[
    "hook_q", "hook_k", "hook_v", "hook_beta", "hook_log_decay", "hook_recurrence_out"
]


def linear_hook(layer: int, name: LinearHook) -> str:
    """A linear-attention (Gated DeltaNet) layer's hooks: ``hook_q``/``hook_k`` ``batch pos
    k_head d_k`` after the convolution, ``hook_v`` and ``hook_recurrence_out`` ``batch pos
    v_head d_v``, ``hook_beta`` and ``hook_log_decay`` ``batch pos v_head``."""
    return f"blocks.{layer}.linear_attn.{name}"


def attn_out_hook(layer: int) -> str:
    """``batch pos d_model``: the attention block's output added to the residual (bias included)."""
    return f"blocks.{layer}.hook_attn_out"


def mlp_out_hook(layer: int) -> str:
    """``batch pos d_model``: the MLP's output added to the residual."""
    return f"blocks.{layer}.hook_mlp_out"


def embed_hook() -> str:
    """``batch pos d_model``: the token embeddings."""
    return "hook_embed"


def pos_embed_hook() -> str:
    """``batch pos d_model``: the learned position embeddings (absent on RoPE/ALiBi models)."""
    return "hook_pos_embed"


def final_norm_in_hook() -> str:
    """``batch pos d_model``: the residual stream entering the final norm."""
    return "ln_final.hook_in"


def final_norm_scale_hook() -> str:
    """``batch pos 1``: the divisor the final norm applied (LayerNorm's std, RMSNorm's RMS)."""
    return "ln_final.hook_scale"


def every_layer(name_of: Callable[[int], str], n_layers: int) -> list[str]:
    """``[name_of(0), ..., name_of(n_layers - 1)]``."""
    return [name_of(layer) for layer in range(n_layers)]


def missing_hooks(model: ModelHandle, names: Iterable[str]) -> list[str]:
    """The names in ``names`` this model's bridge does not expose."""
    hooks = getattr(bridge_of(model), "hook_dict", {})
    return [name for name in names if name not in hooks]


# --- tokens ---------------------------------------------------------------------------------


def tokenize(
    model: ModelHandle, prompt: str, max_tokens: int | None = None
) -> tuple[TokenIds, int]:
    """Token ids ``(1, pos)`` for ``prompt``, cut to the model's context, and the uncut length.

    Special tokens are added as the model's tokenizer does; an encoder's closing special token
    ([SEP]) is kept at the end when the text is cut.

    Raises:
        PromptError: empty or oversized prompt.
    """
    if not prompt or not prompt.strip():
        raise PromptError("The prompt is empty: type some text to see its attention.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(
            f"The prompt has {len(prompt):,} characters; the limit is "
            f"{MAX_PROMPT_CHARS:,}. Paste a shorter passage."
        )
    ids = bridge_of(model).to_tokens(prompt, truncate=False).cpu()
    n_full = ids.shape[1]
    limit = min(model.facts.n_ctx, max_tokens or model.facts.n_ctx)
    if n_full > limit:
        sep = getattr(model.tokenizer, "sep_token_id", None)
        if sep is not None and int(ids[0, -1]) == sep:
            ids = torch.cat([ids[:, : limit - 1], ids[:, -1:]], dim=1)
        else:
            ids = ids[:, :limit]
    return ids, n_full


def piece_ids(model: ModelHandle, text: str) -> list[int]:
    """Token ids of ``text`` on its own: no special tokens, no context cut."""
    return list(model.tokenizer.encode(text, add_special_tokens=False))


# --- forward passes -------------------------------------------------------------------------


def model_device(model: ModelHandle) -> str:
    return str(bridge_of(model).cfg.device or "cpu")


def no_cache(model: ModelHandle) -> dict[str, Any]:
    """``use_cache=False`` for a decoder: one whole pass needs no key/value cache, and
    linear-attention layers fire their inner hooks (q, k, decay, beta) only without one."""
    return {"use_cache": False} if model.facts.causal else {}


@contextmanager
def released_patterns(bridge: Any) -> Iterator[None]:
    """Drop each attention module's copy of its pattern as soon as the module returns.

    TransformerLens keeps the last pattern on every attention module (``_pattern``): at 2,048
    tokens that is 200 MB per GPT-2-small layer, all alive at the end of the pass.
    """
    handles = [
        module.register_forward_hook(lambda mod, _inputs, _out: setattr(mod, "_pattern", None))
        for module in bridge.modules()
        if hasattr(module, "_pattern")
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_hooks(
    model: ModelHandle,
    ids: TokenIds,
    hook_names: Iterable[str],
    dtype: torch.dtype | None = torch.float32,
) -> dict[str, torch.Tensor]:
    """Forward ``ids`` once under the model's lock; return the named activations on CPU.

    Args:
        model: a loaded model.
        ids: ``batch pos`` token ids.
        hook_names: the activations to keep.
        dtype: cast them to this dtype; ``None`` keeps the model's own (masks stay intact).

    Raises:
        KeyError: a named hook did not fire in this pass.
    """
    wanted = set(hook_names)
    with model.lock, torch.no_grad(), released_patterns(bridge_of(model)):
        _, cache = bridge_of(model).run_with_cache(
            ids.to(model_device(model)), names_filter=lambda n: n in wanted, **no_cache(model)
        )
        return {name: cache[name].detach().to("cpu", dtype) for name in wanted}


def run_with_hooks(
    model: ModelHandle,
    ids: TokenIds,
    fwd_hooks: Sequence[Hook] = (),
    return_type: str | None = "logits",
    grad: bool = False,
) -> Any:
    """One forward pass under the model's lock with ``fwd_hooks`` (removed when it ends).

    Args:
        model: a loaded model.
        ids: ``batch pos`` token ids.
        fwd_hooks: ``(hook name, fn(activation, hook))`` pairs; a hook returning a tensor
            replaces the activation.
        return_type: ``"logits"``, ``"loss"`` or ``None`` (TransformerLens's vocabulary).
        grad: keep the autograd graph (for gradient-based importance).
    """
    with model.lock, torch.set_grad_enabled(grad), released_patterns(bridge_of(model)):
        return bridge_of(model).run_with_hooks(
            ids.to(model_device(model)),
            fwd_hooks=list(fwd_hooks),
            return_type=return_type,
            **no_cache(model),
        )


# --- what the softmax sees -----------------------------------------------------------------


def qk_source(model: ModelHandle) -> QKSource | None:
    """Which hooks hold q and k as the softmax sees them; probed once per model.

    Rotary bridges that list ``hook_rot_q`` may still never fire it (GPT-NeoX), so a two-token
    pass checks what really fires. ``None``: a rotary model that fires neither the rotated q/k
    nor the cos/sin tables.
    """
    if model.facts.positional != "rotary":
        return "hook_q/hook_k"
    if "qk_source" not in model.memo:
        probe: list[QKSource] = ["hook_rot_q/hook_rot_k", "hook_q/hook_k + hook_cos/hook_sin"]
        found: QKSource | None = None
        ids = torch.zeros(1, 2, dtype=torch.long)
        for source in probe:
            try:
                run_hooks(model, ids, qk_names(source, 0))
            except KeyError:
                continue
            found = source
            break
        model.memo["qk_source"] = found
    kept: QKSource | None = model.memo["qk_source"]
    return kept


def qk_names(source: QKSource, layer: int) -> list[str]:
    """The hooks to capture for layer ``layer``'s softmax q and k under ``source``."""
    if source == "hook_rot_q/hook_rot_k":
        return [rot_q_hook(layer), rot_k_hook(layer)]
    if source == "hook_q/hook_k + hook_cos/hook_sin":
        return [q_hook(layer), k_hook(layer), cos_hook(layer), sin_hook(layer)]
    return [q_hook(layer), k_hook(layer)]


def softmax_qk(
    acts: dict[str, torch.Tensor], layer: int, source: QKSource
) -> tuple[HeadActivations, HeadActivations]:
    """``batch pos head_index d_head`` q and k as the softmax sees them, from captured hooks."""
    if source == "hook_rot_q/hook_rot_k":
        return acts[rot_q_hook(layer)], acts[rot_k_hook(layer)]
    q, k = acts[q_hook(layer)], acts[k_hook(layer)]
    if source == "hook_q/hook_k + hook_cos/hook_sin":
        cos, sin = acts[cos_hook(layer)], acts[sin_hook(layer)]
        return rotate(q, cos, sin), rotate(k, cos, sin)
    return q, k


# --- the residual stream between blocks (attribution and path patching) ---------------------


def resid_pre_hook(layer: int) -> str:
    """``batch pos d_model``: the residual stream entering block ``layer`` (its norm's input and
    its skip connection; a hook's returned tensor feeds both)."""
    return f"blocks.{layer}.hook_resid_pre"


# --- the parts of the residual stream and the norms it passes (the exact QK split) ----------

NormSite = Literal["ln1", "ln2", "ln1_post", "ln2_post"]


def resid_mid_hook(layer: int) -> str:
    """``batch pos d_model``: the residual stream between block ``layer``'s attention and MLP."""
    return f"blocks.{layer}.hook_resid_mid"


def block_norm_in_hook(layer: int, site: NormSite) -> str:
    """``batch pos d_model``: the input of one of block ``layer``'s norms: ``ln1``/``ln2``
    (before attention/MLP in pre-norm models, after them in post-norm ones), ``ln1_post`` /
    ``ln2_post`` (Gemma's norms of each sublayer's output)."""
    return f"blocks.{layer}.{site}.hook_in"


def embed_norm_in_hook() -> str:
    """``batch pos d_model``: the input of the norm over the embeddings (BERT, Bloom)."""
    return "embed_ln.hook_in"


def type_embed_hook() -> str:
    """``batch pos d_model``: BERT's token type (segment) embeddings."""
    return "token_type_embed.hook_out"


def q_in_hook(layer: int) -> str:
    """``batch pos d_model``: what block ``layer``'s query projection reads (its norm's
    output); a returned tensor changes the queries alone."""
    return _attn(layer, "q.hook_in")


def k_in_hook(layer: int) -> str:
    """``batch pos d_model``: what block ``layer``'s key projection reads."""
    return _attn(layer, "k.hook_in")


def has_hook(model: ModelHandle, name: str) -> bool:
    """Whether this model's bridge exposes ``name``."""
    return not missing_hooks(model, [name])
