"""How attention learns where tokens are: sinusoids, RoPE, ALiBi, and the masks that hide keys.

All functions are small NumPy computations on ``pos``-indexed arrays; masks are ``query_pos
key_pos`` booleans with True meaning "this query may see this key".
"""

from __future__ import annotations

import math

import numpy as np

from models.classroom.steps import softmax_rows

ROPE_BASE = 10_000.0


def sinusoidal(n_pos: int, d_model: int, base: float = 10_000.0) -> np.ndarray:
    """``pos dim`` encodings: ``PE[p, 2i] = sin(p / base^(2i/d))``, ``PE[p, 2i+1] = cos(...)``."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angle = pos / base ** (two_i / d_model)
    pe = np.zeros((n_pos, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe


def rope_rotate(x: np.ndarray, position: int | float, base: float = ROPE_BASE) -> np.ndarray:
    """Rotate each pair ``(x[2i], x[2i+1])`` of ``x`` (``d`` even) by ``position base^(-2i/d)``."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE rotates pairs of dimensions; d = {d} is odd.")
    theta = position * base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    cos, sin = np.cos(theta), np.sin(theta)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rope_scores(q: np.ndarray, k: np.ndarray, n_pos: int, base: float = ROPE_BASE) -> np.ndarray:
    """``query_pos key_pos`` dot products of ``q`` rotated to position i with ``k`` rotated to j.

    The same two vectors are placed at every position, so any change along a diagonal
    (constant ``i - j``) would have to come from absolute position; RoPE gives none.
    """
    rq = np.stack([rope_rotate(q, i, base) for i in range(n_pos)])
    rk = np.stack([rope_rotate(k, j, base) for j in range(n_pos)])
    logits: np.ndarray = rq @ rk.T
    return logits


def diagonal_spread(matrix: np.ndarray) -> float:
    """Largest ``max - min`` along any diagonal (equal ``i - j``) of a square matrix."""
    n = matrix.shape[0]
    return max(float(np.ptp(np.diagonal(matrix, offset))) for offset in range(-n + 1, n))


def alibi_slopes(n_heads: int) -> np.ndarray:
    """One slope per head, as in the ALiBi paper: ``2^(-8 (head + 1) / h)`` for ``h`` a power of 2.

    Other head counts take the slopes of the nearest lower power of two, then every other slope
    of the next power of two (the paper's recipe).
    """

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (head + 1) / n) for head in range(n)]

    if n_heads < 1:
        raise ValueError("ALiBi needs at least one head.")
    lower = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(lower)
    if lower < n_heads:
        slopes += power_of_two(2 * lower)[0::2][: n_heads - lower]
    return np.array(slopes)


def alibi_bias(n: int, slope: float, causal: bool = True) -> np.ndarray:
    """``query_pos key_pos`` bias ``-slope * (i - j)``; ``-inf`` above the diagonal when causal.

    Without a causal mask (encoders) the distance is ``|i - j|``.
    """
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    bias = -slope * np.abs(i - j).astype(np.float64)
    return np.where(j > i, -np.inf, bias) if causal else bias


def causal_mask(n: int) -> np.ndarray:
    """``query_pos key_pos`` True where ``j <= i``."""
    return np.tril(np.ones((n, n), dtype=bool))


def sliding_window_mask(n: int, window: int) -> np.ndarray:
    """``query_pos key_pos`` True where ``i - window < j <= i``: the last ``window`` tokens."""
    if window < 1:
        raise ValueError("The window must hold at least one token.")
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return (j <= i) & (j > i - window)


def reach(n_layers: int, window: int) -> int:
    """How many positions back information can travel through ``n_layers`` windowed layers."""
    return n_layers * (window - 1)


def pattern_with_bias(scores: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``softmax(scores + bias)`` row-wise; ``-inf`` in ``bias`` hides a key."""
    return softmax_rows(np.asarray(scores, dtype=np.float64) + bias)


def pattern_with_mask(scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """``softmax`` of ``scores`` with hidden keys set to ``-inf``."""
    return softmax_rows(np.where(visible, scores, -np.inf))
