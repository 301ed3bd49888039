"""Direct logit attribution: the parts add up to the clean logit difference, and one head's share
matches a computation on a plain Hugging Face GPT-2."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.circuits import IOI, CircuitTask, baseline, copying_task, prepare
from models.model.forward import attn_out_hook, final_norm_scale_hook, run_hooks, tokenize, z_hook
from models.model.spec import BUNDLED_DIR
from models.model.weights import output_projection


@pytest.mark.parametrize("name", ["bundled", "smollm2"])
def test_heads_through_w_o_plus_bias_are_the_attention_output(name, request):
    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, "x = [1, 2, 3]")
    layers = [0, model.facts.n_layers - 1]
    acts = run_hooks(model, ids, [h(l) for l in layers for h in (z_hook, attn_out_hook)])
    for layer in layers:
        w_o, b_o = output_projection(model, layer)
        rebuilt = torch.einsum("bphd,hdm->bpm", acts[z_hook(layer)].double(), w_o) + b_o
        torch.testing.assert_close(
            rebuilt, acts[attn_out_hook(layer)].double(), atol=2e-4, rtol=1e-5
        )


def test_parts_add_up_on_the_bundled_model(bundled):
    setup = prepare(bundled, copying_task(bundled))
    dla = baseline(bundled, setup).attribution
    assert dla.norm_kind == "layernorm" and dla.pos_embed is not None
    assert dla.total == pytest.approx(dla.logit_diff, abs=1e-4)
    assert dla.residual_gap < 1e-4 * max(1.0, dla.residual_norm)
    assert sum(value for _, _, value in dla.parts()) == pytest.approx(dla.total, abs=1e-9)
    assert np.unravel_index(np.argmax(dla.heads), dla.heads.shape) == (2, 2)
    bridge_scale = run_hooks(bundled, setup.clean_ids, [final_norm_scale_hook()])
    assert dla.scale == pytest.approx(float(bridge_scale[final_norm_scale_hook()][0, -1]), rel=1e-5)


def test_parts_add_up_on_smollm2(smollm2):
    setup = prepare(smollm2, IOI)
    dla = baseline(smollm2, setup, batch=1).attribution
    assert dla.norm_kind == "rmsnorm" and dla.pos_embed is None
    assert not dla.attn_bias.any() and dla.norm_bias == 0.0
    assert dla.total == pytest.approx(dla.logit_diff, abs=1e-4)
    assert dla.heads.shape == (30, 9)
    bridge_scale = run_hooks(smollm2, setup.clean_ids, [final_norm_scale_hook()])
    assert dla.scale == pytest.approx(float(bridge_scale[final_norm_scale_hook()][0, -1]), rel=1e-5)


def test_a_heads_share_matches_plain_transformers(bundled):
    task = CircuitTask(
        "def add(a, b):\n    return a +", "def add(a, c):\n    return a +", " b", " c"
    )
    setup = prepare(bundled, task)
    dla = baseline(bundled, setup, batch=1).attribution
    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager").eval()
    seen = {}
    handles = [
        hf.transformer.h[1].attn.c_proj.register_forward_pre_hook(
            lambda _m, args: seen.__setitem__("z", args[0][0, -1].double())
        ),
        hf.transformer.ln_f.register_forward_pre_hook(
            lambda _m, args: seen.__setitem__("resid", args[0][0, -1].double())
        ),
    ]
    with torch.no_grad():
        logits = hf(setup.clean_ids).logits[0, -1].double()
    for handle in handles:
        handle.remove()
    d_head = 32
    w_o = hf.transformer.h[1].attn.c_proj.weight.detach().double()  # Conv1D: (in, out)
    ln = hf.transformer.ln_f
    w_u = hf.lm_head.weight.detach().double()
    diff = w_u[setup.answer_id] - w_u[setup.wrong_id]
    resid = seen["resid"]
    std = torch.sqrt(((resid - resid.mean()) ** 2).mean() + ln.eps)
    for head in range(4):
        part = (
            seen["z"][head * d_head : (head + 1) * d_head]
            @ w_o[head * d_head : (head + 1) * d_head]
        )
        share = float(((part - part.mean()) / std * ln.weight.detach().double()) @ diff)
        assert dla.heads[1, head] == pytest.approx(share, abs=1e-5)
    assert dla.logit_diff == pytest.approx(
        float(logits[setup.answer_id] - logits[setup.wrong_id]), abs=1e-4
    )


def test_a_bias_free_model_shows_no_bias_parts(smollm2):
    """SmolLM2 has no biases: its parts are embeddings, heads and MLPs only (no bars of zero),
    and they still add up to the logit difference; the bundled GPT-2 keeps its biases."""
    setup = prepare(smollm2, copying_task(smollm2))
    dla = baseline(smollm2, setup).attribution
    groups = {group for group, _, _ in dla.parts()}
    assert groups == {"embeddings", "heads", "MLPs"}
    assert sum(value for _, _, value in dla.parts()) == pytest.approx(dla.total, abs=1e-9)
    assert dla.total == pytest.approx(dla.logit_diff, abs=1e-3)


def test_the_bundled_model_keeps_the_biases_it_has(bundled):
    """GPT-2 has attention and final-norm biases, and its unembedding has none."""
    dla = baseline(bundled, prepare(bundled, copying_task(bundled))).attribution
    names = {name for _, name, _ in dla.parts()}
    assert {"final norm bias", "attention bias 0"} <= names and "unembedding bias" not in names
