"""Each attention variant's maths against transformers' own computation on tiny random models.

The references are Hugging Face's eager attention (``output_attentions``), the model's own
modules read through plain forward hooks, and transformers' own delta-rule function called from
inside the model's forward pass.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch
from transformers.models.deepseek_v3 import modeling_deepseek_v3

from models.errors import ModelLoadError
from models.model.forward import (
    k_hook,
    linear_hook,
    q_gate_hook,
    q_hook,
    rot_k_hook,
    rot_q_hook,
    run_hooks,
    scores_hook,
    tokenize,
)
from models.model.loading import bridge_of, load
from models.model.spec import ModelSpec
from models.model.variants import all_plain, layer_variants
from models.model.variants.gates import mean_gate
from models.model.variants.latent import split_scores
from models.model.variants.layers import hf_modules_by_layer, layer_sink_logits
from models.model.variants.linear import l2norm, mixing_matrix
from models.model.variants.mixers import first_unread
from models.model.variants.sinks import full_row_entropy, sink_weights, with_sink_column
from models.model.variants.windows import capped, edge_weight, window_edge
from tests.attention.tiny_variants import PROMPT, WINDOW, build_mamba2
from tests.model.variant_reference import (
    delta_rule_inside_transformers,
    eager,
    hf_attentions,
    hf_gate,
)

TOL = 1e-5


def prompt_ids(model):
    return tokenize(model, PROMPT)[0]


# --- what each layer is ----------------------------------------------------------------------


def test_layer_kinds_read_from_the_models_own_modules(tiny_variants, bundled):
    def kinds(name):
        return [(v.kind, v.window) for v in layer_variants(tiny_variants.model(name))]

    assert kinds("gpt_oss") == [("sliding", WINDOW), ("softmax", None)]
    assert kinds("gemma3") == [("sliding", WINDOW)] * 5 + [("softmax", None)]
    assert kinds("qwen3") == [("sliding", WINDOW), ("softmax", None)]
    assert kinds("qwen3_next") == [("linear", None), ("softmax", None)]
    assert all(v.sinks for v in layer_variants(tiny_variants.model("gpt_oss")))
    assert [v.softcap for v in layer_variants(tiny_variants.model("gemma2"))] == [5.0, 5.0]
    assert [v.gated for v in layer_variants(tiny_variants.model("qwen3_next"))] == [False, True]
    latent = layer_variants(tiny_variants.model("deepseek_v3"))[0].latent
    assert (latent.kv_lora_rank, latent.rope_dim, latent.nope_dim) == (16, 8, 8)
    assert latent.cached_per_token == 24
    assert all_plain(layer_variants(bundled)) and not all_plain(
        layer_variants(tiny_variants.model("qwen3"))
    )


def test_a_layers_words_name_its_window_and_extras(tiny_variants):
    gpt_oss = layer_variants(tiny_variants.model("gpt_oss"))
    assert gpt_oss[0].describe() == f"sliding window {WINDOW}, learned sinks"
    assert layer_variants(tiny_variants.model("gemma2"))[1].describe() == (
        "global, logits capped at ±5"
    )


# --- learned sinks ---------------------------------------------------------------------------


def test_sink_weight_is_one_minus_hf_row_sum(tiny_variants):
    model = tiny_variants.model("gpt_oss")
    ids = prompt_ids(model)
    attentions = hf_attentions(tiny_variants.path("gpt_oss"), ids)
    names = [scores_hook(layer) for layer in range(model.facts.n_layers)]
    acts = run_hooks(model, ids, names)
    for layer, name in enumerate(names):
        lse = torch.logsumexp(acts[name][0], dim=-1)
        sink = sink_weights(lse, layer_sink_logits(model, layer))
        row_sum = attentions[layer][0].sum(-1)
        assert float(sink.max()) > 0.3  # the sinks take a visible share
        torch.testing.assert_close(sink, 1 - row_sum, atol=TOL, rtol=0)
        full = with_sink_column(attentions[layer][0].numpy(), sink.numpy())
        np.testing.assert_allclose(full.sum(-1), 1.0, atol=TOL)


def test_full_row_entropy_counts_the_sink():
    rows = np.array([[0.25, 0.25]])
    assert full_row_entropy(rows, np.array([0.5]))[0] == pytest.approx(1.5 * np.log(2))
    assert full_row_entropy(np.array([[1.0, 0.0]]))[0] == 0.0


# --- windows and soft-caps -------------------------------------------------------------------


def test_sliding_layers_see_the_last_window_keys_as_hf_does(tiny_variants):
    model = tiny_variants.model("gemma3")
    ids = prompt_ids(model)
    attentions = hf_attentions(tiny_variants.path("gemma3"), ids)
    n = ids.shape[1]
    for layer, variant in enumerate(layer_variants(model)):
        seen = (attentions[layer][0] > 0).sum(-1)  # head query
        expected = torch.tensor([min(i + 1, variant.window or n) for i in range(n)])
        assert torch.equal(seen, expected.expand_as(seen))
    pattern = attentions[0][0].numpy()
    queries = np.arange(WINDOW, n)
    np.testing.assert_allclose(
        edge_weight(pattern, WINDOW),
        pattern[:, queries, queries - WINDOW + 1].astype(np.float64).mean(-1),
        rtol=1e-6,
    )
    assert window_edge(WINDOW - 1, WINDOW) is None and window_edge(10, WINDOW) == 10 - WINDOW + 1


def test_softcap_turns_the_raw_logits_into_the_models_own(tiny_variants):
    model = tiny_variants.model("gemma2")
    ids = prompt_ids(model)
    attentions = hf_attentions(tiny_variants.path("gemma2"), ids)
    variant = layer_variants(model)[1]  # global: every earlier key
    acts = run_hooks(model, ids, [rot_q_hook(1), rot_k_hook(1)])
    q = acts[rot_q_hook(1)][0].transpose(0, 1)  # head pos d
    k = acts[rot_k_hook(1)][0].transpose(0, 1).repeat_interleave(2, dim=0)
    scale = hf_modules_by_layer(model)[1][0].scaling
    raw = torch.einsum("hqd,hkd->hqk", q, k) * scale
    assert float(raw.abs().max()) > 2 * variant.softcap  # the cap bites
    n = raw.shape[-1]
    later = torch.ones(n, n, dtype=torch.bool).triu(1)
    shown = torch.softmax(capped(raw, variant.softcap).masked_fill(later, -torch.inf), dim=-1)
    torch.testing.assert_close(shown, attentions[1][0], atol=TOL, rtol=0)
    uncapped = torch.softmax(raw.masked_fill(later, -torch.inf), dim=-1)
    assert float((uncapped - attentions[1][0]).abs().max()) > 0.1


# --- gates -----------------------------------------------------------------------------------


def test_gate_is_the_models_sigmoid_gate(tiny_variants):
    model = tiny_variants.model("qwen3_next")
    ids = prompt_ids(model)
    heads = model.facts.n_heads
    want = hf_gate(tiny_variants.path("qwen3_next"), ids, 1, heads)  # head query
    logits = run_hooks(model, ids, [q_gate_hook(1)])[q_gate_hook(1)][0]
    got = mean_gate(logits, heads)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    assert float(got.std()) > 0.01  # the gate varies: a constant would not test it


# --- linear attention ------------------------------------------------------------------------


def test_mixing_matrix_times_v_is_the_delta_rule_output(tiny_variants):
    model = tiny_variants.model("qwen3_next")
    ids = prompt_ids(model)
    q, k, v, g, beta, out = delta_rule_inside_transformers(tiny_variants.path("qwen3_next"), ids)
    m = mixing_matrix(q, k, g, beta)  # no v
    got = torch.einsum("hts,shd->thd", m, v)
    assert float(out.abs().max()) > 0.1
    torch.testing.assert_close(got, out, atol=TOL, rtol=1e-4)
    assert torch.equal(m, m.tril())  # a later token never reaches back
    # the same from the bridge's hooks, the inputs the app captures
    names = {x: linear_hook(0, x) for x in ("hook_q", "hook_k", "hook_log_decay", "hook_beta")}
    acts = run_hooks(model, ids, names.values())
    from_hooks = mixing_matrix(*(acts[names[x]][0] for x in names))
    torch.testing.assert_close(from_hooks, m, atol=TOL, rtol=0)


def test_dropping_the_key_removal_would_not_reproduce_the_layer(tiny_variants):
    """The delta rule's key removal matters: the gated-linear shortcut M = (q.k) beta decay
    misses the output by far more than the tolerance."""
    model = tiny_variants.model("qwen3_next")
    q, k, v, g, beta, out = delta_rule_inside_transformers(
        tiny_variants.path("qwen3_next"), prompt_ids(model)
    )
    qn, kn = l2norm(q) * q.shape[-1] ** -0.5, l2norm(k)
    group = g.shape[1] // q.shape[1]
    dots = torch.einsum("tkd,skd->kts", qn, kn).repeat_interleave(group, dim=0)
    cum = g.transpose(0, 1).cumsum(-1)
    decay = (cum[:, :, None] - cum[:, None, :]).exp().tril()
    shortcut = dots * decay * beta.transpose(0, 1)[:, None, :]
    assert float((torch.einsum("hts,shd->thd", shortcut, v) - out).abs().max()) > 1e-2


# --- latent attention ------------------------------------------------------------------------


def test_latent_scores_split_into_content_and_rope_exactly(tiny_variants):
    model = tiny_variants.model("deepseek_v3")
    ids = prompt_ids(model)
    attentions = hf_attentions(tiny_variants.path("deepseek_v3"), ids)
    latent = layer_variants(model)[0].latent
    module = hf_modules_by_layer(model)[0][0]
    seen = {}
    hf = eager(tiny_variants.path("deepseek_v3"))
    real = modeling_deepseek_v3.eager_attention_forward

    def record(module, query, key, value, mask, **kwargs):
        seen.setdefault("qk", (query[0], key[0]))
        return real(module, query, key, value, mask, **kwargs)

    # the query and key transformers' own attention function receives
    patched = mock.patch.object(modeling_deepseek_v3, "eager_attention_forward", record)
    with patched, torch.no_grad():
        hf(ids)
    q, k = seen["qk"]
    content, rope = split_scores(q, k, latent.nope_dim, module.scaling)
    n = q.shape[1]
    later = torch.ones(n, n, dtype=torch.bool).triu(1)
    rebuilt = torch.softmax((content + rope).masked_fill(later, -torch.inf), dim=-1)
    torch.testing.assert_close(rebuilt, attentions[0][0], atol=TOL, rtol=0)
    assert float(rope.abs().max()) > 0.1 and float(content.abs().max()) > 0.1
    acts = run_hooks(model, ids, [q_hook(0), k_hook(0)])  # what the app splits
    torch.testing.assert_close(acts[q_hook(0)][0], q, atol=TOL, rtol=0)
    torch.testing.assert_close(acts[k_hook(0)][0], k, atol=TOL, rtol=0)


# --- differential attention ------------------------------------------------------------------


def test_differential_attention_is_refused_in_one_line_naming_it(tiny_variants):
    with pytest.raises(ModelLoadError) as err:
        load(ModelSpec(str(tiny_variants.path("diffllama"))))
    text = str(err.value)
    assert "\n" not in text and len(text) < 300
    assert "DiffLlamaForCausalLM" in text and "differential attention" in text
    assert "Available architectures" not in text and "GPT2LMHeadModel" not in text


def test_a_state_space_layer_is_refused_at_load_and_attention_layers_are_not(
    tiny_variants, tmp_path
):
    """Mamba-2's blocks hold a ``mixer`` and no attention: loading raises one line naming the
    architecture and the layer. Qwen3-Next (a Gated DeltaNet layer and a softmax layer) and
    gpt-oss load as before."""
    path = build_mamba2(tmp_path)
    with pytest.raises(ModelLoadError) as refused:
        load(ModelSpec(str(path)))
    said = str(refused.value)
    assert said.startswith("Mamba2ForCausalLM: layer 0 is a state-space mixer") and "\n" not in said
    for name in ("qwen3_next", "gpt_oss"):
        assert first_unread(bridge_of(tiny_variants.model(name))) is None
