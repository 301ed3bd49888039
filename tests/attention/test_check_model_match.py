"""The kernel on the bundled model's and MiniLM's own q, k, v: every head within 1e-5 (fp32).

The hooks it is compared with are themselves checked against Hugging Face eager attention on the
same weights and token ids (patterns, and z read off the output projection's input), so a match
here is a match with the model, not with the bridge alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from models.attention.check import check_kernel, compare, run_layer
from models.attention.inputs import capture_inputs
from models.model.spec import BUNDLED_DIR, minilm_dir
from tests.attention.hf_reference import eager_patterns_and_z, module_io

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The cat sat on the mat. The cat sat on the mat again, said Ms. O'Neil.\nDone!"
TOL = 1e-5
HAS_BUNDLED = (BUNDLED_DIR / "model.safetensors").exists()
MODELS = [
    "minilm",
    pytest.param(
        "bundled",
        marks=pytest.mark.skipif(
            not HAS_BUNDLED, reason="models/bundled/model.safetensors is not trained yet"
        ),
    ),
]
PROJECTIONS = {
    "minilm": "encoder.layer.{l}.attention.output.dense",
    "bundled": "transformer.h.{l}.attn.c_proj",
}


def hf_model(name: str):
    if name == "minilm":
        return AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager")
    return AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager")


@pytest.fixture(scope="module", params=MODELS)
def case(request):
    model = request.getfixturevalue(request.param)
    inputs = capture_inputs(model, PROMPT)
    return request.param, model, inputs, compare(inputs, device="cpu", timing_repeats=1)


def test_every_head_matches_the_model_within_1e_5(case):
    _, model, inputs, report = case
    facts = model.facts
    assert (
        report.pattern_error.shape == report.output_error.shape == (facts.n_layers, facts.n_heads)
    )
    assert report.backend == "torch-tiled" and report.dtype == "float32" and report.device == "cpu"
    assert report.max_pattern_error <= TOL and report.max_output_error <= TOL
    assert report.within_tolerance and report.tolerance == TOL
    assert report.causal == facts.causal
    n = inputs.n_tokens
    assert report.kernel_patterns.shape == (facts.n_layers, facts.n_heads, n, n)
    torch.testing.assert_close(
        torch.from_numpy(report.kernel_patterns).sum(-1),
        torch.ones(facts.n_layers, facts.n_heads, n),
        atol=1e-5,
        rtol=0,
    )


def test_hooks_and_kernel_equal_hf_eager(case):
    name, model, inputs, report = case
    ids = torch.tensor([inputs.token_ids])
    patterns, z = eager_patterns_and_z(
        hf_model(name), ids, PROJECTIONS[name], model.facts.n_layers, model.facts.n_heads
    )
    torch.testing.assert_close(inputs.patterns[:, 0], patterns, atol=TOL, rtol=0)
    torch.testing.assert_close(inputs.z[:, 0], z, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.from_numpy(report.kernel_patterns), patterns, atol=TOL, rtol=0)
    for layer in range(model.facts.n_layers):
        out, _, _ = run_layer(inputs, layer)
        torch.testing.assert_close(out[0], z[layer], atol=TOL, rtol=0)


def test_encoder_is_unmasked_and_decoder_causal(case):
    _, model, inputs, report = case
    above = torch.ones(inputs.n_tokens, inputs.n_tokens, dtype=torch.bool).triu(1)
    kernel = torch.from_numpy(report.kernel_patterns)
    if model.facts.causal:
        assert kernel[..., above].abs().max() == 0.0
    else:
        assert kernel[..., above].max() > 1e-2


def test_a_wrong_scale_gives_large_errors(case):
    _, _, inputs, good = case
    bad = compare(inputs, device="cpu", scale_factor=2.0, timing_repeats=1)
    assert bad.max_pattern_error > 1000 * TOL and bad.max_output_error > 1000 * TOL
    assert (bad.pattern_error > 10 * good.pattern_error.max()).mean() > 0.9  # nearly every head
    assert not bad.within_tolerance
    assert bad.scales == tuple(2.0 * s for s in good.scales)


def test_minilm_scale_and_q_bias(minilm):
    """hook_q is the query projection's output, bias included (the bias is far from zero)."""
    inputs = capture_inputs(minilm, PROMPT)
    assert (
        inputs.scales == pytest.approx((32**-0.5,) * 6, rel=1e-12)
        and inputs.qk_source == "hook_q/hook_k"
    )
    hf = hf_model("minilm")
    names = [f"encoder.layer.{l}.attention.self.query" for l in range(6)]
    _, seen = module_io(hf, torch.tensor([inputs.token_ids]), names, inputs=False)
    for layer, name in enumerate(names):
        expected = seen[name][0].reshape(inputs.n_tokens, 12, 32).transpose(0, 1)
        torch.testing.assert_close(inputs.q[layer, 0], expected, atol=TOL, rtol=0)
    assert hf.encoder.layer[0].attention.self.query.bias.abs().max() > 0.5


def test_check_kernel_respects_max_tokens(minilm):
    report = check_kernel(minilm, "word " * 100, max_tokens=16, device="cpu")
    assert len(report.tokens) == 16 and report.n_prompt_tokens > 16
    assert report.tokens[-1] == "[SEP]" and report.max_pattern_error <= TOL


INTERPRETER_SCRIPT = """
import json, os, sys
import models.attention.triton_kernel
from models.attention.check import check_kernel
from models.model.loading import load
from models.model.spec import ModelSpec
report = check_kernel(load(ModelSpec("minilm")), "Kernel check, in the interpreter.",
                      backend="triton", device="cpu")
print(json.dumps({"backend": report.backend, "p": report.max_pattern_error,
                  "o": report.max_output_error, "timed": [t.name for t in report.timings]}))
"""


@pytest.mark.slow
def test_triton_kernel_in_the_interpreter_matches_minilm():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETER_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] == "triton-interpreter"
    assert result["p"] <= TOL and result["o"] <= TOL
    assert result["timed"][0] == "app kernel (triton-interpreter)"
