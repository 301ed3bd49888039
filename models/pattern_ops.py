"""Small pure operations on pattern stacks used by the explorer's token view."""

from __future__ import annotations

from typing import Literal

import numpy as np

Scope = Literal["head", "layer", "all"]


def scoped_pattern(patterns: np.ndarray, scope: Scope, layer: int, head: int) -> np.ndarray:
    """``query_pos key_pos`` pattern of one head, the mean over a layer's heads, or over all.

    Args:
        patterns: ``layer head_index query_pos key_pos``.
    """
    if scope == "head":
        return patterns[layer, head]
    if scope == "layer":
        return patterns[layer].mean(axis=0)
    return patterns.mean(axis=(0, 1))


def token_weights(pattern: np.ndarray, token: int, direction: Literal["from", "to"],
                  causal: bool) -> np.ndarray:
    """Weights to colour the prompt with, NaN where attention is impossible.

    ``from``: row ``token`` — how much the selected query attends to each key.
    ``to``: column ``token`` — how much each query attends to the selected key.
    """
    n = pattern.shape[0]
    if direction == "from":
        weights = pattern[token].astype(np.float64)
        if causal:
            weights[token + 1:] = np.nan
    else:
        weights = pattern[:, token].astype(np.float64)
        if causal:
            weights[:token] = np.nan
    return weights[:n]
