"""A 2,048-token prompt on a GPT-2-small-sized model, held as q, k and LSE, rebuilt on demand."""

import shutil

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from models.capture.run import capture
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import BUNDLED_DIR, ModelSpec

N_TOKENS = 2048


@pytest.fixture(scope="module")
def gpt2_small_dir(tmp_path_factory):
    """GPT-2 small's shape (12 layers x 12 heads, d_model 768) with random weights."""
    path = tmp_path_factory.mktemp("gpt2-small-random")
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=2048,
        n_positions=N_TOKENS,
        n_embd=768,
        n_layer=12,
        n_head=12,
        bos_token_id=0,
        eos_token_id=0,
    )
    GPT2LMHeadModel(config).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_DIR / name, path / name)
    return path


@pytest.fixture(scope="module")
def long_run(gpt2_small_dir):
    model = load(ModelSpec(str(gpt2_small_dir)))
    prompt = " ".join(f"word{i % 97} =" for i in range(4000))
    run = capture(model, prompt)
    ids, _ = tokenize(model, prompt)
    return model, run, ids


def test_long_prompt_is_held_factored(long_run):
    model, run, _ = long_run
    assert run.n_tokens == N_TOKENS and run.factored
    full = model.facts.n_layers * model.facts.n_heads * N_TOKENS**2 * 4
    assert run.store.nbytes < full / 10


@pytest.mark.slow
def test_rebuilt_windows_equal_the_model_patterns(long_run, gpt2_small_dir):
    _, run, ids = long_run
    hf = AutoModelForCausalLM.from_pretrained(gpt2_small_dir, attn_implementation="eager").eval()
    wanted = {0: [0, 7], 5: [3], 11: [11]}
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    rng = np.random.default_rng(0)
    for layer, heads in wanted.items():
        expected_layer = attentions[layer][0].numpy()
        for head in heads:
            np.testing.assert_allclose(run.pattern(layer, head), expected_layer[head], atol=1e-5)
            for _ in range(3):
                r0, c0 = rng.integers(0, N_TOKENS - 300, size=2)
                rows, cols = slice(r0, r0 + 300), slice(c0, c0 + 257)
                np.testing.assert_allclose(
                    run.window(layer, head, rows, cols), expected_layer[head][rows, cols], atol=1e-5
                )
        np.testing.assert_allclose(run.layer_patterns(layer), expected_layer, atol=1e-5)


def test_short_prompts_stay_dense(bundled):
    run = capture(bundled, "a short prompt")
    assert not run.factored


def test_factored_and_dense_agree_on_the_same_prompt(any_model):
    prompt = "Attention is what a head spends on the tokens it looks at. " * 6
    dense = capture(any_model, prompt)
    factored = capture(any_model, prompt, dense_limit=0)
    assert factored.factored and not dense.factored
    np.testing.assert_allclose(factored.patterns, dense.patterns, atol=1e-5)
