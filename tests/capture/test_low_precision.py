"""A model loaded in bfloat16 is captured through the fused pass in bfloat16, with float32
statistics: its patterns stay within a stated distance of float32's, its fallbacks are reported,
and its measured difference from float32 bounds the real one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models.capture.streaming as streaming
from models.capture.overview import row_stride
from models.capture.precision import pattern_difference
from models.capture.run import capture
from models.capture.views import head_overview
from tests.capture.test_streaming import reference_pool

CODE = (
    "def moving_average(values, window):\n    total = sum(values[:window])\n"
    "    return total / window\n"
) * 6
ENGLISH = (
    "The ferry leaves the harbour at seven in the morning and comes back before dark. "
    "On calm days the crossing takes forty minutes. "
) * 4
# Largest and mean |bfloat16 - float32| over every weight of every head, measured on these
# prompts (0.017 / 4e-5 bundled, 0.075 / 1.4e-4 SmolLM2: a sink weight of 18.7), with room
# for other CPUs' kernels. The bfloat16 model's weights are the float32 ones rounded, so this
# is the whole difference a user sees.
TOLERANCE = {"bundled": (0.05, 2e-4), "smollm2": (0.15, 1e-3)}
TEXTS = {"bundled": CODE, "smollm2": ENGLISH}


@pytest.fixture(scope="module")
def runs(request):
    """Fused captures of each model's text, by fixture name (each captured once)."""
    made: dict = {}

    def get(name: str):
        if name not in made:
            text = TEXTS[name.removesuffix("_bf16")]
            made[name] = capture(request.getfixturevalue(name), text, dense_limit=0)
        return made[name]

    return get


@pytest.mark.parametrize("name", ["bundled", "smollm2"])
def test_bfloat16_patterns_stay_near_float32(runs, name):
    full, half = runs(name), runs(f"{name}_bf16")
    assert half.path == "fused" and half.fallback is None and half.dtype == "bfloat16"
    assert half.store.check.dtype == "bfloat16" and half.store.check.ratio <= 1.0
    assert half.store.q.dtype == np.float32 and half.store.lse.dtype == np.float32
    gap = np.stack(
        [
            np.abs(full.layer_patterns(i) - half.layer_patterns(i))
            for i in range(full.facts.n_layers)
        ]
    )
    largest, mean = TOLERANCE[name]
    assert gap.max() < largest and gap.mean() < mean
    rows = half.patterns.sum(axis=-1)  # float32 statistics: every row still sums to 1
    np.testing.assert_allclose(rows, 1.0, atol=2e-4)


def test_a_failed_check_is_reported_not_silent(bundled_bf16, monkeypatch):
    # as if the kernel had to match float32 to a billionth: bfloat16 cannot
    monkeypatch.setattr(streaming, "allowed_error", lambda out, *_: torch.full_like(out, 1e-9))
    run = capture(bundled_bf16, CODE, dense_limit=100_000)
    assert run.path != "fused"
    assert "bfloat16 rounding" in run.fallback and "largest difference" in run.fallback


@pytest.mark.parametrize("name", ["smollm2", "smollm2_bf16"])
def test_overview_is_the_max_pool_of_the_rebuilt_pattern(runs, name):
    run = runs(name)
    for layer, head in [(0, 0), (18, 7), (29, 8)]:
        made = head_overview(run, layer, head, 256)  # from q, k and LSE, block maxima first
        factor = run.store.overview_factor
        want = reference_pool(run.pattern(layer, head), factor, row_stride(factor))
        np.testing.assert_allclose(made, want, rtol=1e-5, atol=1e-7)  # float32 products
        assert np.array_equal(np.isnan(made), np.isnan(want))


def test_overviews_in_bfloat16_arithmetic_stay_within_their_bound(runs, smollm2_bf16):
    exact = runs("smollm2_bf16").store
    fast = capture(smollm2_bf16, ENGLISH, dense_limit=0, overview_arithmetic="model").store
    assert (exact.overview_arithmetic, fast.overview_arithmetic) == ("float32", "model")
    want = exact.pooled.astype(np.float64)  # the thumbnails the pass made
    got = fast.pooled.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = 2.0**-8 * (np.abs(np.log(want)) + 1) * want + 2.0**-10 * want + 2.0**-24
        assert np.nanmax(np.abs(got - want) - bound) <= 0
    assert np.nanmax(np.abs(got - want)) > 0  # really computed another way


def test_pattern_difference_bounds_the_real_one(runs, bundled_bf16):
    from transformers import AutoModelForCausalLM

    run = runs("bundled_bf16")
    measured = pattern_difference(bundled_bf16, run, n_rows=48)
    assert measured.n_rows == 48 and measured.dtype == "bfloat16"
    # independent: HF eager attention in float32 on the whole prompt, same (rounded) weights
    hf = AutoModelForCausalLM.from_pretrained(
        bundled_bf16.spec.path_or_name, attn_implementation="eager", dtype=torch.bfloat16
    ).float()
    with torch.no_grad():
        eager = hf(torch.tensor([run.token_ids]), output_attentions=True).attentions
    true = max(
        float(
            np.abs(
                run.store.layer_window(i, slice(0, 48), slice(None)) - a[0, :, :48].numpy()
            ).max()
        )
        for i, a in enumerate(eager)
    )
    assert measured.bound >= true
    assert measured.largest == pytest.approx(true, abs=1e-5)
    assert true > 1e-3  # bfloat16 really differs: the check is not vacuous


def test_pattern_difference_is_rounding_only_in_float32(runs, bundled):
    run = runs("bundled")
    measured = pattern_difference(bundled, run, n_rows=32)
    assert measured.dtype == "float32" and measured.largest < 1e-5


def test_short_prompts_on_a_bfloat16_model_take_the_fused_path_too(bundled_bf16):
    run = capture(bundled_bf16, "a short prompt")
    assert run.path == "fused" and run.factored and run.fallback is None
    np.testing.assert_allclose(run.patterns.sum(axis=-1), 1.0, atol=2e-4)
