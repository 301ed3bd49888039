"""The fused long-prompt capture: same patterns as Hugging Face eager attention, overviews and
thumbnails equal to a max-pool written here from those patterns, and Cancel that leaves the model
usable."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.capture.overview import overview_factor, row_stride
from models.capture.run import capture
from models.capture.streaming import capture_streaming, pool_factor
from models.model.forward import tokenize
from models.progress import Cancelled

TEXT = (
    "def moving_average(values, window):\n    total = sum(values[:window])\n"
    "    return total / window\n"
) * 6
ENGLISH = (
    "The ferry leaves the harbour at seven in the morning and comes back before dark. "
    "On calm days the crossing takes forty minutes. "
) * 4


def eager_patterns(model, ids: torch.Tensor) -> np.ndarray:
    """``layer head q k`` from the HF model with eager attention (weights of the loaded one)."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model.spec.path_or_name, attn_implementation="eager")
    with torch.no_grad():
        out = hf(ids, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


def reference_pool(pattern: np.ndarray, factor: int, stride: int = 1) -> np.ndarray:
    """Max over every cell of each block (over every ``stride``-th row of it, from its first),
    blocks wholly above the diagonal NaN."""
    n = pattern.shape[-1]
    pixels = math.ceil(n / factor)
    out = np.full((*pattern.shape[:-2], pixels, pixels), np.nan)
    for bi in range(pixels):
        for bj in range(pixels):
            if bj * factor > min(n, (bi + 1) * factor) - 1:
                continue
            rows = slice(bi * factor, (bi + 1) * factor, stride)
            block = pattern[..., rows, bj * factor : (bj + 1) * factor]
            out[..., bi, bj] = block.max(axis=(-2, -1))
    return out


@pytest.mark.parametrize("name, text", [("bundled", TEXT), ("smollm2", ENGLISH)])
def test_streaming_capture_equals_eager_attention(request, name, text):
    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, text)
    store = capture_streaming(model, ids)
    assert store is not None and store.pooled is not None
    want = eager_patterns(model, ids)
    got = np.stack([store.layer(layer) for layer in range(model.facts.n_layers)])
    assert np.abs(got - want).max() < 1e-5
    factor, big = pool_factor(ids.shape[1]), overview_factor(ids.shape[1])
    assert store.pool_factor == factor and store.overview_factor == big
    thumbs = reference_pool(want, factor, row_stride(factor))  # 8 rows a pixel at most
    np.testing.assert_allclose(store.pooled, thumbs, atol=1e-5)
    assert not hasattr(store, "overview")  # made per head when shown, every row up to 8 a pixel:
    for layer, head in [(0, 0), (model.facts.n_layers - 1, model.facts.n_heads - 1)]:
        np.testing.assert_allclose(
            store.head_overview(layer, head, big),
            reference_pool(want[layer, head], big, row_stride(big)),
            atol=1e-5,
        )


@pytest.mark.parametrize("name, text", [("bundled", TEXT), ("smollm2", ENGLISH)])
def test_entries_read_bands_columns_and_pairs_as_eager_attention(request, name, text):
    """A band (two slices), a column (one key) and scattered pairs, from the factored store
    (GQA on SmolLM2) and the dense one, against HF eager attention at those entries."""
    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, text)
    n = int(ids.shape[1])
    want = eager_patterns(model, ids)
    factored = capture_streaming(model, ids)
    dense = capture(model, text).store
    assert factored is not None and dense.nbytes == want.nbytes // 2  # float32 stack
    rows, cols = np.array([5, 9, n - 1, 3]), np.array([5, 2, 0, 7])  # 7 > 3: masked
    reads = {
        "band": (slice(2, n), slice(0, n - 2), np.arange(2, n), np.arange(0, n - 2)),
        "column": (slice(1, n), 0, np.arange(1, n), np.zeros(n - 1, dtype=int)),
        "pairs": (rows, cols, rows, cols),
    }
    for layer in (0, model.facts.n_layers - 1):
        for r, c, r_pos, c_pos in reads.values():
            expected = want[layer][:, r_pos, c_pos]
            for store in (factored, dense):
                np.testing.assert_allclose(store.entries(layer, r, c), expected, atol=1e-5)
    assert factored.entries(0, rows, cols)[:, -1].max() == 0.0
    for store in (factored, dense):
        with pytest.raises(ValueError, match="paired"):
            store.entries(0, slice(0, 4), slice(0, 3))


