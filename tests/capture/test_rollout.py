"""Attention rollout against hand-computed two-layer cases, and its refusal on long prompts."""

from dataclasses import replace

import numpy as np
import pytest

from models.capture.rollout import (
    ROLLOUT_RULE,
    RolloutTooLong,
    attention_rollout,
    longest_rollout,
    rollout_bytes,
    rollout_cost,
    rollout_weights,
)
from models.capture.run import AttentionRun, capture
from models.capture.store import DensePatterns
from models.capture.word_split import split_words
from models.capture.words import merge_pattern

TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps."


def toy_run(facts, stack: np.ndarray, causal: bool) -> AttentionRun:
    n_layers, n_heads, n, _ = stack.shape
    return AttentionRun(
        prompt="ab",
        token_ids=(1, 2),
        tokens=("a", "b"),
        store=DensePatterns(stack),
        facts=replace(facts, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads, causal=causal),
        first_is_special=False,
        n_prompt_tokens=n,
    )


def test_two_layer_bidirectional_case_by_hand(bundled):
    stack = np.array(
        [
            [[[0.7, 0.3], [0.1, 0.9]], [[0.5, 0.5], [0.3, 0.7]]],  # mean .6 .4 / .2 .8
            [[[1.0, 0.0], [0.6, 0.4]], [[0.8, 0.2], [0.4, 0.6]]],
        ]
    )  # mean .9 .1 / .5 .5
    run = toy_run(bundled.facts, stack, causal=False)
    # Ã1 = [[.8, .2], [.1, .9]], Ã2 = [[.95, .05], [.25, .75]], R = Ã2 Ã1 (not Ã1 Ã2)
    expected = np.array([[0.765, 0.235], [0.275, 0.725]])
    np.testing.assert_allclose(attention_rollout(run), expected, atol=1e-12)
    np.testing.assert_allclose(rollout_weights(run, 1, "from"), expected[1], atol=1e-12)
    np.testing.assert_allclose(rollout_weights(run, 0, "to"), expected[:, 0], atol=1e-12)


def test_two_layer_causal_case_by_hand(bundled):
    stack = np.array(
        [
            [[[1.0, 0.0], [0.2, 0.8]], [[1.0, 0.0], [0.8, 0.2]]],  # mean row .5 .5
            [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.4, 0.6]]],
        ]
    )  # mean row .2 .8
    run = toy_run(bundled.facts, stack, causal=True)
    # Ã1 row 1 = [.25, .75], Ã2 row 1 = [.1, .9]: R row 1 = [.1 + .9 * .25, .9 * .75]
    expected = np.array([[1.0, 0.0], [0.325, 0.675]])
    np.testing.assert_allclose(attention_rollout(run), expected, atol=1e-12)
    from_0 = rollout_weights(run, 0, "from")
    assert from_0[0] == pytest.approx(1.0) and np.isnan(from_0[1])
    to_1 = rollout_weights(run, 1, "to")
    assert np.isnan(to_1[0]) and to_1[1] == pytest.approx(0.675)


def test_strip_vectors_are_rows_and_columns_of_the_rollout(bundled):
    run = capture(bundled, TEXT)
    full = attention_rollout(run)
    np.testing.assert_allclose(full.sum(axis=1), 1.0, atol=1e-6)
    assert np.all(np.triu(full, k=1) == 0.0)
    np.testing.assert_allclose(rollout_weights(run, 9, "from")[:10], full[9, :10], atol=1e-12)
    np.testing.assert_allclose(rollout_weights(run, 4, "to")[4:], full[4:, 4], atol=1e-12)
    assert "0.5·A + 0.5·I" in ROLLOUT_RULE and "mean" in ROLLOUT_RULE


def test_long_prompt_stores_are_refused_past_the_budget(bundled):
    factored = capture(bundled, TEXT, dense_limit=0)
    assert factored.factored
    need = rollout_bytes(bundled.facts, factored.n_tokens)
    assert need == factored.n_tokens**2 * bundled.facts.n_layers * 4
    with pytest.raises(RolloutTooLong, match="shorter prompt"):
        rollout_weights(factored, 3, "from", budget=need - 1)
    np.testing.assert_allclose(
        attention_rollout(factored, budget=need),
        attention_rollout(capture(bundled, TEXT), budget=0),
        atol=1e-6,
    )
    assert longest_rollout(bundled.facts, need) == factored.n_tokens


def test_cost_of_a_row_is_quadratic_and_of_the_whole_cubic(bundled):
    row = rollout_cost(bundled.facts, 1000)
    whole = rollout_cost(bundled.facts, 1000, full=True)
    assert whole.flops == pytest.approx(row.flops * 1000)
    assert rollout_cost(bundled.facts, 1000, factored=True).seconds() > row.seconds()


def test_spans_and_words_follow_the_word_rule(bundled):
    run = capture(bundled, TEXT)
    words = split_words(bundled.tokenizer, TEXT, run.token_ids, run.tokens)
    merged = merge_pattern(attention_rollout(run), words)
    np.testing.assert_allclose(merged.sum(axis=1), 1.0, atol=1e-9)
    got = rollout_weights(run, slice(3, 6), "from", words=words)
    np.testing.assert_allclose(got[:6], merged[3:6].mean(axis=0)[:6], atol=1e-12)
    assert np.all(np.isnan(got[6:]))
    got = rollout_weights(run, slice(3, 6), "to", words=words)
    np.testing.assert_allclose(got[3:], merged[3:, 3:6].sum(axis=1), atol=1e-12)
    tokens = rollout_weights(run, slice(2, 5), "from")
    np.testing.assert_allclose(tokens[:5], attention_rollout(run)[2:5].mean(axis=0)[:5])
