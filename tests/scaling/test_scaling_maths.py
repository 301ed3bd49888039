"""Row statistics, masking and the synthetic panel against closed forms and plain PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.scaling.maths import (
    alpha_to_factor,
    effective_keys,
    factor_grid,
    jacobian_norm,
    masked_entries,
    row_entropy,
    row_max,
    row_stats,
    scale_scores,
    scaled_patterns,
    sweep,
    synthetic_panel,
)


def explicit_jacobian_norm(p: torch.Tensor) -> torch.Tensor:
    """Build diag(p) - p p^T for each row and take its Frobenius norm (no closed form)."""
    jac = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
    return torch.linalg.matrix_norm(jac, ord="fro")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50])
def test_uniform_rows_match_closed_forms(n):
    p = torch.full((4, n), 1.0 / n, dtype=torch.float64)
    torch.testing.assert_close(row_entropy(p), torch.full((4,), math.log(n), dtype=torch.float64))
    torch.testing.assert_close(row_max(p), torch.full((4,), 1.0 / n, dtype=torch.float64))
    torch.testing.assert_close(effective_keys(p), torch.full((4,), float(n), dtype=torch.float64))
    # ||J||_F^2 = n (1/n - 1/n^2)^2 + (n^2 - n) / n^4 = (n - 1) / n^2
    expected = math.sqrt(n - 1) / n
    torch.testing.assert_close(jacobian_norm(p), torch.full((4,), expected, dtype=torch.float64))
    assert n * (1 / n - 1 / n**2) ** 2 + (n * n - n) / n**4 == pytest.approx((n - 1) / n**2)


def test_one_hot_rows_give_zero_entropy_and_zero_jacobian():
    p = torch.eye(5, dtype=torch.float64)
    assert torch.equal(row_entropy(p), torch.zeros(5, dtype=torch.float64))
    assert torch.equal(row_max(p), torch.ones(5, dtype=torch.float64))
    assert torch.equal(effective_keys(p), torch.ones(5, dtype=torch.float64))
    assert torch.equal(jacobian_norm(p), torch.zeros(5, dtype=torch.float64))


def test_hand_computed_row():
    p = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    assert float(row_entropy(p)) == pytest.approx(1.5 * math.log(2))
    # diagonal 0.25, 0.1875, 0.1875; off-diagonal -0.125 (x2), -0.0625 (x4 ... twice each)
    sq = 0.25**2 + 2 * 0.1875**2 + 4 * 0.125**2 + 2 * 0.0625**2
    assert float(jacobian_norm(p)) == pytest.approx(math.sqrt(sq))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-8, 8), min_size=1, max_size=12))
def test_jacobian_closed_form_equals_explicit_matrix(logits):
    p = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=-1)
    # The closed form subtracts O(1) terms, so near one-hot rows it keeps ~1e-12 absolute accuracy.
    torch.testing.assert_close(jacobian_norm(p), explicit_jacobian_norm(p), atol=1e-10, rtol=1e-6)


@pytest.mark.parametrize("sentinel", [-torch.inf, torch.finfo(torch.float32).min])
@pytest.mark.parametrize("factor", [1 / 16, 1.0, 16.0])
def test_masked_keys_stay_masked_for_any_factor(sentinel, factor):
    scores = torch.tensor([[0.3, sentinel, sentinel], [1.0, -2.0, sentinel], [0.5, 0.1, -0.7]])
    p = scaled_patterns(scores, factor)
    assert p[0].tolist() == [1.0, 0.0, 0.0]
    assert p[1, 2] == 0.0
    want = torch.softmax(factor * torch.tensor([1.0, -2.0]), -1)
    torch.testing.assert_close(p[1, :2], want)
    torch.testing.assert_close(p[2], torch.softmax(factor * scores[2], -1))
    scaled = scale_scores(scores, factor)
    assert torch.equal(masked_entries(scaled), masked_entries(scores))
    assert torch.equal(scaled[masked_entries(scores)], scores[masked_entries(scores)])


def test_half_precision_sentinel_is_detected():
    scores = torch.tensor([[0.5, torch.finfo(torch.float16).min]], dtype=torch.float16)
    assert masked_entries(scores).tolist() == [[False, True]]
    assert scaled_patterns(scores, 0.01)[0].tolist() == [1.0, 0.0]


def test_row_without_keys_is_zero_not_nan():
    p = scaled_patterns(torch.full((2, 3), -torch.inf), 2.0)
    assert torch.equal(p, torch.zeros(2, 3))


def test_factor_grid_and_alpha():
    grid = factor_grid()
    assert len(grid) == 25 and grid[0] == pytest.approx(1 / 16) and grid[-1] == pytest.approx(16)
    assert grid[12] == 1.0 and np.all(np.diff(grid) > 0)
    assert float(alpha_to_factor(0.5, 64)) == 1.0
    assert float(alpha_to_factor(0.0, 64)) == pytest.approx(8.0)
    assert float(alpha_to_factor(1.0, 64)) == pytest.approx(1 / 8)


def test_normalised_entropy_skips_single_key_rows():
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    p = (causal / causal.sum(-1, keepdim=True)).double()[None, None]
    stats = row_stats(p, causal[None, None])
    assert float(stats["norm_entropy"]) == pytest.approx(1.0)
    assert float(stats["entropy"]) == pytest.approx((0 + math.log(2) + math.log(3)) / 3)
    want_jac = (0 + math.sqrt(1) / 2 + math.sqrt(2) / 3) / 3
    assert float(stats["jacobian"]) == pytest.approx(want_jac)


def test_sweep_limits_and_per_head_values():
    gen = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 3, 6, 6, generator=gen) * 3
    scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -torch.inf)
    stats = sweep(scores, np.array([1e-6, 1.0, 1e6]))
    assert stats.entropy.shape == (3, 2, 3) and stats.n_rows == 6 and stats.n_rows_norm == 5
    mean_log_n = np.mean(np.log(np.arange(1, 7)))
    assert stats.uniform["entropy"] == pytest.approx(mean_log_n)
    np.testing.assert_allclose(stats.entropy[0], mean_log_n, atol=1e-5)
    np.testing.assert_allclose(stats.norm_entropy[0], 1.0, atol=1e-5)
    np.testing.assert_allclose(stats.max_weight[2], 1.0, atol=1e-6)
    np.testing.assert_allclose(stats.jacobian[2], 0.0, atol=1e-6)
    p = torch.softmax(scores[1, 2].double(), -1)  # plain PyTorch at c = 1
    assert stats.curve("max_weight", 1, 2)[1] == pytest.approx(float(p.max(-1).values.mean()))
    ent = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    assert stats.curve("eff_keys", 1, 2)[1] == pytest.approx(float(torch.exp(ent).mean()))
    assert stats.curve("entropy")[1] == pytest.approx(stats.entropy[1].mean())


@pytest.fixture(scope="module")
def panel():
    return synthetic_panel()


def test_synthetic_variance_is_d_k(panel):
    assert panel.n_pairs == 20_000 and list(panel.d_ks) == [16, 32, 64, 128, 256, 512, 1024]
    np.testing.assert_allclose(panel.var_raw, panel.d_ks, rtol=0.05)
    np.testing.assert_allclose(panel.var_scaled, 1.0, rtol=0.05)


def test_synthetic_max_weight_saturates_without_scaling(panel):
    assert np.all(np.diff(panel.max_raw) > 0) and panel.max_raw[-1] > 0.9
    assert np.all(panel.max_scaled < 0.2) and np.all(panel.max_scaled > 1 / panel.n_keys)


def test_synthetic_panel_is_seeded(panel):
    again = synthetic_panel(d_ks=(16, 64), n_pairs=2000, n_rows=50, seed=3)
    same = synthetic_panel(d_ks=(16, 64), n_pairs=2000, n_rows=50, seed=3)
    other = synthetic_panel(d_ks=(16, 64), n_pairs=2000, n_rows=50, seed=4)
    assert np.array_equal(again.var_raw, same.var_raw)
    assert not np.array_equal(again.var_raw, other.var_raw)


def exact_jacobian_norm(logits: list[float]) -> float:
    """``||diag(p) - p p^T||_F`` of softmax(logits), every entry built at 60 significant digits."""
    import mpmath

    with mpmath.workdps(60):
        top = max(logits)
        weights = [mpmath.exp(mpmath.mpf(x) - top) for x in logits]
        total = mpmath.fsum(weights)
        p = [w / total for w in weights]
        entries = [
            (p[i] if i == j else 0) - p[i] * p[j] for i in range(len(p)) for j in range(len(p))
        ]
        return float(mpmath.sqrt(mpmath.fsum(e * e for e in entries)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-60, 60, allow_nan=False), min_size=1, max_size=12))
def test_jacobian_norm_keeps_relative_accuracy_near_one_hot(logits):
    p = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=-1)
    want = exact_jacobian_norm(logits)
    got = float(jacobian_norm(p))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_jacobian_norm_of_the_row_that_broke_the_expanded_form():
    logits = [8.0, -7.125]
    got = float(jacobian_norm(torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=-1)))
    assert got == pytest.approx(exact_jacobian_norm(logits), rel=1e-12)
