"""Overviews made in the capture pass: the max-pool of the pattern that q, k and LSE rebuild,
for any length, pooling factor, mask and key-head grouping (no model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.attention import AttentionOptions, rebuild_pattern
from models.capture.overview import (
    ROWS_PER_BLOCK,
    layer_overview,
    overview_factor,
    pool_again,
    row_stride,
    thumb_factor,
)


def reference(q, k, lse, scale, causal, factor, stride=1) -> np.ndarray:
    """Rebuild every weight, then take each block's largest over its rows ``0, stride, ...``
    (blocks above the diagonal NaN)."""
    n = q.shape[1]
    group = q.shape[0] // k.shape[0]
    weights = rebuild_pattern(
        q[None].float(),
        k.repeat_interleave(group, 0)[None].float(),
        lse[None],
        slice(None),
        slice(None),
        AttentionOptions(causal=causal, scale=scale),
    )[0].numpy()
    pixels = math.ceil(n / factor)
    out = np.full((q.shape[0], pixels, pixels), np.nan, dtype=np.float32)
    for i in range(pixels):
        for j in range(pixels):
            if causal and j * factor > min(n, (i + 1) * factor) - 1:
                continue
            block = weights[
                :, i * factor : (i + 1) * factor : stride, j * factor : (j + 1) * factor
            ]
            out[:, i, j] = block.max(axis=(1, 2))
    return out


def problem(n: int, heads: int, kv_heads: int, causal: bool, dtype=torch.float32):
    torch.manual_seed(n + heads)
    q = (torch.randn(heads, n, 16) * 2).to(dtype)
    k = torch.randn(kv_heads, n, 16).to(dtype)
    keys = k.float().repeat_interleave(heads // kv_heads, 0)
    scores = (q.float() @ keys.transpose(-1, -2)) * 0.25
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return q, k, torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("n, factor", [(77, 1), (300, 2), (513, 3), (130, 8), (1000, 12)])
@pytest.mark.parametrize("causal", [True, False])
def test_overview_equals_the_max_pool_of_the_rebuilt_pattern(n, factor, causal):
    q, k, lse = problem(n, 6, 2, causal)
    got = layer_overview(q, k, lse, 0.25, causal, factor).numpy()
    want = reference(q, k, lse, 0.25, causal, factor)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


@pytest.mark.parametrize("n, factor, causal", [(700, 24, True), (640, 32, True), (300, 16, False)])
def test_long_blocks_sample_their_rows(n, factor, causal):
    stride = row_stride(factor)
    assert stride > 1 and factor % stride == 0 and factor // stride >= ROWS_PER_BLOCK
    q, k, lse = problem(n, 4, 2, causal)
    got = layer_overview(q, k, lse, 0.25, causal, factor, stride=stride).numpy()
    want = reference(q, k, lse, 0.25, causal, factor, stride)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    every = reference(q, k, lse, 0.25, causal, factor)
    assert np.nanmax(got - every) <= 1e-6 and np.nanmin(got - every) < 0  # a lower bound


def test_row_strides():
    assert [row_stride(f) for f in (1, 8, 12, 16, 32, 128)] == [1, 1, 1, 2, 4, 16]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_products_stay_within_the_stated_bound(dtype):
    q, k, lse = problem(600, 4, 4, True, dtype)
    exact = layer_overview(q, k, lse, 0.25, True, 3).numpy().astype(np.float64)
    fast = layer_overview(q, k, lse, 0.25, True, 3, "model").numpy().astype(np.float64)
    unit = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = unit * (np.abs(np.log(exact)) + 1) * exact
        assert np.nanmax(np.abs(fast - exact) - bound) <= 0
    assert np.nanmax(np.abs(fast - exact)) > 0


def test_factors_make_thumbnails_whole_overview_pixels():
    for n in (100, 256, 300, 421, 2000, 2048, 8192, 32768):
        base, thumb = overview_factor(n), thumb_factor(n)
        assert thumb % base == 0 and math.ceil(n / thumb) <= 64 and math.ceil(n / base) <= 256
    assert (overview_factor(2048), thumb_factor(2048)) == (8, 32)


@pytest.mark.parametrize("pixels, by", [(256, 4), (250, 4), (150, 3), (37, 1)])
def test_an_overview_pools_again_by_hand(pixels, by):
    rng = np.random.default_rng(pixels)
    overview = rng.random((3, pixels, pixels)).astype(np.float32)
    overview[:, np.triu(np.ones((pixels, pixels), dtype=bool), 5)] = np.nan
    got = pool_again(overview, by)
    t = math.ceil(pixels / by)
    want = np.full((3, t, t), np.nan)
    for i in range(t):
        for j in range(t):
            block = overview[:, i * by : (i + 1) * by, j * by : (j + 1) * by]
            seen = ~np.isnan(block).all(axis=(1, 2))
            want[seen, i, j] = np.nanmax(block[seen], axis=(1, 2))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
