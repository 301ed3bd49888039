import numpy as np

from models.pattern_ops import scoped_pattern, token_weights


def stack():
    rng = np.random.default_rng(0)
    p = rng.random((2, 3, 4, 4))
    return p / p.sum(-1, keepdims=True)


def test_scopes():
    p = stack()
    assert np.array_equal(scoped_pattern(p, "head", 1, 2), p[1, 2])
    assert np.allclose(scoped_pattern(p, "layer", 1, 0), (p[1, 0] + p[1, 1] + p[1, 2]) / 3)
    assert np.allclose(scoped_pattern(p, "all", 0, 0), p.reshape(6, 4, 4).mean(0))


def test_token_weights_directions_and_causal_mask():
    p = np.tril(np.ones((3, 3)))
    p = p / p.sum(1, keepdims=True)
    w = token_weights(p, 1, "from", causal=True)
    assert np.allclose(w[:2], [0.5, 0.5]) and np.isnan(w[2])
    w = token_weights(p, 1, "to", causal=True)
    assert np.isnan(w[0]) and np.allclose(w[1:], [0.5, 1 / 3])
    w = token_weights(np.full((2, 2), 0.5), 0, "from", causal=False)
    assert not np.isnan(w).any()
