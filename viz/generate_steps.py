"""One generation step by step: every head's attention row at a step, the written tokens as
escaped HTML with their probabilities on hover, and the model's certainty over the steps.

The rows of all heads at one step are ``layers x heads x keys``: drawn as one heatmap with a
row per head (grouped by layer), so where every head looks at that moment fits on one screen. A
long text is max-pooled along the keys (every column keeps its largest weight), so a single
bright key (a sink, an induction target a thousand tokens back) stays visible.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.colours import colour_bar
from viz.heatmap import BLANK_COLOUR, COLORSCALE
from viz.token_view import shade

MAX_COLUMNS = 600
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
CHOSEN = "#e4572e"


def pooled_columns(rows: np.ndarray, max_columns: int = MAX_COLUMNS) -> tuple[np.ndarray, int]:
    """``rows`` (``... key_pos``) max-pooled along the keys into at most ``max_columns``
    columns, and the columns' width in keys (1: not pooled). The last column may be shorter."""
    n_keys = rows.shape[-1]
    width = max(1, math.ceil(n_keys / max_columns))
    if width == 1:
        return rows, 1
    pad = (-n_keys) % width
    padded = np.concatenate([rows, np.full((*rows.shape[:-1], pad), np.nan, rows.dtype)], axis=-1)
    blocks = padded.reshape(*rows.shape[:-1], -1, width)
    seen = np.isfinite(blocks).any(axis=-1)  # a block the query cannot see at all stays blank
    pooled = np.where(
        seen, np.nanmax(np.where(np.isfinite(blocks), blocks, -np.inf), axis=-1), np.nan
    )
    return pooled.astype(rows.dtype), width


def step_rows_figure(
    rows: np.ndarray,
    n_prompt: int,
    *,
    step: int,
    chosen: tuple[int, int] | None = None,
    max_columns: int = MAX_COLUMNS,
    windows: Sequence[int | None] = (),
) -> go.Figure:
    """Every head's row at one step: a heatmap row per head, layer by layer, over the keys.

    Args:
        rows: ``layer head_index key_pos`` attention of the step's query.
        n_prompt: prompt length (a dashed line where the model's own output starts).
        step: the step (title).
        chosen: ``(layer, head)`` marked beside its row.
        max_columns: longer rows are max-pooled to this many columns.
        windows: each layer's sliding window (None: global): keys past a window's edge are
            blank, as in the explorer, not drawn as a weight of 0.
    """
    n_layers, n_heads, n_keys = rows.shape
    shown = rows.astype(np.float32)
    for layer, window in enumerate(windows):
        if window is not None and n_keys > window:  # the query is the last key
            shown[layer, :, : n_keys - window] = np.nan
    flat = shown.reshape(n_layers * n_heads, n_keys)
    pooled, width = pooled_columns(flat, max_columns)
    names = [f"{layer}.{head}" for layer in range(n_layers) for head in range(n_heads)]
    where = "key %{x}" if width == 1 else "keys around %{x:.0f} (%{meta} per column)"
    fig = go.Figure(
        go.Heatmap(
            z=np.sqrt(np.clip(pooled, 0.0, None)),
            hoverongaps=False,
            customdata=pooled,
            x=np.arange(pooled.shape[1]) * width + (width - 1) / 2,
            y=names,
            meta=width,
            colorscale=COLORSCALE,
            zmin=0.0,
            zmax=1.0,
            colorbar=colour_bar(
                "weight",
                x=1.07,
                tickvals=np.sqrt([0.01, 0.1, 0.25, 0.5, 1.0]).tolist(),
                ticktext=["0.01", "0.1", "0.25", "0.5", "1"],
            ),
            hovertemplate=f"head %{{y}}<br>{where}<br>weight %{{customdata:.4f}}<extra></extra>",
        )
    )
    if n_prompt < n_keys:
        fig.add_vline(x=n_prompt - 0.5, line={"color": CHOSEN, "dash": "dash", "width": 1.5})
    for layer in range(1, n_layers if n_heads > 1 else 0):  # white rules between layers
        y = layer * n_heads - 0.5
        fig.add_hline(y=y, line={"color": "white", "width": 1})
    if chosen is not None:  # marked beside the plot: an outline would cover a 2-px row
        at = chosen[0] * n_heads + chosen[1]
        fig.add_annotation(
            x=1.0,
            xref="paper",
            y=names[at],
            yref="y",
            text=f"◀ {chosen[0]}.{chosen[1]}",
            showarrow=False,
            xanchor="left",
            font={"color": CHOSEN, "size": 13},
        )
    row_px = max(2, min(24, 560 // max(n_layers * n_heads, 1)))  # SmolLM2: 270 rows in 540 px
    pooled_note = "" if width == 1 else f"; each column the largest of {width} keys"
    fig.update_layout(
        title=html.escape(
            f"Step {step}: every head's attention row (colour: square root of the weight"
            f"{pooled_note})"
        ),
        height=140 + row_px * n_layers * n_heads,
        margin={**MARGIN, "r": 70},
        plot_bgcolor=BLANK_COLOUR,  # keys past a sliding window's edge, as in the explorer
        xaxis={"title": "key position (prompt | output)"},
        yaxis={
            "title": f"layer ({n_heads} heads each; hover names the head)",
            "autorange": "reversed",
            "type": "category",
            "tickvals": [f"{layer}.0" for layer in range(n_layers)],
            "ticktext": [str(layer) for layer in range(n_layers)],
        },
    )
    return fig


def token_stats_figure(
    probs: Sequence[float], entropies: Sequence[float], labels: Sequence[str], *, step: int
) -> go.Figure:
    """How sure the model was at each step: the written token's probability and the entropy of
    its distribution (nats), the shown step marked."""
    steps = np.arange(len(probs))
    text = [html.escape(label, quote=True) for label in labels]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=steps,
            y=list(probs),
            name="probability of the written token",
            marker={"color": "#1f77b4"},
            text=text,
            hovertemplate="step %{x}: %{text}<br>probability %{y:.3f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=list(entropies),
            name="entropy of the distribution (nats)",
            mode="lines+markers",
            yaxis="y2",
            line={"color": CHOSEN},
            text=text,
            hovertemplate="step %{x}: %{text}<br>entropy %{y:.3f} nats<extra></extra>",
        )
    )
    fig.add_vline(x=step, line={"color": "#555555", "dash": "dot", "width": 1})
    fig.update_layout(
        title="How sure the model was at each step",
        height=280,
        margin=MARGIN,
        xaxis={"title": "generation step"},
        yaxis={"title": "probability", "range": [0, 1.02]},
        yaxis2={
            "title": "entropy (nats)",
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
        },
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


def output_spans(
    labels: Sequence[str],
    probs: Sequence[float],
    entropies: Sequence[float],
    alternatives: Sequence[Sequence[tuple[str, float]]],
    selected: int | None,
) -> str:
    """One ``<span class="tok">`` per written token (``data-pos`` = its step), shaded by its
    probability (dark: the model was sure), with the probability, the entropy and the top
    alternatives in its tooltip. Everything escaped here.

    Args:
        labels: readable token labels, one per step.
        probs, entropies: the written token's probability and the distribution's entropy.
        alternatives: per step, the most likely tokens and their probabilities.
        selected: the step outlined.
    """
    parts = []
    for step, (label, prob, entropy) in enumerate(zip(labels, probs, entropies, strict=True)):
        others = ", ".join(f"{alt!r} {p:.3f}" for alt, p in alternatives[step])
        tip = (
            f"step {step}: {label!r} · probability {prob:.3f} · entropy {entropy:.2f} nats"
            f" · most likely: {others}"
        )
        style = f"background:{shade(prob)};" + ("color:white;" if prob > 0.5 else "")
        classes = "tok sel" if step == selected else "tok"
        parts.append(
            f'<span class="{classes}" data-pos="{step}" style="{style}" '
            f'title="{html.escape(tip, quote=True)}">{html.escape(label)}</span>'
        )
    return "".join(parts)
