"""The atlas scatter: every head as a point, any quantity on x, y, colour and size.

The builder reads the atlas table (one row per head: ``L.H``, ``layer``, ``head``, ``flags`` and
each quantity with its ``_se``; :func:`models.heads.atlas.export.atlas_table`), so the points
are the table's numbers and nothing else. Error bars are ± 1 standard error where the table has
one. Heads the finder flags are drawn as diamonds, the others as circles. Each point carries
``L.H``, layer and head as ``customdata``, so a page can show the head's thumbnail on hover and
open its card on a click. Heads with no value on x or y are left out and counted in the
subtitle.

From :data:`WEBGL_FROM` points on, the trace is WebGL (``scattergl``): a 7B model's thousand-odd
heads, or several models side by side, stay responsive; :func:`shared_ranges` gives two figures
the same axes so that a head that moved between two models can be read off by position.
:func:`head_pictures` draws each head's small picture for the map's hover.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz.colours import colour_bar
from viz.thumbnails import data_uri, pooled_pngs

WEBGL_FROM = 500
PICTURE_PX = 128  # a hover picture's edge (blocks scaled up without smoothing)
SIZE_RANGE = (6.0, 18.0)  # marker diameters in px, smallest to largest value
FLAGGED, PLAIN = "diamond", "circle"


def _optional(table: pd.DataFrame, name: str) -> np.ndarray | None:
    """The column as float64 (non-numbers as NaN), or None when the table has none."""
    if name not in table:
        return None
    return pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64)


def _column(table: pd.DataFrame, name: str) -> np.ndarray:
    values = _optional(table, name)
    if values is None:
        raise ValueError(f"the atlas table has no column {name!r}")
    return values


def marker_sizes(values: np.ndarray, sizes: tuple[float, float] = SIZE_RANGE) -> np.ndarray:
    """``values`` mapped linearly onto ``sizes`` (smallest finite value to ``sizes[0]``); a NaN,
    or a column with a single value, gets the middle size."""
    finite = np.isfinite(values)
    low, high = sizes
    if not finite.any() or np.ptp(values[finite]) == 0:
        return np.full(values.shape, (low + high) / 2)
    scaled = (values - values[finite].min()) / np.ptp(values[finite])
    return np.where(finite, low + scaled * (high - low), (low + high) / 2)


def shared_ranges(
    tables: Sequence[pd.DataFrame], x: str, y: str, pad: float = 0.05
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis ranges that hold every finite point (± its standard error) of every table, with
    ``pad`` of the span on each side: two atlases drawn with them share their axes."""

    def span(name: str) -> tuple[float, float]:
        parts = []
        for table in tables:
            values, se = _optional(table, name), _optional(table, f"{name}_se")
            if values is None:
                continue
            se = np.zeros_like(values) if se is None else np.nan_to_num(se)
            parts += [values - se, values + se]
        found = np.concatenate(parts) if parts else np.array([])
        found = found[np.isfinite(found)]
        if not len(found):
            return (0.0, 1.0)
        low, high = float(found.min()), float(found.max())
        margin = pad * (high - low) or 0.5
        return (low - margin, high + margin)

    return span(x), span(y)


