"""Figures of a two-prompt comparison: every head's divergence.

The grid has the all-heads grid's layout (layers down, heads across) coloured by divergence.
One head's A, B and A − B are the explorer's canvas heatmaps (:func:`viz.heatmap.heatmap_data`;
A − B on the signed scale centred on zero: red where A attends more, blue where B does).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from jaxtyping import Float

from viz.colours import colour_bar

DIVERGENCE_COLOURS = "Reds"
# The divergence colours run from 0 to the largest divergence, but never to less than this: a
# comparison where every head moved by less than a hundredth of a bit stays pale, not dark red.
DIVERGENCE_FLOOR = 0.01
ROUNDING = 1e-6  # below this a divergence is float rounding, not a change of attention


def divergence_scale(divergence: Float[np.ndarray, "layer head_index"]) -> float:
    """Top of the divergence colour scale: the largest finite divergence, at least
    :data:`DIVERGENCE_FLOOR`."""
    values = np.asarray(divergence, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return max(float(finite.max()) if finite.size else 0.0, DIVERGENCE_FLOOR)


def divergence_text(value: float, compact: bool = False) -> str:
    """A divergence written short enough for a grid cell, with its significant digits:
    ``.234``, ``.0012``, ``2e-05``, ``0`` (``compact``: two decimals from 0.01 up)."""
    if not np.isfinite(value):
        return "–"
    if value == 0.0:
        return "0"
    if value >= 1.0:
        return "1"
    if value >= 0.01:
        return f"{value:.{2 if compact else 3}f}".removeprefix("0")
    if value >= 1e-4:
        return f"{value:.2g}".removeprefix("0")
    return f"{value:.0e}".replace("e-0", "e-")


def divergence_summary(
    divergence: Float[np.ndarray, "layer head_index"], heads: Sequence[str]
) -> str:
    """One or two sentences for the grid: the largest divergence and its head, what the
    colours run to, and in words when every head barely moved.

    Args:
        divergence: each head's mean JSD in bits.
        heads: each head's name (``L.H``) in ``divergence.ravel()`` order.
    """
    values = np.nan_to_num(np.asarray(divergence, dtype=np.float64)).ravel()
    at = int(np.argmax(values))
    top, name = float(values[at]), heads[at]
    if top < ROUNDING:
        return (
            f"Every head's divergence is below {ROUNDING:g} bits (largest {top:.2g}): A and B "
            "are attended identically up to rounding, so the grid stays white."
        )
    if top < DIVERGENCE_FLOOR:
        return (
            f"Every head moved by less than {DIVERGENCE_FLOOR:g} bits (largest {top:.2g} bits, "
            f"head {name}): A and B are attended almost alike. The colours run from white (0) "
            f"to {DIVERGENCE_FLOOR:g} bits, so these small values stay pale."
        )
    return (
        f"White 0, darkest the largest divergence: {top:.4f} bits (head {name}). Values are "
        "bits; 1 would mean no key in common."
    )


def divergence_grid(
    divergence: Float[np.ndarray, "layer head_index"],
    *,
    title: str,
    selected: tuple[int, int] | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """A ``layer x head`` grid coloured by divergence (0 white), the chosen head outlined.

    Args:
        divergence: each head's mean JSD in bits.
        title: figure title (escaped here).
        selected: ``(layer, head)`` to outline.
        zmax: top of the colour scale; ``None``: :func:`divergence_scale` (the largest
            divergence, at least :data:`DIVERGENCE_FLOOR`, so rounding noise stays pale).
    """
    values = np.asarray(divergence, dtype=np.float64)
    n_layers, n_heads = values.shape
    top = zmax if zmax is not None else divergence_scale(values)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[str(h) for h in range(n_heads)],
            y=[str(li) for li in range(n_layers)],
            colorscale=DIVERGENCE_COLOURS,
            zmin=0.0,
            zmax=max(top, 1e-9),
            colorbar=colour_bar("JSD (bits)"),
            hovertemplate="head %{y}.%{x}<br>divergence %{z:.3~g} bits<extra></extra>",
        )
    )
    if selected is not None:
        layer, head = selected
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            line={"color": "#222", "width": 2},
        )
    fig.update_layout(
        title=html.escape(title),
        height=120 + 22 * n_layers,
        xaxis={"title": "head", "type": "category"},
        yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig
