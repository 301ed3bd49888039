"""Figures and labelled matrices for the classroom page (no Streamlit here).

:func:`matrix_html` prints a small matrix with its row and column labels and every value, ready
for ``st.markdown(..., unsafe_allow_html=True)``; every label is escaped, because row labels can be
tokens from the user's prompt. Plotly figures escape their titles and labels too.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.colours import SIGNED

MINUS_INF = "−∞"
_TABLE_CSS = (
    "border-collapse:collapse;font-family:ui-monospace,Menlo,Consolas,monospace;"
    "font-size:1.05rem;margin:0.2rem 0 0.8rem 0"
)
_CELL = "padding:0.25rem 0.6rem;border:1px solid #d0d0d0;text-align:right"
_HEAD = (
    "padding:0.25rem 0.6rem;border:1px solid #d0d0d0;background:#f2f2f2;font-weight:600;"
    "white-space:nowrap"
)


def format_value(x: float, decimals: int) -> str:
    """A number at ``decimals`` places; ``-inf`` as ``−∞`` and ``-0.000`` as ``0.000``.

    Numbers of a million or more are written in scientific notation, so ``1e200`` takes a few
    characters instead of two hundred digits and the table keeps its width.
    """
    if math.isinf(x):
        return MINUS_INF if x < 0 else "∞"
    if math.isnan(x):
        return "—"
    if abs(x) >= 1e6:
        return f"{x:.{max(decimals, 2)}e}".replace("e+0", "e+").replace("e-0", "e-")
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _shade(x: float, lo: float, hi: float) -> str:
    if not math.isfinite(x) or hi <= lo:
        return "background:#eeeeee;color:#888" if math.isinf(x) else ""
    t = (x - lo) / (hi - lo)
    return f"background:rgba(33,113,181,{0.08 + 0.6 * t:.3f})"


def matrix_html(
    values: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    decimals: int = 3,
    title: str = "",
    shade: bool = False,
    shade_range: tuple[float, float] | None = None,
    compact: bool = False,
) -> str:
    """An escaped HTML table of ``values`` with labelled rows and columns.

    Args:
        values: ``rows cols`` numbers; ``-inf`` is shown as ``−∞`` on a grey cell.
        row_labels: one label per row (escaped here).
        col_labels: one label per column (escaped here).
        decimals: places after the point.
        title: a caption above the table (escaped here).
        shade: colour cells by value (finite values between ``shade_range``).
        shade_range: (low, high); defaults to the finite minimum and maximum.
        compact: smaller type and padding, for wide matrices from a real model.

    Returns:
        An HTML string.
    """
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    lo, hi = shade_range or (
        (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    )
    size = "font-size:0.8rem;padding:0.12rem 0.3rem" if compact else ""
    cell_css, head_css = f"{_CELL};{size}", f"{_HEAD};{size}"
    head = "".join(f'<th style="{head_css}">{html.escape(str(c))}</th>' for c in col_labels)
    rows = []
    for label, row in zip(row_labels, values, strict=True):
        cells = []
        for x in row:
            style = cell_css + (";" + _shade(x, lo, hi) if shade or math.isinf(x) else "")
            cells.append(f'<td style="{style}">{format_value(float(x), decimals)}</td>')
        label_cell = _label_cell(str(label), head_css, compact)
        rows.append(f"<tr>{label_cell}{''.join(cells)}</tr>")
    caption = (
        (
            # a heading wider than its small table stays on one line ("A = softmax(S / √2)")
            f'<caption style="caption-side:top;text-align:left;font-weight:600;'
            f'white-space:nowrap;padding-bottom:0.2rem">{html.escape(title)}</caption>'
        )
        if title
        else ""
    )
    return (
        f'<div style="overflow-x:auto"><table class="classroom-matrix" style="{_TABLE_CSS}">'
        f'{caption}<tr><th style="{head_css}"></th>{head}</tr>{"".join(rows)}</table></div>'
    )


ROW_LABEL_CHARS = 12  # a compact table's row label beyond this is cut; its title holds it all


def _label_cell(label: str, css: str, compact: bool) -> str:
    """A row's label cell: in a compact table a long label (a long token) is cut to
    :data:`ROW_LABEL_CHARS` characters with "…", the whole label in its tooltip, so the
    numbers keep the table's width."""
    if compact and len(label) > ROW_LABEL_CHARS:
        shown = label[: ROW_LABEL_CHARS - 1] + "…"
        return f'<th style="{css}" title="{html.escape(label)}">{html.escape(shown)}</th>'
    return f'<th style="{css}">{html.escape(label)}</th>'


def labels(prefix: str, n: int, start: int = 0) -> list[str]:
    """``["q1", "q2", ...]``: 1-based labels for the classroom's small matrices."""
    return [f"{prefix}{i + 1}" for i in range(start, start + n)]


