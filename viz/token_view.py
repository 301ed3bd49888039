"""Escaped HTML of a prompt with each token shaded by an attention weight.

Shades are relative to the largest weight shown (a legend says which): on a long prompt every
single weight is small, and absolute shading would leave the whole strip white. A
linear-attention layer's signed mixing entries are shaded red (positive) or blue (negative) of
:data:`viz.colours.SIGNED`, relative to the largest magnitude shown.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from models.capture.spans import Direction
from viz.colours import NEGATIVE, POSITIVE, largest_magnitude

VERBS: dict[Direction, str] = {"from": "attention from the selected token", "to": "attention to it"}


def shade(weight: float, top: float = 1.0) -> str:
    """Background for a weight in [0, ``top``]: transparent to the heatmap's dark blue."""
    alpha = min(max(float(weight) / float(top), 0.0), 1.0) ** 0.6  # double, as the browser
    return f"rgba(8, 81, 156, {alpha:.3f})"


def _rgb(colour: str) -> str:
    return ", ".join(str(int(colour[i : i + 2], 16)) for i in (1, 3, 5))


def signed_shade(value: float, top: float = 1.0) -> str:
    """Background for a signed value in [-``top``, ``top``]: transparent at 0, to red above and
    blue below."""
    alpha = min(abs(float(value)) / float(top), 1.0) ** 0.6
    return f"rgba({_rgb(POSITIVE if value >= 0 else NEGATIVE)}, {alpha:.3f})"


def colour_top(weights: np.ndarray) -> float:
    """The weight drawn darkest: the largest visible one (1.0 when none is positive)."""
    finite = weights[np.isfinite(weights)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def legend_html(weights: np.ndarray, signed: bool = False) -> str:
    """A small colour bar from 0 to the darkest weight of the token strip (escaped numbers);
    ``signed``: from minus to plus the largest magnitude of a linear layer's mixing entries."""
    if signed:
        top = largest_magnitude(weights)
        stops = ", ".join(signed_shade(top * f, top) for f in np.linspace(-1, 1, 11))
        return (
            '<div style="font:12px sans-serif;display:flex;align-items:center;gap:6px;">'
            f'<span>{-top:+.3g}</span><span style="display:inline-block;width:160px;'
            f'height:12px;border:1px solid #ccc;background:linear-gradient(to right, {stops});">'
            f'</span><span>{top:+.3g}</span><span style="opacity:0.7">(mixing, signed: not '
            "attention weights)</span></div>"
        )
    top = colour_top(weights)
    stops = ", ".join(shade(top * f, top) for f in np.linspace(0, 1, 6))
    return (
        '<div style="font:12px sans-serif;display:flex;align-items:center;gap:6px;">'
        '<span>0</span><span style="display:inline-block;width:160px;height:12px;'
        f'border:1px solid #ccc;background:linear-gradient(to right, {stops});"></span>'
        f'<span>{top:.3g}</span><span style="opacity:0.7">(darkest = largest weight)</span>'
        "</div>"
    )


def token_spans(
    tokens: Sequence[str],
    weights: np.ndarray,
    selected: int | None,
    direction: Direction,
    signed: bool = False,
) -> str:
    """One ``<span>`` per token, with ``data-pos`` for clicks and a tooltip with the weight.

    Args:
        tokens: readable token labels (escaped here).
        weights: one weight per token (NaN where the token is not visible to the query).
        selected: the clicked position, outlined.
        direction: ``from``: weights are what the selected query attends to; ``to``: how much
            each token attends to the selected one.
        signed: the weights are a linear layer's signed mixing entries (see
            :func:`signed_shade`).
    """
    verb = VERBS[direction]
    top = largest_magnitude(weights) if signed else colour_top(weights)
    paint = signed_shade if signed else shade
    parts = []
    for pos, (tok, weight) in enumerate(zip(tokens, weights, strict=True)):
        seen = not np.isnan(weight)
        style = f"background:{paint(weight, top)};" if seen else "opacity:0.45;"
        if seen and abs(weight) / top > 0.5:
            style += "color:white;"
        classes = "tok sel" if pos == selected else "tok"
        tip = f"({pos}) {tok}: {verb} {weight:.3f}" if seen else f"({pos}) {tok}: masked"
        parts.append(
            f'<span class="{classes}" data-pos="{pos}" style="{style}" '
            f'title="{html.escape(tip, quote=True)}">{html.escape(tok)}</span>'
        )
    return "".join(parts)
