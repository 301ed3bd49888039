"""The sweep on real models, against Hugging Face eager attention and a re-weighted HF model."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from models.capture.run import capture
from models.model.forward import tokenize
from models.model.spec import BUNDLED_DIR, minilm_dir
from models.scaling.capture import (
    ScalingUnavailable,
    capture_scores,
    loss_at,
    loss_unavailable,
    next_token_loss,
)
from models.scaling.maths import scaled_patterns

PROMPT = "When Mary and John went to the store, John gave a drink to Mary. def f(x): return x"
FACTORS = [1 / 16, 0.25, 1.0, 4.0, 16.0]


@functools.lru_cache(maxsize=2)
def hf_attentions(causal: bool, token_ids: tuple[int, ...]) -> np.ndarray:
    """``layer head q k`` patterns from Hugging Face eager attention on the same token ids."""
    from transformers import AutoModel, AutoModelForCausalLM

    if causal:
        hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager")
    else:
        hf = AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager")
    with torch.no_grad():
        out = hf(torch.tensor([token_ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


@pytest.fixture(scope="module")
def captured(any_model):
    return any_model, capture_scores(any_model, PROMPT)


def test_c1_reproduces_hook_pattern_for_every_head(captured):
    model, cap = captured
    run = capture(model, PROMPT)
    assert cap.token_ids == run.token_ids
    mine = scaled_patterns(torch.from_numpy(cap.scores), 1.0).numpy()
    assert (
        mine.shape
        == run.patterns.shape
        == (model.facts.n_layers, model.facts.n_heads, cap.n_tokens, cap.n_tokens)
    )
    assert np.abs(mine - run.patterns).max() < 1e-5
    assert cap.max_error < 1e-5
    want = "hook_attn_scores" if model.facts.causal else "hook_q/hook_k"
    assert cap.source == want
    if model.facts.causal:
        future = np.triu(np.ones((cap.n_tokens, cap.n_tokens), dtype=bool), 1)
        assert np.all(np.isneginf(cap.scores[..., future]))
    else:
        assert np.isfinite(cap.scores).all()


@pytest.mark.parametrize("factor", FACTORS)
def test_scaled_patterns_match_hugging_face(captured, factor):
    """softmax(c * log A) = softmax(c * s) for HF's own A = softmax(s): a reference per factor."""
    model, cap = captured
    ref = hf_attentions(model.facts.causal, cap.token_ids)
    with np.errstate(divide="ignore"):
        want = scaled_patterns(torch.from_numpy(np.log(ref)), factor).numpy()
    mine = scaled_patterns(torch.from_numpy(cap.scores), factor).numpy()
    assert np.abs(mine - want).max() < 1e-4


def hf_loss_with_factor(ids: torch.Tensor, factor: float) -> float:
    """Loss of the bundled GPT-2 in Hugging Face with every query projection times ``factor``."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, attn_implementation="eager")
    d_model = hf.config.n_embd
    with torch.no_grad():
        for block in hf.transformer.h:
            block.attn.c_attn.weight[:, :d_model] *= factor
            block.attn.c_attn.bias[:d_model] *= factor
        return float(hf(ids, labels=ids).loss)


@pytest.mark.parametrize("factor", [1.0, 1 / 16, 4.0])
def test_loss_matches_hugging_face_with_scaled_queries(bundled, factor):
    ids, _ = tokenize(bundled, PROMPT)
    result = next_token_loss(bundled, ids, factor)
    assert result.n_predictions == ids.shape[1] - 1
    assert result.check_error < 1e-5
    assert result.loss == pytest.approx(hf_loss_with_factor(ids, factor), abs=1e-5)


def test_loss_at_c1_is_the_unmodified_model(bundled):
    ids, _ = tokenize(bundled, PROMPT)
    with torch.no_grad():
        logits = bundled.bridge(ids)
    plain = torch.nn.functional.cross_entropy(logits[0, :-1].double(), ids[0, 1:])
    assert loss_at(bundled, PROMPT, 1.0).loss == pytest.approx(float(plain), abs=1e-6)
    # the own scale should be near the best of the sweep: no factor far from 1 does better
    losses = {c: loss_at(bundled, PROMPT, c).loss for c in FACTORS}
    assert min(losses, key=losses.get) in (0.25, 1.0, 4.0)
    assert losses[1 / 16] > losses[1.0] and losses[16.0] > losses[1.0]


def test_no_hook_left_on_the_shared_bridge(bundled):
    loss_at(bundled, PROMPT, 2.0)
    assert all(not hp.fwd_hooks for hp in bundled.bridge.hook_dict.values())


@pytest.mark.filterwarnings("ignore:A hook on attention.hook_attn_scores returned a modified")
def test_encoder_has_no_next_token_loss(minilm):
    assert "encoder" in loss_unavailable(minilm, 10)
    with pytest.raises(ScalingUnavailable):
        loss_at(minilm, PROMPT, 2.0)
    ids, _ = tokenize(minilm, PROMPT)
    with pytest.raises(ScalingUnavailable, match="after the softmax"):
        next_token_loss(minilm, ids, 2.0)
