import numpy as np
import pytest

from models.capture.run import AttentionRun
from models.capture.store import DensePatterns
from models.capture.views import (
    head_overview,
    pool,
    pooled_layer,
    scoped_weights,
    strongest_key,
    strongest_sink,
)
from models.model.facts import ModelFacts


def make_run(causal: bool, n: int = 5):
    rng = np.random.default_rng(0)
    p = rng.random((2, 3, n, n)).astype(np.float32)
    if causal:
        p = np.tril(p)
    p /= p.sum(-1, keepdims=True)
    facts = ModelFacts(
        "toy",
        "toy",
        n_layers=2,
        n_heads=3,
        n_kv_heads=3,
        d_head=4,
        d_model=12,
        n_ctx=64,
        causal=causal,
        positional="standard",
        prepends_bos=False,
        n_params=0,
    )
    run = AttentionRun(
        prompt="x",
        token_ids=tuple(range(n)),
        tokens=tuple(f"t{i}" for i in range(n)),
        store=DensePatterns(p),
        facts=facts,
        first_is_special=False,
        n_prompt_tokens=n,
    )
    return run, p


def test_scoped_weights_read_one_row_or_column():
    run, p = make_run(causal=False)
    np.testing.assert_allclose(scoped_weights(run, "head", 1, 2, 3, "from"), p[1, 2, 3])
    np.testing.assert_allclose(scoped_weights(run, "head", 1, 2, 3, "to"), p[1, 2, :, 3])
    np.testing.assert_allclose(
        scoped_weights(run, "layer", 0, 0, 1, "from"), p[0, :, 1].mean(0), rtol=1e-6
    )
    np.testing.assert_allclose(
        scoped_weights(run, "all", 0, 0, 4, "to"), p[:, :, :, 4].reshape(6, -1).mean(0), rtol=1e-6
    )


def test_scoped_weights_mark_unreachable_tokens_in_causal_models():
    run, p = make_run(causal=True)
    w = scoped_weights(run, "head", 0, 1, 2, "from")
    np.testing.assert_allclose(w[:3], p[0, 1, 2, :3])
    assert np.isnan(w[3:]).all()
    w = scoped_weights(run, "head", 0, 1, 2, "to")
    assert np.isnan(w[:2]).all() and np.allclose(w[2:], p[0, 1, 2:, 2])


def test_pool_averages_blocks_and_skips_masked_cells():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    pooled = pool(a, 2, how="mean")
    assert pooled.shape == (2, 2)
    assert pooled[0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)
    assert pooled[1, 1] == pytest.approx((10 + 11 + 14 + 15) / 4)
    b = np.array([[1.0, np.nan], [0.5, 0.5]], dtype=np.float32)
    assert pool(b, 1, how="mean")[0, 0] == pytest.approx((1.0 + 0.5 + 0.5) / 3)


@pytest.mark.parametrize("n,size", [(5, 72), (40, 7), (37, 5)])
def test_pooled_layer_equals_pooling_the_masked_pattern(n, size):
    run, p = make_run(causal=True, n=n)
    full = p[1].copy()
    full[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = np.nan
    np.testing.assert_allclose(pooled_layer(run, 1, size), pool(full, size), rtol=1e-6)


def test_pool_takes_each_blocks_strongest_weight():
    a = np.zeros((6, 6), dtype=np.float32)
    a[np.arange(1, 6), np.arange(0, 5)] = 0.9  # a previous-token diagonal, one cell wide
    pooled = pool(a, 2)
    assert pooled.shape == (2, 2)
    # 3 x 3 blocks: the diagonal lights both diagonal blocks and the block just below
    np.testing.assert_allclose(pooled, [[0.9, 0.0], [0.9, 0.9]])
    assert pool(a, 2, how="mean")[1, 1] < 0.4  # the average washes it out


def test_head_overview_and_strongest_key_read_one_head():
    run, p = make_run(causal=True, n=37)
    full = p[1, 2].copy()
    full[np.triu(np.ones((37, 37), dtype=bool), k=1)] = np.nan
    np.testing.assert_allclose(head_overview(run, 1, 2, 8), pool(full, 8), rtol=1e-6)
    assert strongest_key(run, 1, 2, 20) == int(np.argmax(p[1, 2, 20, :21]))


def test_strongest_sink_is_the_key_later_queries_attend_to_most():
    run, p = make_run(causal=True, n=37)
    want_pattern = p[0, 1].astype(np.float64)
    later = np.arange(37)[:, None] > np.arange(37)[None, :]
    alphas = np.where(
        later.sum(0) >= 4, (want_pattern * later).sum(0) / np.maximum(later.sum(0), 1), -np.inf
    )
    assert strongest_sink(run, 0, 1) == int(np.argmax(alphas))


@pytest.mark.parametrize("causal", [True, False])
def test_strongest_sink_on_sampled_rows_by_hand(causal):
    """Long prompts: every 4th query row (max_rows 8 of 37); a key competes with at least four
    sampled queries after it (causal) or other than it (bidirectional)."""
    run, p = make_run(causal=causal, n=37)
    rows = np.arange(0, 37, 4)
    sampled = p[1, 2][rows].astype(np.float64)
    keys = np.arange(37)
    later = rows[:, None] > keys[None, :] if causal else rows[:, None] != keys[None, :]
    counts = later.sum(0)
    alphas = np.where(counts >= 4, (sampled * later).sum(0) / np.maximum(counts, 1), -np.inf)
    assert strongest_sink(run, 1, 2, max_rows=8) == int(np.argmax(alphas))


def test_strongest_key_can_leave_the_first_key_out():
    run, p = make_run(causal=True, n=37)
    row = p[1, 2, 30, :31].astype(np.float64)
    assert strongest_key(run, 1, 2, 30) == int(np.argmax(row))
    assert strongest_key(run, 1, 2, 30, skip_first=True) == 1 + int(np.argmax(row[1:]))


# 700 tokens: bands of 175 rows (the thumbnails' blocks) end inside the overview's 88-row blocks
@pytest.mark.parametrize("n, size", [(37, 8), (40, 7), (64, 16), (700, 8)])
def test_value_weighted_overview_from_the_weighting_pass_equals_the_rebuilt_one(
    n, size, monkeypatch
):
    import dataclasses

    from models.capture import weighted
    from models.capture.weighted import value_weighting

    monkeypatch.setattr(weighted, "BAND_BYTES", 4 * 3 * n * 100)  # bands of about 100 rows
    run, _ = make_run(causal=True, n=n)
    norms = np.random.default_rng(1).random((2, 3, n)).astype(np.float32) + 0.1
    weighting = value_weighting(run, norms, size=4, overview=size)
    assert weighting.overview is not None and weighting.overview_factor == -(-n // size)
    rebuilt = dataclasses.replace(weighting, overview=None)
    for layer, head in [(0, 0), (1, 2)]:
        want = head_overview(run, layer, head, size, rebuilt)  # banded, from every window
        got = head_overview(run, layer, head, size, weighting)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2**-10, atol=2**-24)
