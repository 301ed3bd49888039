"""Tiny random checkpoints of the attention variants of 2025–26 models, built on the fly.

No network: each is built from transformers' own configuration class, saved to a directory with
the same small BPE tokenizer as :mod:`tests.attention.tiny_models`, and loaded through the
app's loader like any local directory. Windows are a few tokens wide so that they bite on a
short prompt; weights are drawn large enough that attention is peaked (a wrong term then shows
as a large error, not as noise).

- ``gpt_oss``: learned per-head sinks, alternating sliding (window 6) and full layers;
- ``gemma2``: sliding / global layers 1:1 with logit soft-capping;
- ``gemma3``: five local layers to one global, QK-norm, a second RoPE base;
- ``qwen3``: QK-norm, a sliding window on the first layer only;
- ``qwen3_next``: Gated DeltaNet (linear attention) layers and gated full-attention layers;
- ``deepseek_v3``: multi-head latent attention (a compressed KV latent, split RoPE heads);
- ``diffllama``: differential attention.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import (
    DeepseekV3Config,
    DiffLlamaConfig,
    Gemma2Config,
    Gemma3TextConfig,
    GptOssConfig,
    Qwen3Config,
    Qwen3NextConfig,
)

from tests.attention.tiny_models import save, small_tokenizer

PROMPT = "def main(args): return args.out and the model is here. The model is here again."
WINDOW = 6
COMMON: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
    bos_token_id=0,
    eos_token_id=0,
    pad_token_id=0,
    initializer_range=0.3,
    tie_word_embeddings=False,
)


def _gpt_oss(vocab: int) -> Any:
    return GptOssConfig(
        vocab_size=vocab,
        num_hidden_layers=2,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 64,
            "rope_theta": 150000.0,
        },
        **COMMON,
    )


def _gemma2(vocab: int) -> Any:
    return Gemma2Config(
        vocab_size=vocab,
        num_hidden_layers=2,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        query_pre_attn_scalar=16,
        attn_logit_softcapping=5.0,
        final_logit_softcapping=30.0,
        **COMMON,
    )


def _gemma3(vocab: int) -> Any:
    return Gemma3TextConfig(
        vocab_size=vocab,
        num_hidden_layers=6,
        sliding_window=WINDOW,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        query_pre_attn_scalar=16,
        **COMMON,
    )


def _qwen3(vocab: int) -> Any:
    return Qwen3Config(
        vocab_size=vocab,
        num_hidden_layers=2,
        use_sliding_window=True,
        sliding_window=WINDOW,
        max_window_layers=1,
        layer_types=["sliding_attention", "full_attention"],
        **COMMON,
    )


def _qwen3_next(vocab: int) -> Any:
    return Qwen3NextConfig(
        vocab_size=vocab,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=8,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        **COMMON,
    )


def _deepseek_v3(vocab: int) -> Any:
    common = {k: v for k, v in COMMON.items() if k != "head_dim"}
    return DeepseekV3Config(
        vocab_size=vocab,
        num_hidden_layers=2,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        n_routed_experts=2,
        num_experts_per_tok=1,
        n_group=1,
        topk_group=1,
        moe_intermediate_size=32,
        first_k_dense_replace=1,
        **{**common, "num_key_value_heads": 4},
    )


def _diffllama(vocab: int) -> Any:
    return DiffLlamaConfig(vocab_size=vocab, num_hidden_layers=2, **COMMON)


# name -> (configuration, output projection of layer {l}: its input is the merged head outputs)
VARIANTS: dict[str, tuple[Callable[[int], Any], str]] = {
    "gpt_oss": (_gpt_oss, "model.layers.{l}.self_attn.o_proj"),
    "gemma2": (_gemma2, "model.layers.{l}.self_attn.o_proj"),
    "gemma3": (_gemma3, "model.layers.{l}.self_attn.o_proj"),
    "qwen3": (_qwen3, "model.layers.{l}.self_attn.o_proj"),
    "qwen3_next": (_qwen3_next, "model.layers.{l}.self_attn.o_proj"),
    "deepseek_v3": (_deepseek_v3, "model.layers.{l}.self_attn.o_proj"),
    "diffllama": (_diffllama, "model.layers.{l}.self_attn.o_proj"),
}


def build_mamba2(out: Path) -> Path:
    """A tiny Mamba-2 (every layer a state-space mixer, no attention) under ``out/mamba2``: the
    app refuses it at load."""
    tokenizer = small_tokenizer()
    config = transformers.Mamba2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_heads=4,
        head_dim=16,
        state_size=8,
        n_groups=1,
        expand=2,
        conv_kernel=4,
        chunk_size=16,
    )
    torch.manual_seed(0)
    return save(causal_lm(config), tokenizer, out / "mamba2")


def causal_lm(config: Any) -> torch.nn.Module:
    """The causal-LM class transformers registers for ``config``."""
    return transformers.AutoModelForCausalLM.from_config(config)


def build(name: str, out: Path, tokenizer: Any = None, seed: int = 0) -> Path:
    """Save the tiny ``name`` model of :data:`VARIANTS` under ``out``; return its directory."""
    tokenizer = tokenizer or small_tokenizer()
    torch.manual_seed(seed)
    return save(causal_lm(VARIANTS[name][0](len(tokenizer))), tokenizer, out / name)


def build_variants(out: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Save every (or each named) variant under ``out``; return name -> directory."""
    tokenizer = small_tokenizer()
    chosen = list(VARIANTS) if names is None else names
    return {name: build(name, out, tokenizer, seed) for seed, name in enumerate(chosen)}
