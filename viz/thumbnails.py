"""Small PNG pictures of head patterns: the all-heads grid and one head's overview.

Each picture is a max-pooled pattern drawn pixel-per-block in 128 shades (the same in every
picture), white for 0 and dark blue for the strongest weight, grey where the model cannot look.
By default each head is normalised to its own strongest weight (leaving out the first query
row, which in a causal model always puts 1.0 on the first key) and drawn on a square-root
scale, so that a head's structure shows even when its weights are spread thin: a diagonal, an
offset stripe, a bright first column.

A linear-attention layer's mixing matrix is signed, not weights: :func:`signed_pngs` draws it
on :data:`viz.colours.SIGNED` (blue negative, white 0, red positive), each picture from minus
to plus its own largest magnitude.
"""

from __future__ import annotations

import base64
import functools
import io

import numpy as np
import plotly.colors
from PIL import Image

from viz.colours import SIGNED

LOW = np.array([255, 255, 255], dtype=np.float32)
HIGH = np.array([8, 48, 107], dtype=np.float32)
MASKED = np.array([225, 225, 225], dtype=np.uint8)
LEVELS = 128  # shades of blue a picture is drawn in (the same in every picture)
SIGNED_LEVELS = 127  # shades of a signed picture: odd, so that 0 is the middle one (white)
# Bytes a pixel of a picture takes while it is drawn: the pooled grid (float32) and, while it
# is shaded, its float32 copies (as read, NaN set to 0, divided, clipped, raised to the gamma),
# the shades and the mask (a byte each), the picture scaled up and its PNG (a byte each, at
# most). What a job that draws a picture adds to its estimate.
PIXEL_BYTES = 4 + 5 * 4 + 2 + 2


def head_tops(pooled: np.ndarray) -> np.ndarray:
    """Each picture's strongest pooled weight outside its first pixel row (1.0 where it has
    none), for a ``picture q_pixel k_pixel`` stack."""
    part = pooled[:, 1:] if pooled.shape[1] > 1 else pooled
    top = np.fmax.reduce(part.reshape(len(part), -1), axis=1, initial=-np.inf)
    return np.where(np.isfinite(top) & (top > 0), top, 1.0)


def pooled_pngs(
    pooled: np.ndarray, size: int = 72, normalise: bool = True, gamma: float = 0.5
) -> list[bytes]:
    """PNG bytes of each pooled ``q_pixel k_pixel`` pattern of a stack (NaN = masked), each
    ``size`` px square: shaded together, encoded one by one.

    Args:
        pooled: ``picture q_pixel k_pixel`` pooled weights.
        size: edge of each picture in pixels (blocks are scaled up without smoothing).
        normalise: divide by each picture's own strongest weight (see :func:`head_tops`).
        gamma: weights are drawn as ``w ** gamma`` (0.5: square root; 1: linear).
    """
    pooled = np.asarray(pooled, dtype=np.float32)
    tops = head_tops(pooled) if normalise else np.ones(len(pooled))
    weights = np.clip(np.nan_to_num(pooled, nan=0.0) / tops[:, None, None], 0.0, 1.0) ** gamma
    shades = np.rint(weights * (LEVELS - 1)).astype(np.uint8)
    shades[np.isnan(pooled)] = LEVELS  # the masked grey, after the blues
    return _encode(shades, _palette(), size)


def signed_tops(pooled: np.ndarray) -> np.ndarray:
    """Each signed picture's largest magnitude (1.0 where it has none)."""
    flat = np.abs(pooled.reshape(len(pooled), -1))
    top = np.fmax.reduce(flat, axis=1, initial=-np.inf)
    return np.where(np.isfinite(top) & (top > 0), top, 1.0)


def signed_pngs(pooled: np.ndarray, size: int = 72) -> list[bytes]:
    """PNG bytes of each pooled signed ``q_pixel k_pixel`` picture (NaN = masked), each drawn
    on :data:`viz.colours.SIGNED` from minus to plus its own largest magnitude
    (:func:`signed_tops`): white at 0, red positive, blue negative, linear."""
    pooled = np.asarray(pooled, dtype=np.float32)
    share = np.clip(np.nan_to_num(pooled, nan=0.0) / signed_tops(pooled)[:, None, None], -1, 1)
    shades = np.rint((share + 1.0) / 2.0 * (SIGNED_LEVELS - 1)).astype(np.uint8)
    shades[np.isnan(pooled)] = SIGNED_LEVELS  # the masked grey, after the colours
    return _encode(shades, _signed_palette(), size)


def _encode(shades: np.ndarray, palette: list[int], size: int) -> list[bytes]:
    pictures = []
    for shade in shades:
        image = Image.fromarray(shade, mode="P")
        image.putpalette(palette)
        if image.size != (size, size):
            image = image.resize((size, size), Image.Resampling.NEAREST)
        buf = io.BytesIO()
        image.save(buf, format="PNG", compress_level=6)
        pictures.append(buf.getvalue())
    return pictures


def pooled_png(
    pooled: np.ndarray, size: int = 72, normalise: bool = True, gamma: float = 0.5
) -> bytes:
    """PNG bytes of one pooled ``q_pixel k_pixel`` pattern (see :func:`pooled_pngs`)."""
    return pooled_pngs(np.asarray(pooled)[None], size, normalise, gamma)[0]


@functools.cache
def _signed_palette() -> list[int]:
    """:data:`SIGNED_LEVELS` colours evenly spaced along :data:`viz.colours.SIGNED`, then the
    masked grey."""
    scale = plotly.colors.get_colorscale(SIGNED)
    steps = [i / (SIGNED_LEVELS - 1) for i in range(SIGNED_LEVELS)]
    picked = plotly.colors.sample_colorscale(scale, steps)
    colours = [list(plotly.colors.unlabel_rgb(c)) for c in picked] + [list(MASKED)]
    return [round(float(x)) for colour in colours for x in colour]


@functools.cache
def _palette() -> list[int]:
    """:data:`LEVELS` blues evenly spaced from white to dark blue, then the masked grey."""
    blues = np.rint(LOW + (HIGH - LOW) * (np.arange(LEVELS)[:, None] / (LEVELS - 1)))
    return [int(x) for x in np.concatenate([blues, MASKED[None].astype(np.float32)]).ravel()]


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
