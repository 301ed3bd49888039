"""Tiny random checkpoints of the architectures the kernel check must handle, built on the fly.

No network: each is a fresh Hugging Face model saved to a temporary directory with a small BPE
tokenizer, then loaded through the app's own loader like any local directory. Weights are drawn
with a large ``initializer_range`` so attention is peaked, not uniform (a wrong scale or a
missing rotation then shows up as a large error, not as 1e-4 noise).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    BloomConfig,
    BloomForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from models.bundled.corpus import train_tokenizer

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "def main(args): return args.out and the model is here. The model is here again."
COMMON = dict(bos_token_id=0, eos_token_id=0, initializer_range=0.3)

# name -> (builder, output projection of layer {l}: its input is the merged hook_z)
ARCHITECTURES = {
    "gpt2_inverse_layer_scale": (
        lambda v: GPT2LMHeadModel(
            GPT2Config(
                vocab_size=v,
                n_positions=96,
                n_embd=32,
                n_layer=3,
                n_head=4,
                scale_attn_by_inverse_layer_idx=True,
                **COMMON,
            )
        ),
        "transformer.h.{l}.attn.c_proj",
    ),
    "llama_gqa_rope": (
        lambda v: LlamaForCausalLM(
            LlamaConfig(
                vocab_size=v,
                hidden_size=64,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=96,
                pad_token_id=0,
                **COMMON,
            )
        ),
        "model.layers.{l}.self_attn.o_proj",
    ),
    "neox_partial_rope": (
        lambda v: GPTNeoXForCausalLM(
            GPTNeoXConfig(
                vocab_size=v,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=96,
                rotary_pct=0.5,
                **COMMON,
            )
        ),
        "gpt_neox.layers.{l}.attention.dense",
    ),
    "bloom_alibi_6_heads": (
        lambda v: BloomForCausalLM(
            BloomConfig(vocab_size=v, hidden_size=48, n_layer=2, n_head=6, **COMMON)
        ),
        "transformer.h.{l}.self_attention.dense",
    ),
}


# Architectures whose attention score goes through more than a projection and a rotation:
# QK-norm (Qwen3) and Gemma 2's soft-capped logits, sandwich norms, 1 + w norm weights,
# query_pre_attn_scalar and a sliding window shorter than PROMPT on its local layers.
QK_ARCHITECTURES = {
    "qwen3_qk_norm": lambda v: Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=v,
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=96,
            pad_token_id=0,
            **COMMON,
        )
    ),
    "gemma2_softcap": lambda v: Gemma2ForCausalLM(
        Gemma2Config(
            vocab_size=v,
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=96,
            attn_logit_softcapping=5.0,
            sliding_window=8,
            pad_token_id=0,
            **COMMON,
        )
    ),
}


def small_tokenizer() -> Any:
    """The 300-piece BPE tokenizer every tiny model shares."""
    return train_tokenizer((ROOT / "models" / "bundled" / "train.py").read_text() * 2, 300)


def save(model: Any, tokenizer: Any, path: Path) -> Path:
    """``model`` and ``tokenizer`` as a checkpoint folder at ``path``."""
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_all(out: Path) -> dict[str, Path]:
    """Save every architecture of :data:`ARCHITECTURES` under ``out``; return name -> directory."""
    tokenizer = small_tokenizer()
    dirs = {}
    for seed, (name, (make, _)) in enumerate(ARCHITECTURES.items()):
        torch.manual_seed(seed)
        dirs[name] = save(make(len(tokenizer)), tokenizer, out / name)
    return dirs


def build_qk(out: Path) -> dict[str, Path]:
    """Save every architecture of :data:`QK_ARCHITECTURES` under ``out``, each norm's weight
    drawn at random (a norm gain left out, or read without Gemma's ``1 + w``, then shows)."""
    tokenizer = small_tokenizer()
    dirs = {}
    for seed, (name, make) in enumerate(QK_ARCHITECTURES.items()):
        torch.manual_seed(100 + seed)
        model = make(len(tokenizer))
        with torch.no_grad():
            for param_name, param in model.named_parameters():
                if "norm" in param_name:
                    param.uniform_(-0.5, 1.5)
        dirs[name] = save(model, tokenizer, out / name)
    return dirs
