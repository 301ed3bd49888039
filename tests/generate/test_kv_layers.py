"""The KV cache layer by layer, against the real cache transformers leaves after a generation:
sliding layers stop growing (Gemma 3: five local layers to one global; Qwen3: a window on the
first layer only), and a latent layer's bytes come from its latent size."""

from __future__ import annotations

import numpy as np
import pytest

from models.generate.generation import generate
from models.generate.kv import growing_bytes_per_token, held_tokens, kv_growth, layered_kv_bytes
from models.generate.settings import GenerationSettings
from models.model.variants import LayerVariant, layer_variants
from models.model.variants.latent import LatentShape
from tests.attention.tiny_variants import PROMPT, WINDOW


@pytest.mark.parametrize("name", ["gemma3", "qwen3"])
def test_the_layered_count_equals_the_real_cache_after_a_generation(tiny_variants, name):
    model = tiny_variants.model(name)
    gen = generate(model, PROMPT, GenerationSettings(max_new_tokens=6))
    variants = layer_variants(model)
    assert any(v.kind == "sliding" for v in variants) and any(v.kind == "softmax" for v in variants)
    size = 4  # float32
    counted = layered_kv_bytes(model.facts, variants, np.array([gen.cache_tokens]), size)
    assert int(counted[0]) == gen.cache_bytes
    # by hand: every token on the global layers, WINDOW - 1 on each sliding one
    per_layer = 2 * model.facts.n_kv_heads * model.facts.d_head * size
    n_global = sum(v.kind == "softmax" for v in variants)
    by_hand = per_layer * (n_global * gen.cache_tokens + (len(variants) - n_global) * (WINDOW - 1))
    assert gen.cache_bytes == by_hand
    assert growing_bytes_per_token(model.facts, variants, size) == per_layer * n_global
    plain = kv_growth(model.facts, np.array([gen.cache_tokens]), size)["model"][0]
    assert plain > gen.cache_bytes  # the every-layer formula over-counts this model


def test_held_tokens_and_latent_bytes_by_hand(bundled):
    sliding, linear = LayerVariant("sliding", 4, window=8), LayerVariant("linear", 4)
    lengths = np.array([0, 3, 7, 8, 100])
    assert held_tokens(sliding, lengths).tolist() == [0, 3, 7, 7, 7]
    assert held_tokens(linear, lengths).tolist() == [0] * 5
    assert held_tokens(LayerVariant("softmax", 4), lengths).tolist() == lengths.tolist()
    latent = LayerVariant("softmax", 4, latent=LatentShape(32, 8, 16, 16))
    facts = bundled.facts
    bytes_ = layered_kv_bytes(facts, [latent, linear], np.array([10]), 2)
    assert bytes_[0] == (32 + 8) * 2 * 10  # the latent and the shared rotated key, no heads
    mha = layered_kv_bytes(facts, [latent], np.array([10]), 2, "MHA")
    assert mha[0] == 2 * facts.n_heads * facts.d_head * 2 * 10
