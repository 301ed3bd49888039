"""A head's activation and the decile sampling, on hand-built cases whose answer is known."""

import numpy as np
import pytest
import torch

from models.heads.atlas.peaks import MIN_ROW_WEIGHT, ROW_KEYS, Peaks, decile_sample


def test_deciles_of_twenty_texts_by_hand():
    # activations 0.95, 0.90, ..., 0.00 on texts 0..19, shuffled into text order
    rng = np.random.default_rng(3)
    order = rng.permutation(20)
    activation = np.empty(20)
    activation[order] = 0.95 - 0.05 * np.arange(20)  # order[r] is the text ranked r
    deciles = decile_sample(activation, per_decile=2)
    assert [d.index for d in deciles] == list(range(10))
    for d in deciles:  # two texts per decile: ranks 2d and 2d + 1, strongest first
        assert d.texts == (order[2 * d.index], order[2 * d.index + 1])
        assert d.values == pytest.approx((0.95 - 0.1 * d.index, 0.90 - 0.1 * d.index))
        assert (d.high, d.low) == pytest.approx(d.values)


def test_deciles_with_three_per_decile_take_the_ends_and_the_middle():
    activation = np.linspace(1.0, 0.01, 100)  # text t ranked t
    deciles = decile_sample(activation, per_decile=3)
    # ten ranks per decile; round(linspace(0, 9, 3)) = 0, 4 (4.5 rounds to even), 9
    assert deciles[0].texts == (0, 4, 9) and deciles[9].texts == (90, 94, 99)
    assert deciles[3].low == pytest.approx(activation[39]) and deciles[3].high == activation[30]


def test_deciles_of_few_texts_skip_the_empty_ones_and_leave_nan_out():
    activation = np.array([0.2, np.nan, 0.9, 0.5, 0.5])
    deciles = decile_sample(activation, per_decile=1)
    # 4 ranked texts: 2 (0.9), 3 (0.5, the earlier tie), 4, 0; deciles 2, 4, 7, 9 hold them
    assert [(d.index, d.texts) for d in deciles] == [(2, (2,)), (4, (3,)), (7, (4,)), (9, (0,))]
    assert decile_sample(np.full(3, np.nan)) == []


def test_peak_skips_the_first_key_and_keeps_the_row():
    pattern = torch.zeros(2, 4, 4)
    pattern[:, :, 0] = 1.0  # both heads sink everything on key 0 ...
    pattern[0, 2] = torch.tensor([0.3, 0.6, 0.1, 0.0])  # ... head 0 peaks at (2, 1)
    pattern[1, 3] = torch.tensor([0.002, 0.004, 0.494, 0.5])  # head 1 at (3, 3)
    peaks = Peaks.empty(n_texts=2, n_layers=1, n_heads=2)
    peaks.record(1, 0, pattern)
    assert peaks.value[1, 0] == pytest.approx([0.6, 0.5])
    assert peaks.query[1, 0].tolist() == [2, 3] and peaks.key[1, 0].tolist() == [1, 3]
    assert np.isnan(peaks.value[0]).all() and (peaks.query[0] == -1).all()
    keys, weights = peaks.row_keys[1, 0, 1], peaks.row_weights[1, 0, 1]
    # strongest first; 0.004 and 0.002 are under the cut
    assert MIN_ROW_WEIGHT == 0.005 and keys.tolist() == [3, 2] + [-1] * (ROW_KEYS - 2)
    assert weights[:2] == pytest.approx([0.5, 0.494]) and (weights[2:] == 0).all()
    assert peaks.row_keys[1, 0, 0, :3].tolist() == [1, 0, 2]


def test_a_one_token_text_has_no_peak():
    peaks = Peaks.empty(1, 1, 3)
    peaks.record(0, 0, torch.ones(3, 1, 1))
    assert np.isnan(peaks.value).all()
