"""Captures of the attention variants against transformers' own computations, and the fidelity
check and the bridge comparison on planted faults."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.capture.fidelity import measure, sample_rows, tolerance
from models.capture.rollout import attention_rollout
from models.capture.run import capture
from models.capture.sinks import measured_sink
from models.capture.spans import span_weights
from models.capture.weighted import gated_norms, value_norms, value_weighting
from models.model.eager import run_eager
from models.model.forward import pattern_hook, tokenize
from models.model.loading import load
from models.model.parity import MEMO_KEY, check_parity, parity_of
from models.model.spec import ModelSpec
from tests.attention.tiny_variants import PROMPT
from tests.model.variant_reference import (
    delta_rule_inside_transformers,
    hf_attentions,
    hf_gate,
    hf_value_weighted,
)

TOL = 1e-5
SOFTMAX_MODELS = ["gpt_oss", "gemma2", "gemma3", "qwen3", "qwen3_next", "deepseek_v3"]


@pytest.fixture(scope="module")
def runs(tiny_variants):
    return {name: capture(tiny_variants.model(name), PROMPT) for name in SOFTMAX_MODELS}


def ids_of(run):
    return torch.tensor([run.token_ids])


@pytest.mark.parametrize("name", SOFTMAX_MODELS)
def test_patterns_equal_hf_eager_attention(tiny_variants, runs, name):
    run = runs[name]
    attentions = hf_attentions(tiny_variants.path(name), ids_of(run))
    assert run.path == "dense" and run.extras is not None
    softmax = run.softmax_layers()  # transformers returns weights for these layers only
    assert len(attentions) == len(softmax)
    for layer, want in zip(softmax, attentions, strict=True):
        np.testing.assert_allclose(run.layer_patterns(layer), want[0].numpy(), atol=TOL, rtol=0)
    assert run.fidelity is not None and run.fidelity.passes
    assert run.fidelity.worst[1] < 1e-5


def test_sink_is_one_minus_hf_row_sum_and_completes_each_row(tiny_variants, runs):
    run = runs["gpt_oss"]
    attentions = hf_attentions(tiny_variants.path("gpt_oss"), ids_of(run))
    for layer in range(run.facts.n_layers):
        sink = run.extras.sinks[layer]
        want = 1.0 - attentions[layer][0].sum(-1).numpy()
        np.testing.assert_allclose(sink, want, atol=TOL, rtol=0)
        np.testing.assert_allclose(run.layer_patterns(layer).sum(-1) + sink, 1.0, atol=TOL)
        assert sink.max() > 0.3
    assert run.extras.sink_logits[0].shape == (run.facts.n_heads,)


def test_gate_equals_the_models_sigmoid_gate(tiny_variants, runs):
    run = runs["qwen3_next"]
    want = hf_gate(tiny_variants.path("qwen3_next"), ids_of(run), 1, run.facts.n_heads)
    np.testing.assert_allclose(run.extras.mean_gate(1), want.numpy(), atol=TOL, rtol=0)
    assert run.extras.mean_gate(0) is None  # the linear layer has no output gate


def test_mixing_matrix_reproduces_the_delta_rule_inside_transformers(tiny_variants, runs):
    run = runs["qwen3_next"]
    _, _, v, _, _, out = delta_rule_inside_transformers(
        tiny_variants.path("qwen3_next"), ids_of(run)
    )
    m = torch.from_numpy(np.array(run.extras.mixing[0]))
    got = torch.einsum("hts,shd->thd", m, v)
    torch.testing.assert_close(got, out, atol=TOL, rtol=1e-4)
    assert not run.layer_patterns(0).any()  # no softmax pattern stands in for it
    assert run.fidelity.errors[0] < 1e-5  # measured on the linear layer too


def test_latent_split_adds_up_to_the_scores_shown(runs):
    run = runs["deepseek_v3"]
    content, rope = run.extras.latent_split(0, 1)
    n = run.n_tokens
    scores = torch.from_numpy(content + rope).masked_fill(
        torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf
    )
    np.testing.assert_allclose(
        torch.softmax(scores, dim=-1).numpy(), run.pattern(0, 1), atol=TOL, rtol=0
    )


def fidelity_of(model, run, shown, gates=None):
    ids = ids_of(run)
    rows = sample_rows(run.n_tokens)
    _, reference = run_eager(model, ids)
    return measure(
        run.facts.n_layers,
        rows,
        lambda layer: shown(layer, rows),
        reference,
        run.extras.gates if gates is None else gates,
        {},
        "float32",
        run.facts.architecture,
    )


def test_fidelity_refuses_rows_that_fold_the_sink_back_in(tiny_variants, runs):
    """Rows renormalised to sum to 1 (the sink dropped and forgotten) no longer reproduce the
    layer's output: the check says so, naming the architecture."""
    run = runs["gpt_oss"]

    def renormalised(layer, rows):
        window = run.store.layer_window(layer, rows, slice(None))
        return window / window.sum(-1, keepdims=True)

    found = fidelity_of(tiny_variants.model("gpt_oss"), run, renormalised)
    assert not found.passes and found.worst[1] > 100 * tolerance("float32")
    assert "GptOssForCausalLM" in found.refusal()


