"""Positions (sinusoids, RoPE, ALiBi, masks), head sharing and the failure-mode demos."""

import math

import numpy as np
import pytest

from models.classroom import failures, positions, sharing
from models.classroom.steps import softmax_rows


def test_sinusoidal_values_by_hand():
    pe = positions.sinusoidal(4, 6)
    assert pe[0].tolist() == [0, 1, 0, 1, 0, 1]
    assert pe[1, 0] == pytest.approx(math.sin(1))
    assert pe[3, 2] == pytest.approx(math.sin(3 / 10000 ** (2 / 6)))
    assert pe[3, 5] == pytest.approx(math.cos(3 / 10000 ** (4 / 6)))


def _rotation(d, pos, base=10000.0):
    """Block-diagonal rotation matrix built from 2x2 blocks, independently of rope_rotate."""
    r = np.zeros((d, d))
    for i in range(d // 2):
        a = pos * base ** (-2 * i / d)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [
            [math.cos(a), -math.sin(a)],
            [math.sin(a), math.cos(a)],
        ]
    return r


def test_rope_matches_rotation_matrices_and_depends_only_on_offset():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=8), rng.normal(size=8)
    np.testing.assert_allclose(positions.rope_rotate(q, 5), _rotation(8, 5) @ q, atol=1e-12)
    s = positions.rope_scores(q, k, 10)
    assert positions.diagonal_spread(s) < 1e-9
    for i, j in [(3, 1), (7, 5), (9, 7)]:  # same offset 2
        assert s[i, j] == pytest.approx(q @ _rotation(8, -2) @ k, abs=1e-9)
    assert abs(s[3, 1] - s[3, 2]) > 1e-3  # different offsets differ
    with pytest.raises(ValueError):
        positions.rope_rotate(np.ones(3), 1)


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16, 32])
def test_alibi_slopes_follow_the_geometric_formula(h):
    expected = [2 ** (-8 / h * (head + 1)) for head in range(h)]
    np.testing.assert_allclose(positions.alibi_slopes(h), expected)


def test_alibi_slopes_for_other_head_counts_and_bias():
    np.testing.assert_allclose(positions.alibi_slopes(8), [1 / 2**i for i in range(1, 9)])
    twelve = positions.alibi_slopes(12)
    np.testing.assert_allclose(twelve[8:], [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5])
    b = positions.alibi_bias(3, 0.5)
    np.testing.assert_array_equal(b, [[0, -np.inf, -np.inf], [-0.5, 0, -np.inf], [-1, -0.5, 0]])
    np.testing.assert_array_equal(positions.alibi_bias(2, 1.0, causal=False), [[0, -1], [-1, 0]])
    p = positions.pattern_with_bias(np.zeros((3, 3)), b)
    np.testing.assert_allclose(p[2], np.exp([-1, -0.5, 0]) / np.exp([-1, -0.5, 0]).sum())


def test_masks():
    assert positions.causal_mask(4).sum() == 10
    w = positions.sliding_window_mask(5, 2)
    assert w.tolist()[4] == [False, False, False, True, True]
    assert w.sum(axis=1).tolist() == [1, 2, 2, 2, 2]
    assert positions.reach(32, 4096) == 32 * 4095
    with pytest.raises(ValueError):
        positions.sliding_window_mask(3, 0)


def test_sharing_groups_and_parameter_counts():
    assert sharing.kv_groups(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert sharing.kv_groups(4, 4) == [0, 1, 2, 3]
    assert [sharing.sharing_kind(32, g) for g in (32, 8, 1)] == ["MHA", "GQA", "MQA"]
    mha = sharing.attention_params(4096, 32, 32, 128)
    assert mha["W_Q"] == mha["W_K"] == mha["W_O"] == 4096 * 4096
    assert mha["total"] == 4 * 4096 * 4096
    gqa = sharing.attention_params(8192, 64, 8, 128)
    assert gqa["W_K"] == 8192 * 8 * 128 and gqa["W_Q"] == 8192 * 8192
    assert gqa["total"] == 2 * 8192 * 8192 + 2 * 8192 * 1024
    biased = sharing.attention_params(4, 2, 1, 2, bias=True)
    assert biased["total"] == (4 * 4 + 4) + 2 * (4 * 2 + 2) + (4 * 4 + 4)
    with pytest.raises(ValueError, match="split evenly"):
        sharing.kv_groups(6, 4)
    assert sharing.divisors(12) == [1, 2, 3, 4, 6, 12]


def test_saturation_scales_like_sqrt_dk():
    sat = failures.saturation(128, n_keys=64, n_queries=512)
    assert sat.logit_std == pytest.approx(math.sqrt(128), rel=0.15)
    assert sat.scaled_std == pytest.approx(1.0, rel=0.15)
    assert sat.top_weight > 0.8 > sat.scaled_top_weight
    assert sat.grad_norm < sat.scaled_grad_norm


def test_online_softmax_equals_softmax_and_tiling_saves_traffic():
    row = np.array([0.5, 2.0, -1.0, 3.0, 0.0, 1.0, 7.0])
    trace, weights = failures.online_softmax_trace(row, tile=3)
    np.testing.assert_allclose(weights, softmax_rows(row[None])[0], atol=1e-15)
    assert [t["running_max"] for t in trace] == [2.0, 3.0, 7.0]
    assert trace[-1]["running_sum"] == pytest.approx(np.exp(row - 7).sum())
    t = failures.hbm_traffic(16384, 128)
    assert t["naive"] == 2 * (4 * 16384 * 128 + 4 * 16384**2)  # Q, K, V, O + S, P twice
    assert t["tiled"] == 2 * 4 * 16384 * 128 + 4 * 16384
    assert t["tiled"] < t["tiled_no_cache"] < t["naive"]
    # naive: about d_head / 2 FLOPs per byte, below an H100's ridge; tiled: about n / 2, above
    assert t["naive_intensity"] < failures.H100_RIDGE < t["tiled_intensity"]
    assert t["naive_intensity"] == pytest.approx(64, rel=0.01)
