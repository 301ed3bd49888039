"""Each head's small picture for the atlas map (shown when the pointer rests on its point): the
head's pattern on one corpus text, the longest (the most structure to see), max-pooled to at
most :data:`PICTURE` pixels a side, keys a query cannot see left NaN (drawn blank).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float

from models.capture.views import pool

PICTURE = 32  # pixels a side at most


def picture_text(sizes: Sequence[int]) -> int:
    """Which text the pictures show: the longest (the first of equals)."""
    return int(np.argmax(np.asarray(sizes)))


def pooled(
    pattern: Float[torch.Tensor, "head query_pos key_pos"], causal: bool
) -> Float[np.ndarray, "head pixel pixel"]:
    """One layer's pictures: every head's pattern, max-pooled, later keys NaN when causal."""
    weights = pattern.detach().to("cpu", torch.float32).numpy().copy()
    if causal:
        n = weights.shape[-1]
        weights[..., ~np.tril(np.ones((n, n), dtype=bool))] = np.nan
    pictures: np.ndarray = pool(weights, PICTURE).astype(np.float32)
    return pictures
