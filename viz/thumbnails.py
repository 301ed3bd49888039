"""Small PNG pictures of every head's pattern for the all-heads grid.

Each thumbnail is the pattern drawn pixel-per-cell (average-pooled when the prompt is longer than
the picture), white for 0 and dark blue for 1, grey where the model cannot look.
"""

from __future__ import annotations

import base64
import io
import warnings

import numpy as np
from PIL import Image

LOW = np.array([255, 255, 255], dtype=np.float32)
HIGH = np.array([8, 48, 107], dtype=np.float32)
MASKED = np.array([225, 225, 225], dtype=np.uint8)


def pool(pattern: np.ndarray, size: int) -> np.ndarray:
    """Average-pool a ``query_pos key_pos`` array down to at most ``size`` x ``size``."""
    n_q, n_k = pattern.shape
    fq, fk = -(-n_q // size), -(-n_k // size)
    if fq == 1 and fk == 1:
        return pattern
    pad = np.full((fq * -(-n_q // fq), fk * -(-n_k // fk)), np.nan, dtype=np.float32)
    pad[:n_q, :n_k] = pattern
    blocks = pad.reshape(pad.shape[0] // fq, fq, pad.shape[1] // fk, fk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-masked blocks stay NaN
        return np.nanmean(blocks, axis=(1, 3))


def pattern_png(pattern: np.ndarray, causal: bool, size: int = 72) -> bytes:
    """PNG bytes of one head's pattern, scaled to ``size`` pixels with square cells."""
    shown = pattern.astype(np.float32, copy=True)
    if causal:
        n_q, n_k = shown.shape
        rows, cols = np.triu_indices(n=n_q, k=1 + n_k - n_q, m=n_k)
        shown[rows, cols] = np.nan
    small = pool(shown, size)
    weights = np.clip(np.nan_to_num(small, nan=0.0), 0.0, 1.0) ** 0.5
    rgb = (LOW + (HIGH - LOW) * weights[..., None]).astype(np.uint8)
    rgb[np.isnan(small)] = MASKED
    image = Image.fromarray(rgb, mode="RGB").resize((size, size), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
