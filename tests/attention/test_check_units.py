"""Hand-made tensors: per-head errors, ALiBi slopes, RoPE, windows, SDPA masks and timing."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

from models.attention import AttentionOptions, naive_attention
from models.attention.check import compare, tolerance
from models.attention.inputs import KernelInputs
from models.attention.timing import median_ms, sdpa, time_implementations
from models.model.softmax_terms import alibi_slopes, rotate
from models.model.softmax_terms import windows_from_config as layer_windows


def hand_made(n_layers=2, n_heads=4, n_kv=2, n=7, d=8, causal=True, seed=0) -> KernelInputs:
    """Random q, k, v with the model side computed by naive float64 attention."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_layers, 1, n_heads, n, d, generator=gen)
    k = torch.randn(n_layers, 1, n_kv, n, d, generator=gen)
    v = torch.randn(n_layers, 1, n_kv, n, d, generator=gen)
    scales = (d**-0.5, 0.5 * d**-0.5)[:n_layers]
    outs, patterns = [], []
    for layer in range(n_layers):
        out, _, pattern = naive_attention(
            q[layer], k[layer], v[layer], AttentionOptions(causal=causal, scale=scales[layer])
        )
        outs.append(out.float())
        patterns.append(pattern.float())
    return KernelInputs(
        token_ids=tuple(range(n)),
        tokens=tuple(f"t{i}" for i in range(n)),
        q=q,
        k=k,
        v=v,
        z=torch.stack(outs),
        patterns=torch.stack(patterns),
        scales=scales,
        windows=(None,) * n_layers,
        alibi_slopes=None,
        causal=causal,
        qk_source="hook_q/hook_k",
        scale_source="test",
        reference_error=0.0,
        model_dtype="float32",
        n_prompt_tokens=n,
    )


def test_errors_are_per_head_and_exact():
    inputs = hand_made()
    patterns, z = inputs.patterns.clone(), inputs.z.clone()
    patterns[1, 0, 2, 5, 3] += 0.01  # head 1.2, query 5, key 3
    z[0, 0, 1, 4, 6] -= 0.02  # head 0.1, position 4, dim 6
    report = compare(
        KernelInputs(**{**inputs.__dict__, "patterns": patterns, "z": z}),
        device="cpu",
        timing_repeats=1,
    )
    assert report.pattern_error[1, 2] == pytest.approx(0.01, abs=1e-6)
    assert report.output_error[0, 1] == pytest.approx(0.02, abs=1e-6)
    others = torch.ones(2, 4, dtype=torch.bool)
    others[1, 2] = False
    assert report.pattern_error[others.numpy()].max() < 1e-6
    others[1, 2], others[0, 1] = True, False
    assert report.output_error[others.numpy()].max() < 1e-6
    rows = {row["head"]: row for row in report.head_rows()}
    assert list(rows)[:5] == ["0.0", "0.1", "0.2", "0.3", "1.0"] and len(rows) == 8
    assert rows["1.2"]["max |P_kernel - P_model|"] == pytest.approx(0.01, abs=1e-6)


def test_per_layer_scales_and_gqa_reach_the_kernel():
    report = compare(hand_made(), device="cpu", timing_repeats=1)
    assert report.max_pattern_error < 1e-6 and report.max_output_error < 1e-6
    assert report.kernel_patterns.shape == (2, 4, 7, 7) and report.causal


def test_encoder_without_mask():
    report = compare(hand_made(causal=False, n_kv=4), device="cpu", timing_repeats=1)
    assert report.max_pattern_error < 1e-6 and report.kernel_patterns[..., 0, -1].min() > 0


@pytest.mark.parametrize("n_heads", [1, 4, 6, 8, 12, 16])
def test_alibi_slopes_match_bloom(n_heads):
    bias = build_alibi_tensor(torch.ones(1, 5), n_heads, torch.float32)  # slope * key position
    torch.testing.assert_close(alibi_slopes(n_heads), bias[:, 0, 1])


def test_alibi_slopes_by_hand():
    assert alibi_slopes(4).tolist() == [0.25, 0.0625, 0.015625, 0.00390625]


def test_rotate_matches_hf_partial_rotary():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 5, 3, 8, generator=gen)  # batch pos head d_head
    angle = torch.randn(1, 5, 2, generator=gen)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)  # rotary_dim 4
    expected, _ = apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=2)
    torch.testing.assert_close(rotate(q, cos, sin), expected)
    assert torch.equal(rotate(q, cos, sin)[..., 4:], q[..., 4:])


def test_layer_windows_from_config():
    assert layer_windows(SimpleNamespace(), 2) == (None, None)
    assert layer_windows(SimpleNamespace(sliding_window=4), 2) == (4, 4)
    assert layer_windows(SimpleNamespace(sliding_window=4, use_sliding_window=False), 2) == (
        None,
        None,
    )
    config = SimpleNamespace(sliding_window=3, layer_types=["sliding_attention", "full_attention"])
    assert layer_windows(config, 2) == (3, None)


def test_tolerance_follows_the_coarser_dtype():
    assert tolerance("float32", "float32") == 1e-5
    assert tolerance("float32", "bfloat16") == tolerance("bfloat16", "float32") == 5e-2


@pytest.mark.parametrize(
    "opts",
    [
        dict(causal=True),
        dict(causal=False),
        dict(causal=True, window=3, alibi=True),
        dict(causal=False, window=2, alibi=True),
    ],
)
def test_sdpa_wrapper_has_the_kernels_semantics(opts):
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 6, 8, generator=gen)
    k, v = torch.randn(1, 2, 6, 8, generator=gen), torch.randn(1, 2, 6, 8, generator=gen)
    slopes = alibi_slopes(4) if opts.pop("alibi", False) else None
    options = AttentionOptions(scale=0.3, alibi=slopes, **opts)
    got = sdpa(q, k, v, options)
    expected, _, _ = naive_attention(q, k, v, options)
    torch.testing.assert_close(got, expected.float(), atol=1e-5, rtol=0)


def test_median_ms_warms_up_then_takes_the_median():
    calls = []
    value = median_ms(lambda: calls.append(1), torch.device("cpu"), repeats=4)
    assert len(calls) == 5 and 0 <= value < 50


def test_timings_name_the_three_implementations():
    q = torch.randn(1, 2, 16, 8)
    rows = time_implementations(
        q,
        q[:, :1],
        q[:, :1],
        AttentionOptions(causal=True, scale=1 / math.sqrt(8)),
        backend="torch",
        repeats=2,
    )
    assert [row.name for row in rows] == [
        "app kernel (torch-tiled)",
        "PyTorch SDPA",
        "naive attention (full pattern)",
    ]
    assert all(row.median_ms > 0 and row.repeats == 2 for row in rows)
