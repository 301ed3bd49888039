"""Small PNG pictures of head patterns: the all-heads grid and one head's overview.

Each picture is a max-pooled pattern drawn pixel-per-block in 128 shades (the same in every
picture), white for 0 and dark blue for the strongest weight, grey where the model cannot look.
By default each head is normalised to its own strongest weight (leaving out the first query
row, which in a causal model always puts 1.0 on the first key) and drawn on a square-root
scale, so that a head's structure shows even when its weights are spread thin: a diagonal, an
offset stripe, a bright first column.
"""

from __future__ import annotations

import base64
import functools
import io

import numpy as np
from PIL import Image

LOW = np.array([255, 255, 255], dtype=np.float32)
HIGH = np.array([8, 48, 107], dtype=np.float32)
MASKED = np.array([225, 225, 225], dtype=np.uint8)
LEVELS = 128  # shades of blue a picture is drawn in (the same in every picture)


def head_top(pooled: np.ndarray) -> float:
    """A head's strongest pooled weight outside the first pixel row (1.0 if it has none)."""
    part = pooled[1:] if pooled.shape[0] > 1 else pooled
    finite = part[np.isfinite(part)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def pooled_png(
    pooled: np.ndarray, size: int = 72, normalise: bool = True, gamma: float = 0.5
) -> bytes:
    """PNG bytes of a pooled ``q_pixel k_pixel`` pattern (NaN = masked), ``size`` px square.

    Args:
        pooled: the pooled weights.
        size: edge of the picture in pixels (blocks are scaled up without smoothing).
        normalise: divide by the head's own strongest weight (see :func:`head_top`).
        gamma: weights are drawn as ``w ** gamma`` (0.5: square root; 1: linear).
    """
    top = head_top(pooled) if normalise else 1.0
    weights = np.clip(np.nan_to_num(pooled, nan=0.0) / top, 0.0, 1.0) ** gamma
    shade = np.rint(weights * (LEVELS - 1)).astype(np.uint8)
    shade[np.isnan(pooled)] = LEVELS  # the masked grey, after the blues
    image = Image.fromarray(shade, mode="P")
    image.putpalette(_palette())
    image = image.resize((size, size), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


@functools.cache
def _palette() -> list[int]:
    """:data:`LEVELS` blues evenly spaced from white to dark blue, then the masked grey."""
    blues = np.rint(LOW + (HIGH - LOW) * (np.arange(LEVELS)[:, None] / (LEVELS - 1)))
    return [int(x) for x in np.concatenate([blues, MASKED[None].astype(np.float32)]).ravel()]


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
