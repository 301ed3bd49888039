import numpy as np

from models.capture import AttentionRun
from models.facts import ModelFacts
from models.pattern_ops import scoped_pattern, token_weights
from models.pattern_store import DensePatterns


def make_run():
    rng = np.random.default_rng(0)
    p = rng.random((2, 3, 4, 4)).astype(np.float32)
    p /= p.sum(-1, keepdims=True)
    facts = ModelFacts("toy", "toy", n_layers=2, n_heads=3, n_kv_heads=3, d_head=4, d_model=12,
                       n_ctx=8, causal=False, positional="standard", prepends_bos=False,
                       n_params=0)
    run = AttentionRun(prompt="a b c d", token_ids=(1, 2, 3, 4), tokens=("a", "b", "c", "d"),
                       store=DensePatterns(p), facts=facts, first_is_special=False,
                       n_prompt_tokens=4)
    return run, p


def test_scopes():
    run, p = make_run()
    assert np.array_equal(scoped_pattern(run, "head", 1, 2), p[1, 2])
    assert np.allclose(scoped_pattern(run, "layer", 1, 0), (p[1, 0] + p[1, 1] + p[1, 2]) / 3)
    assert np.allclose(scoped_pattern(run, "all", 0, 0), p.reshape(6, 4, 4).mean(0), atol=1e-7)


def test_token_weights_directions_and_causal_mask():
    p = np.tril(np.ones((3, 3)))
    p = p / p.sum(1, keepdims=True)
    w = token_weights(p, 1, "from", causal=True)
    assert np.allclose(w[:2], [0.5, 0.5]) and np.isnan(w[2])
    w = token_weights(p, 1, "to", causal=True)
    assert np.isnan(w[0]) and np.allclose(w[1:], [0.5, 1 / 3])
    w = token_weights(np.full((2, 2), 0.5), 0, "from", causal=False)
    assert not np.isnan(w).any()
