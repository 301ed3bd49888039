"""Value-weighted attention against a direct computation from hook_v and the HF output
projection, on MHA (bundled GPT-2) and GQA (SmolLM2)."""

import numpy as np

from models.capture.weighted import value_norms, value_weighted
from models.model.forward import pattern_hook, run_hooks, tokenize, v_hook


def test_value_weighted_by_hand():
    pattern = np.array(
        [
            [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]],
            [[0.0, 0.0, 0.0], [0.25, 0.75, 0.0], [1.0, 0.0, 0.0]],
        ]
    )
    norms = np.array([[2.0, 1.0, 0.0], [0.0, 4.0, 1.0]])
    out = value_weighted(pattern, norms)
    expected = np.array(
        [
            [[1.0, 0.0, 0.0], [2 / 3, 1 / 3, 0.0], [0.4 / 0.7, 0.3 / 0.7, 0.0]],
            [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]],
        ]
    )
    np.testing.assert_allclose(out, expected, atol=1e-6)
    assert (pattern == np.array(pattern)).all()  # the input is left alone


def direct_norms(model, ids, projection_rows):
    """``||v_j W_O^h||`` with loops: kv head of query head h is h // (n_heads / n_kv_heads)."""
    f = model.facts
    acts = run_hooks(model, ids, [v_hook(layer) for layer in range(f.n_layers)])
    group = f.n_heads // f.n_kv_heads
    out = np.zeros((f.n_layers, f.n_heads, ids.shape[1]))
    for layer in range(f.n_layers):
        v = acts[v_hook(layer)][0].double().numpy()
        for head in range(f.n_heads):
            w = projection_rows(layer, head)
            for pos in range(ids.shape[1]):
                out[layer, head, pos] = np.linalg.norm(v[pos, head // group] @ w)
    return out


def test_value_norms_on_the_bundled_model(bundled):
    ids, _ = tokenize(bundled, "for item in items:\n    print(item)")
    hf = bundled.bridge.original_model.transformer.h

    def rows(layer, head):  # Conv1D weight is (in, out): head h's rows of the projection
        return (
            hf[layer]
            .attn.original_component.c_proj.weight.detach()
            .double()
            .numpy()[head * 32 : (head + 1) * 32]
        )

    np.testing.assert_allclose(
        value_norms(bundled, ids), direct_norms(bundled, ids, rows), rtol=1e-5, atol=1e-6
    )


def test_value_norms_on_smollm2_gqa(smollm2):
    ids, _ = tokenize(smollm2, "The cat sat on the mat.")
    layers = smollm2.bridge.original_model.model.layers

    def rows(layer, head):  # nn.Linear weight is (out, in): head h's input columns
        weight = layers[layer].self_attn.original_component.o_proj.weight
        return weight.detach().double().numpy()[:, head * 64 : (head + 1) * 64].T

    norms = value_norms(smollm2, ids)
    assert norms.shape == (30, 9, ids.shape[1])
    np.testing.assert_allclose(norms, direct_norms(smollm2, ids, rows), rtol=1e-4, atol=1e-5)


def test_sink_heads_move_little_from_the_first_token(smollm2):
    """Heads that put most of their attention on the first token write its value small."""
    ids, _ = tokenize(smollm2, "The cat sat on the mat and looked at the door.")
    acts = run_hooks(smollm2, ids, [pattern_hook(layer) for layer in range(30)])
    patterns = np.stack([acts[pattern_hook(layer)][0].numpy() for layer in range(30)])
    weighted = value_weighted(patterns, value_norms(smollm2, ids))
    np.testing.assert_allclose(weighted[:, :, 1:].sum(axis=-1), 1.0, atol=1e-5)
    raw_sink = patterns[:, :, 1:, 0].mean(axis=-1)
    sinks = raw_sink > 0.5
    assert sinks.sum() > 50
    assert weighted[:, :, 1:, 0].mean(axis=-1)[sinks].mean() < raw_sink[sinks].mean() - 0.2
