"""Generation and eviction on tiny random checkpoints of other attention variants: a Mistral with
a sliding window (the cache keeps only the window) and GQA, a GPT-NeoX with partial RoPE, and a
Bloom with ALiBi (whose attention the app cannot intercept: refused with a message).

References as elsewhere: transformers' ``generate`` and eager attention on the same weights,
and a plain forward with labels for the full-cache perplexity.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    BloomConfig,
    BloomForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    MistralConfig,
    MistralForCausalLM,
)

from models.generate import GenerationError, GenerationSettings, generate
from models.generate.eviction import full_pass, perplexity, policy_pass
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import ModelSpec
from tests.attention.tiny_models import save, small_tokenizer

PROMPT = "def main(args): return args.out and the model is here."
COMMON = {"bos_token_id": 0, "eos_token_id": 0, "initializer_range": 0.3}
BUILDERS = {
    "mistral_window": lambda v: MistralForCausalLM(
        MistralConfig(
            vocab_size=v,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=96,
            sliding_window=6,
            pad_token_id=0,
            **COMMON,
        )
    ),
    "neox_partial_rope": lambda v: GPTNeoXForCausalLM(
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
    "bloom_alibi": lambda v: BloomForCausalLM(
        BloomConfig(vocab_size=v, hidden_size=32, n_layer=2, n_head=4, **COMMON)
    ),
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name -> (loaded model, eager HF model) for every tiny architecture."""
    out = tmp_path_factory.mktemp("tiny_generate")
    tokenizer = small_tokenizer()
    models = {}
    for seed, (name, make) in enumerate(BUILDERS.items()):
        torch.manual_seed(seed)
        save(make(len(tokenizer)), tokenizer, out / name)
        eager = AutoModelForCausalLM.from_pretrained(out / name, attn_implementation="eager")
        models[name] = (load(ModelSpec(str(out / name))), eager.eval())
    return models


@pytest.mark.parametrize("name", ["mistral_window", "neox_partial_rope"])
def test_rows_and_tokens_match_transformers(tiny, name):
    model, hf = tiny[name]
    result = generate(model, PROMPT, GenerationSettings(max_new_tokens=10))
    prompt = torch.tensor([result.ids[: result.n_prompt]])
    with torch.no_grad():
        wanted = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=10
        )
        out = hf(torch.tensor([result.ids]), output_attentions=True)
    assert list(result.ids) == wanted[0].tolist()
    patterns = torch.stack(out.attentions)[:, 0].numpy()
    assert result.n_prompt > 6  # the window (6) really cuts rows
    for step in range(len(result.steps)):
        query = result.n_prompt - 1 + step
        np.testing.assert_allclose(
            result.rows(step), patterns[:, :, query, : query + 1], atol=1e-5, rtol=0
        )


@pytest.mark.parametrize("name", ["mistral_window", "neox_partial_rope"])
def test_full_cache_and_large_budgets_equal_plain_perplexity(tiny, name):
    model, hf = tiny[name]
    ids = tokenize(model, PROMPT * 3, 40)[0]
    with torch.no_grad():
        plain = float(torch.exp(hf(ids, labels=ids).loss))
    full = full_pass(model, ids)
    assert perplexity(full.losses) == pytest.approx(plain, rel=1e-5)
    for policy in ("window", "sinks", "h2o"):
        got = policy_pass(model, ids, policy, 60, sinks=2)
        np.testing.assert_allclose(got.numpy(), full.losses.numpy(), atol=1e-4)


def test_an_attention_the_app_cannot_read_is_refused(tiny):
    model, _ = tiny["bloom_alibi"]
    with pytest.raises(GenerationError, match="cannot be read"):
        generate(model, PROMPT, GenerationSettings(max_new_tokens=3))
    with pytest.raises(GenerationError, match="does not run through"):
        full_pass(model, tokenize(model, PROMPT)[0])
