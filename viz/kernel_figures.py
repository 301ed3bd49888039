"""Figures of the kernel check: per-head error grids and one head's patterns side by side.

Token labels and titles go through :func:`html.escape` (plotly renders some HTML in text).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.colours import SIGNED, colour_bar
from viz.heatmap import COLORSCALE, masked, position_ticks, safe_labels, score_grid

PANEL_PX = 300  # each panel's height; its width follows (square cells)


def short_bar(title: str, **options: object) -> dict:
    """A narrow colour bar for a panel of three, its short title written across on top (a
    one-letter title read sideways turns into a glyph: "Δ" looked like "◁")."""
    bar = colour_bar(title, **{"len": 0.9, "thickness": 12, **options})
    bar["title"] = {"text": title, "side": "top"}
    return bar


def error_grid(errors: np.ndarray, *, title: str) -> go.Figure:
    """A ``layer head_index`` grid of errors, hover and colour bar in scientific notation.

    Args:
        errors: ``layer head_index`` non-negative errors.
        title: figure title (escaped by :func:`viz.heatmap.score_grid`).

    Returns:
        A plotly figure.
    """
    top = float(np.max(errors)) if errors.size else 0.0
    fig = score_grid(
        np.asarray(errors, dtype=np.float64), title=title, zmin=0.0, zmax=top if top > 0 else 1e-12
    )
    fig.update_traces(
        hovertemplate="head %{y}.%{x}<br>max error %{z:.3e}<extra></extra>",
        colorbar=colour_bar("max |Δ|", tickformat=".1e"),
        selector={"type": "heatmap"},
    )
    return fig


def difference(model_pattern: np.ndarray, kernel_pattern: np.ndarray) -> np.ndarray:
    """``kernel - model`` as float64 (``query_pos key_pos``)."""
    return np.asarray(kernel_pattern, dtype=np.float64) - np.asarray(
        model_pattern, dtype=np.float64
    )


def pattern_comparison(
    model_pattern: np.ndarray,
    kernel_pattern: np.ndarray,
    labels: Sequence[str],
    *,
    causal: bool,
    title: str,
) -> go.Figure:
    """The model's pattern, the kernel's rebuilt pattern and their difference, side by side.

    Args:
        model_pattern: ``query_pos key_pos`` from ``hook_pattern``.
        kernel_pattern: ``query_pos key_pos`` rebuilt from the kernel's LSE.
        labels: ``(i) token`` label per position (escaped here).
        causal: leave the cells above the diagonal blank.
        title: figure title (escaped here).

    Returns:
        A plotly figure with three heatmaps; the difference uses a colour scale centred on 0.
    """
    text = safe_labels(labels)
    diff = difference(model_pattern, kernel_pattern)
    span = float(np.nanmax(np.abs(diff))) if diff.size else 0.0
    span = span if span > 0 else 1e-12
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.04,  # both colour bars stack at the right: the panels take the rest
        subplot_titles=("model (hook_pattern)", "kernel (rebuilt from LSE)", "kernel − model"),
    )
    hover = "query %{y}<br>key %{x}<br>"
    for col, z in ((1, model_pattern), (2, kernel_pattern)):
        fig.add_trace(
            go.Heatmap(
                z=masked(z, causal),
                x=text,
                y=text,
                colorscale=COLORSCALE,
                zmin=0.0,
                zmax=1.0,
                hovertemplate=hover + "weight %{z:.6f}<extra></extra>",
                hoverongaps=False,
                colorbar=short_bar("weight", x=1.02, y=0.78, len=0.44),
                showscale=col == 2,
            ),
            1,
            col,
        )
    fig.add_trace(
        go.Heatmap(
            z=masked(diff, causal),
            x=text,
            y=text,
            colorscale=SIGNED,
            zmid=0.0,
            zmin=-span,
            zmax=span,
            hovertemplate=hover + "difference %{z:.3e}<extra></extra>",
            hoverongaps=False,
            colorbar=short_bar("Δ", tickformat=".1e", x=1.02, y=0.2, len=0.4),
        ),
        1,
        3,
    )
    n = len(labels)
    # Up to 60 positions every label shows; past that, five positions by number, so a long
    # prompt's panels still say where the rows and keys are.
    ticks = {} if n <= 60 else position_ticks(text)
    fig.update_xaxes(type="category", tickangle=-60 if n <= 60 else 0, side="bottom", **ticks)
    fig.update_yaxes(type="category", autorange="reversed", showticklabels=False)
    fig.update_yaxes(showticklabels=True, row=1, col=1, **ticks)
    for col in (1, 2, 3):  # square cells: three square panels side by side, not tall strips
        suffix = "" if col == 1 else str(col)
        fig.update_yaxes(scaleanchor=f"x{suffix}", constrain="domain", row=1, col=col)
        fig.update_xaxes(constrain="domain", row=1, col=col)
    fig.update_layout(
        title={"text": html.escape(title), "x": 0.5, "xanchor": "center"},
        height=PANEL_PX + (220 if n <= 60 else 110),
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        plot_bgcolor="#f4f4f4",
    )
    return fig
