"""Head loadings: DLA and path-patching edges into a head, split per earlier head."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.circuits import baseline, copying_task, input_effects, path_patching, prepare
from models.circuits.loadings import dla_loadings, path_loadings
from models.head import Head
from models.model.spec import BUNDLED_DIR


@pytest.fixture(scope="module")
def setup(bundled):
    return prepare(bundled, copying_task(bundled))


@pytest.fixture(scope="module")
def hf64():
    return AutoModelForCausalLM.from_pretrained(
        BUNDLED_DIR, attn_implementation="eager", dtype=torch.float64
    ).eval()


@torch.no_grad()
def plain_loading(hf, setup, sender: Head, receiver: Head) -> float:
    """``sender``'s output read through ``receiver``'s OV circuit onto LD, pattern and norm
    scales frozen, in plain float64 PyTorch on a Hugging Face GPT-2."""
    blocks, seen = hf.transformer.h, {}
    hooks = [
        blocks[receiver.layer].ln_1.register_forward_pre_hook(
            lambda _m, a: seen.__setitem__("resid", a[0][0])
        ),
        blocks[sender.layer].attn.c_proj.register_forward_pre_hook(
            lambda _m, a: seen.__setitem__("z", a[0][0])
        ),
        hf.transformer.ln_f.register_forward_pre_hook(
            lambda _m, a: seen.__setitem__("final", a[0][0])
        ),
    ]
    out = hf(setup.clean_ids, output_attentions=True)
    for hook in hooks:
        hook.remove()
    d, dh = hf.config.n_embd, hf.config.n_embd // hf.config.n_head
    rows = lambda h: slice(h * dh, (h + 1) * dh)
    part = (
        seen["z"][:, rows(sender.index)]
        @ blocks[sender.layer].attn.c_proj.weight[rows(sender.index)]
    )
    ln1 = blocks[receiver.layer].ln_1
    sigma = (seen["resid"].var(-1, unbiased=False, keepdim=True) + ln1.eps).sqrt()
    normed = (part - part.mean(-1, keepdim=True)) / sigma * ln1.weight
    attn = blocks[receiver.layer].attn
    w_v = attn.c_attn.weight[:, 2 * d + receiver.index * dh : 2 * d + (receiver.index + 1) * dh]
    weights = out.attentions[receiver.layer][0, receiver.index, -1]
    written = (weights @ (normed @ w_v)) @ attn.c_proj.weight[rows(receiver.index)]
    final, ln_f = seen["final"][-1], hf.transformer.ln_f
    unembed = hf.lm_head.weight
    toward = ln_f.weight * (unembed[setup.answer_id] - unembed[setup.wrong_id])
    sigma_f = (final.var(unbiased=False) + ln_f.eps).sqrt()
    return float(written @ (toward - toward.mean()) / sigma_f)


@pytest.mark.parametrize("receiver", [Head(2, 2), Head(1, 3)])
def test_dla_loadings_close_on_the_attribution_and_match_plain_pytorch(
    bundled, setup, hf64, receiver
):
    loadings = dla_loadings(bundled, setup, receiver)
    dla = baseline(bundled, setup).attribution.heads[receiver]
    assert loadings.total == pytest.approx(dla, abs=1e-5)
    assert abs(loadings.gap) <= 1e-5 * max(1.0, abs(dla))
    assert loadings.heads[receiver.layer :].sum() == 0.0  # later heads cannot reach it
    names = [name for name, _ in loadings.rest]
    assert names[:2] == ["embed", "pos_embed"] and "mlp.0" in names and "b_V" in names
    for sender in [Head(0, h) for h in range(4)] + [Head(receiver.layer - 1, 1)]:
        expected = plain_loading(hf64, setup, sender, receiver)
        assert loadings.heads[sender] == pytest.approx(expected, abs=1e-5)
    assert np.abs(loadings.heads).max() > 1e-3  # some head carries part of it


def test_path_loadings_close_on_patching_the_whole_input(bundled, setup):
    result = path_patching(bundled, setup, Head(2, 1), "q")
    loadings = path_loadings(bundled, setup, result)
    np.testing.assert_array_equal(loadings.heads, result.effects)
    whole = input_effects(bundled, setup, "q", layers=[2])[2, 1]
    assert loadings.total == pytest.approx(whole, abs=1e-5)
    assert loadings.gap == pytest.approx(0.0, abs=1e-12)
    assert loadings.edge == "path q" and loadings.rest == ()
