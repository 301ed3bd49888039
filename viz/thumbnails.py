"""Small PNG pictures of every head's pattern for the all-heads grid.

Each thumbnail is the pattern drawn pixel-per-cell (average-pooled when the prompt is longer than
the picture), white for 0 and dark blue for 1, grey where the model cannot look.
"""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

LOW = np.array([255, 255, 255], dtype=np.float32)
HIGH = np.array([8, 48, 107], dtype=np.float32)
MASKED = np.array([225, 225, 225], dtype=np.uint8)


def pooled_png(pooled: np.ndarray, size: int = 72) -> bytes:
    """PNG bytes of a pooled ``q_pixel k_pixel`` pattern (NaN = masked), ``size`` px square."""
    weights = np.clip(np.nan_to_num(pooled, nan=0.0), 0.0, 1.0) ** 0.5
    rgb = (LOW + (HIGH - LOW) * weights[..., None]).astype(np.uint8)
    rgb[np.isnan(pooled)] = MASKED
    image = Image.fromarray(rgb, mode="RGB").resize((size, size), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
