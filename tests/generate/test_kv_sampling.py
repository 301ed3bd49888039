"""KV cache bytes against REFERENCE.md's worked numbers, a real transformers cache, and the
sampler's filters against hand-computed distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.generate.cost import eviction_estimate, generation_estimate
from models.generate.kv import cache_nbytes, kv_bytes_per_token, kv_growth
from models.generate.sampling import choose, filtered_logits
from models.generate.settings import GenerationSettings
from models.model.facts import ModelFacts

KIB, MIB = 1024, 1024**2


def facts(n_layers: int, n_heads: int, n_kv: int, d_head: int) -> ModelFacts:
    return ModelFacts(
        name="m",
        architecture="a",
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=d_head,
        d_model=n_heads * d_head,
        n_ctx=8192,
        causal=True,
        positional="rotary",
        prepends_bos=True,
        n_params=135_000_000,
    )


SMOL = facts(30, 9, 3, 64)


def test_kv_bytes_match_the_reference_numbers():
    assert kv_bytes_per_token(SMOL, 2) == 22.5 * KIB  # bf16
    assert kv_bytes_per_token(SMOL, 2) * 8192 == 180 * MIB
    assert kv_bytes_per_token(SMOL, 2, "MHA") == 3 * kv_bytes_per_token(SMOL, 2)
    assert kv_bytes_per_token(SMOL, 2, "MQA") * 3 == kv_bytes_per_token(SMOL, 2)
    llama2 = facts(32, 32, 32, 128)
    assert kv_bytes_per_token(llama2, 2) == 512 * KIB
    growth = kv_growth(SMOL, np.array([0, 1, 4096]), 4)
    assert growth["model"].tolist() == [0.0, 46080.0, 46080.0 * 4096]
    assert set(growth) == {"model", "MHA", "MQA"}


def test_cache_bytes_read_a_real_dynamic_cache():
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(3):
        k = torch.zeros(1, 2, 7, 16, dtype=torch.bfloat16)
        cache.update(k, k.clone(), layer)
    assert cache_nbytes(cache) == 2 * 3 * 2 * 7 * 16 * 2


def test_estimates_grow_with_the_work():
    small = generation_estimate(SMOL, 64, 16)
    big = generation_estimate(SMOL, 512, 64)
    assert 0 < small.seconds() < big.seconds() and 0 < small.peak_bytes < big.peak_bytes
    one = eviction_estimate(SMOL, 1024, (512,), ("window",))
    more = eviction_estimate(SMOL, 1024, (64, 512), ("window", "h2o"))
    assert 0 < one.seconds() < more.seconds()


LOGITS = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))


def test_top_k_and_top_p_keep_the_hand_computed_tokens():
    kept = filtered_logits(LOGITS, GenerationSettings(decoding="sample", top_k=3))
    assert torch.isinf(kept).tolist() == [False, False, False, True]
    kept = filtered_logits(LOGITS, GenerationSettings(decoding="sample", top_p=0.75))
    assert torch.isinf(kept).tolist() == [False, False, True, True]  # 0.5 < 0.75 <= 0.8
    kept = filtered_logits(LOGITS, GenerationSettings(decoding="sample", top_p=0.1))
    assert torch.isinf(kept).tolist() == [False, True, True, True]  # the top token stays


def test_temperature_divides_the_logits():
    hot = torch.softmax(
        filtered_logits(LOGITS, GenerationSettings(decoding="sample", temperature=2.0)), -1
    )
    want = np.sqrt([0.5, 0.3, 0.15, 0.05])
    np.testing.assert_allclose(hot.numpy(), want / want.sum(), rtol=1e-6)


def test_choice_statistics_are_the_model_distribution():
    choice = choose(LOGITS, GenerationSettings(), None)
    assert choice.token_id == 0 and choice.prob == pytest.approx(0.5)
    entropy = -sum(p * math.log(p) for p in (0.5, 0.3, 0.15, 0.05))
    assert choice.entropy == pytest.approx(entropy, rel=1e-6)
    assert choice.top_ids == (0, 1, 2, 3)
    sampled = GenerationSettings(decoding="sample", top_k=1, seed=0)
    gen = torch.Generator().manual_seed(0)
    assert {choose(LOGITS, sampled, gen).token_id for _ in range(20)} == {0}


def test_settings_round_trip_through_link_parameters():
    sampled = GenerationSettings(
        max_new_tokens=40,
        chat=True,
        decoding="sample",
        temperature=0.7,
        top_k=20,
        top_p=0.9,
        seed=123,
    )
    assert GenerationSettings.from_params(sampled.to_params()) == (sampled, [])
    greedy = GenerationSettings(max_new_tokens=8)
    assert greedy.to_params() == {"n": "8", "chat": "0", "decoding": "greedy"}
    assert GenerationSettings.from_params(greedy.to_params()) == (greedy, [])
    unbounded = GenerationSettings(decoding="sample", seed=5)
    assert GenerationSettings.from_params(unbounded.to_params()) == (unbounded, [])
    odd, notes = GenerationSettings.from_params({"n": "many", "decoding": "beam", "temp": "-1"})
    assert odd == GenerationSettings(temperature=-1.0) and len(notes) == 2
    assert odd.problems() == []  # greedy ignores the temperature


@pytest.mark.parametrize("temp", ["1e-300", "0.001", "1e5"])
def test_a_temperature_the_sampler_cannot_divide_by_is_refused_in_words(temp):
    """A link's temp=1e-300 would turn every logit into inf and the draw into NaN; it is
    refused by the settings' own check, with the bounds, before anything runs."""
    settings, notes = GenerationSettings.from_params({"decoding": "sample", "temp": temp})
    assert not notes
    (problem,) = settings.problems()
    assert "temperature between 0.01 and 100" in problem


@pytest.mark.parametrize("temp", ["nan", "inf", "-inf"])
def test_a_temperature_that_is_not_a_finite_number_is_ignored_with_a_note(temp):
    settings, notes = GenerationSettings.from_params({"decoding": "sample", "temp": temp})
    assert settings.temperature == 1.0
    assert notes == [f"Ignored temp={temp!r} in the link: not a number."]


def test_the_bounds_are_usable_temperatures():
    """At both ends of the range the sampler's weights are a distribution (no inf, no NaN)."""
    for temp in (0.01, 100.0):
        settings = GenerationSettings(decoding="sample", temperature=temp)
        assert settings.problems() == []
        weights = torch.softmax(filtered_logits(LOGITS * 1e3, settings), -1)
        assert torch.isfinite(weights).all() and float(weights.sum()) == pytest.approx(1.0)