def test_long_runs_use_the_fused_path_and_report_each_layer(smollm2):
    seen = []
    run = capture(smollm2, ENGLISH, dense_limit=0, progress=lambda f, t: seen.append((f, t)))
    assert run.factored and run.store.pooled is not None
    assert len([t for _, t in seen if t.startswith("layer ")]) == 30
    assert seen[-1][1] == "layer 30 of 30"
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] <= 1.0


def test_cancel_stops_the_pass_and_leaves_the_model_usable(bundled):
    calls = []

    def stop_at_second_layer(fraction, text):
        calls.append(text)
        if len(calls) == 2:
            raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        capture(bundled, TEXT, dense_limit=0, progress=stop_at_second_layer)
    assert len(calls) == 2 and not bundled.lock.locked()
    again = capture(bundled, TEXT, dense_limit=0)
    assert again.factored


def test_a_model_whose_attention_never_calls_back_falls_back_to_the_bridge(bundled, monkeypatch):
    import models.capture.streaming as streaming

    monkeypatch.setattr(streaming, "run_plain", lambda model, ids, on_layer: None)
    run = capture(bundled, TEXT, dense_limit=0)
    assert run.factored and run.store.pooled is None  # the bridge's factored path
    dense = capture(bundled, TEXT)
    assert np.abs(run.patterns - dense.patterns).max() < 1e-5


@pytest.mark.parametrize("name, text", [("bundled", TEXT), ("smollm2", ENGLISH)])
def test_streaming_value_norms_equal_the_bridge_computation(request, name, text):
    from models.capture.weighted import value_norms

    model = request.getfixturevalue(name)
    ids, _ = tokenize(model, text)
    store = capture_streaming(model, ids)
    np.testing.assert_allclose(store.value_norms, value_norms(model, ids), rtol=1e-4, atol=1e-5)


def test_value_weighted_views_equal_the_direct_formula(bundled):
    from models.capture.views import head_overview, pool, scoped_weights
    from models.capture.weighted import value_norms, value_weighted, value_weighting

    run = capture(bundled, TEXT, dense_limit=0)
    ids = torch.tensor([run.token_ids])
    norms = value_norms(bundled, ids)
    weighting = value_weighting(run, norms, size=16)
    full = np.stack([run.layer_patterns(layer) for layer in range(3)])
    want = value_weighted(full, norms)  # layer head q k, rows renormalised
    for layer, head in [(0, 1), (2, 2)]:
        rows, cols = slice(10, 30), slice(5, 40)
        got = run.window(layer, head, rows, cols) * weighting.scale(layer, head, rows, cols)
        np.testing.assert_allclose(got, want[layer, head, rows, cols], atol=1e-6)
        masked = want[layer, head].copy()
        masked[np.triu(np.ones_like(masked, dtype=bool), 1)] = np.nan
        np.testing.assert_allclose(weighting.pooled[layer, head], pool(masked, 16), atol=1e-6)
        # the 256-px overview made in the same pass (128 tokens: one position a pixel)
        assert weighting.overview_factor == 1
        np.testing.assert_allclose(
            head_overview(run, layer, head, 256, weighting), masked, rtol=2**-10, atol=2**-24
        )
    token = run.n_tokens - 1
    mean_layer = scoped_weights(run, "layer", 2, 0, token, "from", weighting)
    np.testing.assert_allclose(mean_layer, want[2, :, token].mean(axis=0), atol=1e-6)