def test_fidelity_refuses_patterns_without_their_gate(tiny_variants, runs):
    run = runs["qwen3_next"]

    def shown(layer, rows):
        return (
            None
            if run.kind(layer) == "linear"
            else run.store.layer_window(layer, rows, slice(None))
        )

    model = tiny_variants.model("qwen3_next")
    assert fidelity_of(model, run, shown).passes
    ungated = fidelity_of(model, run, shown, gates={})
    assert not ungated.passes and ungated.worst[0] == 1


def test_a_bridge_that_disagrees_is_named_at_load_and_transformers_is_used(tiny_variants):
    model = load(ModelSpec(str(tiny_variants.path("qwen3"))))  # its own copy: a hook is added
    assert parity_of(model) is not None and parity_of(model).agrees
    hook = model.bridge.hook_dict[pattern_hook(0)]
    hook.add_hook(lambda pattern, hook: pattern * 0.5, is_permanent=True)
    parity = check_parity(model)
    assert not parity.agrees and "disagree" in parity.text()
    model.memo[MEMO_KEY] = parity
    run = capture(model, PROMPT)
    assert run.path == "transformers"
    attentions = hf_attentions(tiny_variants.path("qwen3"), tokenize(model, PROMPT)[0])
    np.testing.assert_allclose(run.layer_patterns(0), attentions[0][0].numpy(), atol=TOL)
    assert run.fidelity.passes


def test_plain_models_keep_their_paths_and_are_measured(bundled, bundled_bf16):
    dense = capture(bundled, "def f(x): return x + 1")
    assert dense.path == "dense" and dense.extras is None
    assert dense.fidelity.worst[1] < 1e-5
    fused = capture(bundled_bf16, "def f(x): return x + 1")
    assert fused.path == "fused" and fused.extras is None
    assert fused.fidelity.passes and len(fused.fidelity.errors) == bundled.facts.n_layers
    assert 0 < fused.fidelity.worst[1] <= tolerance("bfloat16")


def test_a_span_over_all_heads_averages_the_softmax_layers_only(tiny_variants, runs):
    """Qwen3-Next: "all heads" is the mean of HF's eager weights over the heads of its softmax
    layers; the linear layer's signed mixing matrix is not averaged in."""
    run = runs["qwen3_next"]
    found = hf_attentions(tiny_variants.path("qwen3_next"), ids_of(run))
    softmax = [a[0].double().numpy() for a in found if a is not None]
    assert 0 < len(softmax) < run.facts.n_layers  # the tiny model has both kinds of layer
    rows = slice(2, 6)
    want = np.mean([a[:, rows].mean(axis=1) for a in softmax], axis=(0, 1))  # from the span
    got = span_weights(run, "all", 0, 0, rows, "from")
    seen = np.isfinite(got)
    np.testing.assert_allclose(got[seen], want[seen], atol=1e-6)
    assert not seen[rows.stop :].any()  # causal: keys after the span are NaN


