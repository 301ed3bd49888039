"""Small pure operations on pattern stacks used by the explorer's token view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from models.capture import AttentionRun

Scope = Literal["head", "layer", "all"]


def scoped_pattern(run: "AttentionRun", scope: Scope, layer: int, head: int) -> np.ndarray:
    """``query_pos key_pos`` pattern of one head, the mean over a layer's heads, or over all.

    The mean over all heads is accumulated layer by layer, so a long prompt never needs the
    whole stack in memory.
    """
    if scope == "head":
        return run.pattern(layer, head)
    if scope == "layer":
        return run.layer_patterns(layer).mean(axis=0)
    total = np.zeros((run.n_tokens, run.n_tokens), dtype=np.float64)
    for patterns in run.iter_layers():
        total += patterns.sum(axis=0)
    return (total / (run.facts.n_layers * run.facts.n_heads)).astype(np.float32)


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
