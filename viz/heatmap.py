"""Heatmaps of attention patterns: one :class:`HeatmapData`, drawn by plotly or by the
explorer's canvas.

Token labels go through :func:`html.escape` for plotly (it renders a subset of HTML in axis and
hover text, and a prompt is data, never markup); the canvas gets them as plain text, which it
draws as text.
"""

from __future__ import annotations

import base64
import functools
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from models.model.variants.sinks import SINK_KEY, SINK_LABEL
from viz.colours import SEQUENTIAL, SIGNED, colour_bar, largest_magnitude

COLORSCALE = SEQUENTIAL
LEVELS = 255  # colour indices of the canvas heatmap (0 .. 254)
BLANK = 255  # the index of a masked cell
BLANK_COLOUR = "#f4f4f4"
SELECTED_COLOUR = "#e4572e"
KEY_AXIS, QUERY_AXIS = "key (attended to)", "query (attending)"


def safe_labels(labels: Sequence[str]) -> list[str]:
    return [html.escape(label, quote=True) for label in labels]


ColourScale = Literal["linear", "sqrt", "log"]
LOG_FLOOR = 1e-4
SCALE_TICKS = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
TICK_GAP = 0.05  # least distance between two colour-bar labels, as a share of the bar


def position_ticks(
    text: Sequence[str], positions: Sequence[int] | None = None, count: int = 5
) -> dict[str, list[str]]:
    """Ticks at ``count`` evenly spaced entries of a category axis whose categories are
    ``text``, each written as its position (``positions[i]``, by default ``i``): the full
    ``(i) token`` labels of a long prompt would overlap."""
    at = np.unique(np.linspace(0, len(text) - 1, count).round().astype(int))
    where = range(len(text)) if positions is None else positions
    return {"tickvals": [text[i] for i in at], "ticktext": [str(where[i]) for i in at]}


def masked(
    pattern: np.ndarray,
    causal: bool,
    row0: int = 0,
    cols: int | Sequence[int] = 0,
    window: int | None = None,
) -> np.ndarray:
    """A copy of ``query_pos key_pos`` with positions the model cannot see set to NaN (blank).

    ``row0`` is the absolute position of the first row when ``pattern`` is a window; ``cols``
    the absolute position of the first column, or every column's position (``SINK_KEY`` for
    a learned sink's column, which every query sees). ``window``: a sliding layer's width
    ``w``; query ``i`` sees keys ``i - w < j`` only, so the cells left of the window's edge
    are blank too.
    """
    shown = np.array(pattern, dtype=np.float32, copy=True)
    if not causal and window is None:
        return shown
    rows = row0 + np.arange(shown.shape[0])[:, None]
    if isinstance(cols, (int, np.integer)):
        positions = (cols + np.arange(shown.shape[1]))[None, :]
    else:
        positions = np.asarray(cols)[None, :]
    hidden = np.zeros(shown.shape, dtype=bool)
    if causal:
        hidden |= positions > rows
    if window is not None:
        hidden |= (positions != SINK_KEY) & (rows - positions >= window)
    shown[hidden] = np.nan
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
        "colorbar": colour_bar(
            html.escape(value_name),
            tickvals=[value for value, _ in kept],
            ticktext=[f"{tick:g}" for _, tick in kept],
            thickness=14,
        ),
    }


MIXING = "mixing (signed)"  # what a cell of a linear-attention layer's matrix holds


def signed_axis(values: np.ndarray, value_name: str = MIXING) -> dict:
    """Colour range symmetric about 0 for signed values (a linear-attention layer's mixing
    matrix): from minus to plus the largest absolute finite value (1 when every value is 0)."""
    top = largest_magnitude(values)
    ticks = [-top, -top / 2, 0.0, top / 2, top]
    return {
        "zmin": -top,
        "zmax": top,
        "zmid": 0.0,
        "colorbar": colour_bar(
            html.escape(value_name),
            tickvals=ticks,
            ticktext=[f"{tick:+.3g}" if tick else "0" for tick in ticks],
            thickness=14,
        ),
    }