def small_heatmap(
    z: np.ndarray,
    *,
    title: str,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    decimals: int = 2,
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    show_text: bool = True,
) -> go.Figure:
    """A labelled heatmap with each value printed; ``-inf`` cells are blank, marked ``−∞``."""
    z = np.asarray(z, dtype=np.float64)
    text = [[format_value(x, decimals) for x in row] for row in z]
    shown = np.where(np.isfinite(z), z, np.nan)
    xs = [html.escape(str(x)) for x in x_labels]
    ys = [html.escape(str(y)) for y in y_labels]
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=xs,
            y=ys,
            colorscale=colorscale,
            zmin=zmin,
            zmax=zmax,
            hoverongaps=False,
            text=text,
            texttemplate="%{text}" if show_text else None,
            showscale=False,
            hovertemplate="row %{y}<br>column %{x}<br>%{text}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": html.escape(title), "y": 0.98, "yanchor": "top"},
        height=min(560, 150 + 34 * len(ys)),
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
        plot_bgcolor="#e6e6e6",
        xaxis={"side": "top", "type": "category"},
        yaxis={"autorange": "reversed", "type": "category"},
    )
    return fig


def sinusoid_heatmap(pe: np.ndarray) -> go.Figure:
    """``pos dim`` sinusoidal encodings as a heatmap (position down, dimension across)."""
    fig = go.Figure(
        go.Heatmap(
            z=pe,
            colorscale=SIGNED,
            zmin=-1,
            zmax=1,
            hovertemplate="position %{y}<br>dim %{x}<br>%{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Sinusoidal position encodings",
        height=420,
        xaxis_title="dimension",
        yaxis_title="position",
        yaxis={"autorange": "reversed"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def sharing_diagram(kv_of_head: Sequence[int], title: str) -> go.Figure:
    """Query heads (top row) joined to the key/value head each one reads (bottom row)."""
    n_heads, n_kv = len(kv_of_head), max(kv_of_head) + 1
    q_x = np.arange(n_heads, dtype=float)
    kv_x = np.array(
        [np.mean([h for h in range(n_heads) if kv_of_head[h] == g]) for g in range(n_kv)]
    )
    fig = go.Figure()
    for head, group in enumerate(kv_of_head):
        fig.add_trace(
            go.Scatter(
                x=[q_x[head], kv_x[group]],
                y=[1, 0],
                mode="lines",
                line={"color": "#9ecae1", "width": 1.5},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    small = n_heads <= 32
    fig.add_trace(
        go.Scatter(
            x=q_x,
            y=[1] * n_heads,
            mode="markers+text" if small else "markers",
            name="query heads",
            text=[f"Q{h}" for h in range(n_heads)],
            textposition="top center",
            marker={"size": 14 if small else 7, "color": "#3182bd"},
            hovertemplate="query head %{text}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=kv_x,
            y=[0] * n_kv,
            mode="markers+text" if n_kv <= 32 else "markers",
            name="key/value heads",
            text=[f"KV{g}" for g in range(n_kv)],
            textposition="bottom center",
            marker={"size": 18, "color": "#e6550d", "symbol": "square"},
            hovertemplate="key/value head %{text}<extra></extra>",
        )
    )
    fig.update_layout(
        title=html.escape(title),
        height=260,
        showlegend=True,
        xaxis={"visible": False},
        yaxis={"visible": False, "range": [-0.5, 1.5]},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.05},
    )
    return fig


def _ticks(lo: float, hi: float, base: float, fmt) -> dict:
    first = math.floor(math.log(max(lo, 1.0), base))
    last = math.ceil(math.log(max(hi, 1.0), base))
    vals = [base**e for e in range(first, last + 1)]
    return {"tickvals": vals, "ticktext": [fmt(v).replace(".00 ", " ") for v in vals]}


def cost_chart(
    lengths: np.ndarray,
    series: dict[str, np.ndarray],
    *,
    title: str,
    y_title: str,
    fmt,
    base: float,
    crossover: float | None = None,
) -> go.Figure:
    """Log-log lines of a cost against sequence length, ticks in human units.

    Args:
        lengths: ``n`` sequence lengths.
        series: name -> values per length.
        title, y_title: labels (escaped here).
        fmt: value -> human string (used for ticks and hover).
        base: tick spacing (10 for FLOPs, 32 for bytes).
        crossover: a length to mark with a dashed line.
    """
    fig = go.Figure()
    for name, values in series.items():
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=values,
                mode="lines",
                name=html.escape(name),
                text=[fmt(v) for v in values],
                hovertemplate="n = %{x:,}<br>%{text}<extra>%{fullData.name}</extra>",
            )
        )
    all_values = np.concatenate([np.asarray(v, dtype=float) for v in series.values()])
    positive = all_values[all_values > 0]
    yaxis = {"type": "log", "title": html.escape(y_title)}
    if positive.size:
        yaxis.update(_ticks(positive.min(), positive.max(), base, fmt))
    if crossover is not None and positive.size:
        # A trace, not a shape: a shape's x on a log axis is read as log10(x), so a line meant for
        # n = 256 would stretch the axis to 1e256.
        fig.add_trace(
            go.Scatter(
                x=[crossover, crossover],
                y=[positive.min(), positive.max()],
                mode="lines",
                line={"dash": "dash", "color": "#e4572e"},
                name=f"n² terms overtake at n ≈ {crossover:,.0f}",
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        title=html.escape(title),
        height=400,
        yaxis=yaxis,
        xaxis={"type": "log", "title": "sequence length n (tokens)"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig
