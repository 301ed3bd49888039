"""The classroom's recomputation of a real head agrees with the model and with Hugging Face."""

import numpy as np
import pytest
import torch

from models.classroom import real
from models.head import HeadGroups
from models.model.forward import tokenize
from models.model.loading import load
from models.model.spec import BUNDLED_DIR, ModelSpec, minilm_dir

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"


def _needs_bundled():
    if not (BUNDLED_DIR / "model.safetensors").exists():
        pytest.skip("the bundled model has not been trained yet")


def _hf_attention(model_cls, path, ids, layer, qk_modules):
    """q, k (pos head d_head) and pattern (head q k) from HF eager attention via forward hooks."""
    hf = model_cls.from_pretrained(str(path), attn_implementation="eager").eval()
    seen = {}
    handles = [
        mod(hf, layer).register_forward_hook(
            lambda _m, _i, out, name=name: seen.__setitem__(name, out.detach())
        )
        for name, mod in qk_modules.items()
    ]
    try:
        with torch.no_grad():
            out = hf(ids, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return seen, out.attentions[layer][0].numpy()


def _check_against_model(model, layer):
    acts = real.layer_activations(model, PROMPT, layer)
    for head in range(model.facts.n_heads):
        check = real.head_steps(acts, head)
        assert check.pattern_error < 1e-5 and check.z_error < 1e-5
        if check.score_error is not None:
            assert check.score_error < 1e-5
    return acts


def test_minilm_head_matches_hooks_and_hf_eager(minilm):
    layer, head, d_head = 2, 5, minilm.facts.d_head
    acts = _check_against_model(minilm, layer)
    assert acts.scores_are_weights  # this bridge fires hook_attn_scores with the weights
    ids, _ = tokenize(minilm, PROMPT)
    from transformers import AutoModel

    seen, pattern = _hf_attention(
        AutoModel,
        minilm_dir(),
        ids,
        layer,
        {
            "q": lambda m, l: m.encoder.layer[l].attention.self.query,
            "k": lambda m, l: m.encoder.layer[l].attention.self.key,
        },
    )
    q = seen["q"][0].view(-1, minilm.facts.n_heads, d_head)[:, head].numpy()
    k = seen["k"][0].view(-1, minilm.facts.n_heads, d_head)[:, head].numpy()
    check = real.head_steps(acts, head)
    np.testing.assert_allclose(check.steps.scaled, q @ k.T / np.sqrt(d_head), atol=1e-4)
    np.testing.assert_allclose(check.steps.weights, pattern[head], atol=1e-5)


def _check_gpt2(model, path):
    """Every head of the last layer against the hooks and HF eager's q/k (from c_attn), pattern."""
    layer = model.facts.n_layers - 1
    acts = _check_against_model(model, layer)
    assert not acts.scores_are_weights
    ids, _ = tokenize(model, PROMPT)
    from transformers import AutoModelForCausalLM

    seen, pattern = _hf_attention(
        AutoModelForCausalLM, path, ids, layer, {"qkv": lambda m, l: m.transformer.h[l].attn.c_attn}
    )
    d_model, n_heads, d_head = model.facts.d_model, model.facts.n_heads, model.facts.d_head
    q, k, _ = seen["qkv"][0].split(d_model, dim=-1)
    for head in range(n_heads):
        qh = q.view(-1, n_heads, d_head)[:, head].numpy()
        kh = k.view(-1, n_heads, d_head)[:, head].numpy()
        check = real.head_steps(acts, head)
        ref = np.tril(qh @ kh.T / np.sqrt(d_head))
        np.testing.assert_allclose(np.tril(check.steps.scaled), ref, atol=1e-4)
        np.testing.assert_allclose(check.steps.weights, pattern[head], atol=1e-5)
        assert np.isneginf(check.steps.logits[0, 1:]).all()


def test_bundled_head_matches_hooks_and_hf_eager(bundled_if_trained):
    _check_gpt2(bundled_if_trained, BUNDLED_DIR)


@pytest.fixture(scope="module")
def bundled_if_trained(request):
    _needs_bundled()
    return request.getfixturevalue("bundled")


def _tiny(tmp_path_factory, name, model_cls, config):
    """A random tiny model saved in HF format (with MiniLM's tokenizer), loaded by the bridge."""
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp(name)
    torch.manual_seed(0)
    model_cls(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(path)
    return load(ModelSpec(str(path))), path


def test_gpt2_architecture_matches_hf_eager(tmp_path_factory):
    """The bundled model's code path on a random GPT-2, so it is covered before training ends."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _check_gpt2(
        *_tiny(
            tmp_path_factory,
            "gpt2",
            GPT2LMHeadModel,
            GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=30522),
        )
    )


def test_gqa_rotary_model_uses_rotated_q_k_and_shared_kv_heads(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    model, _ = _tiny(
        tmp_path_factory,
        "llama",
        LlamaForCausalLM,
        LlamaConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            vocab_size=30522,
            max_position_embeddings=128,
        ),
    )
    acts = real.layer_activations(model, PROMPT, 1)
    assert acts.rotated and acts.k.shape[1] == 2 and acts.q.shape[1] == 4
    for head in range(4):
        check = real.head_steps(acts, head)
        assert check.kv_head == head // 2
        assert check.score_error < 1e-5 and check.pattern_error < 1e-5 and check.z_error < 1e-5


def test_window_helpers_and_kv_mapping():
    w = np.arange(16.0).reshape(4, 4) / 100
    np.testing.assert_array_equal(real.window(w, 1, 3), [[0.05, 0.06], [0.09, 0.10]])
    np.testing.assert_allclose(real.mass_outside(np.full((4, 4), 0.25), 1, 3), [0.5, 0.5])
    groups = HeadGroups.checked(8, 2)
    assert [groups.kv_head(h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert list(groups.query_heads(1)) == [4, 5, 6, 7] and groups.size == 4
    assert (
        groups.kind == "GQA" and HeadGroups(4, 4).kind == "MHA" and HeadGroups(4, 1).kind == "MQA"
    )
    with pytest.raises(ValueError):
        HeadGroups.checked(6, 4)


def test_smollm2_head_reads_rotated_q_and_k_and_its_own_scale(smollm2):
    acts = real.layer_activations(smollm2, "The ferry leaves the harbour at seven.", 17)
    assert acts.rotated and acts.scale == pytest.approx(0.125)
    check = real.head_steps(acts, 4)
    assert check.kv_head == 1  # 9 query heads share 3 key/value heads: 3, 4, 5 read head 1
    assert check.pattern_error < 1e-5 and check.z_error < 1e-4


@pytest.mark.parametrize("name", ["gemma2", "gemma3", "gpt_oss"])
def test_soft_caps_windows_and_sinks_agree_with_the_model(tiny_variants, name):
    """Gemma 2 (capped logits, a window of 6), Gemma 3 (windows) and gpt-oss (learned sinks):
    every head's recomputed scores, pattern and z agree with the model's own hooks, and the
    pattern with Hugging Face's eager weights."""
    from tests.model.variant_reference import hf_attentions

    model = tiny_variants.model(name)
    for layer in range(model.facts.n_layers):
        acts = _check_against_model(model, layer)
        ids = tokenize(model, PROMPT)[0]
        want = hf_attentions(tiny_variants.path(name), ids)[layer][0].numpy()
        for head in range(model.facts.n_heads):
            got = real.head_steps(acts, head).steps.weights
            np.testing.assert_allclose(got, want[head], atol=1e-5)
    if name == "gemma2":  # the cap is the model's own, and it bites on these scores
        from transformers import AutoConfig

        cap = AutoConfig.from_pretrained(tiny_variants.path(name)).attn_logit_softcapping
        steps = real.head_steps(acts, 0).steps
        assert acts.softcap == cap and np.abs(steps.scaled).max() > 1.2 * np.abs(steps.capped).max()