def test_rollout_counts_a_linear_layer_as_the_identity(runs):
    """Qwen3-Next's rollout is the product over its softmax layers alone: each layer's head
    mean of HF-equal patterns, half and half with the identity, rows renormalised."""
    run = runs["qwen3_next"]
    n = run.n_tokens
    want = np.eye(n)
    for layer in run.softmax_layers():
        mixed = 0.5 * np.eye(n) + 0.5 * run.layer_patterns(layer).astype(np.float64).mean(axis=0)
        want = mixed / mixed.sum(axis=-1, keepdims=True) @ want
    assert len(run.softmax_layers()) < run.facts.n_layers
    np.testing.assert_allclose(attention_rollout(run), want, atol=1e-12)


def test_the_sink_summary_states_the_gated_and_learned_sinks(tiny_variants, runs):
    """Qwen3-Next: the sink's weight through the gates is each head's weight on it times its
    gate at the query (HF's eager weights and sigmoid gate), over every head and sampled row
    (the linear layer holds no weight there); gpt-oss: the learned sinks' mean is one minus
    HF's row sums on the same rows."""
    run = runs["qwen3_next"]
    found = measured_sink(run)
    path, ids = tiny_variants.path("qwen3_next"), ids_of(run)
    rows = list(found.rows)
    softmax = hf_attentions(path, ids)[-1]  # layer 1, the only layer with a softmax
    weights = softmax[0, :, rows, found.position].double().numpy()
    gate = hf_gate(path, ids, 1, run.facts.n_heads)[:, rows].double().numpy()
    n_heads = run.facts.n_layers * run.facts.n_heads
    assert found.mean_weight == pytest.approx(weights.sum() / (n_heads * len(rows)), abs=1e-5)
    assert found.gated_weight == pytest.approx((weights * gate).sum() / weights.size / 2, abs=1e-5)
    assert found.learned_weight is None and found.gated_weight < found.mean_weight
    oss = runs["gpt_oss"]
    summary = measured_sink(oss)
    hf = hf_attentions(tiny_variants.path("gpt_oss"), ids_of(oss))
    sinks = [1 - a[0, :, list(summary.rows)].double().numpy().sum(-1) for a in hf]
    assert summary.learned_weight == pytest.approx(np.mean(sinks), abs=1e-5)
    assert summary.gated_weight is None


@pytest.mark.parametrize(("name", "layer"), [("qwen3_next", 1), ("deepseek_v3", 0), ("gpt_oss", 1)])
def test_value_weighting_is_what_each_head_writes_from_each_key(tiny_variants, runs, name, layer):
    """The value-weighted pattern equals one built from transformers' own eager attention:
    ``A[i, j] ||(g_i ⊙ v_j) W_O||`` renormalised, with Qwen3-Next's output gate per query and
    dimension, DeepSeek-V3's latent layer's own values (d_v 16 against d_head 8), and gpt-oss's
    rows (their learned sink moves nothing). A gated layer's norms are per pair, so they
    differ from query to query."""
    run, model = runs[name], tiny_variants.model(name)
    ids = ids_of(run)
    pairs = gated_norms(model, ids, run.extras.gates)
    weighting = value_weighting(run, value_norms(model, ids), size=8, pairs=pairs)
    whole = slice(None)
    got = np.stack(
        [
            run.window(layer, h, whole, whole) * weighting.scale(layer, h, whole, whole)
            for h in range(run.facts.n_heads)
        ]
    )
    want = hf_value_weighted(tiny_variants.path(name), ids, layer)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    if name == "qwen3_next":
        assert set(pairs) == {1}  # the gated softmax layer; layer 0 is linear
        spread = pairs[1][:, 5:, 0].std(axis=1) / pairs[1][:, 5:, 0].mean(axis=1)
        assert spread.min() > 0.01  # key 0's norm changes with the query's gate
        assert weighting.norms[0].max() == 0.0  # the linear layer is never weighted
    else:
        assert pairs == {}
