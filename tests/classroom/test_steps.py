"""Scaled dot-product attention step by step: worked examples A and B, masks, typed input."""

import math

import numpy as np
import pytest
import torch

from models.classroom import steps
from models.classroom.steps import MatrixError, attention_steps, parse_matrix, steps_from_text


def example(name):
    ex = steps.EXAMPLES[name]
    return steps_from_text(ex["q"], ex["k"], ex["v"])


def test_example_a_reproduces_reference_values():
    s = example("A")
    np.testing.assert_array_equal(s.scores, [[2, 3], [0, -1]])
    np.testing.assert_allclose(s.scaled, [[1.414, 2.121], [0.0, -0.707]], atol=5e-4)
    np.testing.assert_allclose(s.weights, [[0.330, 0.670], [0.670, 0.330]], atol=5e-4)
    np.testing.assert_allclose(s.output, [[23.3952, 33.3952], [16.6048, 26.6048]], atol=5e-5)
    assert np.round(s.output, 2).tolist() == [[23.40, 33.40], [16.60, 26.60]]
    # by hand: a 2-way softmax is a logistic of the difference of the two logits
    p = 1 / (1 + math.exp(3 / math.sqrt(2) - 2 / math.sqrt(2)))
    assert s.weights[0, 0] == pytest.approx(p, abs=1e-12)


def test_example_b_reproduces_reference_values():
    s = example("B")
    np.testing.assert_allclose(
        s.scaled, [[0.71, 0, 0.71], [0, 0.71, 0.71], [0.71, 0.71, 1.41]], atol=5e-3
    )
    w = s.weights
    assert np.argmax(w[2]) == 2  # token 3 attends most to itself
    assert w[0, 0] == pytest.approx(w[0, 2]) and w[0, 1] < w[0, 0]
    assert w[1, 1] == pytest.approx(w[1, 2]) and w[1, 0] < w[1, 1]
    np.testing.assert_allclose(w.sum(axis=1), 1.0)


def test_matches_torch_sdpa_on_random_matrices():
    rng = np.random.default_rng(1)
    for causal in (False, True):
        q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
        s = attention_steps(q, k, v, causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(torch.tensor(x)[None] for x in (q, k, v)), is_causal=causal
        )[0].numpy()
        np.testing.assert_allclose(s.output, ref, atol=1e-12)


def test_causal_mask_on_example_a_shows_minus_inf_and_renormalises():
    ex = steps.EXAMPLES["A"]
    s = steps_from_text(ex["q"], ex["k"], ex["v"], causal=True)
    assert s.logits[0, 1] == -np.inf and np.isfinite(s.logits[1]).all()
    np.testing.assert_allclose(s.weights, [[1, 0], [0.670, 0.330]], atol=5e-4)
    np.testing.assert_allclose(s.output[0], [10, 20])
    b = steps.EXAMPLES["B"]
    masked = steps_from_text(b["q"], b["k"], b["v"], causal=True).weights
    free = example("B").weights
    # row 2 keeps the first two unmasked weights in proportion, rescaled to sum to 1
    np.testing.assert_allclose(masked[1, :2], free[1, :2] / free[1, :2].sum())


def test_softmax_rows_handles_a_row_with_nothing_visible():
    out = steps.softmax_rows(np.array([[-np.inf, -np.inf], [0.0, -np.inf]]))
    np.testing.assert_array_equal(out, [[0, 0], [1, 0]])


@pytest.mark.parametrize("text", ["1, 2; 0, -1", "1 2\n0 -1", "[[1, 2], [0, -1]]", "1,2;0,−1;"])
def test_parse_accepts_common_layouts(text):
    np.testing.assert_array_equal(parse_matrix(text, "Q"), [[1, 2], [0, -1]])


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("1, x; 0, 1", "`x` is not a number"),
        ("1, 2; 3", "row 2 has 1 number but"),
        ("1, nan", "not a finite number"),
        ("; ".join(["1"] * 7), "at most 6 × 6"),
        (", ".join(["1"] * 7), "at most 6 × 6"),
    ],
)
def test_parse_rejects_bad_text_with_a_clear_message(text, fragment):
    with pytest.raises(MatrixError, match=fragment.replace("×", ".")):
        parse_matrix(text, "Q")


def test_shape_checks_name_the_problem():
    with pytest.raises(MatrixError, match="Q has 3 columns but K has 2"):
        steps_from_text("1, 2, 3", "1, 2", "1")
    with pytest.raises(MatrixError, match="K has 2 rows but V has 1"):
        steps_from_text("1, 2", "1, 2; 3, 4", "1")
    with pytest.raises(MatrixError, match="same number of rows"):
        steps_from_text("1, 2", "1, 2; 3, 4", "1; 2", causal=True)
    # cross-attention (fewer queries than keys) is fine without the mask
    assert steps_from_text("1, 2", "1, 2; 3, 4", "1; 2").weights.shape == (1, 2)


@pytest.mark.parametrize(
    "q, k",
    [
        ("1e308, 1e308; 1, 1", "1e308, 1e308; 1, 1"),  # a row of A summed to 0 before
        ("1e200, 0; 0, 1", "1e200, 0; 0, 1"),  # an overflowing score gave A = 0.000
    ],
)
def test_overflowing_scores_are_refused_not_shown_as_zero(q, k):
    with pytest.raises(MatrixError, match="Q Kᵀ overflows"):
        steps_from_text(q, k, "1, 0; 0, 1")


def test_typed_fragments_cannot_break_out_of_their_code_span():
    with pytest.raises(MatrixError) as err:
        parse_matrix("1, x`](https://evil.example) :red[**ADMIN**]", "Q")
    assert str(err.value).count("`") == 2  # the fragment's own backtick cannot end the span


def test_a_soft_cap_and_a_learned_sink_by_hand():
    """Scores 1 and 3 (one query, two keys, scale 1): capped at c = 2 they are 2 tanh(1/2)
    and 2 tanh(3/2); a sink logit s joins the softmax, so the keys' weights are
    e^x / (e^a + e^b + e^s) and the sink takes the rest."""
    q, k, v = np.array([[1.0]]), np.array([[1.0], [3.0]]), np.array([[10.0], [20.0]])
    steps = attention_steps(q, k, v, scale=1.0, softcap=2.0, sink=0.5)
    a, b = 2 * np.tanh(0.5), 2 * np.tanh(1.5)
    np.testing.assert_allclose(steps.scaled, [[1.0, 3.0]])
    np.testing.assert_allclose(steps.capped, [[a, b]])
    total = np.exp(a) + np.exp(b) + np.exp(0.5)
    np.testing.assert_allclose(steps.weights, [[np.exp(a) / total, np.exp(b) / total]])
    np.testing.assert_allclose(steps.sink_weights, [np.exp(0.5) / total])
    np.testing.assert_allclose(steps.output, [[(10 * np.exp(a) + 20 * np.exp(b)) / total]])
    plain = attention_steps(q, k, v, scale=1.0)
    assert plain.capped is None and plain.sink_weights is None
    np.testing.assert_allclose(plain.weights.sum(), 1.0)
