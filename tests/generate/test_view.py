"""The attention view's helpers: grouped scores against a plain loop, the mask check on planted
masks."""

from __future__ import annotations

import torch

from models.generate.view import grouped_scores, mask_is_causal_window


def test_grouped_scores_pair_each_query_head_with_its_key_head():
    torch.manual_seed(0)
    q, k = torch.randn(6, 3, 4), torch.randn(2, 5, 4)  # 6 query heads share 2 key heads
    got = grouped_scores(q, k)
    for h in range(6):
        torch.testing.assert_close(got[h], q[h] @ k[h // 3].T)


def causal(n_q: int, n_keys: int, window: int | None = None) -> torch.Tensor:
    query_pos = torch.arange(n_keys - n_q, n_keys)[:, None]
    key_pos = torch.arange(n_keys)[None]
    ok = key_pos <= query_pos
    if window:
        ok &= key_pos > query_pos - window
    return ok[None, None]


def test_mask_check_accepts_causal_and_window_masks_only():
    assert mask_is_causal_window(causal(4, 4), 4, None, rows=(0, 2, -1))
    assert mask_is_causal_window(causal(1, 9, window=3), 9, 3)
    assert not mask_is_causal_window(causal(1, 9), 9, 3)  # the window was not applied
    padded = causal(4, 4).clone()
    padded[..., 0] = False  # a left-padding mask
    assert not mask_is_causal_window(padded, 4, None, rows=(-1,))
    additive = torch.zeros(1, 1, 3, 3).masked_fill(~causal(3, 3), torch.finfo(torch.float32).min)
    assert mask_is_causal_window(additive, 3, None, rows=(0, 1, 2))
