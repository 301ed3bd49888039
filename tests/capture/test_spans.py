"""Attention from and to a span of tokens or words, against the whole pattern."""

import numpy as np
import pytest
import torch

from models.capture import spans
from models.capture.run import capture
from models.capture.spans import SPAN_RULE, span_cost, span_weights
from models.capture.views import scoped_weights
from models.capture.weighted import value_norms, value_weighting
from models.capture.word_split import split_words
from models.capture.words import merge_pattern

TEXT = "The quick brown fox jumps over the lazy dog. Unbelievably, the dog sleeps."


@pytest.fixture(scope="module")
def runs(bundled):
    return capture(bundled, TEXT), capture(bundled, TEXT, dense_limit=0)


def test_token_span_from_is_the_mean_row_and_to_the_summed_column(runs):
    dense, factored = runs
    pattern = dense.pattern(1, 2).astype(np.float64)
    got_from = span_weights(dense, "head", 1, 2, slice(5, 9), "from")
    np.testing.assert_allclose(got_from[:9], pattern[5:9].mean(axis=0)[:9], atol=1e-7)
    assert np.all(np.isnan(got_from[9:]))
    assert np.nansum(got_from) == pytest.approx(1.0, abs=1e-5)
    got_to = span_weights(dense, "head", 1, 2, slice(5, 9), "to")
    np.testing.assert_allclose(got_to[5:], pattern[5:, 5:9].sum(axis=1), atol=1e-7)
    assert np.all(np.isnan(got_to[:5]))
    for direction in ("from", "to"):
        np.testing.assert_allclose(
            span_weights(factored, "head", 1, 2, slice(5, 9), direction),
            span_weights(dense, "head", 1, 2, slice(5, 9), direction),
            atol=1e-6,
        )


def test_a_one_token_span_is_the_token_view(runs):
    dense, _ = runs
    for scope in ("head", "layer", "all"):
        for direction in ("from", "to"):
            np.testing.assert_allclose(
                span_weights(dense, scope, 2, 3, slice(7, 8), direction),
                scoped_weights(dense, scope, 2, 3, 7, direction),
                atol=1e-7,
            )


def test_layer_and_all_scopes_average_the_heads(runs):
    dense, _ = runs
    stack = dense.patterns.astype(np.float64)
    got = span_weights(dense, "all", 0, 0, slice(3, 6), "from")
    np.testing.assert_allclose(got[:6], stack[:, :, 3:6].mean(axis=(0, 1, 2))[:6], atol=1e-7)
    got = span_weights(dense, "layer", 2, 0, slice(3, 6), "to")
    np.testing.assert_allclose(got[3:], stack[2, :, 3:, 3:6].sum(axis=-1).mean(axis=0), atol=1e-7)


def test_word_span_is_the_merged_pattern(bundled, runs):
    dense, factored = runs
    words = split_words(bundled.tokenizer, TEXT, dense.token_ids, dense.tokens)
    merged = merge_pattern(dense.pattern(1, 0), words)
    span = slice(3, 6)
    got_from = span_weights(dense, "head", 1, 0, span, "from", words=words)
    np.testing.assert_allclose(got_from[:6], merged[span].mean(axis=0)[:6], atol=1e-7)
    assert got_from.shape == (words.n_words,) and np.all(np.isnan(got_from[6:]))
    got_to = span_weights(factored, "head", 1, 0, span, "to", words=words)
    np.testing.assert_allclose(got_to[3:], merged[3:, span].sum(axis=1), atol=1e-6)
    one = span_weights(dense, "head", 1, 0, slice(4, 5), "from", words=words)
    np.testing.assert_allclose(one[:5], merged[4, :5], atol=1e-7)
    assert "mean" in SPAN_RULE and "sum" in SPAN_RULE


def test_an_empty_span_is_refused(runs):
    with pytest.raises(ValueError):
        span_weights(runs[0], "head", 0, 0, slice(4, 4), "from")


@pytest.mark.parametrize("factored", [False, True], ids=["dense", "factored"])
def test_a_span_read_in_blocks_of_rows_is_the_whole_read_at_once(
    bundled, runs, monkeypatch, factored
):
    """Blocks of one or two rows (every layer, head and weighting path) against the whole
    stack averaged in plain NumPy: the blocks bound memory, not the answer."""
    dense, run = runs[0], runs[int(factored)]
    stack = dense.patterns.astype(np.float64)
    n_cols = dense.n_tokens
    monkeypatch.setattr(spans, "CHUNK_BYTES", 4 * dense.facts.n_heads * n_cols * 2)
    got = span_weights(run, "all", 0, 0, slice(2, 11), "from")
    np.testing.assert_allclose(got[:11], stack[:, :, 2:11].mean(axis=(0, 1, 2))[:11], atol=1e-6)
    got = span_weights(run, "layer", 1, 0, slice(0, n_cols), "to")
    np.testing.assert_allclose(got, stack[1].sum(axis=-1).mean(axis=0), atol=1e-6)
    weighting = value_weighting(dense, value_norms(bundled, torch.tensor([dense.token_ids])), 8)
    got = span_weights(run, "head", 2, 1, slice(4, 9), "from", weighting=weighting)
    scaled = stack[2, 1] * weighting.scale(2, 1, slice(None), slice(None))
    np.testing.assert_allclose(got[:9], scaled[4:9].mean(axis=0)[:9], atol=1e-6)


def test_a_span_over_every_head_is_priced_by_what_it_reads(bundled):
    """Flops count each weight read once per head in scope (a rebuilt weight costs its q.k);
    the memory is one block of rows, whatever the length."""
    facts = bundled.facts
    one = span_cost(facts, 100, 10, "head", False, False)
    every = span_cost(facts, 100, 10, "all", False, False)
    assert every.flops == pytest.approx(one.flops * facts.n_layers * facts.n_heads)
    rebuilt = span_cost(facts, 100, 10, "head", True, False)
    assert rebuilt.flops == pytest.approx(100 * 10 * (2 * facts.d_head + 8 + 1))
    long = span_cost(facts, 100_000, 100_000, "all", True, False)
    assert long.peak_bytes <= 10 * spans.CHUNK_BYTES + 4 * 100_000 * 8
