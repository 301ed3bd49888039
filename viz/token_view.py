"""Escaped HTML of a prompt with each token shaded by an attention weight.

Shades are relative to the largest weight shown (a legend says which): on a long prompt every
single weight is small, and absolute shading would leave the whole strip white.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from models.capture.spans import Direction

VERBS: dict[Direction, str] = {"from": "attention from the selected token", "to": "attention to it"}


def shade(weight: float, top: float = 1.0) -> str:
    """Background for a weight in [0, ``top``]: transparent to the heatmap's dark blue."""
    alpha = min(max(float(weight) / float(top), 0.0), 1.0) ** 0.6  # double, as the browser
    return f"rgba(8, 81, 156, {alpha:.3f})"


def colour_top(weights: np.ndarray) -> float:
    """The weight drawn darkest: the largest visible one (1.0 when none is positive)."""
    finite = weights[np.isfinite(weights)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def legend_html(weights: np.ndarray) -> str:
    """A small colour bar from 0 to the darkest weight of the token strip (escaped numbers)."""
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
    tokens: Sequence[str], weights: np.ndarray, selected: int | None, direction: Direction
) -> str:
    """One ``<span>`` per token, with ``data-pos`` for clicks and a tooltip with the weight.

    Args:
        tokens: readable token labels (escaped here).
        weights: one weight per token (NaN where the token is not visible to the query).
        selected: the clicked position, outlined.
        direction: ``from``: weights are what the selected query attends to; ``to``: how much
            each token attends to the selected one.
    """
    verb = VERBS[direction]
    top = colour_top(weights)
    parts = []
    for pos, (tok, weight) in enumerate(zip(tokens, weights, strict=True)):
        seen = not np.isnan(weight)
        style = f"background:{shade(weight, top)};" if seen else "opacity:0.45;"
        if seen and weight / top > 0.5:
            style += "color:white;"
        classes = "tok sel" if pos == selected else "tok"
        tip = f"({pos}) {tok}: {verb} {weight:.3f}" if seen else f"({pos}) {tok}: masked"
        parts.append(
            f'<span class="{classes}" data-pos="{pos}" style="{style}" '
            f'title="{html.escape(tip, quote=True)}">{html.escape(tok)}</span>'
        )
    return "".join(parts)