def atlas_scatter(
    table: pd.DataFrame,
    x: str,
    y: str,
    colour: str | None = None,
    size: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    title: str = "",
    ranges: tuple[tuple[float, float], tuple[float, float]] | None = None,
    selected: str | None = None,
    webgl_from: int = WEBGL_FROM,
) -> go.Figure:
    """Every head of ``table`` at (``x``, ``y``), coloured by ``colour`` and sized by ``size``.

    Args:
        table: the atlas table (one row per head).
        x, y, colour, size: column names (colour and size optional).
        labels: column -> words for axis titles and hover (the column name when missing).
        title: figure title (escaped here, like every label).
        ranges: fixed ``(x_range, y_range)`` (see :func:`shared_ranges`).
        selected: an ``L.H`` to ring.
        webgl_from: draw with WebGL from this many points on.
    """
    labels = dict(labels or {})
    words = {name: html.escape(labels.get(name, name)) for name in (x, y, colour, size) if name}
    xs, ys = _column(table, x), _column(table, y)
    shown = np.isfinite(xs) & np.isfinite(ys)
    rows = table[shown]
    heads = rows["L.H"].astype(str).to_numpy()
    flags = rows["flags"].fillna("").astype(str) if "flags" in rows else pd.Series([""] * len(rows))
    marker: dict = {
        "symbol": np.where(flags.str.len().to_numpy() > 0, FLAGGED, PLAIN),
        "size": marker_sizes(_column(rows, size)) if size else SIZE_RANGE[0] + 3,
        "line": {"width": np.where(heads == (selected or ""), 3.0, 0.5), "color": "#222"},
        "opacity": 0.85,
    }
    if colour:
        marker.update(color=_column(rows, colour), colorscale="Viridis", showscale=True)
        marker["colorbar"] = colour_bar(words[colour])
    sizes = _column(rows, size) if size else np.full(len(rows), np.nan)
    custom = np.stack(
        [
            heads,
            rows["layer"].astype(int).astype(str).to_numpy(),
            rows["head"].astype(int).astype(str).to_numpy(),
            np.array([f"{v:.4g}" for v in sizes]),
            np.array([html.escape(f) for f in flags], dtype=str),
        ],
        axis=-1,
    )
    trace_type = go.Scattergl if len(rows) >= webgl_from else go.Scatter
    trace = trace_type(
        x=xs[shown],
        y=ys[shown],
        mode="markers",
        marker=marker,
        customdata=custom,
        error_x=_error_bars(rows, x),
        error_y=_error_bars(rows, y),
        hovertemplate=_hover(words, x, y, colour, size),
        name="heads",
    )
    fig = go.Figure(trace)
    left_out = int((~shown).sum())
    subtitle = f"{len(rows)} heads · ◆ flagged by the head finder"
    if left_out:
        subtitle += f" · {left_out} without a value on an axis left out"
    fig.update_layout(
        title=f"{html.escape(title)}<br><sub>{subtitle}</sub>",
        xaxis={"title": words[x], "range": list(ranges[0]) if ranges else None},
        yaxis={"title": words[y], "range": list(ranges[1]) if ranges else None},
        height=520,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        # a click selects a head (its card opens); Streamlit turns click selection off when
        # the drag mode is lasso or box select, so dragging zooms instead
        clickmode="event+select",
        dragmode="zoom",
    )
    return fig


def _error_bars(rows: pd.DataFrame, name: str) -> dict:
    se = _optional(rows, f"{name}_se")
    if se is None or not np.isfinite(se).any():
        return {"visible": False}
    return {"type": "data", "array": np.nan_to_num(se), "visible": True, "thickness": 1, "width": 0}


def _hover(words: Mapping[str, str], x: str, y: str, colour: str | None, size: str | None) -> str:
    lines = ["head %{customdata[0]}", f"{words[x]} %{{x:.4g}}", f"{words[y]} %{{y:.4g}}"]
    if colour:
        lines.append(f"{words[colour]} %{{marker.color:.4g}}")
    if size:
        lines.append(f"{words[size]} %{{customdata[3]}}")
    lines.append("%{customdata[4]}")
    return "<br>".join(lines) + "<extra></extra>"


def head_pictures(pictures: np.ndarray) -> dict[str, str]:
    """``L.H`` -> PNG data URI of each head's pooled pattern (``layer head pix pix``, NaN where
    masked), each scaled to its own strongest weight as the explorer's grid draws them; a head
    with no picture (all NaN: a layer with no softmax pattern) is left out."""
    n_layers, n_heads, side, _ = pictures.shape
    flat = np.asarray(pictures, dtype=np.float32).reshape(n_layers * n_heads, side, side)
    drawn = ~np.isnan(flat).all(axis=(1, 2))
    pngs = pooled_pngs(flat[drawn], PICTURE_PX) if drawn.any() else []
    names = [f"{i // n_heads}.{i % n_heads}" for i in np.flatnonzero(drawn)]
    return {name: data_uri(png) for name, png in zip(names, pngs, strict=True)}
