"""Head scores on attention variants, against Hugging Face's eager weights computed here: a
learned sink's weight and the full-row entropy (gpt-oss), the weight at a sliding window's edge,
the sink logits in the table, and linear-attention layers left unscored (Qwen3-Next)."""

from __future__ import annotations

import numpy as np
import pytest

from models.heads.finding.corpus_scores import score_corpus
from models.heads.finding.induction import measure_repeated
from models.heads.table import Thresholds, corpus_table
from models.model.forward import tokenize
from models.model.variants.layers import sink_logit_grid
from tests.attention.tiny_variants import PROMPT, WINDOW
from tests.model.variant_reference import eager, hf_attentions

TEXTS = [PROMPT, "The model is here. " * 4 + "It reads args and returns the out."]


def full_row_entropy_by_hand(weights: np.ndarray) -> np.ndarray:
    """Mean over rows 1.. of -sum p ln p over the keys and the sink ``1 - sum_j A[i, j]``."""
    full = np.concatenate([weights, 1 - weights.sum(-1, keepdims=True)], axis=-1)
    terms = np.where(full > 0, -full * np.log(np.where(full > 0, full, 1)), 0.0)
    return terms.sum(-1)[..., 1:].mean(-1)


@pytest.fixture(scope="module")
def gpt_oss(tiny_variants):
    model = tiny_variants.model("gpt_oss")
    return model, tiny_variants.path("gpt_oss"), score_corpus(model, TEXTS)


def test_learned_sink_weight_and_full_row_entropy_equal_hf(gpt_oss):
    model, path, scores = gpt_oss
    per_text = []
    for text in TEXTS:
        ids = tokenize(model, text)[0]
        per_text.append([a[0].double().numpy() for a in hf_attentions(path, ids)])
    for layer in range(2):
        sink = np.mean([1 - t[layer].sum(-1).mean(-1) for t in per_text], axis=0)
        entropy = np.mean([full_row_entropy_by_hand(t[layer]) for t in per_text], axis=0)
        np.testing.assert_allclose(scores.spreads["learned_sink"].mean[layer], sink, atol=1e-5)
        np.testing.assert_allclose(scores.spreads["entropy"].mean[layer], entropy, atol=1e-4)
        assert sink.max() > 0.01  # a share far above the tolerance
    keys_only = np.mean(
        [
            np.where(t[0] > 0, -t[0] * np.log(np.where(t[0] > 0, t[0], 1)), 0)
            .sum(-1)[:, 1:]
            .mean(-1)
            for t in per_text
        ],
        axis=0,
    )
    assert np.abs(scores.spreads["entropy"].mean[0] - keys_only).max() > 1e-3  # the sink counts


def test_the_weight_at_a_sliding_windows_edge_equals_hf(gpt_oss):
    model, path, scores = gpt_oss
    edges = []
    for text in TEXTS:
        a = hf_attentions(path, tokenize(model, text)[0])[0][0].double().numpy()
        queries = np.arange(WINDOW, a.shape[-1])
        edges.append(a[:, queries, queries - WINDOW + 1].mean(-1))
    np.testing.assert_allclose(scores.spreads["window_edge"].mean[0], np.mean(edges, 0), atol=1e-6)
    assert np.isnan(scores.spreads["window_edge"].mean[1]).all()  # layer 1 is global


def test_the_table_holds_each_heads_sink_logit_and_variant_columns(gpt_oss, bundled):
    model, path, scores = gpt_oss
    rep = measure_repeated(model, 8, 2, 0)
    table = corpus_table(rep, scores, Thresholds(), None, sink_logit_grid(model))
    want = np.stack([layer.self_attn.sinks.detach().numpy() for layer in eager(path).model.layers])
    np.testing.assert_allclose(table["sink_logit"].to_numpy(), want.ravel(), atol=1e-6)
    assert {"learned_sink", "learned_sink_se", "window_edge"} <= set(table.columns)
    plain = score_corpus(bundled, TEXTS[:1])
    plain_table = corpus_table(measure_repeated(bundled, 8, 2, 0), plain, Thresholds())
    assert sink_logit_grid(bundled) is None
    assert not {"learned_sink", "window_edge", "sink_logit"} & set(plain_table.columns)


def test_a_linear_attention_layer_is_left_unscored(tiny_variants):
    """Qwen3-Next's layer 0 (Gated DeltaNet) has no pattern: its scores are empty, not an
    error, and the softmax layer's are measured."""
    scores = score_corpus(tiny_variants.model("qwen3_next"), TEXTS[:1])
    previous = scores.spreads["previous_token"].mean
    assert np.isnan(previous[0]).all() and np.isfinite(previous[1]).all()
