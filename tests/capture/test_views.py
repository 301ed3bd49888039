import numpy as np
import pytest

from models.capture.run import AttentionRun
from models.model.facts import ModelFacts
from models.capture.views import pool, pooled_layer, scoped_weights
from models.capture.store import DensePatterns


def make_run(causal: bool, n: int = 5):
    rng = np.random.default_rng(0)
    p = rng.random((2, 3, n, n)).astype(np.float32)
    if causal:
        p = np.tril(p)
    p /= p.sum(-1, keepdims=True)
    facts = ModelFacts("toy", "toy", n_layers=2, n_heads=3, n_kv_heads=3, d_head=4, d_model=12,
                       n_ctx=64, causal=causal, positional="standard", prepends_bos=False,
                       n_params=0)
    run = AttentionRun(prompt="x", token_ids=tuple(range(n)), tokens=tuple(f"t{i}" for i in range(n)),
                       store=DensePatterns(p), facts=facts, first_is_special=False,
                       n_prompt_tokens=n)
    return run, p


def test_scoped_weights_read_one_row_or_column():
    run, p = make_run(causal=False)
    np.testing.assert_allclose(scoped_weights(run, "head", 1, 2, 3, "from"), p[1, 2, 3])
    np.testing.assert_allclose(scoped_weights(run, "head", 1, 2, 3, "to"), p[1, 2, :, 3])
    np.testing.assert_allclose(scoped_weights(run, "layer", 0, 0, 1, "from"),
                               p[0, :, 1].mean(0), rtol=1e-6)
    np.testing.assert_allclose(scoped_weights(run, "all", 0, 0, 4, "to"),
                               p[:, :, :, 4].reshape(6, -1).mean(0), rtol=1e-6)


def test_scoped_weights_mark_unreachable_tokens_in_causal_models():
    run, p = make_run(causal=True)
    w = scoped_weights(run, "head", 0, 1, 2, "from")
    np.testing.assert_allclose(w[:3], p[0, 1, 2, :3])
    assert np.isnan(w[3:]).all()
    w = scoped_weights(run, "head", 0, 1, 2, "to")
    assert np.isnan(w[:2]).all() and np.allclose(w[2:], p[0, 1, 2:, 2])


def test_pool_averages_blocks_and_skips_masked_cells():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    pooled = pool(a, 2)
    assert pooled.shape == (2, 2)
    assert pooled[0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)
    assert pooled[1, 1] == pytest.approx((10 + 11 + 14 + 15) / 4)
    b = np.array([[1.0, np.nan], [0.5, 0.5]], dtype=np.float32)
    assert pool(b, 1)[0, 0] == pytest.approx((1.0 + 0.5 + 0.5) / 3)


@pytest.mark.parametrize("n,size", [(5, 72), (40, 7), (37, 5)])
def test_pooled_layer_equals_pooling_the_masked_pattern(n, size):
    run, p = make_run(causal=True, n=n)
    full = p[1].copy()
    full[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = np.nan
    np.testing.assert_allclose(pooled_layer(run, 1, size), pool(full, size), rtol=1e-6)