def scale_top(shown: np.ndarray, cols: Sequence[int], fixed: bool, skip_first: bool) -> float:
    """Top of the colour scale: 1, or the largest weight shown (without key 0 and a learned
    sink's column if asked)."""
    if fixed:
        return 1.0
    keep = np.asarray(cols) > 0 if skip_first else np.ones(len(cols), dtype=bool)
    part = shown[:, keep] if keep.any() else shown
    finite = part[np.isfinite(part)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


@dataclass(frozen=True)
class HeatmapData:
    """One head's heatmap as data, drawn by plotly (:func:`heatmap_figure`) or by the page's
    canvas (:func:`canvas_data`) from the same numbers.

    Attributes:
        shown: ``query key`` weights of the cells drawn, NaN where the model cannot look.
        row_labels: each row's label, as plain text (escaped where it becomes markup).
        col_labels: each column's label, as plain text.
        axis: the colour range and colour-bar ticks (see :func:`colour_axis`).
        scale: how colour follows the weight.
        selected: the row to outline (an index into the rows), or None.
        selected_col: the column to outline (an index into the columns), or None: the
            selected token as a key, when the view shows which tokens attend to it.
        pinned: how many leading columns are pinned keys (a line marks where the window starts).
        value_name: what a cell holds ("weight", "value-weighted weight", or
            :data:`MIXING`).
        title: the figure's title (plain text).
        selected_col: see above.
        colorscale: :data:`COLORSCALE` for weights; :data:`viz.colours.SIGNED` (symmetric
            about 0) for a linear-attention layer's signed mixing matrix.
    """

    shown: np.ndarray
    row_labels: list[str]
    col_labels: list[str]
    axis: dict
    scale: ColourScale
    selected: int | None
    pinned: int
    value_name: str
    title: str
    selected_col: int | None = None
    colorscale: str = COLORSCALE

    @property
    def signed(self) -> bool:
        return self.colorscale == SIGNED

    @property
    def cells(self) -> int:
        return int(self.shown.size)


def heatmap_data(
    pattern: np.ndarray,
    labels: Sequence[str],
    *,
    causal: bool,
    title: str = "",
    zmax: float | None = 1.0,
    selected: int | None = None,
    selected_key: int | None = None,
    rows: slice = slice(None),
    cols: slice | Sequence[int] = slice(None),
    scale: ColourScale = "linear",
    skip_first: bool = False,
    pinned: int = 0,
    value_name: str = "weight",
    signed: bool = False,
    window: int | None = None,
) -> HeatmapData:
    """One head's pattern ready to draw: rows are queries, columns keys, masked cells blank.

    Args:
        pattern: ``query_pos key_pos`` weights, or the window ``rows`` x ``cols`` of them.
        labels: ``(i) token`` label of every position of the prompt.
        causal: blank the cells above the diagonal.
        title: figure title.
        zmax: top of the colour scale; ``None`` scales to the largest weight shown.
        selected: the absolute position of a query row to outline.
        selected_key: the absolute position of a key column to outline (the first column
            that holds it, pinned keys first).
        rows: which rows of the whole pattern ``pattern`` holds (default: all of them).
        cols: which columns: a slice, or the list of absolute key positions (pinned keys
            first; ``SINK_KEY`` for a learned sink's column, labelled "sink").
        scale: colour from the weight, its square root, or its log10 (ticks stay in weights).
        skip_first: leave key 0 out when scaling to the largest weight.
        pinned: how many leading columns are pinned keys.
        value_name: what a cell holds ("weight", or "value-weighted weight").
        signed: the cells are a linear-attention layer's signed mixing matrix, not weights:
            drawn on :data:`viz.colours.SIGNED` from minus to plus their largest absolute
            value (``zmax``, ``scale`` and ``skip_first`` do not apply).
        window: a sliding layer's width: keys past the window's edge are blank (the edge
            is where the coloured band starts).
    """
    n_all = len(labels)
    row_ids = list(range(n_all))[rows]
    col_ids = list(range(n_all))[cols] if isinstance(cols, slice) else [int(c) for c in cols]
    shown = masked(pattern, causal, row_ids[0] if row_ids else 0, col_ids, window)
    if signed:
        scale, value_name = "linear", MIXING
        axis = signed_axis(shown, value_name)
    else:
        top = scale_top(shown, col_ids, zmax is None, skip_first) if zmax is None else zmax
        axis = colour_axis(top, scale, value_name)
    return HeatmapData(
        shown=shown,
        row_labels=[labels[i] for i in row_ids],
        col_labels=[SINK_LABEL if i == SINK_KEY else labels[i] for i in col_ids],
        axis=axis,
        scale=scale,
        selected=row_ids.index(selected) if selected is not None and selected in row_ids else None,
        pinned=pinned,
        value_name=value_name,
        title=title,
        selected_col=col_ids.index(selected_key)
        if selected_key is not None and selected_key in col_ids
        else None,
        colorscale=SIGNED if signed else COLORSCALE,
    )


def head_heatmap(pattern: np.ndarray, labels: Sequence[str], **options) -> go.Figure:
    """:func:`heatmap_data` drawn by plotly (see there for the options)."""
    return heatmap_figure(heatmap_data(pattern, labels, **options))


def heatmap_figure(data: HeatmapData) -> go.Figure:
    """The plotly figure of a heatmap (token labels and title escaped)."""
    row_labels, col_labels = safe_labels(data.row_labels), safe_labels(data.col_labels)
    fig = go.Figure(
        go.Heatmap(
            z=colour_values(data.shown, data.scale),
            customdata=data.shown,
            x=col_labels,
            y=row_labels,
            colorscale=data.colorscale,
            **data.axis,
            hovertemplate=(
                "query %{y}<br>key %{x}<br>"
                + html.escape(data.value_name)
                + " %{customdata:.4f}<extra></extra>"
            ),
            hoverongaps=False,
        )
    )
    n = max(len(row_labels), len(col_labels))
    if data.selected is not None:
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=len(col_labels) - 0.5,
            y0=data.selected - 0.5,
            y1=data.selected + 0.5,
            line={"color": SELECTED_COLOUR, "width": 2},
        )
    if data.selected_col is not None:
        fig.add_shape(
            type="rect",
            x0=data.selected_col - 0.5,
            x1=data.selected_col + 0.5,
            y0=-0.5,
            y1=len(row_labels) - 0.5,
            line={"color": SELECTED_COLOUR, "width": 2},
        )
    if data.pinned:
        fig.add_shape(
            type="line",
            x0=data.pinned - 0.5,
            x1=data.pinned - 0.5,
            y0=-0.5,
            y1=len(row_labels) - 0.5,
            line={"color": "#333", "width": 2, "dash": "dot"},
        )
    size = min(900, max(360, 18 * n + 160))
    fig.update_layout(
        title={
            "text": html.escape(data.title),
            "x": 0.5,
            "xanchor": "center",
            "y": 0.005,
            "yanchor": "bottom",
        },  # below the plot: the key axis and its labels are on top
        height=size + 60,
        margin={"l": 10, "r": 10, "t": 110, "b": 50},
        xaxis={"title": KEY_AXIS, "side": "top", "tickangle": -60, "type": "category"},
        yaxis={"title": QUERY_AXIS, "autorange": "reversed", "type": "category"},
        plot_bgcolor=BLANK_COLOUR,
    )
    return fig


