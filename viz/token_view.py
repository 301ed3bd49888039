"""Escaped HTML of a prompt with each token shaded by an attention weight."""

from __future__ import annotations

import html
from typing import Literal, Sequence

import numpy as np

Direction = Literal["from", "to"]


def shade(weight: float) -> str:
    """Background for a weight in [0, 1]: transparent to the heatmap's dark blue."""
    alpha = float(np.clip(weight, 0.0, 1.0)) ** 0.6
    return f"rgba(8, 81, 156, {alpha:.3f})"


def token_spans(tokens: Sequence[str], weights: np.ndarray, selected: int | None,
                direction: Direction) -> str:
    """One ``<span>`` per token, with ``data-pos`` for clicks and a tooltip with the weight.

    Args:
        tokens: readable token labels (escaped here).
        weights: one weight per token (NaN where the token is not visible to the query).
        selected: the clicked position, outlined.
        direction: ``from``: weights are what the selected query attends to; ``to``: how much
            each token attends to the selected one.
    """
    verb = "attention from the selected token" if direction == "from" else "attention to it"
    parts = []
    for pos, (tok, weight) in enumerate(zip(tokens, weights)):
        seen = not np.isnan(weight)
        style = f"background:{shade(weight)};" if seen else "opacity:0.45;"
        if seen and weight > 0.5:
            style += "color:white;"
        classes = "tok sel" if pos == selected else "tok"
        tip = f"({pos}) {tok}: {verb} {weight:.3f}" if seen else f"({pos}) {tok}: masked"
        parts.append(
            f'<span class="{classes}" data-pos="{pos}" style="{style}" '
            f'title="{html.escape(tip, quote=True)}">{html.escape(tok)}</span>')
    return "".join(parts)
