"""The scaling sweep on a soft-capped model (Gemma 2): the raw logits are scaled and capped
again, as the model computes with another scale; checked by hand and against Hugging Face's
eager Gemma 2 with every layer's scaling multiplied."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.scaling.capture import capture_scores, next_token_loss
from models.scaling.maths import rescaled, scale_scores, scaled_patterns
from tests.attention.tiny_variants import PROMPT
from tests.model.variant_reference import eager


def test_rescaled_by_hand():
    raw = torch.tensor([-8.0, -1.0, 0.5, 3.0], dtype=torch.float64)
    torch.testing.assert_close(rescaled(raw, 1.0, 5.0), 5 * torch.tanh(raw / 5))
    torch.testing.assert_close(rescaled(raw, 2.0, 5.0), 5 * torch.tanh(2 * raw / 5))
    torch.testing.assert_close(rescaled(raw, 2.0), 2 * raw)  # no cap: plain scaling
    masked = torch.tensor([[1.0, -torch.inf]])
    assert scale_scores(masked, 3.0, 5.0)[0, 1] == -torch.inf


def hf_at_factor(path, ids, factor, layers=None):
    """Eager Gemma 2 with the logit scale of ``layers`` (every layer when None) times
    ``factor``: its loss and every layer's weights."""
    hf = eager(path)
    for i, layer in enumerate(hf.model.layers):
        if layers is None or i in layers:
            layer.self_attn.scaling *= factor
    with torch.no_grad():
        out = hf(ids, labels=ids, output_attentions=True)
    return float(out.loss), [a[0].double().numpy() for a in out.attentions]


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_gemma2_sweep_and_loss_equal_the_model_at_another_scale(tiny_variants, factor):
    """Each layer's swept pattern is the model's with that layer's scale changed (the sweep
    keeps every layer's inputs); the loss, every layer's at once."""
    model, path = tiny_variants.model("gemma2"), tiny_variants.path("gemma2")
    found = capture_scores(model, PROMPT)
    assert found.softcaps and all(c is not None for c in found.softcaps)
    ids = torch.tensor([found.token_ids])
    for layer in range(model.facts.n_layers):
        want = hf_at_factor(path, ids, factor, layers={layer})[1][layer]
        scores = torch.from_numpy(found.scores[layer])
        got = scaled_patterns(scores, factor, found.softcap(layer)).numpy()
        np.testing.assert_allclose(got, want, atol=1e-5)
        capped = torch.from_numpy(found.capped_scores(layer))
        plain = scaled_patterns(capped, factor).numpy()  # scaling the capped logits instead
        assert np.abs(plain - want).max() > 1e-3
    loss, _ = hf_at_factor(path, ids, factor)
    assert next_token_loss(model, ids, factor).loss == pytest.approx(loss, abs=1e-5)
    _, own = hf_at_factor(path, ids, 1.0)
    for layer, want in enumerate(own):  # the raw logits, capped, are what the model read
        got = scaled_patterns(torch.from_numpy(found.capped_scores(layer)), 1.0).numpy()
        np.testing.assert_allclose(got, want, atol=1e-5)