@functools.cache
def colour_table(n: int = LEVELS, colorscale: str = COLORSCALE) -> list[list[int]]:
    """``n`` RGB colours evenly spaced along ``colorscale``, as plotly interpolates it."""
    scale = plotly.colors.get_colorscale(colorscale)
    picked = plotly.colors.sample_colorscale(scale, [i / (n - 1) for i in range(n)])
    return [list(plotly.colors.unlabel_rgb(colour)) for colour in picked]


def colour_levels(data: HeatmapData) -> np.ndarray:
    """``query key`` uint8 colour index of every cell: ``0 .. LEVELS - 1`` along the colour
    range (clipped at its ends, like plotly), :data:`BLANK` where the cell is masked."""
    low, high = data.axis["zmin"], data.axis["zmax"]
    z = colour_values(data.shown, data.scale).astype(np.float64)
    share = np.clip((z - low) / (high - low if high > low else 1.0), 0.0, 1.0)
    levels = np.rint(np.nan_to_num(share) * (LEVELS - 1)).astype(np.uint8)
    levels[~np.isfinite(data.shown)] = BLANK
    return levels


def canvas_data(data: HeatmapData) -> dict:
    """What the page's canvas heatmap draws (JSON-ready, labels as plain text: the canvas
    draws text, never markup): colour indices and float32 weights (little-endian, base64),
    the colour table, the colour bar's ticks (as shares of the bar) and the outlines."""
    low, high = data.axis["zmin"], data.axis["zmax"]
    bar = data.axis["colorbar"]
    span = high - low if high > low else 1.0
    return {
        "n_rows": int(data.shown.shape[0]),
        "n_cols": int(data.shown.shape[1]),
        "levels": base64.b64encode(colour_levels(data).tobytes()).decode("ascii"),
        "values": base64.b64encode(data.shown.astype("<f4").tobytes()).decode("ascii"),
        "colours": colour_table(LEVELS, data.colorscale),
        "blank": BLANK_COLOUR,
        "ticks": [
            [(value - low) / span, text]
            for value, text in zip(bar["tickvals"], bar["ticktext"], strict=True)
        ],
        "rows": list(data.row_labels),
        "cols": list(data.col_labels),
        "selected": data.selected,
        "selected_col": data.selected_col,
        "pinned": data.pinned,
        "value_name": data.value_name,
        "axes": [KEY_AXIS, QUERY_AXIS],
        "title": data.title,
    }


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
