"""Plotly heatmaps of attention patterns.

Token labels go through :func:`html.escape`: plotly renders a subset of HTML in axis and hover
text, and a prompt is data, never markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Literal

import numpy as np
import plotly.graph_objects as go

COLORSCALE = "Blues"


def safe_labels(labels: Sequence[str]) -> list[str]:
    return [html.escape(label, quote=True) for label in labels]


ColourScale = Literal["linear", "sqrt", "log"]
LOG_FLOOR = 1e-4
SCALE_TICKS = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
TICK_GAP = 0.05  # least distance between two colour-bar labels, as a share of the bar


def masked(
    pattern: np.ndarray, causal: bool, row0: int = 0, cols: int | Sequence[int] = 0
) -> np.ndarray:
    """A copy of ``query_pos key_pos`` with positions the model cannot see set to NaN (blank).

    ``row0`` is the absolute position of the first row when ``pattern`` is a window; ``cols``
    the absolute position of the first column, or every column's position.
    """
    shown = np.array(pattern, dtype=np.float32, copy=True)
    if causal:
        rows = row0 + np.arange(shown.shape[0])[:, None]
        positions = (
            cols + np.arange(shown.shape[1])
            if isinstance(cols, (int, np.integer))
            else np.asarray(cols)
        )
        shown[positions[None, :] > rows] = np.nan
    return shown


def colour_values(weights: np.ndarray, scale: ColourScale) -> np.ndarray:
    """What the colour is computed from: the weight, its square root, or its log10."""
    if scale == "sqrt":
        return np.sqrt(np.clip(weights, 0.0, None))
    if scale == "log":
        return np.log10(np.clip(weights, LOG_FLOOR, None))
    return weights


def colour_axis(top: float, scale: ColourScale, value_name: str = "weight") -> dict:
    """Colour bar range and ticks labelled in weights whatever the scale."""
    top = max(float(top), LOG_FLOOR * 10)
    ticks = [t for t in SCALE_TICKS if t <= top * 1.0001 and (scale != "linear" or t >= 0.05)]
    ticks = sorted({*ticks, round(top, 4)}, reverse=True)
    low = float(colour_values(np.array([LOG_FLOOR if scale == "log" else 0.0]), scale)[0])
    high = float(colour_values(np.array([top]), scale)[0])
    kept: list[tuple[float, float]] = []  # (value, tick), from the top down
    for tick, value in zip(ticks, colour_values(np.array(ticks), scale), strict=True):
        if not kept or kept[-1][0] - value >= TICK_GAP * (high - low):  # labels must not touch
            kept.append((float(value), tick))
    kept.reverse()
    return {
        "zmin": low,
        "zmax": high,
        "colorbar": {
            "title": html.escape(value_name),
            "tickvals": [value for value, _ in kept],
            "ticktext": [f"{tick:g}" for _, tick in kept],
            "thickness": 14,
        },
    }


def scale_top(shown: np.ndarray, cols: Sequence[int], fixed: bool, skip_first: bool) -> float:
    """Top of the colour scale: 1, or the largest weight shown (without key 0 if asked)."""
    if fixed:
        return 1.0
    keep = np.asarray(cols) != 0 if skip_first else np.ones(len(cols), dtype=bool)
    part = shown[:, keep] if keep.any() else shown
    finite = part[np.isfinite(part)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def head_heatmap(
    pattern: np.ndarray,
    labels: Sequence[str],
    *,
    causal: bool,
    title: str,
    zmax: float | None = 1.0,
    selected: int | None = None,
    rows: slice = slice(None),
    cols: slice | Sequence[int] = slice(None),
    scale: ColourScale = "linear",
    skip_first: bool = False,
    pinned: int = 0,
    value_name: str = "weight",
) -> go.Figure:
    """One head's pattern: rows are queries, columns keys, masked cells left blank.

    Args:
        pattern: ``query_pos key_pos`` weights, or the window ``rows`` x ``cols`` of them.
        labels: ``(i) token`` label of every position of the prompt.
        causal: blank the cells above the diagonal.
        title: figure title (escaped here).
        zmax: top of the colour scale; ``None`` scales to the largest weight shown.
        selected: the absolute position of a query row to outline.
        rows: which rows of the whole pattern ``pattern`` holds (default: all of them).
        cols: which columns: a slice, or the list of absolute key positions (pinned keys first).
        scale: colour from the weight, its square root, or its log10 (ticks stay in weights).
        skip_first: leave key 0 out when scaling to the largest weight.
        pinned: how many leading columns are pinned keys (a line marks where the window starts).
        value_name: what a cell holds, for the colour bar and the hover ("weight", or
            "value-weighted weight").
    """
    n_rows_all = len(labels)
    row_ids = list(range(n_rows_all))[rows]
    col_ids = list(range(n_rows_all))[cols] if isinstance(cols, slice) else [int(c) for c in cols]
    row_labels = safe_labels([labels[i] for i in row_ids])
    col_labels = safe_labels([labels[i] for i in col_ids])
    row0 = row_ids[0] if row_ids else 0
    shown = masked(pattern, causal, row0, col_ids)
    axis = colour_axis(
        scale_top(shown, col_ids, zmax is None, skip_first) if zmax is None else zmax,
        scale,
        value_name,
    )
    fig = go.Figure(
        go.Heatmap(
            z=colour_values(shown, scale),
            customdata=shown,
            x=col_labels,
            y=row_labels,
            colorscale=COLORSCALE,
            **axis,
            hovertemplate=(
                "query %{y}<br>key %{x}<br>"
                + html.escape(value_name)
                + " %{customdata:.4f}<extra></extra>"
            ),
            hoverongaps=False,
        )
    )
    n = max(len(row_labels), len(col_labels))
    if selected is not None and selected in row_ids:
        at = row_ids.index(selected)
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=len(col_labels) - 0.5,
            y0=at - 0.5,
            y1=at + 0.5,
            line={"color": "#e4572e", "width": 2},
        )
    if pinned:
        fig.add_shape(
            type="line",
            x0=pinned - 0.5,
            x1=pinned - 0.5,
            y0=-0.5,
            y1=len(row_labels) - 0.5,
            line={"color": "#333", "width": 2, "dash": "dot"},
        )
    size = min(900, max(360, 18 * n + 160))
    fig.update_layout(
        title={
            "text": html.escape(title),
            "x": 0.5,
            "xanchor": "center",
            "y": 0.005,
            "yanchor": "bottom",
        },  # below the plot: the key axis and its labels are on top
        height=size + 60,
        margin={"l": 10, "r": 10, "t": 110, "b": 50},
        xaxis={"title": "key (attended to)", "side": "top", "tickangle": -60, "type": "category"},
        yaxis={"title": "query (attending)", "autorange": "reversed", "type": "category"},
        plot_bgcolor="#f4f4f4",
    )
    return fig


def score_grid(
    values: np.ndarray,
    *,
    title: str,
    flagged: np.ndarray | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
    colorscale: str = "Viridis",
) -> go.Figure:
    """A ``layer head_index`` grid of one number per head, flagged heads marked with a star."""
    n_layers, n_heads = values.shape
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[str(h) for h in range(n_heads)],
            y=[str(layer) for layer in range(n_layers)],
            colorscale=colorscale,
            zmin=zmin,
            zmax=zmax,
            hovertemplate="head %{y}.%{x}<br>%{z:.4f}<extra></extra>",
        )
    )
    if flagged is not None:
        ys, xs = np.nonzero(flagged)
        fig.add_trace(
            go.Scatter(
                x=[str(x) for x in xs],
                y=[str(y) for y in ys],
                mode="text",
                text=["★"] * len(xs),
                textfont={"color": "white", "size": 16},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    fig.update_layout(
        title=html.escape(title),
        height=120 + 34 * n_layers,
        xaxis={"title": "head", "type": "category"},
        yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig
