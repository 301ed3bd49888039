"""RoPE, GQA, ALiBi and a per-layer scale, on tiny random checkpoints loaded like a local dir.

Each model's kernel patterns and outputs are compared with Hugging Face eager attention on the
same checkpoint (not only with the bridge's hooks).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from models.attention.check import compare, run_layer
from models.attention.inputs import KernelUnavailable, capture_inputs
from models.model.forward import run_hooks
from models.model.loading import load
from models.model.softmax_terms import alibi_slopes
from models.model.spec import ModelSpec
from tests.attention.hf_reference import eager_patterns_and_z
from tests.attention.tiny_models import ARCHITECTURES, PROMPT, build_all

TOL = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    dirs = build_all(tmp_path_factory.mktemp("tiny_models"))
    return {name: (path, load(ModelSpec(str(path)))) for name, path in dirs.items()}


@pytest.fixture(scope="module")
def checked(tiny):
    out = {}
    for name, (path, model) in tiny.items():
        inputs = capture_inputs(model, PROMPT)
        out[name] = (path, model, inputs, compare(inputs, device="cpu", timing_repeats=1))
    return out


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_kernel_matches_hf_eager(checked, name):
    path, model, inputs, report = checked[name]
    ids = torch.tensor([inputs.token_ids])
    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    patterns, z = eager_patterns_and_z(
        hf, ids, ARCHITECTURES[name][1], model.facts.n_layers, model.facts.n_heads
    )
    assert patterns.max() > 0.5  # peaked attention: a wrong input would show
    assert report.max_pattern_error <= TOL and report.max_output_error <= TOL
    torch.testing.assert_close(torch.from_numpy(report.kernel_patterns), patterns, atol=TOL, rtol=0)
    # The large random weights give |z| up to ~8; the bridge and HF sum in different orders
    # (Bloom's hook_z sits 2e-5 from HF's), so z is compared relative to its size.
    z_tol = TOL * max(1.0, float(z.abs().max()))
    for layer in range(model.facts.n_layers):
        out, _, _ = run_layer(inputs, layer)
        torch.testing.assert_close(out[0], z[layer], atol=z_tol, rtol=0)


def test_gpt2_inverse_layer_index_scale(checked):
    _, _, inputs, report = checked["gpt2_inverse_layer_scale"]
    assert inputs.scales == pytest.approx([8**-0.5 / (layer + 1) for layer in range(3)])
    assert report.scales == inputs.scales


def test_gqa_keeps_kv_heads_and_uses_rotated_hooks(tiny, checked):
    _, model, inputs, _ = checked["llama_gqa_rope"]
    assert (model.facts.n_heads, model.facts.n_kv_heads) == (4, 2)
    assert inputs.q.shape[2] == 4 and inputs.k.shape[2] == inputs.v.shape[2] == 2
    assert inputs.qk_source == "hook_rot_q/hook_rot_k"
    ids = torch.tensor([inputs.token_ids])
    raw = run_hooks(model, ids, ["blocks.0.attn.hook_k"])["blocks.0.attn.hook_k"]
    assert raw.shape[2] == 2  # the bridge's own hook_k has n_kv_heads heads
    assert (raw.transpose(1, 2) - inputs.k[0]).abs().max() > 1e-2  # hook_k is pre-rotation


def test_neox_rotation_applied_from_cos_sin(checked):
    _, model, inputs, _ = checked["neox_partial_rope"]
    assert model.facts.positional == "rotary"
    assert inputs.qk_source == "hook_q/hook_k + hook_cos/hook_sin"


def test_bloom_alibi_slopes_for_six_heads(checked):
    _, model, inputs, _report = checked["bloom_alibi_6_heads"]
    assert model.facts.positional == "alibi"
    torch.testing.assert_close(inputs.alibi_slopes, alibi_slopes(6))
    bad = compare(
        inputs.__class__(**{**inputs.__dict__, "alibi_slopes": None}),
        device="cpu",
        timing_repeats=1,
    )
    assert bad.max_pattern_error > 1e-2  # without the slopes the kernel is far off


def test_wrong_inputs_are_refused_not_blamed_on_the_kernel(tiny, monkeypatch):
    import models.attention.inputs as ki

    _, model = tiny["gpt2_inverse_layer_scale"]
    monkeypatch.setattr(ki, "layer_scales", lambda m: ((8**-0.5,) * 3, "1 / sqrt(d_head)"))
    with pytest.raises(KernelUnavailable, match="not supported"):
        capture_inputs(model, PROMPT)
