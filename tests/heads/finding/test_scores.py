"""Each score on hand-built patterns whose answer is known exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.heads.finding import scores
from models.heads.finding.corpus_scores import text_scores
from models.heads.finding.scores import (
    current_token_score,
    distance_score,
    duplicate_token_score,
    entropy_score,
    flag,
    induction_score,
    previous_token_score,
    sink_alphas,
    sink_score,
    top_sink,
)


def causal_uniform(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def one_hot_rows(n: int, keys: list[int]) -> np.ndarray:
    pattern = np.zeros((n, n))
    pattern[np.arange(n), keys] = 1.0
    return pattern


def perfect_induction(prefix: int, span: int) -> np.ndarray:
    n = prefix + 2 * span
    pattern = causal_uniform(n)
    for q in range(prefix + span, n):
        pattern[q] = 0.0
        pattern[q, q - span + 1] = 1.0
    return pattern


@pytest.mark.parametrize("prefix, span", [(1, 5), (0, 4), (1, 50), (2, 3)])
def test_perfect_induction_scores_one(prefix, span):
    assert induction_score(perfect_induction(prefix, span), span, prefix) == pytest.approx(1.0)


def test_induction_counts_second_half_queries_only():
    # A head that does the induction move on first-half rows too must not score more than 1,
    # and a head that only does it in the first half scores 0.
    span, n = 4, 9
    first_half_only = causal_uniform(n)
    for q in range(2, 1 + span):
        first_half_only[q] = 0.0
        first_half_only[q, q - 1] = 1.0
    for q in range(1 + span, n):
        first_half_only[q] = 0.0
        first_half_only[q, 0] = 1.0
    assert induction_score(first_half_only, span, 1) == 0.0


def test_uniform_bidirectional_scores_one_over_keys():
    n = 7
    pattern = np.full((n, n), 1.0 / n)
    tokens = [9, 1, 2, 1, 3, 2, 4]  # positions 3 and 5 each have one earlier copy
    for score in (
        previous_token_score(pattern),
        current_token_score(pattern),
        induction_score(pattern, 3, 1),
        duplicate_token_score(pattern, tokens),
    ):
        assert score == pytest.approx(1.0 / n)
    np.testing.assert_allclose(sink_alphas(pattern, causal=False), 1.0 / n)


def test_uniform_causal_scores_one_over_allowed_keys():
    n, span = 11, 5
    pattern = causal_uniform(n)
    allowed = np.arange(1, n + 1)  # row i sees i + 1 keys
    assert previous_token_score(pattern) == pytest.approx(np.mean(1.0 / allowed[1:]))
    assert current_token_score(pattern) == pytest.approx(np.mean(1.0 / allowed[1:]))
    assert current_token_score(pattern, first_query=0) == pytest.approx(np.mean(1.0 / allowed))
    second_half = np.arange(1 + span, 1 + 2 * span)
    assert induction_score(pattern, span, 1) == pytest.approx(np.mean(1.0 / allowed[second_half]))
    # alpha_0: queries 1..n-1, each puts 1/(i+1) on the first token
    assert sink_score(pattern, causal=True) == pytest.approx(np.mean(1.0 / allowed[1:]))


def test_previous_and_current_token_heads():
    n = 6
    previous = one_hot_rows(n, [0, *range(n - 1)])
    current = np.eye(n)
    assert previous_token_score(previous) == 1.0 and current_token_score(previous) == 0.0
    assert current_token_score(current) == 1.0 and previous_token_score(current) == 0.0
    assert np.isnan(previous_token_score(np.ones((1, 1))))


def test_duplicate_token_score_hand_example():
    tokens = [0, 5, 7, 5, 8, 5]
    pattern = causal_uniform(6)
    pattern[3] = [0.1, 0.6, 0.1, 0.2, 0, 0]  # one earlier copy (pos 1): 0.6
    pattern[5] = [0.0, 0.3, 0.1, 0.4, 0.1, 0.1]  # copies at 1 and 3: 0.3 + 0.4
    assert duplicate_token_score(pattern, tokens) == pytest.approx((0.6 + 0.7) / 2)


def test_duplicate_token_score_is_nan_without_repeats():
    assert np.isnan(duplicate_token_score(causal_uniform(4), [1, 2, 3, 4]))


def test_perfect_sink_head_is_flagged():
    n = 8
    sink = one_hot_rows(n, [0] * n)
    assert sink_score(sink, causal=True) == 1.0
    assert flag(sink_score(sink, causal=True), 0.3)


def test_row_zero_alone_never_flags_a_head():
    # A causal current-token head: row 0 is forced onto token 0, every other row on itself.
    # "argmax of the column sum is token 0" would flag it; the sink score must not.
    for n in (2, 3, 5, 40):
        head = np.eye(n)
        assert sink_score(head, causal=True) == 0.0
        assert not flag(sink_score(head, causal=True), 0.3)
        only_row0 = causal_uniform(n)
        only_row0[1:, 0] = 0.0
        only_row0[1:] /= only_row0[1:].sum(-1, keepdims=True)
        assert sink_score(only_row0, causal=True) == 0.0


def test_sink_on_last_token_of_an_encoder_is_found():
    n = 9
    sep_sink = one_hot_rows(n, [n - 1] * n)  # every query on [SEP], the last position
    alphas = sink_alphas(sep_sink, causal=False)
    assert alphas[n - 1] == 1.0 and alphas[0] == 0.0
    position, alpha = top_sink(alphas, causal=False)
    assert position == n - 1 and alpha == 1.0


def test_top_sink_ignores_late_keys_few_queries_see():
    n = 12
    previous = one_hot_rows(n, [0, *range(n - 1)])
    alphas = sink_alphas(previous, causal=True)
    assert alphas[n - 2] == 1.0  # seen by one query only
    position, alpha = top_sink(alphas, causal=True, min_queries=4)
    assert alpha == pytest.approx(0.25) and position == n - 5
    assert np.isnan(alphas[n - 1])  # nobody after the last key


def test_middle_sink_in_a_causal_model():
    n, newline = 10, 3
    pattern = causal_uniform(n)
    pattern[newline + 1 :] = 0.0
    pattern[newline + 1 :, newline] = 1.0
    position, alpha = top_sink(sink_alphas(pattern, causal=True), causal=True)
    assert position == newline and alpha == 1.0


def test_flags():
    values = np.array([[0.3, 0.31, np.nan], [1.0, 0.0, 0.29]])
    np.testing.assert_array_equal(flag(values, 0.3), [[False, True, False], [True, False, False]])


def test_text_scores_keep_leading_axes():
    stack = np.stack([np.stack([np.eye(5), causal_uniform(5)])] * 3)  # layer head q k
    out = text_scores(stack, [1, 2, 1, 2, 3], causal=True)
    assert set(out) == {
        "induction_text",
        "previous_token",
        "duplicate_token",
        "current_token",
        "sink",
        "top_sink_alpha",
        "top_sink_pos",
        "entropy",
        "distance",
        "learned_sink",
        "window_edge",
    }
    assert all(values.shape == (3, 2) for values in out.values())
    assert np.isnan(out["learned_sink"]).all() and np.isnan(out["window_edge"]).all()
    assert out["current_token"][0, 0] == 1.0 and out["duplicate_token"][0, 0] == 0.0
    np.testing.assert_allclose(out["sink"], sink_alphas(stack, True)[..., 0])


@st.composite
def patterns(draw):
    n = draw(st.integers(2, 9))
    causal = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    raw = np.random.default_rng(seed).random((2, n, n)) + 1e-3
    if causal:
        raw = raw * np.tril(np.ones((n, n)))
    return raw / raw.sum(-1, keepdims=True), causal


@settings(max_examples=60, deadline=None)
@given(patterns())
def test_sink_alphas_match_a_plain_loop(case):
    pattern, causal = case
    n = pattern.shape[-1]
    alphas = sink_alphas(pattern, causal)
    for k in range(n):
        queries = [t for t in range(n) if t != k and (t > k or not causal)]
        expected = np.mean(pattern[:, queries, k], axis=-1) if queries else np.full(2, np.nan)
        np.testing.assert_allclose(alphas[:, k], expected, atol=1e-12)
    for score in (previous_token_score(pattern), current_token_score(pattern), alphas):
        finite = score[~np.isnan(score)]
        assert np.all((finite >= -1e-12) & (finite <= 1 + 1e-12))
    np.testing.assert_allclose(sink_score(pattern, causal), alphas[:, 0], atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(patterns(), st.lists(st.integers(0, 3), min_size=9, max_size=9))
def test_duplicate_score_of_float32_patterns_matches_a_plain_loop(case, tokens):
    pattern, _causal = case
    n = pattern.shape[-1]
    ids = tokens[:n]
    single = pattern.astype(np.float32)
    expected = []
    for head in range(2):
        rows = [
            sum(float(single[head, i, j]) for j in range(i) if ids[j] == ids[i])
            for i in range(n)
            if ids[i] in ids[:i]
        ]
        expected.append(np.mean(rows) if rows else np.nan)
    np.testing.assert_allclose(duplicate_token_score(single, ids), expected, atol=1e-6)


def test_entropy_and_distance_by_hand():
    # row 0 is left out; rows 1..3 of a 4-token causal pattern
    pattern = np.array(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.5, 0.5, 0.0, 0.0],  # ln 2 nats; distance 0.5 * 1 + 0.5 * 0 = 0.5
            [0.0, 1.0, 0.0, 0.0],  # 0 nats; distance 1
            [0.25, 0.25, 0.25, 0.25],  # ln 4 nats; distance (3 + 2 + 1 + 0) / 4 = 1.5
        ]
    )
    assert entropy_score(pattern) == pytest.approx((np.log(2) + np.log(4)) / 3, abs=1e-15)
    assert distance_score(pattern) == pytest.approx((0.5 + 1 + 1.5) / 3, abs=1e-15)
    assert np.isnan(entropy_score(np.ones((1, 1)))) and np.isnan(distance_score(np.ones((1, 1))))


def test_entropy_and_distance_of_known_heads():
    n = 9
    previous = one_hot_rows(n, [0, *range(n - 1)])
    assert entropy_score(previous) == 0.0 and distance_score(previous) == pytest.approx(1.0)
    itself = np.eye(n)
    assert entropy_score(itself) == 0.0 and distance_score(itself) == 0.0
    uniform = causal_uniform(n)
    rows = np.arange(1, n)
    assert entropy_score(uniform) == pytest.approx(np.log(rows + 1).mean(), abs=1e-12)
    assert distance_score(uniform) == pytest.approx((rows / 2).mean(), abs=1e-12)


def test_distance_counts_later_keys_negative_without_a_mask():
    # an encoder head that always looks one token ahead (the last token looks at itself)
    n = 5
    ahead = one_hot_rows(n, [1, 2, 3, 4, 4])
    assert distance_score(ahead) == pytest.approx((-1 - 1 - 1 + 0) / 4)
    both = (one_hot_rows(n, [0, 0, 1, 2, 3]) + one_hot_rows(n, [1, 2, 3, 4, 4])) / 2
    assert distance_score(both)[()] == pytest.approx(((1 - 1) + (1 - 1) + (1 - 1) + (1 + 0)) / 8)


@settings(max_examples=25)
@given(st.integers(2, 12), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_row_chunks_give_the_same_scores(n, heads, seed):
    rng = np.random.default_rng(seed)
    raw = rng.random((heads, n, n)).astype(np.float32) * np.tril(np.ones((n, n), np.float32))
    pattern = raw / raw.sum(-1, keepdims=True)
    whole = entropy_score(pattern), distance_score(pattern)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scores, "ROW_CHUNK_VALUES", 1)  # one row per chunk
        chunked = entropy_score(pattern), distance_score(pattern)
    for got, want in zip(chunked, whole, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # the plain formula, written out
    p = pattern.astype(np.float64)[:, 1:]
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    offsets = np.arange(1, n)[:, None] - np.arange(n)[None, :]
    np.testing.assert_allclose(whole[0], terms.sum(-1).mean(-1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(whole[1], (p * offsets).sum(-1).mean(-1), rtol=1e-12, atol=1e-12)
